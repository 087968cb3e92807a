/*
 * emu_device.c - the emulated device's memory, its access bracket and
 * kernel launches (emu_device.h).
 *
 * Device memory is host memory from malloc, so AddressSanitizer's red
 * zones catch a kernel that runs past an allocation. A sorted table of
 * live allocations answers "is this device memory?" for copies and kernel
 * arguments. Under ASan the allocations are poisoned whenever no device
 * bracket is open, so the host touching device memory directly, which on
 * a GPU would fault, is reported.
 *
 * A launch hands its blocks to the calling thread and a few persistent
 * helper threads through an atomic counter; each runs whole blocks
 * (emu_block.c), so a block's __shared__ variables, thread-locals of the
 * module, belong to one block at a time. The first mistake any block makes
 * stops the launch.
 */
#include "emu_device.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "emu_block.h"
#include "emu_fiber.h"
#include "emu_module.h"

#ifdef EIN_EMU_ASAN
#include <sanitizer/asan_interface.h>
#endif

#if defined(__SANITIZE_THREAD__)
#define EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMU_TSAN 1
#endif
#endif
#ifndef EMU_TSAN
#define EMU_TSAN 0
#endif

enum { DEVICE_ALIGN = 256, MAX_WORKERS = 64 };

/* -------------------------------------------------- the device lock */

typedef struct dev_alloc {
  uintptr_t lo;
  size_t size;
  int device; /* the device current when it was allocated */
} dev_alloc;

/* The device that allocations, kernels and cuBLAS calls of this thread act
 * on, as cudaSetDevice's. */
static _Thread_local int current_device;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t dev_mu; /* recursive: the bracket, memory, copies */
static int depth;              /* open brackets of the lock's owner */
static pthread_t owner;
static dev_alloc *allocs; /* sorted by lo */
static size_t nallocs, cap_allocs;

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

static void init_lock(void) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&dev_mu, &a);
  pthread_mutexattr_destroy(&a);
}

