/*
 * arena.h - a bump allocator: everything one parse or binding creates comes
 * from one arena and goes with one ein_arena_destroy (no per-node frees).
 */
#ifndef EIN_UTIL_ARENA_H
#define EIN_UTIL_ARENA_H

#include <stddef.h>

typedef struct ein_arena_chunk ein_arena_chunk;

typedef struct ein_arena {
  ein_arena_chunk *head; /* newest chunk; older ones follow */
} ein_arena;

void ein_arena_init(ein_arena *arena);
void ein_arena_destroy(ein_arena *arena);

/* Zeroed memory aligned for any scalar type, or NULL when out of memory or
 * when count * size overflows. */
void *ein_arena_alloc(ein_arena *arena, size_t count, size_t size);

/* A NUL-terminated copy of s[0..len). */
char *ein_arena_strndup(ein_arena *arena, const char *s, size_t len);

#endif
