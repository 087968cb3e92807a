/*
 * test_run_cache.c - what the CUDA backend keeps between runs of a plan
 * (runtime/cuda/run_cache.h), checked without a GPU:
 *
 *   owner ids     nonzero and never repeated, also when 8 threads draw
 *                 them at once;
 *   kernel sets   a set is found only by the owner that published it (a
 *                 new owner, as after a backend is destroyed and another
 *                 made, never gets an old owner's handles); the first set
 *                 published for an owner stays; 8 threads sharing a plan
 *                 as 4 backends, each looking up, "loading" with a fake
 *                 loader and publishing, all end with their own owner's
 *                 handles and one set per owner;
 *   GEMM arrays   ein_gemm_arrays_match is true only when the pointer
 *                 arrays would be the same: every field the arrays depend
 *                 on, changed alone, makes it false, and over random calls
 *                 a match always means equal arrays.
 *
 * Pure C: the handles are made-up pointers, never called.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cuda_program.h"
#include "error.h"
#include "harness.h"
#include "run_cache.h"

enum { THREADS = 8, OWNERS = 4, HANDLES = 12, ROUNDS = 20000 };

/* The fake loader: handle i of owner o is a pointer that encodes both. */
static void *fake_handle(uint64_t owner, int i) {
  return (void *)(uintptr_t)(owner * 1000 + (uint64_t)i + 1);
}

static void fake_load(uint64_t owner, void **h) {
  for (int i = 0; i < HANDLES; i++) h[i] = fake_handle(owner, i);
}

static bool handles_of(void *const *h, uint64_t owner) {
  if (!h) return false;
  for (int i = 0; i < HANDLES; i++)
    if (h[i] != fake_handle(owner, i)) return false;
  return true;
}

/* ------------------------------------------------------------ owners */

enum { IDS = 2000 };
static uint64_t drawn[THREADS][IDS];

static void *draw_ids(void *arg) {
  uint64_t *out = arg;
  for (int i = 0; i < IDS; i++) out[i] = ein_kernel_owner_new();
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void owner_ids(void) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, draw_ids, drawn[i]);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  uint64_t *all = &drawn[0][0];
  qsort(all, THREADS * IDS, sizeof *all, cmp_u64);
  int repeats = 0;
  for (int i = 1; i < THREADS * IDS; i++) repeats += all[i] == all[i - 1];
  CHECK(all[0] != 0 && repeats == 0, "owner ids: first %llu, %d repeated",
        (unsigned long long)all[0], repeats);
}

/* ------------------------------------------------------- kernel sets */

static void sets_single(void) {
  ein_kernel_sets *s = ein_kernel_sets_create(HANDLES);
  CHECK(s != NULL, "create");
  if (!s) return;
  uint64_t a = ein_kernel_owner_new(), b = ein_kernel_owner_new();
  CHECK(ein_kernel_sets_find(s, a) == NULL, "an empty collection finds none");
  void *h[HANDLES];
  fake_load(a, h);
  void *const *pa = ein_kernel_sets_add(s, a, h);
  CHECK(handles_of(pa, a) && pa != (void *const *)h, "add copies a's set");
  memset(h, 0, sizeof h); /* the caller's array may go */
  CHECK(ein_kernel_sets_find(s, a) == pa && handles_of(pa, a),
        "find a after add");
  CHECK(ein_kernel_sets_find(s, b) == NULL,
        "another owner (a backend made later) does not get a's handles");
  fake_load(b, h);
  void *const *again = ein_kernel_sets_add(s, a, h);
  CHECK(again == pa && handles_of(again, a),
        "a second add for a keeps the first set");
  void *const *pb = ein_kernel_sets_add(s, b, h);
  CHECK(handles_of(pb, b) && handles_of(ein_kernel_sets_find(s, a), a) &&
            ein_kernel_sets_find(s, b) == pb,
        "a and b each find their own");
  ein_kernel_sets_destroy(s);

  ein_kernel_sets *none = ein_kernel_sets_create(0);
  uint64_t c = ein_kernel_owner_new();
  CHECK(none && ein_kernel_sets_add(none, c, NULL) != NULL &&
            ein_kernel_sets_find(none, c) != NULL &&
            ein_kernel_sets_find(none, a) == NULL,
        "a program without kernels still records its owners");
  ein_kernel_sets_destroy(none);
}

typedef struct runner {
  pthread_t thread;
  ein_kernel_sets *sets;
  uint64_t owner;
  int loads, wrong;
  void *const *last;
} runner;

/* A backend's runs of one plan: find, else load and publish. */
static void *run_plan(void *arg) {
  runner *r = arg;
  for (int i = 0; i < ROUNDS; i++) {
    void *const *h = ein_kernel_sets_find(r->sets, r->owner);
    if (!h) {
      void *fresh[HANDLES];
      fake_load(r->owner, fresh);
      r->loads++;
      h = ein_kernel_sets_add(r->sets, r->owner, fresh);
    }
    r->wrong += !handles_of(h, r->owner);
    r->last = h;
  }
  return NULL;
}