static void init_once(void) {
  init_lock();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void lock(void) {
  pthread_once(&once, init_once);
  pthread_mutex_lock(&dev_mu);
}

static void unlock(void) { pthread_mutex_unlock(&dev_mu); }

static void poison(const dev_alloc *a, bool on) {
#ifdef EIN_EMU_ASAN
  if (on)
    ASAN_POISON_MEMORY_REGION((void *)a->lo, a->size);
  else
    ASAN_UNPOISON_MEMORY_REGION((void *)a->lo, a->size);
#else
  (void)a;
  (void)on;
#endif
}

void ein_emu_device_begin(void) {
  lock();
  if (depth++ == 0) {
    owner = pthread_self();
    for (size_t i = 0; i < nallocs; i++)
      poison(&allocs[i], false);
  }
}

void ein_emu_device_end(void) {
  if (--depth == 0)
    for (size_t i = 0; i < nallocs; i++)
      poison(&allocs[i], true);
  unlock();
}

static bool in_bracket(void) {
  lock();
  bool in = depth > 0 && pthread_equal(owner, pthread_self());
  unlock();
  return in;
}

/* ------------------------------------------------------------ memory */

/* Index of the last allocation starting at or before p, or -1. */
static ptrdiff_t find(uintptr_t p) {
  size_t lo = 0, hi = nallocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (allocs[mid].lo <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (ptrdiff_t)lo - 1;
}

void ein_emu_set_device(int device) { current_device = device; }

int ein_emu_current_device(void) { return current_device; }

ein_emu_where ein_emu_locate(const void *p, size_t bytes, int *device) {
  uintptr_t u = (uintptr_t)p;
  lock();
  ptrdiff_t i = find(u);
  bool in = i >= 0 && u - allocs[i].lo <= allocs[i].size &&
            bytes <= allocs[i].size - (u - allocs[i].lo);
  int dev = in ? allocs[i].device : -1;
  unlock();
  if (device) *device = dev;
  return !in ? EIN_EMU_HOST
         : dev == current_device ? EIN_EMU_OWN
                                 : EIN_EMU_OTHER;
}

bool ein_emu_is_device(const void *p, size_t bytes) {
  uintptr_t u = (uintptr_t)p;
  lock();
  ptrdiff_t i = find(u);
  bool in = i >= 0 && u - allocs[i].lo <= allocs[i].size &&
            bytes <= allocs[i].size - (u - allocs[i].lo);
  unlock();
  return in;
}

/* Whether any byte of [p, p + max(bytes, 1)) is device memory. */
static bool touches_device(const void *p, size_t bytes) {
  uintptr_t u = (uintptr_t)p, end = u + (bytes ? bytes : 1);
  lock();
  ptrdiff_t i = find(end - 1);
  bool hit = i >= 0 && allocs[i].size && allocs[i].lo + allocs[i].size > u;
  unlock();
  return hit;
}

ein_status ein_emu_malloc(void **ptr, size_t bytes, ein_error_rec *err) {
  *ptr = NULL;
  void *p = NULL;
  if (posix_memalign(&p, DEVICE_ALIGN, bytes ? bytes : 1) != 0)
    return ein_fail_device_memory(
        err,
        "emulated device: out of memory allocating %zu "
        "bytes",
        bytes);
  memset(p, 0xff, bytes); /* never-written device memory reads as NaN */
  lock();
  if (nallocs == cap_allocs) {
    size_t cap = cap_allocs ? 2 * cap_allocs : 64;
    dev_alloc *a = ein_realloc(allocs, cap * sizeof *a);
    if (!a) {
      unlock();
      free(p);
      return ein_fail_memory(err,
                             "out of memory recording a device allocation");
    }
    allocs = a;
    cap_allocs = cap;
  }
  size_t at = (size_t)(find((uintptr_t)p) + 1);
  memmove(&allocs[at + 1], &allocs[at], (nallocs - at) * sizeof *allocs);
  allocs[at] = (dev_alloc){(uintptr_t)p, bytes, current_device};
  nallocs++;
  poison(&allocs[at], depth == 0);
  unlock();
  *ptr = p;
  return EIN_OK;
}

void ein_emu_free(void *ptr) {
  if (!ptr)
    return;
  lock();
  ptrdiff_t i = find((uintptr_t)ptr);
  if (i >= 0 && allocs[i].lo == (uintptr_t)ptr) {
    poison(&allocs[i], false);
    memmove(&allocs[i], &allocs[i + 1],
            (nallocs - (size_t)i - 1) * sizeof *allocs);
    nallocs--;
    free(ptr);
  }
  unlock();
}

static ein_status copy_side(const void *p, size_t bytes, bool device,
                            const char *side, const char *what,
                            ein_error_rec *err) {
  if (device && !ein_emu_is_device(p, bytes))
    return ein_fail_device(err,
                           "emulated device: %s copy: the %s %p is not device "
                           "memory (or its %zu bytes run past its allocation)",
                           what, side, p, bytes);
  if (!device && touches_device(p, bytes))
    return ein_fail_device(err,
                           "emulated device: %s copy: the %s %p is device "
                           "memory, where host memory was expected",
                           what, side, p);
  return EIN_OK;
}

ein_status ein_emu_copy(void *dst, const void *src, size_t bytes,
                        ein_emu_copy_kind kind, ein_error_rec *err) {
  static const char *const names[] = {"host-to-device", "device-to-host",
                                      "device-to-device"};
  if ((unsigned)kind > EIN_EMU_D2D)
    return ein_fail_argument(err, "emulated device: unknown copy kind %d",
                             (int)kind);
  bool dst_dev = kind != EIN_EMU_D2H, src_dev = kind != EIN_EMU_H2D;
  ein_status st =
      copy_side(dst, bytes, dst_dev, "destination", names[kind], err);
  if (!st)
    st = copy_side(src, bytes, src_dev, "source", names[kind], err);
  if (st || bytes == 0)
    return st;
  ein_emu_device_begin();
  memmove(dst, src, bytes);
  ein_emu_device_end();
  return EIN_OK;
}

/* ------------------------------------------------------ worker threads */

typedef struct job {
  const ein_emu_run *l;
  const ein_emu_module *m;
  uint64_t nblocks;
  uint64_t stride; /* runs blocks 0, stride, 2 x stride, ... (sampling) */
  atomic_uint_fast64_t next;
  atomic_bool failed;
  pthread_mutex_t mu; /* guards msg and counted */
  char msg[EIN_MESSAGE_BYTES];
  ein_emu_counters counted; /* the workers' sums, when counting */
} job;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  int helpers, running;
  uint64_t gen;
  job *job;
  bool started;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, 0, 0, 0, NULL, false};

/* fork() (docs/design.md, "Fork safety"): the helper threads stay in the
 * parent. Before it, the device lock and the pool's are taken, so no
 * launch is under way and the pool's fields are whole; after it the
 * parent goes on as before, and the child forgets the helpers (its next
 * launch starts its own) and the waiters its condition variables had.
 * The child makes the device lock anew: glibc's recursive mutex knows its
 * owner by thread id, which the forking thread no longer has there; it
 * holds it again for the brackets the forking thread had open. */
static void fork_prepare(void) {
  lock();
  pthread_mutex_lock(&pool.mu);
}

static void fork_parent(void) {
  pthread_mutex_unlock(&pool.mu);
  unlock();
}

static void fork_child(void) {
  pool.started = false;
  pool.helpers = pool.running = 0;
  pool.job = NULL;
  pthread_cond_init(&pool.wake, NULL);
  pthread_cond_init(&pool.done, NULL);
  pthread_mutex_unlock(&pool.mu);
  init_lock();
  for (int i = 0; i < depth; i++)
    pthread_mutex_lock(&dev_mu);
}

/* Runs blocks of j until none is left or one fails. */
static void work(ein_emu_worker *w, job *j) {
  void *shared;
  size_t size;
  ein_emu_module_shared(j->m, &shared, &size);
  ein_emu_worker_set_shared(w, shared, size);
  char msg[EIN_MESSAGE_BYTES];
  while (!atomic_load(&j->failed)) {
    uint64_t i = atomic_fetch_add(&j->next, 1) * j->stride;
    if (i >= j->nblocks)
      break;
    if (!ein_emu_block_run(w, j->l, i, msg, sizeof msg)) {
      pthread_mutex_lock(&j->mu);
      if (!atomic_load(&j->failed))
        memcpy(j->msg, msg, sizeof msg);
      atomic_store(&j->failed, true);
      pthread_mutex_unlock(&j->mu);
    }
  }
  if (j->l->count) {
    pthread_mutex_lock(&j->mu);
    ein_emu_worker_take_counters(w, &j->counted);
    pthread_mutex_unlock(&j->mu);
  }
}

static void *helper_main(void *arg) {
  uint64_t seen = (uint64_t)(uintptr_t)arg;
  ein_emu_worker *w = ein_emu_worker_create(); /* NULL: it only idles */
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    while (pool.gen == seen)
      pthread_cond_wait(&pool.wake, &pool.mu);
    seen = pool.gen;
    job *j = pool.job;
    pthread_mutex_unlock(&pool.mu);
    if (w)
      work(w, j);
    pthread_mutex_lock(&pool.mu);
    if (--pool.running == 0)
      pthread_cond_signal(&pool.done);
  }
  return NULL;
}

