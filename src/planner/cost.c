/*
 * cost.c - the predicted time, FLOP utilization and memory of a plan on a
 * device model, and the built-in models. See cost.h and docs/design.md,
 * "Resource accounting".
 */
#include "cost.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* GPU overheads: one ein_eval with one kernel launch took 5.6 us on the
 * H100 (../shared/anchors, einc-h100-2026-11-23, bench/host_overhead);
 * its split into the host call and the launch is an estimate, and the
 * other GPUs are assumed to pay the same. */
#define GPU_CALL_S 3.1e-6
#define GPU_STEP_S 2.5e-6

/* Peaks are dense (the data sheets' sparsity figures halved), in the
 * order of ein_peak_kind: f64 (FP64 tensor core where there is one: the
 * DGEMM rate), f32 (FP32 without TF32), tf32, bf16, f16, fp8. einc's
 * measurements (h100 only): cuBLAS GEMM 8192^3 in bf16 and f32, and a
 * device-to-device copy, on an H100 SXM5 80GB (../shared/anchors,
 * 2026-11-22). */
/* 2026-11-22 00:00 UTC in Unix seconds: the day of the H100's
 * measurements (the hour was not kept). */
#define H100_MEASURED 1795305600.0

static const ein_device_model models[] = {
    /* NVIDIA H100 Tensor Core GPU data sheet, H100 SXM column */
    {"h100", "NVIDIA H100 SXM5 80GB",
     {67e12, 67e12, 494.5e12, 989.5e12, 989.5e12, 1979e12},
     {0, 51e12, 0, 780e12, 0, 0}, 3.35e12, 2.96e12, GPU_CALL_S, GPU_STEP_S,
     EIN_BACKEND_CUDA, 0, "data sheet", {0}},
    /* NVIDIA H100 Tensor Core GPU data sheet, H100 PCIe column */
    {"h100-pcie", "NVIDIA H100 PCIe 80GB",
     {51e12, 51e12, 378e12, 756.5e12, 756.5e12, 1513e12},
     {0}, 2.0e12, 0, GPU_CALL_S, GPU_STEP_S, EIN_BACKEND_CUDA, 0, "data sheet", {0}},
    /* NVIDIA H200 Tensor Core GPU data sheet, H200 SXM column */
    {"h200", "NVIDIA H200 SXM 141GB",
     {67e12, 67e12, 494.5e12, 989.5e12, 989.5e12, 1979e12},
     {0}, 4.8e12, 0, GPU_CALL_S, GPU_STEP_S, EIN_BACKEND_CUDA, 0, "data sheet", {0}},
    /* NVIDIA A100 Tensor Core GPU data sheet, A100 80GB SXM column; no
     * fp8 arithmetic */
    {"a100", "NVIDIA A100 SXM4 80GB",
     {19.5e12, 19.5e12, 156e12, 312e12, 312e12, 0},
     {0}, 2.039e12, 0, GPU_CALL_S, GPU_STEP_S, EIN_BACKEND_CUDA, 0, "data sheet", {0}},
    /* NVIDIA L4 Tensor Core GPU data sheet; FP64 is not on it: Ada's
     * 1/64 of FP32 */
    {"l4", "NVIDIA L4 24GB",
     {30.3e12 / 64, 30.3e12, 60e12, 121e12, 121e12, 242.5e12},
     {0}, 300e9, 0, GPU_CALL_S, GPU_STEP_S, EIN_BACKEND_CUDA, 0, "data sheet", {0}},
    /* NVIDIA HGX B200 data sheet, its eight-GPU figures per GPU */
    {"b200", "NVIDIA B200 180GB",
     {37e12, 75e12, 1.125e15, 2.25e15, 2.25e15, 4.5e15},
     {0}, 8e12, 0, GPU_CALL_S, GPU_STEP_S, EIN_BACKEND_CUDA, 0, "data sheet", {0}},
};

const ein_device_model *ein_device_model_find(const char *name) {
  if (!name) return NULL;
  if (strcmp(name, "h100-sxm") == 0) name = "h100";
  for (size_t i = 0; i < sizeof models / sizeof *models; i++)
    if (strcmp(models[i].name, name) == 0) return &models[i];
  return NULL;
}

