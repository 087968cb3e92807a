/*
 * test_plan_cache.c - the context's plan cache as ein.h opens it to
 * callers (ein_cache_find, ein_cache_put): one table with ein_eval's
 * plans, whose eviction drops a caller's entry as it drops ein_eval's,
 * whose counts see both, and which releases a caller's data once, as its
 * entry leaves; and a tensor's part of a key, written and
 * read back by one rule (ein_cache_key_tensor, ein_plan_output_compact).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ctx_internal.h"
#include "ein.h"
#include "harness.h"
#include "plan_object.h"

static const DLDataType F32 = {kDLFloat, 32, 1};

static ein_cache_stats stats_of(ein_ctx *ctx) {
  ein_cache_stats s;
  REQUIRE_OK(ein_cache_stats_get(ctx, &s));
  return s;
}

/* The release callback: counts how often it ran on the data. */
static void count_release(void *data) { ++*(int *)data; }

/* ein_eval of a transpose of an n x 3 tensor: a plan of its own per n
 * (the buffers are the calling thread's); whether it ran. No CHECK here:
 * worker threads call it too, and the harness's counts are not atomic. */
static bool transposed(ein_ctx *ctx, int64_t n) {
  float in[3 * (EIN_PLAN_CACHE_ENTRIES + 1)] = {0};
  float out[3 * (EIN_PLAN_CACHE_ENTRIES + 1)];
  int64_t si[2] = {n, 3}, so[2] = {3, n};
  DLTensor ti = {in, {kDLCPU, 0}, 2, F32, si, NULL, 0};
  DLTensor to = {out, {kDLCPU, 0}, 2, F32, so, NULL, 0};
  const DLTensor *ins[1] = {&ti};
  return ein_eval(ctx, "i j -> j i", ins, 1, &to, NULL) == EIN_OK;
}

static void eval_transpose(ein_ctx *ctx, int64_t n) {
  CHECK(transposed(ctx, n), "eval %lld: %s", (long long)n,
        ein_last_error(ctx)->message);
}

/* A caller's entry: found by its key alone, its data given back,
 * counted with ein_eval's finds, evicted by ein_eval's entries under the
 * one least-recently-used rule, its data released once as it leaves, and
 * its plan alive while the caller keeps a reference. */
static void test_caller_entry(ein_ctx *ctx) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, -1, 2, -2, 3, -3}, c[4];
  int64_t sa[2] = {2, 3}, sb[2] = {3, 2}, sc[2] = {2, 2};
  DLTensor ta = {a, {kDLCPU, 0}, 2, F32, sa, NULL, 0};
  DLTensor tb = {b, {kDLCPU, 0}, 2, F32, sb, NULL, 0};
  DLTensor tc = {c, {kDLCPU, 0}, 2, F32, sc, NULL, 0};
  const DLTensor *ins[2] = {&ta, &tb};
  ein_plan *p;
  REQUIRE_OK(ein_plan_create(ctx, "i j, j k -> i k", ins, 2, NULL, NULL, &p));
  int released = 0, other = 0;
  static const char key[] = "caller: i j, j k -> i k 2x3 3x2";
  ein_cache_stats s0 = stats_of(ctx);
  CHECK(ein_cache_find(ctx, 7, key, sizeof key) == NULL, "found before put");
  CHECK(ein_cache_put(ctx, 7, key, sizeof key, p, &released,
                      count_release) == 1, "put");
  CHECK(ein_cache_put(ctx, 7, key, sizeof key, p, &other, count_release) ==
            0, "put twice");
  void *found = ein_cache_find(ctx, 7, key, sizeof key);
  ein_cache_stats s1 = stats_of(ctx);
  CHECK(found == &released && released == 0 && other == 0,
        "found %p (put %p), released %d", found, (void *)&released, released);
  CHECK(s1.hits == s0.hits + 1 && s1.misses == s0.misses + 1 &&
            s1.entries == s0.entries + 1 &&
            s1.capacity == EIN_PLAN_CACHE_ENTRIES,
        "counts: %llu hits %llu misses %d entries",
        (unsigned long long)(s1.hits - s0.hits),
        (unsigned long long)(s1.misses - s0.misses), s1.entries - s0.entries);
  /* ein_eval's new entries push the caller's (least recently used) out. */
  for (int64_t n = 1; n <= EIN_PLAN_CACHE_ENTRIES; n++) eval_transpose(ctx, n);
  ein_cache_stats s2 = stats_of(ctx);
  CHECK(s2.misses == s1.misses + EIN_PLAN_CACHE_ENTRIES &&
            s2.evictions > s1.evictions,
        "ein_eval: %llu misses, %llu evictions",
        (unsigned long long)(s2.misses - s1.misses),
        (unsigned long long)(s2.evictions - s1.evictions));
  CHECK(ein_cache_find(ctx, 7, key, sizeof key) == NULL,
        "the caller's entry outlived %d newer ones", EIN_PLAN_CACHE_ENTRIES);
  CHECK(released == 1 && other == 0, "released %d and %d times", released,
        other);
  CHECK(ein_plan_execute(ctx, p, ins, 2, &tc) == EIN_OK && c[0] == 14 &&
            c[3] == -32,
        "the caller's plan still runs: %g %g", c[0], c[3]);
  ein_plan_destroy(p);
}