static int worker_count(void) {
  const char *e = getenv("EINC_EMU_THREADS");
  long n = e && *e ? strtol(e, NULL, 10) : 0;
#ifdef EIN_EMU_SANITIZE
  n = 1; /* __shared__ variables are globals then (prelude_host.h) */
#endif
  if (n <= 0) {
    n = sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 1 : n > 4 ? 4 : n;
  }
  return n > MAX_WORKERS ? MAX_WORKERS : (int)n;
}

/* Helper threads live as long as the process; called under dev_mu. */
static void start_helpers(void) {
  pthread_mutex_lock(&pool.mu);
  if (!pool.started) {
    pool.started = true;
    int want = worker_count() - 1;
    for (int i = 0; i < want; i++) {
      pthread_t t;
      if (pthread_create(&t, NULL, helper_main,
                         (void *)(uintptr_t)pool.gen) != 0)
        break;
      pthread_detach(t);
      pool.helpers++;
    }
  }
  pthread_mutex_unlock(&pool.mu);
}

/* The calling thread's worker. Launches are serialised by the device
 * lock, so one serves every caller; its scheduler context is rebound when
 * another thread calls. */
static ein_emu_worker *caller_worker(void) {
  static ein_emu_worker *w;
  static pthread_t last;
  if (!w && !(w = ein_emu_worker_create()))
    return NULL;
  if (!pthread_equal(last, pthread_self())) {
    ein_emu_worker_rebind(w);
    last = pthread_self();
  }
  return w;
}

static ein_status run_job(job *j, ein_error_rec *err) {
  ein_emu_worker *w = caller_worker();
  if (!w)
    return ein_fail_memory(err, "out of memory starting an emulated launch");
  start_helpers();
  bool helped = j->nblocks > 1 && pool.helpers > 0;
  if (helped) {
    pthread_mutex_lock(&pool.mu);
    pool.job = j;
    pool.running = pool.helpers;
    pool.gen++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
  }
  work(w, j);
  if (helped) {
    pthread_mutex_lock(&pool.mu);
    while (pool.running)
      pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
  }
  if (atomic_load(&j->failed))
    return ein_fail_backend(err, "emulated device: %s", j->msg);
  return EIN_OK;
}