const char *ein_cost_model_names(void) {
  return "cpu, cuda, h100 (= h100-sxm), h100-pcie, h200, a100, l4, b200";
}

static const char *const kind_names[EIN_NPEAK] = {"f64",  "f32", "tf32",
                                                  "bf16", "f16", "fp8"};

const char *ein_cost_kind_name(ein_peak_kind kind) {
  return (unsigned)kind < EIN_NPEAK ? kind_names[kind] : "?";
}

static ein_peak_kind kind_of(ein_dtype dt, bool tf32) {
  switch (dt) {
  case EIN_DT_F64: case EIN_DT_C128: return EIN_PEAK_F64;
  case EIN_DT_BF16: return EIN_PEAK_BF16;
  case EIN_DT_F16: return EIN_PEAK_F16;
  default: return tf32 ? EIN_PEAK_TF32 : EIN_PEAK_F32;
  }
}

/* An FP8 GEMM (fp8_gemm.h) runs on the fp8 tensor cores: only plans
 * that take the FP8 path have one, so the decode path, whose GEMM reads
 * f32, keeps f32's (or TF32's) rate. */
static bool fp8_gemm(const ein_step *s) {
  return s->kind == EIN_STEP_GEMM && s->gemm.scaled;
}

ein_peak_kind ein_cost_step_kind(const ein_plan_ir *ir, const ein_step *s) {
  if (fp8_gemm(s)) return EIN_PEAK_FP8;
  ein_dtype dt = s->nsrc ? s->src_dtype[0] : s->dst_dtype;
  return kind_of(dt, ir->allow_tf32 && s->kind == EIN_STEP_GEMM &&
                         dt == EIN_DT_F32);
}

ein_peak_kind ein_cost_plan_kind(const ein_plan_ir *ir) {
  for (int i = 0; i < ir->nsteps; i++)
    if (fp8_gemm(&ir->steps[i])) return EIN_PEAK_FP8;
  return kind_of(ir->dtype, ir->allow_tf32 && ir->dtype == EIN_DT_F32);
}

double ein_cost_peak(const ein_device_model *m, ein_peak_kind kind) {
  return (unsigned)kind < EIN_NPEAK ? m->peak[kind] : 0;
}

double ein_cost_rate(const ein_device_model *m, ein_peak_kind kind,
                     bool complex) {
  if ((unsigned)kind >= EIN_NPEAK) kind = EIN_PEAK_F32;
  double r = m->measured[kind] > 0 ? m->measured[kind] : m->peak[kind];
  if (!(r > 0) && kind != EIN_PEAK_F32) return ein_cost_rate(m, EIN_PEAK_F32, complex);
  return complex ? r / 4 : r;
}

double ein_cost_plan_peak(const ein_plan_ir *ir, const ein_device_model *m) {
  double p = ein_cost_peak(m, ein_cost_plan_kind(ir));
  return ein_dtype_is_complex(ir->dtype) ? p / 4 : p;
}

double ein_cost_bandwidth(const ein_device_model *m) {
  return m->measured_bytes_per_s > 0 ? m->measured_bytes_per_s
                                     : m->bytes_per_s;
}

static bool good(double v) { return isfinite(v) && v >= 0; }

bool ein_cost_model_usable(const ein_device_model *m) {
  if (!m || !good(m->bytes_per_s) || !good(m->measured_bytes_per_s) ||
      !good(m->call_seconds) || !good(m->step_seconds))
    return false;
  for (int k = 0; k < EIN_NPEAK; k++)
    if (!good(m->peak[k]) || !good(m->measured[k])) return false;
  return ein_cost_rate(m, EIN_PEAK_F32, false) > 0 &&
         ein_cost_bandwidth(m) > 0;
}

/* A view plan moves nothing when its result is taken as a view (einc's
 * Python does), but an execute writes the output: its one step then
 * copies the output's bytes (read and written) at the model's bandwidth.
 * (Before, an execute of a 2048x2048 transpose was predicted at 300 ns
 * and took 9 ms: bench/results/2026-11-28-predicted-cpu.md.) */
static double output_bytes(const ein_plan_ir *ir) {
  double bytes = (double)ein_dtype_size(ir->dtype);
  for (int d = 0; d < ir->out_ndim; d++) bytes *= (double)ir->out_shape[d];
  return bytes;
}

