/*
 * harness.h - a minimal test harness: CHECK counts a case as passed or
 * failed and prints what failed; test_summary() prints the line that
 * tests/run.sh adds up and returns the exit status.
 */
#ifndef EIN_TEST_HARNESS_H
#define EIN_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ein.h"
#include "test_limits.h"

static int test_passed, test_failed;

#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (cond) {                                                              \
      test_passed++;                                                         \
    } else {                                                                 \
      test_failed++;                                                         \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
      fprintf(stderr, __VA_ARGS__);                                          \
      fputc('\n', stderr);                                                   \
    }                                                                        \
  } while (0)

/* A setup call that must succeed (creating a context, say): without it the
 * test cannot go on, so a failure prints the status and exits nonzero. */
#define REQUIRE_OK(call)                                                     \
  do {                                                                       \
    ein_status req_ = (call);                                                \
    if (req_ != EIN_OK) {                                                    \
      fprintf(stderr, "FATAL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,    \
              ein_status_name(req_));                                        \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

/* Equal strings, with both shown on failure. */
#define CHECK_STR(got, want, ...)                                            \
  do {                                                                       \
    const char *got_ = (got), *want_ = (want);                               \
    if (got_ && want_ && strcmp(got_, want_) == 0) {                         \
      test_passed++;                                                         \
    } else {                                                                 \
      test_failed++;                                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                   \
      fprintf(stderr, __VA_ARGS__);                                          \
      fprintf(stderr, "\n   got: %s\n  want: %s\n", got_ ? got_ : "(null)",  \
              want_ ? want_ : "(null)");                                     \
    }                                                                        \
  } while (0)

/* Prints "ein-test-summary: NAME: N passed, N failed"; 0 when none failed. */
static inline int test_summary(const char *name) {
  printf("ein-test-summary: %s: %d passed, %d failed\n", name, test_passed,
         test_failed);
  return test_failed ? 1 : 0;
}

#endif