/* ------------------------------------------------------------ launches */

/* What CUDA refuses at launch: cudaErrorInvalidConfiguration and
 * cudaErrorLaunchOutOfResources. */
static ein_status check_geometry(const ein_emu_run *l, unsigned bound,
                                 ein_error_rec *err) {
  const unsigned *g = l->grid, *b = l->block;
  uint64_t threads = (uint64_t)b[0] * b[1] * b[2];
  if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2] || b[0] > 1024 ||
      b[1] > 1024 || b[2] > 64 || threads > 1024 || g[0] > 0x7fffffffu ||
      g[1] > 65535 || g[2] > 65535)
    return ein_fail_backend(err,
                            "emulated device: %s<<<(%u,%u,%u), (%u,%u,%u)>>>: "
                            "invalid configuration argument (block at most "
                            "1024x1024x64 and 1024 threads, grid at most "
                            "2^31-1 x 65535 x 65535, none 0)",
                            l->kernel, g[0], g[1], g[2], b[0], b[1], b[2]);
  if (threads > bound)
    return ein_fail_backend(err,
                            "emulated device: %s: a block of %llu threads is "
                            "more than its __launch_bounds__(%u): too many "
                            "resources requested for launch",
                            l->kernel, (unsigned long long)threads, bound);
  return EIN_OK;
}

static ein_status check_args(const ein_emu_run *l, bool vec,
                             ein_error_rec *err) {
  const void *args[3] = {l->d, l->s0, l->s1};
  static const char *const names[3] = {"d", "s0", "s1"};
  for (int i = 0; i < 3; i++) {
    if (!args[i])
      continue;
    int owner;
    ein_emu_where w = ein_emu_locate(args[i], 0, &owner);
    if (w == EIN_EMU_HOST)
      return ein_fail_device(err,
                             "emulated device: a host pointer handed to a "
                             "kernel: argument %s (%p) of %s is not device "
                             "memory",
                             names[i], args[i], l->kernel);
    if (w == EIN_EMU_OTHER)
      return ein_fail_device(err,
                             "emulated device %d: argument %s (%p) of %s is "
                             "memory of device %d: a kernel reaches only its "
                             "own device's memory",
                             current_device, names[i], args[i], l->kernel,
                             owner);
    if (vec && (uintptr_t)args[i] % 16)
      return ein_fail_backend(err,
                              "emulated device: %s: argument %s (%p) is not "
                              "16-byte aligned: misaligned address",
                              l->kernel, names[i], args[i]);
  }
  return EIN_OK;
}

/* -------------------------------------------------------- counting */

/* -1: the environment decides (EINC_EMU_COUNTERS). */
static atomic_int counting_forced = -1;

void ein_emu_counting_set(int on) {
  atomic_store(&counting_forced, on < 0 ? -1 : on != 0);
}

bool ein_emu_counting(void) {
  int f = atomic_load(&counting_forced);
  if (f >= 0)
    return f;
  const char *e = getenv("EINC_EMU_COUNTERS");
  return e && strcmp(e, "1") == 0;
}

/* The distinct allocations holding the launch's pointer arguments: the
 * global memory its counted accesses may touch. */
static int argument_ranges(const ein_emu_run *l, uintptr_t *lo,
                           uintptr_t *hi) {
  const void *args[3] = {l->d, l->s0, l->s1};
  int n = 0;
  lock();
  for (int i = 0; i < 3; i++) {
    ptrdiff_t k = args[i] ? find((uintptr_t)args[i]) : -1;
    if (k < 0)
      continue;
    bool seen = false;
    for (int j = 0; j < n; j++)
      seen |= lo[j] == allocs[k].lo;
    if (!seen) {
      lo[n] = allocs[k].lo;
      hi[n++] = allocs[k].lo + allocs[k].size;
    }
  }
  unlock();
  return n;
}

static _Atomic uint64_t sample_blocks; /* 0: every block */

void ein_emu_sample_set(uint64_t max_blocks) {
  atomic_store(&sample_blocks, max_blocks);
}

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The stride between the blocks a counted launch runs: 1, or when a
 * sample is asked for and the grid is larger, the least stride giving at
 * most that many blocks that shares no factor with the grid's rows and
 * planes (so the sample is not all one column of tiles). */