static double view_copy_seconds(const ein_plan_ir *ir,
                                const ein_device_model *m) {
  return 2 * output_bytes(ir) / ein_cost_bandwidth(m);
}

/* A GPU moves memory in 32-byte sectors: an operand read or written in
 * runs shorter than a sector pays for the whole sector (a diagonal, a
 * column of a row-major matrix: one element per sector). docs/design.md,
 * "Sector bytes in the roofline". */
#define SECTOR 32.0

static double span(int64_t stride) {
  return stride < 0 ? -(double)stride : (double)stride;
}

/* Bytes moved per byte of operand k's elements (k: 0 dst, 1 and 2 the
 * sources) of a LOOP or FILL step. Its run is the axis of stride 1
 * extended by each axis whose stride is the run so far (any kernel can
 * walk it in order: the transposes tile, the reductions read along it);
 * when the run covers every element the operand touches it is contiguous
 * (1). Otherwise each run of R bytes costs whole sectors, ceil(R / 32) x
 * 32, unless runs lie closer than that (a pitch of P bytes to the next
 * run: the sectors are shared, P bytes a run). Stride-0 axes re-read the
 * same elements and are not runs. */
static double operand_factor(const ein_step *s, int k, double esize) {
  double run = 1, pitch = INFINITY;
  for (bool grew = true; grew;) {
    grew = false;
    for (int i = 0; i < s->naxes; i++)
      if (s->axes[i].size > 1 && span(s->axes[i].stride[k]) == run) {
        run *= (double)s->axes[i].size;
        grew = true;
      }
  }
  for (int i = 0; i < s->naxes; i++) {
    double st = span(s->axes[i].stride[k]);
    if (s->axes[i].size > 1 && st != 0 && st >= run) pitch = fmin(pitch, st);
  }
  if (pitch == INFINITY) return 1;
  double r = run * esize;
  double per_run = fmax(r, fmin(pitch * esize, ceil(r / SECTOR) * SECTOR));
  return per_run / r;
}

/* Elements operand k touches: the product over the axes it moves along. */
static double operand_elems(const ein_step *s, int k) {
  double n = 1;
  for (int i = 0; i < s->naxes; i++)
    if (s->axes[i].stride[k] != 0) n *= (double)s->axes[i].size;
  return n;
}

/* A view step's plan bytes are 0 (plan.h); its sectors are the copy's
 * that runs where a caller asks for a separate output. */
double ein_cost_sector_bytes(const ein_step *s) {
  double b = s->bytes_read + s->bytes_written;
  if (s->view)
    b = operand_elems(s, 0) * (double)(ein_dtype_size(s->dst_dtype) +
                                       ein_dtype_size(s->src_dtype[0]));
  if (s->kind != EIN_STEP_LOOP && s->kind != EIN_STEP_FILL)
    return b; /* cuBLAS reads each matrix along a unit stride */
  int nops = s->kind == EIN_STEP_FILL ? 1 : 1 + s->nsrc;
  for (int k = 0; k < nops; k++) {
    double esize = (double)ein_dtype_size(k ? s->src_dtype[k - 1]
                                             : s->dst_dtype);
    b += operand_elems(s, k) * esize * (operand_factor(s, k, esize) - 1);
  }
  return b;
}

void ein_cost_record_sectors(ein_plan_ir *ir) {
  for (int i = 0; i < ir->nsteps; i++)
    ir->steps[i].sector_bytes = ein_cost_sector_bytes(&ir->steps[i]);
}

bool ein_cost_model_sectors(const ein_device_model *m) {
  return m->backend == EIN_BACKEND_CUDA;
}

double ein_cost_step_bytes(const ein_step *s, bool sectors) {
  return sectors ? s->sector_bytes : s->bytes_read + s->bytes_written;
}

double ein_cost_step_roofline(const ein_plan_ir *ir, const ein_step *s,
                              const ein_device_model *m) {
  if (ir->view.is_view)
    return ein_cost_model_sectors(m) && s->view
               ? s->sector_bytes / ein_cost_bandwidth(m)
               : view_copy_seconds(ir, m);
  ein_dtype dt = s->nsrc ? s->src_dtype[0] : s->dst_dtype;
  double rate = ein_cost_rate(m, ein_cost_step_kind(ir, s),
                              ein_dtype_is_complex(dt));
  double t_flops = s->flops > 0 ? s->flops / rate : 0;
  double t_bytes = ein_cost_step_bytes(s, ein_cost_model_sectors(m)) /
                   ein_cost_bandwidth(m);
  return fmax(t_flops, t_bytes);
}

