/*
 * device_models.c - ein_device_model_get and the caller's overrides: the
 * models of the machine a plan runs on (device_models.h); the built-in
 * ones (data sheets) are the planner's (cost.h).
 *
 * The "cpu" model's rates are measured by runtime/cpu/cpu_rates.c and
 * kept in the disk cache (runtime/disk_cache.h) under the CPU's model name
 * and the thread count, as text that is parsed and checked when read: a
 * file the cache's checksum passes but whose rates are not positive and
 * finite is measured again, not trusted. A process also keeps the model it
 * resolved, so it measures or reads the file once per thread count.
 *
 * One measurement taken while the machine is busy (a build on every core)
 * reads low (f64 GEMM 6.5 GFLOP/s against 22, copy 8.4 GB/s against 26.7
 * on the bench machine) and, kept, skewed every prediction after it. So
 * the first RATE_RUNS processes that use the model each measure once and
 * keep the best of each rate so far (load only ever slows a measurement);
 * from then on the entry is read. A version-1 entry counts as one run.
 *
 * Even the best of three can read below what a call later reaches (issue
 * 35: a cached f32 peak of 97 GFLOP/s under a 193 GFLOP/s GEMM, MFU 199%).
 * A rate cannot be above what the machine did, so a run measured faster
 * than the model's peak raises the peak (ein_cpu_model_raise): in the
 * process's model and in the cache entry, with the time it was seen. Each
 * rate keeps the Unix time it was measured at (version 4 entries; older
 * ones read as of unknown time, the half rates as f32's, and count as one
 * run, so the next processes measure the half rates).
 */
#include "device_models.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "cpu_rates.h"
#include "cuda_backend.h"
#include "disk_cache.h"
#include "cost.h"

enum { PAYLOAD_CAP = 512, RATE_RUNS = 3 };
static const char PAYLOAD_HEAD[] = "einc cpu rates 4\n";
static const char PAYLOAD_HEAD_V2[] = "einc cpu rates 2\n";
static const char PAYLOAD_HEAD_V1[] = "einc cpu rates 1\n";
/* The rates' names in the payload, in ein_cpu_rate's order. */
static const char *const RATE_NAMES[EIN_NRATE] = {"f32", "f64", "bf16",
                                                   "f16", "copy"};

size_t ein_cpu_model_key(char *buf, size_t cap) {
  char cpu[128];
  ein_cpu_model_name(cpu, sizeof cpu);
  int n = snprintf(buf, cap, "device-model cpu 1|%s|%d threads", cpu,
                   ein_cpu_threads());
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* The host overheads: ein_eval of a cached plan took 1.37 us on the
 * H100 machine's host (bench/host_overhead); the part per step (an OpenMP
 * region or a BLAS call) is an estimate. */
#define CPU_CALL_S 1.4e-6
#define CPU_STEP_S 0.3e-6

/* The rate a peak kind is measured as: tf32 and fp8 are computed in f32
 * on the host. */
static ein_cpu_rate rate_of_kind(ein_peak_kind kind) {
  switch (kind) {
  case EIN_PEAK_F64: return EIN_RATE_F64;
  case EIN_PEAK_BF16: return EIN_RATE_BF16;
  case EIN_PEAK_F16: return EIN_RATE_F16;
  default: return EIN_RATE_F32;
  }
}

/* A half dtype runs at least at f32's rate (a plan converts to f32 where
 * its own GEMM is slower), so its rate never reads below f32's. */
static void half_at_least_f32(ein_cpu_rates *r) {
  for (int h = EIN_RATE_BF16; h <= EIN_RATE_F16; h++)
    if (r->rate[h] < r->rate[EIN_RATE_F32]) {
      r->rate[h] = r->rate[EIN_RATE_F32];
      r->when[h] = r->when[EIN_RATE_F32];
    }
}

/* The model from measured rates: a CPU has no data sheet here, so its
 * peaks are the measurements. */