/* Equal hashes of different keys: the bytes decide. */
static void test_same_hash(ein_ctx *ctx) {
  int64_t s1[2] = {2, 3}, s2[2] = {3, 2};
  DLTensor t1 = {NULL, {kDLCPU, 0}, 2, F32, s1, NULL, 0}, t2 = t1;
  t2.shape = s2;
  const DLTensor *i1[1] = {&t1}, *i2[1] = {&t2};
  ein_plan *p1, *p2;
  REQUIRE_OK(ein_plan_create(ctx, "i j -> j i", i1, 1, NULL, NULL, &p1));
  REQUIRE_OK(ein_plan_create(ctx, "i j -> j i", i2, 1, NULL, NULL, &p2));
  int d1 = 0, d2 = 0;
  CHECK(ein_cache_put(ctx, 99, "one", 3, p1, &d1, NULL) == 1 &&
            ein_cache_put(ctx, 99, "two", 3, p2, &d2, NULL) == 1,
        "put both");
  void *f1 = ein_cache_find(ctx, 99, "one", 3);
  void *f2 = ein_cache_find(ctx, 99, "two", 3);
  CHECK(f1 == &d1 && f2 == &d2 && !ein_cache_find(ctx, 99, "six", 3),
        "same hash: %p %p for %p %p", f1, f2, (void *)&d1, (void *)&d2);
  ein_plan_destroy(p1);
  ein_plan_destroy(p2);
}

/* The key's tensor part: tensors one plan serves write the same bytes
 * (NULL strides and their compact ones; any stride of a size-1 dim), other
 * layouts differ; and the reader agrees with the writer on compactness. */
