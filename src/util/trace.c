/*
 * trace.c - the phase log of trace.h: a fixed array under a mutex, since
 * phases are few (one-time steps and runs) and may come from any thread.
 */
#include "trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct record {
  const char *phase;
  double start, seconds;
} record;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static record log_[EIN_TRACE_MAX];
static int count;
static atomic_int state = -1; /* -1: EINC_TRACE not read yet */

void ein_trace_enable(bool on) { atomic_store(&state, on ? 1 : 0); }

bool ein_trace_on(void) {
  int s = atomic_load_explicit(&state, memory_order_relaxed);
  if (s < 0) {
    const char *e = getenv("EINC_TRACE");
    s = e && *e && strcmp(e, "0") != 0;
    int unset = -1;
    atomic_compare_exchange_strong(&state, &unset, s);
    s = atomic_load(&state);
  }
  return s == 1;
}

double ein_trace_now(void) {
  if (!ein_trace_on())
    return 0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  double v = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
  return v > 0 ? v : 1e-9;
}

void ein_trace_end(const char *phase, double t0) {
  if (t0 <= 0 || !ein_trace_on())
    return;
  double secs = ein_trace_now() - t0;
  pthread_mutex_lock(&lock);
  if (count < EIN_TRACE_MAX)
    log_[count++] = (record){phase, t0, secs};
  pthread_mutex_unlock(&lock);
}

int ein_trace_count(void) {
  pthread_mutex_lock(&lock);
  int n = count;
  pthread_mutex_unlock(&lock);
  return n;
}

bool ein_trace_get(int i, const char **phase, double *start,
                   double *seconds) {
  pthread_mutex_lock(&lock);
  bool ok = i >= 0 && i < count;
  if (ok) {
    *phase = log_[i].phase;
    *start = log_[i].start;
    *seconds = log_[i].seconds;
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

void ein_trace_clear(void) {
  pthread_mutex_lock(&lock);
  count = 0;
  pthread_mutex_unlock(&lock);
}