static void cpu_model_from(const ein_cpu_rates *r, const char *source,
                           ein_device_model *out) {
  char cpu[128];
  ein_cpu_model_name(cpu, sizeof cpu);
  int threads = ein_cpu_threads();
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "cpu");
  snprintf(out->description, sizeof out->description, "%s, %d thread%s",
           cpu, threads, threads == 1 ? "" : "s");
  for (int k = 0; k < EIN_NPEAK; k++) {
    ein_cpu_rate i = rate_of_kind((ein_peak_kind)k);
    out->peak[k] = out->measured[k] = r->rate[i];
    out->measured_at[k] = r->when[i];
  }
  out->bytes_per_s = out->measured_bytes_per_s = r->rate[EIN_RATE_COPY];
  out->call_seconds = CPU_CALL_S;
  out->step_seconds = CPU_STEP_S;
  out->backend = EIN_BACKEND_CPU;
  out->source = source;
}

static bool plausible(double rate) {
  return isfinite(rate) && rate > 0 && rate < 1e18;
}

/* The body of a version 1 or 2 payload (f32, f64, copy; no times): the
 * half rates are f32's, the times unknown. */
static bool parse_old(const char *body, ein_cpu_rates *r) {
  int used = 0;
  double *v = r->rate;
  if (sscanf(body, "f32 %lg\nf64 %lg\ncopy %lg\n%n", &v[EIN_RATE_F32],
             &v[EIN_RATE_F64], &v[EIN_RATE_COPY], &used) != 3 ||
      body[used] != '\0')
    return false;
  v[EIN_RATE_BF16] = v[EIN_RATE_F16] = v[EIN_RATE_F32];
  return true;
}

/* The body of a version 4 payload: "name rate unix-time" per rate, in
 * RATE_NAMES' order. */
static bool parse_new(const char *body, ein_cpu_rates *r) {
  for (int i = 0; i < EIN_NRATE; i++) {
    char name[8];
    int used = 0;
    if (sscanf(body, "%7s %lg %lg\n%n", name, &r->rate[i], &r->when[i],
               &used) != 3 ||
        strcmp(name, RATE_NAMES[i]) != 0 || !(r->when[i] >= 0))
      return false;
    body += used;
  }
  return *body == '\0';
}

/* The rates in a cache payload and the runs they are the best of; false
 * for anything malformed. */
static bool parse_payload(const char *p, size_t size, ein_cpu_rates *r,
                          int *runs) {
  char text[PAYLOAD_CAP];
  size_t head = sizeof PAYLOAD_HEAD - 1;
  memset(r, 0, sizeof *r);
  if (size >= sizeof text || size < head) return false;
  int version = memcmp(p, PAYLOAD_HEAD, head) == 0      ? 4
                : memcmp(p, PAYLOAD_HEAD_V2, head) == 0 ? 2
                : memcmp(p, PAYLOAD_HEAD_V1, head) == 0 ? 1
                                                        : 0;
  if (!version) return false;
  memcpy(text, p, size);
  text[size] = '\0';
  const char *body = text + head;
  int used = 0;
  *runs = 1;
  if (version > 1 &&
      (sscanf(body, "runs %d\n%n", runs, &used) != 1 || *runs < 1))
    return false;
  body += used;
  if (!(version == 4 ? parse_new(body, r) : parse_old(body, r)))
    return false;
  /* an older entry has no half rates of their own: it counts as one run,
   * so the next uses measure them (keeping the best of the rest) */
  if (version < 4) *runs = 1;
  for (int i = 0; i < EIN_NRATE; i++)
    if (!plausible(r->rate[i])) return false;
  return true;
}

static bool cache_read(const char *dir, const char *key, size_t keylen,
                       ein_cpu_rates *r, int *runs) {
  char *payload;
  size_t size;
  if (!dir || !ein_disk_cache_load(dir, key, keylen, &payload, &size))
    return false;
  bool ok = parse_payload(payload, size, r, runs);
  ein_free(payload);
  return ok;
}

static void cache_write(const char *dir, const char *key, size_t keylen,
                        const ein_cpu_rates *r, int runs) {
  char text[PAYLOAD_CAP];
  int n = snprintf(text, sizeof text, "%sruns %d\n", PAYLOAD_HEAD, runs);
  for (int i = 0; i < EIN_NRATE && n > 0 && (size_t)n < sizeof text; i++)
    n += snprintf(text + n, sizeof text - (size_t)n, "%s %.17g %.0f\n",
                  RATE_NAMES[i], r->rate[i], r->when[i]);
  /* a cache that cannot be written only costs the next process a
   * measurement */
  if (dir && n > 0 && (size_t)n < sizeof text)
    (void)ein_disk_cache_store(dir, key, keylen, text, (size_t)n);
}