double ein_cost_step_seconds(const ein_plan_ir *ir, const ein_step *s,
                             const ein_device_model *m) {
  return m->step_seconds + ein_cost_step_roofline(ir, s, m);
}

double ein_cost_predicted_seconds(const ein_plan_ir *ir,
                                  const ein_device_model *m) {
  double t = 0;
  for (int i = 0; i < ir->nsteps; i++)
    t += ein_cost_step_seconds(ir, &ir->steps[i], m);
  const ein_slicing *sl = &ir->slicing;
  if (sl->n) {
    /* every slice runs the steps; pieces of summed slices add up */
    double pieces = 1;
    for (int k = 0; k < sl->nkept; k++) pieces *= (double)sl->sizes[k];
    t *= sl->count;
    if (sl->add)
      t += (sl->count - pieces) *
               ein_cost_step_seconds(sl->add, &sl->add->steps[0], m) +
           pieces * ein_cost_step_seconds(sl->store, &sl->store->steps[0], m);
  }
  return m->call_seconds + t;
}

double ein_cost_model_flops(const ein_plan_ir *ir) {
  return ir->slicing.n ? ir->slicing.unsliced_flops : ir->flops;
}

int ein_cost_ntemps(const ein_plan_ir *ir) {
  int n = 0;
  for (int b = 0; b < ir->nbuffers; b++) n += ir->buffers[b].kind == EIN_BUF_TEMP;
  return n;
}

int64_t ein_cost_buffer_bytes(const ein_plan_buffer *b) {
  return b->elems * (int64_t)ein_dtype_size(b->dtype);
}

int64_t ein_cost_temp_bytes(const ein_plan_ir *ir, int t) {
  for (int b = 0; b < ir->nbuffers; b++)
    if (ir->buffers[b].kind == EIN_BUF_TEMP && t-- == 0)
      return ein_cost_buffer_bytes(&ir->buffers[b]);
  return -1;
}

/* a + b + c bytes, held at INT64_MAX (whole tensors may be that big) */
static int64_t sum_bytes(int64_t a, int64_t b, int64_t c) {
  double s = (double)a + (double)b + (double)c;
  return s < 0x1p63 ? a + b + c : INT64_MAX;
}

void ein_cost_memory(const ein_plan_ir *ir, ein_plan_memory *out) {
  out->input_bytes = ir->input_bytes;
  out->output_bytes = ir->output_bytes;
  out->workspace_bytes = ein_plan_slice_bytes_ir(ir);
  /* a sliced plan's sums are alive throughout */
  int64_t sums = out->workspace_bytes - ir->workspace_bytes;
  out->peak_live_bytes = sum_bytes(ir->input_bytes, ir->output_bytes,
                                   ir->peak_temp_bytes + sums);
  out->peak_bytes =
      sum_bytes(ir->input_bytes, ir->output_bytes, out->workspace_bytes);
}

void ein_plan_spread_cost_ir(const ein_plan_ir *ir, const ein_device_model *m,
                             int workers, double bytes_per_s,
                             ein_spread_cost *out) {
  const ein_slicing *sl = &ir->slicing;
  double units = sl->n ? sl->count : 1;
  double out_bytes = output_bytes(ir);
  /* min_bytes: every input element read once plus the output written */
  double in_bytes = fmax(ir->min_bytes - out_bytes, 0);
  double rounds = ceil(log2((double)workers));
  *out = (ein_spread_cost){.workers = workers, .units = units};
  out->units_per_worker = ceil(units / (double)workers);
  out->one_seconds = ein_cost_predicted_seconds(ir, m);
  out->compute_seconds = out->one_seconds * out->units_per_worker / units;
  out->input_seconds = rounds * in_bytes / bytes_per_s;
  out->partial_seconds = rounds * out_bytes / bytes_per_s;
  out->seconds =
      out->compute_seconds + out->input_seconds + out->partial_seconds;
  out->speedup = out->seconds > 0 ? out->one_seconds / out->seconds : 1;
  out->efficiency = out->speedup / (double)workers;
}
