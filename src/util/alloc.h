/*
 * alloc.h - every host allocation of einc goes through these wrappers.
 *
 * One choke point lets tests make the N-th allocation fail (as SQLite's
 * out-of-memory tests do) and check that every caller turns that into
 * EIN_ERR_NO_MEMORY without leaking.
 */
#ifndef EIN_UTIL_ALLOC_H
#define EIN_UTIL_ALLOC_H

#include <stddef.h>

void *ein_malloc(size_t size);
void *ein_calloc(size_t count, size_t size);
void *ein_realloc(void *ptr, size_t size);
void ein_free(void *ptr);

/* Copies `len` bytes of s into a new NUL-terminated string. */
char *ein_strndup(const char *s, size_t len);

/* Test hook: the allocation after `n` more succeed fails (n = 0: the next
 * one); a negative n disables injection. Not thread-safe: tests only. */
void ein_alloc_fail_after(long n);

/* Test hook: true while the failure set by ein_alloc_fail_after has not
 * happened yet (the code ran out of allocations before reaching it). */
int ein_alloc_fail_pending(void);

#endif