/* Each rate the better of a and b, with its time. */
static void best_of(ein_cpu_rates *a, const ein_cpu_rates *b) {
  for (int i = 0; i < EIN_NRATE; i++)
    if (b->rate[i] > a->rate[i]) {
      a->rate[i] = b->rate[i];
      a->when[i] = b->when[i];
    }
}

ein_status ein_cpu_model_in(const char *dir, ein_device_model *out) {
  char key[256];
  size_t keylen = ein_cpu_model_key(key, sizeof key);
  ein_cpu_rates kept, r;
  int runs = 0;
  if (cache_read(dir, key, keylen, &kept, &runs) && runs >= RATE_RUNS) {
    half_at_least_f32(&kept);
    cpu_model_from(&kept, "cache", out);
    return EIN_OK;
  }
  if (!ein_cpu_rates_measure(&r)) return EIN_ERR_NO_MEMORY;
  if (runs > 0) best_of(&r, &kept); /* the best of each rate over the runs */
  half_at_least_f32(&r);
  cache_write(dir, key, keylen, &r, runs + 1);
  cpu_model_from(&r, "measured", out);
  return EIN_OK;
}

/* Raises m's figures for rate i (and those that follow it) to `rate`,
 * measured at `when`. */
static void model_raise(ein_device_model *m, ein_cpu_rate i, double rate,
                        double when) {
  for (int k = 0; k < EIN_NPEAK; k++) {
    ein_cpu_rate ik = rate_of_kind((ein_peak_kind)k);
    bool follows = ik == i || (i == EIN_RATE_F32 && (ik == EIN_RATE_BF16 ||
                                                     ik == EIN_RATE_F16));
    if (follows && m->peak[k] < rate && !(m->given & (1u << k))) {
      m->peak[k] = m->measured[k] = rate;
      m->measured_at[k] = when;
    }
  }
}

bool ein_cpu_model_raise_in(const char *dir, ein_device_model *m,
                            ein_peak_kind kind, double rate) {
  if (!m || strcmp(m->name, "cpu") != 0 || m->backend != EIN_BACKEND_CPU ||
      (unsigned)kind >= EIN_NPEAK || (m->given & (1u << kind)) ||
      !plausible(rate) || rate <= m->peak[kind])
    return false;
  ein_cpu_rate i = rate_of_kind(kind);
  double now = (double)time(NULL);
  model_raise(m, i, rate, now);
  char key[256];
  size_t keylen = ein_cpu_model_key(key, sizeof key);
  ein_cpu_rates kept;
  int runs = 0;
  if (!cache_read(dir, key, keylen, &kept, &runs)) {
    /* no entry to raise: the model's own figures, as one run */
    memset(&kept, 0, sizeof kept);
    for (int k = 0; k < EIN_NPEAK; k++) {
      kept.rate[rate_of_kind((ein_peak_kind)k)] = m->measured[k];
      kept.when[rate_of_kind((ein_peak_kind)k)] = m->measured_at[k];
    }
    kept.rate[EIN_RATE_COPY] = m->measured_bytes_per_s;
    kept.when[EIN_RATE_COPY] = now;
    runs = 1;
  }
  if (kept.rate[i] < rate) kept.rate[i] = rate, kept.when[i] = now;
  half_at_least_f32(&kept);
  bool whole = true;
  for (int j = 0; j < EIN_NRATE; j++) whole = whole && plausible(kept.rate[j]);
  if (whole) cache_write(dir, key, keylen, &kept, runs);
  return true;
}

/* The process's "cpu" model, for the thread count it was resolved with.
 * Later calls get it as it was resolved, source included: a report is
 * asked for twice (its length, then its text: ein_plan_describe), and a
 * source that turned from "measured" into "cache" between the two made the
 * second text 3 bytes shorter than the length the caller was given. */
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static ein_device_model memo;
static int memo_threads; /* 0: none yet */

