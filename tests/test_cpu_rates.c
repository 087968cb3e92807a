/*
 * test_cpu_rates.c - the host's GEMM and copy rates (runtime/cpu/
 * cpu_rates.h), the one measurement the "cpu" device model and einc
 * bench's floor share (issue 40).
 *
 * The size search runs on scripted timers first (no timing, so the same
 * in every run): an idle machine reads its rate at a bounded cost, a
 * burst of load at the start and a steady load (every run losing a
 * scheduler quantum, as a team thread descheduled by another process
 * does) still read near it. Then the real measurements: positive and
 * finite per dtype, each through the path plans' GEMMs take, told by
 * oneDNN's call counters (bf16/f16 on oneDNN where the backend has it,
 * f32 on its sgemm where gemm calls pick it: meson also runs this with
 * EINC_SGEMM=openblas).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu_dnnl.h"
#include "cpu_rates.h"
#include "harness.h"

typedef enum load { IDLE, BURST, STEADY, BROKEN } load;

/* A machine of `rate` FLOP/s, 10 us per call, under `how` load. */
typedef struct script {
  double rate, quantum;
  load how;
  int runs;       /* runs timed so far */
  double seconds; /* the time they took: the measurement's cost */
  int64_t largest;
} script;

static double scripted(void *ctx, int64_t n, int runs) {
  script *s = ctx;
  if (s->how == BROKEN && n > 256) return -1;
  double best = -1, work = 2.0 * (double)n * (double)n * (double)n;
  for (int r = 0; r < runs; r++, s->runs++) {
    bool hit = s->how == STEADY || (s->how == BURST && s->runs < 8);
    double t = work / s->rate + 1e-5 + (hit ? s->quantum : 0);
    s->seconds += t;
    best = best < 0 || t < best ? t : best;
  }
  s->largest = n > s->largest ? n : s->largest;
  return best;
}

static void search_case(const char *what, double rate, load how,
                        double at_least, double max_cost) {
  script s = {.rate = rate, .quantum = 16e-3, .how = how};
  double got;
  bool ok = ein_cpu_gemm_rate_by(scripted, &s, &got);
  CHECK(ok && got <= rate && got >= at_least * rate,
        "%s: read %.3g FLOP/s of %.3g (want at least %.0f%%), n up to "
        "%lld in %d runs", what, got, rate, 100 * at_least,
        (long long)s.largest, s.runs);
  CHECK(s.seconds <= max_cost, "%s: measuring took %.3f s (at most %.2f)",
        what, s.seconds, max_cost);
}

static void size_search(void) {
  search_case("idle, fast (bf16 on 2 Zen 5 cores)", 6.6e11, IDLE, 0.95,
              0.3);
  search_case("idle, slow (f64 at 30 GFLOP/s)", 3e10, IDLE, 0.95, 0.6);
  search_case("a burst of load, then idle", 6.6e11, BURST, 0.95, 0.5);
  /* the reverted search, sized by one run, read 0.004 of the rate here */
  search_case("steady load: a 16 ms quantum every run", 6.6e11, STEADY,
              0.4, 0.8);
  script s = {.rate = 1e11, .how = BROKEN};
  double got = 1;
  CHECK(!ein_cpu_gemm_rate_by(scripted, &s, &got) && got == 0,
        "a GEMM that fails fails the rate (%g)", got);
}

static bool usable(double r) { return isfinite(r) && r > 0; }

/* dt's rate, and whether oneDNN's half (or sgemm) counter moved. */
static void measured_case(ein_dtype dt) {
  const char *name = ein_dtype_name(dt);
  bool half = dt == EIN_DT_BF16 || dt == EIN_DT_F16;
  long h0 = ein_cpu_dnnl_calls(), s0 = ein_cpu_dnnl_sgemm_calls();
  double rate = -1;
  bool ok = ein_cpu_gemm_rate(dt, &rate);
  long h = ein_cpu_dnnl_calls() - h0, s = ein_cpu_dnnl_sgemm_calls() - s0;
  if (half && !ein_cpu_dnnl_gemm_dtype(dt)) {
    CHECK(!ok && rate == 0 && h == 0,
          "%s: no half GEMM here, no rate (plans and the floor take f32's)",
          name);
    return;
  }
  CHECK(ok && usable(rate), "%s: rate %g", name, rate);
  printf("# %s GEMM %.3g GFLOP/s (oneDNN half calls %ld, sgemm %ld)\n",
         name, rate / 1e9, h, s);
  bool sgemm = dt == EIN_DT_F32 && ein_cpu_dnnl_f32_gemm();
  CHECK(half ? h > 0 && s == 0 : h == 0,
        "%s: measured on oneDNN's half GEMM iff a half dtype (%ld calls)",
        name, h);
  CHECK(sgemm ? s > 0 : s == 0,
        "%s: on oneDNN's sgemm iff f32 GEMMs go there (%ld calls)", name, s);
}

int main(void) {
  size_search();
  const ein_dtype dts[] = {EIN_DT_F32, EIN_DT_F64, EIN_DT_BF16, EIN_DT_F16};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++)
    measured_case(dts[i]);
  double copy = -1;
  CHECK(ein_cpu_copy_rate(&copy) && usable(copy), "copy rate %g", copy);
  CHECK(ein_cpu_llc_bytes() > 0, "a last-level cache size");
  ein_cpu_rates all;
  CHECK(ein_cpu_rates_measure(&all), "the model's measurement");
  for (int i = 0; i < EIN_NRATE; i++)
    CHECK(usable(all.rate[i]), "the model's rate %d: %g", i, all.rate[i]);
  return test_summary("cpu_rates");
}
