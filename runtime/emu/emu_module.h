/*
 * emu_module.h - inside the emulated device: what emu_device.c needs of a
 * loaded module (emu_module.c compiles and loads it; the public calls are
 * in emu_device.h).
 */
#ifndef EIN_EMU_MODULE_H
#define EIN_EMU_MODULE_H

#include <stdbool.h>
#include <stddef.h>

#include "emu_block.h"
#include "emu_device.h"

/* Kernel `index`'s entry point (ein_vec's when vec) and its
 * __launch_bounds__ (1024 without one); false when there is none. */
bool ein_emu_module_kernel(const ein_emu_module *m, int index, bool vec,
                           ein_emu_entry *entry, unsigned *bound);

/* The calling OS thread's copy of the module's thread-locals, which are
 * its kernels' __shared__ variables; *size 0 when unknown. */
void ein_emu_module_shared(const ein_emu_module *m, void **p, size_t *size);

#endif
