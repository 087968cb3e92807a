/* arena.c - chunked bump allocation; see arena.h. */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"

struct ein_arena_chunk {
  ein_arena_chunk *next;
  size_t used, cap;
  alignas(max_align_t) unsigned char data[];
};

enum { CHUNK_BYTES = 16 * 1024, ALIGN = alignof(max_align_t) };

void ein_arena_init(ein_arena *arena) { arena->head = NULL; }

void ein_arena_destroy(ein_arena *arena) {
  ein_arena_chunk *c = arena->head;
  while (c) {
    ein_arena_chunk *next = c->next;
    ein_free(c);
    c = next;
  }
  arena->head = NULL;
}

void *ein_arena_alloc(ein_arena *arena, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  size_t bytes = count * size;
  if (bytes > SIZE_MAX - ALIGN) return NULL;
  bytes = (bytes + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  if (bytes == 0) bytes = ALIGN;
  ein_arena_chunk *c = arena->head;
  if (!c || c->cap - c->used < bytes) {
    size_t cap = bytes > CHUNK_BYTES ? bytes : CHUNK_BYTES;
    if (cap > SIZE_MAX - sizeof *c) return NULL;
    c = ein_malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->used = 0;
    c->cap = cap;
    c->next = arena->head;
    arena->head = c;
  }
  void *p = c->data + c->used;
  c->used += bytes;
  memset(p, 0, bytes);
  return p;
}

char *ein_arena_strndup(ein_arena *arena, const char *s, size_t len) {
  if (len == SIZE_MAX) return NULL;
  char *copy = ein_arena_alloc(arena, len + 1, 1);
  if (!copy) return NULL;
  memcpy(copy, s, len);
  return copy;
}