static void test_key_tensor(ein_ctx *ctx) {
  int64_t shape[3] = {4, 1, 5}, compact[3] = {5, 5, 1}, odd1[3] = {5, 77, 1};
  int64_t trans[3] = {1, 4, 4};
  DLTensor t = {NULL, {kDLCPU, 0}, 3, F32, shape, NULL, 0};
  DLTensor tc = t, t1 = t, tt = t;
  tc.strides = compact;
  t1.strides = odd1;
  tt.strides = trans;
  unsigned char k[EIN_CACHE_KEY_TENSOR_MAX], kc[EIN_CACHE_KEY_TENSOR_MAX],
      k1[EIN_CACHE_KEY_TENSOR_MAX], kt[EIN_CACHE_KEY_TENSOR_MAX];
  size_t n = ein_cache_key_tensor(&t, k, sizeof k);
  CHECK(n == 2 + 16 * 3, "length %zu", n);
  CHECK(ein_cache_key_tensor(&tc, kc, sizeof kc) == n &&
            memcmp(k, kc, n) == 0, "NULL strides and compact ones differ");
  CHECK(ein_cache_key_tensor(&t1, k1, sizeof k1) == n &&
            memcmp(k, k1, n) == 0, "a size-1 dim's stride counted");
  CHECK(ein_cache_key_tensor(&tt, kt, sizeof kt) == n &&
            memcmp(k, kt, n) != 0, "a transposed layout writes the same");
  CHECK(ein_cache_key_tensor(&t, k, n - 1) == 0, "wrote past cap");
  DLTensor bad = t;
  bad.dtype = (DLDataType){kDLFloat, 24, 1};
  CHECK(ein_cache_key_tensor(&bad, k, sizeof k) == 0, "an f24 key");
  /* ein_plan_output_compact reads the part ein_plan_create wrote. */
  const DLTensor *ins[1] = {&t};
  int64_t oshape[3] = {4, 1, 5};
  DLTensor oc = tc, ot = tt;
  oc.shape = ot.shape = oshape;
  ein_plan *pn, *pc, *pt;
  REQUIRE_OK(ein_plan_create(ctx, "a b c -> a b c", ins, 1, NULL, NULL, &pn));
  REQUIRE_OK(ein_plan_create(ctx, "a b c -> a b c", ins, 1, &oc, NULL, &pc));
  REQUIRE_OK(ein_plan_create(ctx, "a b c -> a b c", ins, 1, &ot, NULL, &pt));
  CHECK(ein_plan_output_compact(pn) && ein_plan_output_compact(pc) &&
            !ein_plan_output_compact(pt),
        "compact: none %d, compact %d, transposed %d",
        ein_plan_output_compact(pn), ein_plan_output_compact(pc),
        ein_plan_output_compact(pt));
  ein_plan_destroy(pn);
  ein_plan_destroy(pc);
  ein_plan_destroy(pt);
}

/* Callers' puts and finds beside ein_eval's entries from 4 threads at
 * once, so entries of both kinds are evicted on any thread: every datum
 * put is released exactly once (by ein_ctx_destroy at the latest), and a
 * find gives back only data put under its key. */
typedef struct worker {
  ein_ctx *ctx;
  int id, puts, wrong;
  atomic_int *released;
} worker;

static void count_atomic(void *data) { atomic_fetch_add((atomic_int *)data, 1); }

static void *work(void *arg) {
  worker *w = arg;
  int64_t s[2] = {2, 3};
  DLTensor t = {NULL, {kDLCPU, 0}, 2, F32, s, NULL, 0};
  const DLTensor *ins[1] = {&t};
  ein_plan *p;
  if (ein_plan_create(w->ctx, "i j -> j i", ins, 1, NULL, NULL, &p)) {
    w->wrong++;
    return NULL;
  }
  for (int i = 0; i < 300; i++) {
    char key[32];
    int len = snprintf(key, sizeof key, "w%d-%d", w->id, i % 40);
    void *found = ein_cache_find(w->ctx, (uint64_t)(i % 40), key, (size_t)len);
    if (found && found != w->released) w->wrong++;
    if (!found && ein_cache_put(w->ctx, (uint64_t)(i % 40), key, (size_t)len,
                                p, w->released, count_atomic))
      w->puts++;
    if (!transposed(w->ctx, 1 + (i * 7 + w->id) % EIN_PLAN_CACHE_ENTRIES))
      w->wrong++;
  }
  ein_plan_destroy(p);
  return NULL;
}

static void test_threads(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  atomic_int released[4];
  worker w[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    atomic_init(&released[i], 0);
    w[i] = (worker){ctx, i, 0, 0, &released[i]};
    CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0, "thread %d", i);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  ein_cache_stats st = stats_of(ctx);
  ein_ctx_destroy(ctx);
  for (int i = 0; i < 4; i++)
    CHECK(w[i].wrong == 0 && w[i].puts > 0 &&
              atomic_load(&released[i]) == w[i].puts,
          "thread %d: %d wrong finds, %d puts, %d released", i, w[i].wrong,
          w[i].puts, atomic_load(&released[i]));
  CHECK(st.evictions > 0, "no eviction in %llu misses",
        (unsigned long long)st.misses);
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  test_caller_entry(ctx);
  test_same_hash(ctx);
  test_key_tensor(ctx);
  CHECK(ein_cache_find(NULL, 7, "k", 1) == NULL &&
            ein_cache_put(ctx, 7, NULL, 1, NULL, NULL, NULL) == 0,
        "NULL arguments");
  ein_ctx_destroy(ctx);
  test_threads();
  return test_summary("plan_cache");
}
