/*
 * backends.c - the table of backends (backend.h). Adding a backend is one
 * line here and one entry in its own file; nothing above runtime/ changes.
 * The helpers the backends share are in backend_common.c, below them.
 */
#include "backend.h"

static const ein_backend_entry *const table[] = {
    &ein_cpu_entry,
    &ein_cuda_entry,
    &ein_emu_entry,
};

enum { NENTRIES = sizeof table / sizeof table[0] };

const ein_backend_entry *ein_backend_find(ein_backend_kind kind) {
  for (int i = 0; i < NENTRIES; i++)
    if (table[i]->kind == kind) return table[i];
  return NULL;
}

const ein_backend_entry *ein_backend_for_memory(DLDeviceType t) {
  for (int i = 0; i < NENTRIES; i++)
    if (table[i]->accepts(t)) return table[i];
  return NULL;
}