static uint64_t sample_stride(const unsigned grid[3], uint64_t nblocks) {
  uint64_t want = atomic_load(&sample_blocks);
  if (!want || nblocks <= want)
    return 1;
  uint64_t s = (nblocks + want - 1) / want;
  while (gcd_u64(s, grid[0]) > 1 ||
         gcd_u64(s, (uint64_t)grid[0] * grid[1]) > 1)
    s++;
  return s;
}

/* A sampled launch's sums scaled to its whole grid: by the blocks each
 * run block stands for (its distinct sectors are scaled as they are
 * counted, ein_emu_count_launch.scale). */
static void scale_sample(ein_emu_counters *c, double f) {
  uint64_t *v[] = {&c->ld_requests, &c->ld_sectors, &c->ld_ideal_sectors,
                   &c->ld_bytes, &c->st_requests, &c->st_sectors,
                   &c->st_ideal_sectors, &c->st_bytes,
                   &c->sh_ld_requests, &c->sh_ld_wavefronts, &c->sh_ld_ideal,
                   &c->sh_st_requests, &c->sh_st_wavefronts, &c->sh_st_ideal,
                   &c->warp_basic_blocks, &c->ld_block_sectors};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    *v[i] = (uint64_t)((double)*v[i] * f + 0.5);
}

/* Runs the launch's blocks, counting when counters is not NULL. */
static ein_status run_counted(ein_emu_run *l, const ein_emu_module *m,
                              ein_emu_counters *counters, ein_error_rec *err) {
  job j = {.l = l, .m = m,
           .nblocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2],
           .stride = 1};
  if (counters)
    j.stride = sample_stride(l->grid, j.nblocks);
  atomic_init(&j.next, 0);
  atomic_init(&j.failed, false);
  pthread_mutex_init(&j.mu, NULL);
  ein_emu_count_launch count;
  uintptr_t lo[3], hi[3];
  if (counters) {
    int n = argument_ranges(l, lo, hi);
    if (!ein_emu_count_launch_init(&count, n, lo, hi)) {
      pthread_mutex_destroy(&j.mu);
      return ein_fail_memory(err, "out of memory counting a launch's "
                                  "memory accesses");
    }
    l->count = &count;
  }
  ein_status st = run_job(&j, err);
  if (counters) {
    uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    double f = (double)j.nblocks /
               (double)((j.nblocks + j.stride - 1) / j.stride);
    *counters = j.counted;
    count.scale = f;
    ein_emu_count_launch_finish(&count, counters);
    if (j.stride > 1)
      scale_sample(counters, f);
    counters->blocks = j.nblocks;
    counters->threads = j.nblocks * threads;
    counters->warps = j.nblocks * ((threads + 31) / 32);
  }
  pthread_mutex_destroy(&j.mu);
  return st;
}

ein_status ein_emu_launch_counted(ein_emu_module *m, int index, bool vec,
                                  const unsigned grid[3],
                                  const unsigned block[3], void *d,
                                  const void *s0, const void *s1,
                                  ein_emu_counters *counters,
                                  ein_error_rec *err) {
  if (EMU_TSAN)
    return ein_fail_backend(err,
                            "emulated device: kernels do not run under "
                            "ThreadSanitizer (their fiber switches are not "
                            "annotated for it)");
  if (!in_bracket())
    return ein_fail_internal(err, "emulated device: a launch outside "
                                  "ein_emu_device_begin/end");
  if (counters && (!m || !ein_emu_module_counting(m)))
    return ein_fail_argument(err, "emulated device: counters asked of a "
                                  "module not compiled to count");
  ein_emu_run l = {.d = d, .s0 = s0, .s1 = s1};
  memcpy(l.grid, grid, sizeof l.grid);
  memcpy(l.block, block, sizeof l.block);
  snprintf(l.kernel, sizeof l.kernel, "kernel %d (%s)", index,
           vec ? "ein_vec" : "ein_main");
  unsigned bound;
  if (!m || !ein_emu_module_kernel(m, index, vec, &l.entry, &bound))
    return ein_fail_argument(err, "emulated device: the module has no %s",
                             l.kernel);
  ein_status st = check_geometry(&l, bound, err);
  if (!st)
    st = check_args(&l, vec, err);
  return st ? st : run_counted(&l, m, counters, err);
}

ein_status ein_emu_launch(ein_emu_module *m, int index, bool vec,
                          const unsigned grid[3], const unsigned block[3],
                          void *d, const void *s0, const void *s1,
                          ein_error_rec *err) {
  return ein_emu_launch_counted(m, index, vec, grid, block, d, s0, s1, NULL,
                                err);
}