static void sets_threads(void) {
  ein_kernel_sets *s = ein_kernel_sets_create(HANDLES);
  if (!s) return;
  uint64_t owner[OWNERS];
  for (int i = 0; i < OWNERS; i++) owner[i] = ein_kernel_owner_new();
  runner r[THREADS];
  for (int i = 0; i < THREADS; i++) {
    r[i] = (runner){.sets = s, .owner = owner[i % OWNERS]};
    pthread_create(&r[i].thread, NULL, run_plan, &r[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(r[i].thread, NULL);
  for (int i = 0; i < THREADS; i++) {
    CHECK(r[i].wrong == 0 && r[i].loads >= 0 && r[i].loads <= 1,
          "thread %d: %d runs with another owner's handles, %d loads", i,
          r[i].wrong, r[i].loads);
    /* The two threads of one owner share one published set. */
    CHECK(r[i].last == r[i % OWNERS].last &&
              r[i].last == ein_kernel_sets_find(s, r[i].owner),
          "thread %d: one set per owner", i);
  }
  ein_kernel_sets_destroy(s);
}

/* -------------------------------------------------------- GEMM arrays */

static ein_cublas_gemm base_gemm(void) {
  ein_cublas_gemm g;
  memset(&g, 0, sizeof g);
  g.ab_dtype = EIN_DT_F32;
  g.c_dtype = EIN_DT_F32;
  g.m = 8, g.n = 4, g.k = 16, g.lda = 8, g.ldb = 16, g.ldc = 8;
  g.count = 3;
  g.stride_a = 128, g.stride_b = 64, g.stride_c = 32;
  g.loops.n = 2;
  g.loops.size[0] = 5, g.loops.size[1] = 7;
  for (int i = 0; i < 2; i++)
    for (int o = 0; o < 3; o++) g.loops.st[i][o] = 1000 * (i + 1) + 100 * o;
  return g;
}

/* The arrays of g at fixed pointers, or NULL. */
static const void **arrays_of(const ein_cublas_gemm *g, int64_t *total) {
  ein_error_rec err;
  ein_error_init(&err);
  const void **p = ein_cublas_pointer_arrays(g, (char *)0x100000,
                                             (const char *)0x200000,
                                             (const char *)0x300000, total,
                                             &err);
  ein_error_clear(&err);
  return p;
}

static bool same_arrays(const ein_cublas_gemm *x, const ein_cublas_gemm *y) {
  int64_t tx = 0, ty = 0;
  const void **px = arrays_of(x, &tx), **py = arrays_of(y, &ty);
  bool same = px && py && tx == ty &&
              memcmp(px, py, (size_t)tx * 3 * sizeof *px) == 0;
  ein_free(px);
  ein_free(py);
  return same;
}

static void arrays_fields(void) {
  ein_cublas_gemm g = base_gemm(), h = base_gemm();
  CHECK(ein_gemm_arrays_match(&g, &h) && same_arrays(&g, &h), "equal calls");
  /* What the arrays do not depend on may differ. */
  h.m = 99, h.n = 98, h.k = 97, h.lda = 99, h.ldb = 97, h.ldc = 99;
  h.trans_a = h.trans_b = true, h.a_is_step_a = true;
  h.compute = EIN_GEMM_COMPUTE_32F_TF32;
  h.loops.size[5] = 42; /* past loops.n */
  CHECK(ein_gemm_arrays_match(&g, &h), "sizes, transposes, compute ignored");
  /* Each field they depend on, changed alone. */
  enum { CHANGES = 11 };
  for (int c = 0; c < CHANGES; c++) {
    h = base_gemm();
    switch (c) {
    case 0: h.ab_dtype = EIN_DT_F16; break;
    case 1: h.c_dtype = EIN_DT_F64; break;
    case 2: h.count = 4; break;
    case 3: h.stride_a = 129; break;
    case 4: h.stride_b = 65; break;
    case 5: h.stride_c = 33; break;
    case 6: h.loops.n = 1; break;
    case 7: h.loops.size[1] = 6; break;
    case 8: h.loops.st[0][0] += 1; break;
    case 9: h.loops.st[1][1] += 1; break;
    case 10: h.loops.st[1][2] += 1; break;
    }
    CHECK(!ein_gemm_arrays_match(&g, &h) && !same_arrays(&g, &h),
          "change %d: arrays differ, and so must the key", c);
  }
}

/* Random small calls: a match always means the same arrays. */
static void arrays_random(void) {
  srand(16);
  int matches = 0, wrong = 0;
  for (int i = 0; i < 3000; i++) {
    ein_cublas_gemm x = base_gemm(), y;
    x.count = 1 + rand() % 2;
    x.stride_a = rand() % 3, x.stride_c = rand() % 3;
    x.loops.n = 1 + rand() % 2;
    for (int a = 0; a < x.loops.n; a++) {
      x.loops.size[a] = 1 + rand() % 2;
      for (int o = 0; o < 3; o++) x.loops.st[a][o] = rand() % 3;
    }
    y = x;
    if (rand() % 2) y.loops.st[rand() % y.loops.n][rand() % 3] = rand() % 3;
    if (rand() % 4 == 0) y.stride_c = rand() % 3;
    if (ein_gemm_arrays_match(&x, &y)) {
      matches++;
      wrong += !same_arrays(&x, &y);
    }
  }
  CHECK(matches > 100 && wrong == 0, "%d matches, %d with other arrays",
        matches, wrong);
}

int main(void) {
  owner_ids();
  sets_single();
  sets_threads();
  arrays_fields();
  arrays_random();
  return test_summary("run_cache");
}
