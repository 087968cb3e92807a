/* alloc.c - allocation wrappers with a fault-injection counter for tests. */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

static long fail_countdown = -1;

/* True when the injected failure is due now. */
static int injected_failure(void) {
  if (fail_countdown < 0) return 0;
  if (fail_countdown == 0) {
    fail_countdown = -1;
    return 1;
  }
  fail_countdown--;
  return 0;
}

void ein_alloc_fail_after(long n) { fail_countdown = n; }

int ein_alloc_fail_pending(void) { return fail_countdown >= 0; }

void *ein_malloc(size_t size) {
  if (injected_failure()) return NULL;
  return malloc(size ? size : 1);
}

void *ein_calloc(size_t count, size_t size) {
  if (injected_failure()) return NULL;
  return calloc(count ? count : 1, size ? size : 1);
}

void *ein_realloc(void *ptr, size_t size) {
  if (injected_failure()) return NULL;
  return realloc(ptr, size ? size : 1);
}

void ein_free(void *ptr) { free(ptr); }

char *ein_strndup(const char *s, size_t len) {
  char *copy = ein_malloc(len + 1);
  if (!copy) return NULL;
  memcpy(copy, s, len);
  copy[len] = '\0';
  return copy;
}