static ein_status cpu_model(ein_device_model *out) {
  pthread_mutex_lock(&memo_lock);
  ein_status st = EIN_OK;
  if (memo_threads == ein_cpu_threads()) {
    *out = memo;
  } else {
    char dir[4096];
    bool have_dir = ein_disk_cache_dir(dir, sizeof dir);
    st = ein_cpu_model_in(have_dir ? dir : NULL, out);
    if (!st) memo = *out, memo_threads = ein_cpu_threads();
  }
  pthread_mutex_unlock(&memo_lock);
  return st;
}

bool ein_cpu_model_raise(ein_device_model *m, ein_peak_kind kind,
                         double rate) {
  pthread_mutex_lock(&memo_lock);
  char dir[4096];
  bool have_dir = ein_disk_cache_dir(dir, sizeof dir);
  bool raised = ein_cpu_model_raise_in(have_dir ? dir : NULL, m, kind, rate);
  if (raised && memo_threads == ein_cpu_threads())
    model_raise(&memo, rate_of_kind(kind), rate, m->measured_at[kind]);
  pthread_mutex_unlock(&memo_lock);
  return raised;
}

/* The built-in model of a GPU by its name (cudaGetDeviceProperties'),
 * or NULL. "L4" is matched as a word: an L40 is another GPU. */
static const char *known_gpu(const char *gpu) {
  if (strstr(gpu, "H100") && strstr(gpu, "PCIe")) return "h100-pcie";
  if (strstr(gpu, "H100")) return "h100";
  if (strstr(gpu, "H200")) return "h200";
  if (strstr(gpu, "A100")) return "a100";
  if (strstr(gpu, "B200")) return "b200";
  const char *l4 = strstr(gpu, " L4");
  if (l4 && (l4[3] == '\0' || l4[3] == ' ')) return "l4";
  return NULL;
}

/* GPU 0 by its name: a known one's built-in model, else h100's, said. */
static void cuda_model(ein_device_model *out) {
  char gpu[128];
  bool found = ein_cuda_device_name(0, gpu, sizeof gpu);
  const char *known = found ? known_gpu(gpu) : NULL;
  *out = *ein_device_model_find(known ? known : "h100");
  if (known) {
    snprintf(out->description, sizeof out->description, "%s", gpu);
    return;
  }
  out->source = "assumed";
  if (found)
    snprintf(out->description, sizeof out->description,
             "%.100s has no model in einc: h100's assumed", gpu);
  else
    snprintf(out->description, sizeof out->description,
             "no CUDA GPU found: h100's rates assumed");
}

ein_status ein_device_model_get(const char *name, ein_device_model *out) {
  if (!name || !out) return EIN_ERR_INVALID_ARGUMENT;
  if (strcmp(name, "cpu") == 0) return cpu_model(out);
  if (strcmp(name, "cuda") == 0) {
    cuda_model(out);
    return EIN_OK;
  }
  const ein_device_model *m = ein_device_model_find(name);
  if (!m) return EIN_ERR_INVALID_ARGUMENT;
  *out = *m;
  return EIN_OK;
}

const char *ein_device_model_names(void) { return ein_cost_model_names(); }

static bool positive(double v) { return isfinite(v) && v > 0; }

ein_status ein_device_model_set_peak(ein_device_model *m, ein_peak_kind kind,
                                     double flops_per_s) {
  if (!m || (unsigned)kind >= EIN_NPEAK || !positive(flops_per_s))
    return EIN_ERR_INVALID_ARGUMENT;
  m->peak[kind] = flops_per_s;
  m->measured[kind] = 0;
  m->given |= 1u << kind;
  return EIN_OK;
}

ein_status ein_device_model_set_bandwidth(ein_device_model *m,
                                          double bytes_per_s) {
  if (!m || !positive(bytes_per_s)) return EIN_ERR_INVALID_ARGUMENT;
  m->bytes_per_s = bytes_per_s;
  m->measured_bytes_per_s = 0;
  m->given |= 1u << EIN_NPEAK;
  return EIN_OK;
}
