/*
 * report.c - a plan described for people (text) and programs (JSON), with a
 * roofline estimate of its time on a device model. See report.h.
 */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shape_text.h"

/* Rates measured on our GPU machine (../shared/anchors, 2026-11-22):
 * cuBLAS GEMM 8192^3 and a device-to-device copy. f64 is the H100's
 * FP64 tensor-core rate less the same margin (not measured). */
static const ein_device_model models[] = {
    {"h100", "NVIDIA H100", 780e12, 51e12, 55e12, 2.96e12, "built-in"},
    {"h200", "NVIDIA H200", 780e12, 51e12, 55e12, 4.3e12, "built-in"},
};

const ein_device_model *ein_device_model_find(const char *name) {
  if (!name) return &models[0];
  for (size_t i = 0; i < sizeof models / sizeof *models; i++)
    if (strcmp(models[i].name, name) == 0) return &models[i];
  return NULL;
}

/* FLOPs count a multiply-add as 2 whatever the type; a complex one is
 * four real ones, so its peak is a quarter of its parts'. */
static double peak_for(const ein_device_model *m, ein_dtype dt) {
  switch (dt) {
  case EIN_DT_F16: case EIN_DT_BF16: return m->flops_half;
  case EIN_DT_F64: return m->flops_f64;
  case EIN_DT_C64: return m->flops_f32 / 4;
  case EIN_DT_C128: return m->flops_f64 / 4;
  default: return m->flops_f32;
  }
}

/* Roofline: the larger of compute time and memory time. */
static double step_seconds(const ein_device_model *m, const ein_step *s) {
  ein_dtype dt = s->nsrc ? s->src_dtype[0] : s->dst_dtype;
  double t_flops = s->flops / peak_for(m, dt);
  double t_bytes = (s->bytes_read + s->bytes_written) / m->bytes_per_s;
  return fmax(t_flops, t_bytes);
}

double ein_plan_predicted_seconds(const ein_plan_ir *ir,
                                  const ein_device_model *m) {
  double t = 0;
  for (int i = 0; i < ir->nsteps; i++) t += step_seconds(m, &ir->steps[i]);
  const ein_slicing *sl = &ir->slicing;
  if (!sl->n) return t;
  /* every slice runs the steps; pieces of summed slices add up */
  double pieces = 1;
  for (int k = 0; k < sl->nkept; k++) pieces *= (double)sl->sizes[k];
  t *= sl->count;
  if (sl->add)
    t += (sl->count - pieces) * step_seconds(m, &sl->add->steps[0]) +
         pieces * step_seconds(m, &sl->store->steps[0]);
  return t;
}

void ein_plan_spread_cost_ir(const ein_plan_ir *ir, const ein_device_model *m,
                             int workers, double bytes_per_s,
                             ein_spread_cost *out) {
  const ein_slicing *sl = &ir->slicing;
  double units = sl->n ? sl->count : 1, out_bytes = (double)ein_dtype_size(ir->dtype);
  for (int d = 0; d < ir->out_ndim; d++) out_bytes *= (double)ir->out_shape[d];
  /* min_bytes: every input element read once plus the output written */
  double in_bytes = fmax(ir->min_bytes - out_bytes, 0);
  double rounds = ceil(log2((double)workers));
  *out = (ein_spread_cost){.workers = workers, .units = units};
  out->units_per_worker = ceil(units / (double)workers);
  out->one_seconds = ein_plan_predicted_seconds(ir, m);
  out->compute_seconds = out->one_seconds * out->units_per_worker / units;
  out->input_seconds = rounds * in_bytes / bytes_per_s;
  out->partial_seconds = rounds * out_bytes / bytes_per_s;
  out->seconds = out->compute_seconds + out->input_seconds +
                 out->partial_seconds;
  out->speedup = out->seconds > 0 ? out->one_seconds / out->seconds : 1;
  out->efficiency = out->speedup / (double)workers;
}

/* The name of a buffer in reports: in1.., out, t1.. */
static void buffer_name(const ein_plan_ir *ir, int buf, char *out,
                        size_t cap) {
  const ein_plan_buffer *b = &ir->buffers[buf];
  if (b->kind == EIN_BUF_INPUT)
    snprintf(out, cap, "in%d", b->input + 1);
  else if (b->kind == EIN_BUF_OUTPUT)
    snprintf(out, cap, "out");
  else {
    int t = 0;
    for (int i = 0; i <= buf; i++) t += ir->buffers[i].kind == EIN_BUF_TEMP;
    snprintf(out, cap, "t%d", t);
  }
}

static void group_text(const ein_plan_ir *ir, const ein_axis_group *g,
                       ein_strbuf *sb) {
  if (g->n == 0) {
    ein_strbuf_printf(sb, "-");
    return;
  }
  for (int i = 0; i < g->n; i++)
    ein_strbuf_printf(sb, "%s%s", i ? "*" : "", ir->axis_labels[g->axes[i]]);
  ein_strbuf_printf(sb, "=%lld", (long long)g->size);
}

static void gemm_transposes(const ein_step *s, bool *ta, bool *tb, bool *tc) {
  const ein_gemm *g = &s->gemm;
  int64_t ld;
  *ta = *tb = *tc = false;
  ein_matrix_layout(g->m, g->k, g->a_ms, g->a_ks, ta, &ld);
  ein_matrix_layout(g->k, g->n, g->b_ks, g->b_ns, tb, &ld);
  ein_matrix_layout(g->m, g->n, g->c_ms, g->c_ns, tc, &ld);
}

static const char *size_unit(double bytes, double *scaled) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    u++;
  }
  *scaled = bytes;
  return units[u];
}

/* A time in the unit that keeps it readable: "0.0635 ns", "12.5 µs",
 * "3.2 ms", "1.5 s" (three significant digits). */
static void time_text(char *buf, size_t cap, double seconds) {
  static const struct { double scale; const char *unit; } units[] = {
      {1e9, "ns"}, {1e6, "\xc2\xb5s"}, {1e3, "ms"}, {1, "s"}};
  int u = 0;
  while (u < 3 && seconds * units[u].scale >= 1000) u++;
  snprintf(buf, cap, "%.3g %s", seconds * units[u].scale, units[u].unit);
}

/* A rate with a decimal prefix that keeps it readable: "780 TFLOP/s",
 * "95.1 GFLOP/s", "2.96 TB/s", "11.2 GB/s". */
static void rate_text(char *buf, size_t cap, double rate, const char *unit) {
  static const struct { double scale; const char *prefix; } p[] = {
      {1e12, "T"}, {1e9, "G"}, {1e6, "M"}};
  int i = 0;
  while (i < 2 && rate < p[i].scale) i++;
  snprintf(buf, cap, "%.3g %s%s", rate / p[i].scale, p[i].prefix, unit);
}

/* Appends text right-aligned in `width` columns; 'µ' is two bytes but one
 * column. */
static void append_right(ein_strbuf *sb, const char *text, int width) {
  int cols = 0;
  for (const unsigned char *c = (const unsigned char *)text; *c; c++)
    cols += (*c & 0xc0) != 0x80; /* continuation bytes take no column */
  ein_strbuf_printf(sb, "%*s%s", width > cols ? width - cols : 0, "", text);
}

/* The sliced axes, the slices, the FLOP overhead against the plan made
 * whole, and what one slice needs (ein_slicing). */
static void text_slicing(const ein_plan_ir *ir, ein_strbuf *sb) {
  const ein_slicing *sl = &ir->slicing;
  if (!sl->n) return;
  ein_strbuf_printf(sb, "sliced      ");
  for (int k = 0; k < sl->n; k++) { /* name=size, :slices when chunked */
    ein_strbuf_printf(sb, " %s=%lld", ir->axis_labels[sl->axes[k]],
                      (long long)(sl->sizes[k] * sl->chunk[k]));
    if (sl->chunk[k] > 1)
      ein_strbuf_printf(sb, ":%lld", (long long)sl->sizes[k]);
    ein_strbuf_printf(sb, "%s", k < sl->nkept ? "" : "(sum)");
  }
  ein_strbuf_printf(sb, "   %.6g slices of %.4g FLOPs", sl->count,
                    sl->slice_flops);
  if (sl->unsliced_flops > 0)
    ein_strbuf_printf(sb, "   overhead %.3gx (unsliced %.4g FLOPs)",
                      ir->flops / sl->unsliced_flops, sl->unsliced_flops);
  double sc;
  const char *u = size_unit((double)ein_plan_slice_bytes_ir(ir), &sc);
  ein_strbuf_printf(sb, "\none slice    %.3g %s (its workspace", sc, u);
  if (sl->add)
    ein_strbuf_printf(sb, " and 3 sums of %lld elements", (long long)sl->acc_elems);
  ein_strbuf_printf(sb, "); the steps below are one slice's\n");
}

/* ,"key":v (fmt a printf format of a double), or null when v is not
 * finite. */
static void json_number(ein_strbuf *sb, const char *key, double v,
                        const char *fmt) {
  ein_strbuf_printf(sb, ",\"%s\":", key);
  if (!isfinite(v)) {
    ein_strbuf_printf(sb, "null");
    return;
  }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  ein_strbuf_printf(sb, fmt, v);
#pragma GCC diagnostic pop
}

/* The JSON "slicing" member: null, or the same figures. */
static void json_slicing(const ein_plan_ir *ir, ein_strbuf *sb) {
  const ein_slicing *sl = &ir->slicing;
  if (!sl->n) {
    ein_strbuf_printf(sb, "\"slicing\":null,");
    return;
  }
  ein_strbuf_printf(sb, "\"slicing\":{\"axes\":[");
  for (int k = 0; k < sl->n; k++) {
    ein_strbuf_printf(sb, "%s", k ? "," : "");
    ein_strbuf_json_string(sb, ir->axis_labels[sl->axes[k]]);
  }
  ein_strbuf_printf(sb, "],\"axis_slices\":[");
  for (int k = 0; k < sl->n; k++)
    ein_strbuf_printf(sb, "%s%lld", k ? "," : "", (long long)sl->sizes[k]);
  ein_strbuf_printf(sb,
                    "],\"summed\":%d,\"slices\":%.17g,\"slice_flops\":%.17g,"
                    "\"unsliced_flops\":%.17g,\"overhead\":%.6g,"
                    "\"slice_bytes\":%lld,\"accumulate_elements\":%lld},",
                    sl->n - sl->nkept, sl->count, sl->slice_flops,
                    sl->unsliced_flops,
                    sl->unsliced_flops > 0 ? ir->flops / sl->unsliced_flops : 0,
                    (long long)ein_plan_slice_bytes_ir(ir),
                    (long long)sl->acc_elems);
}

void ein_plan_path_text(const ein_plan_ir *ir, ein_strbuf *sb) {
  int (*lin)[2] = ir->path_linear;
  ein_strbuf_printf(sb, "[");
  for (int i = 0; i < ir->npath; i++)
    ein_strbuf_printf(sb, "%s(%d, %d)", i ? ", " : "", lin[i][0], lin[i][1]);
  ein_strbuf_printf(sb, "]");
}

static const char *role_word(ein_axis_role r) {
  return r == EIN_AXIS_REDUCED ? "reduced"
         : r == EIN_AXIS_REPEATED ? "repeated"
                                  : "kept";
}

/* The plan's summary: expression, dtypes, axes, output, path, costs and
 * the prediction. */
static void text_summary(const ein_plan_ir *ir, const char *expr,
                         const char *backend, const ein_device_model *m,
                         ein_strbuf *sb) {
  ein_strbuf_printf(sb, "expression   %s\n", expr);
  ein_strbuf_printf(sb, "dtype        %s (computed in %s)   backend %s\n",
                    ein_dtype_name(ir->dtype),
                    ein_dtype_name(ein_dtype_compute(ir->dtype)), backend);
  ein_strbuf_printf(sb, "axes        ");
  for (int a = 0; a < ir->naxes; a++)
    ein_strbuf_printf(sb, " %s=%lld%s", ir->axis_labels[a],
                      (long long)ir->axis_sizes[a],
                      ir->axis_roles[a] == EIN_AXIS_REDUCED    ? "(sum)"
                      : ir->axis_roles[a] == EIN_AXIS_REPEATED ? "(rep)"
                                                               : "");
  char shape[EIN_SHAPE_TEXT_CAP];
  ein_strbuf_printf(sb, "\noutput       %s",
                    ein_format_shape(shape, sizeof shape, ir->out_shape,
                                     ir->out_ndim));
  ein_strbuf_printf(sb, "\npath         %s", ir->path_method);
  for (int i = 0; i < ir->npath; i++)
    ein_strbuf_printf(sb, " (%d,%d)", ir->path[i][0], ir->path[i][1]);
  if (ir->npath > 0) {
    ein_strbuf_printf(sb, "\n             as opt_einsum: ");
    ein_plan_path_text(ir, sb);
  }
  ein_strbuf_printf(sb, "\nnaive FLOPs  %.4g\nplan FLOPs   %.4g   speed-up %.3gx\n",
                    ir->naive_flops, ir->flops,
                    ir->flops > 0 ? ir->naive_flops / ir->flops : 1.0);
  double sc;
  const char *u = size_unit((double)ir->largest_intermediate *
                                (double)ein_dtype_size(ein_dtype_compute(ir->dtype)),
                            &sc);
  ein_strbuf_printf(sb, "largest intermediate  %lld elements (%.3g %s)",
                    (long long)ir->largest_intermediate, sc, u);
  u = size_unit((double)ir->workspace_bytes, &sc);
  ein_strbuf_printf(sb, "   workspace %.3g %s\n", sc, u);
  text_slicing(ir, sb);
  char t[32], flops[32], bw[32];
  time_text(t, sizeof t, ein_plan_predicted_seconds(ir, m));
  rate_text(flops, sizeof flops, peak_for(m, ir->dtype), "FLOP/s");
  rate_text(bw, sizeof bw, m->bytes_per_s, "B/s");
  ein_strbuf_printf(sb, "predicted    %s on %s%s%s (%s %s, %s)\n", t, m->name,
                    m->description[0] ? ": " : "", m->description, flops,
                    ein_dtype_name(ir->dtype), bw);
}

/* "a,b -> c": the buffers a step reads and writes. */
static void step_operands(const ein_plan_ir *ir, const ein_step *s,
                          char *ops, size_t cap) {
  char d[16], a[16], b[16];
  buffer_name(ir, s->dst.buffer, d, sizeof d);
  if (s->nsrc == 0) {
    snprintf(ops, cap, "-> %s", d);
  } else if (s->nsrc == 1) {
    buffer_name(ir, s->src[0].buffer, a, sizeof a);
    snprintf(ops, cap, "%s -> %s", a, d);
  } else {
    buffer_name(ir, s->src[0].buffer, a, sizeof a);
    buffer_name(ir, s->src[1].buffer, b, sizeof b);
    snprintf(ops, cap, "%s,%s -> %s", a, b, d);
  }
}

/* A step's axes: a GEMM's four groups and transposes, a LOOP's axes with
 * '+' on the reduced ones. */
static void step_groups(const ein_plan_ir *ir, const ein_step *s,
                        ein_strbuf *groups) {
  if (s->kind == EIN_STEP_GEMM) {
    static const char *gname[4] = {"B ", " M ", " N ", " K "};
    for (int g = 0; g < 4; g++) {
      ein_strbuf_printf(groups, "%s", gname[g]);
      group_text(ir, &s->gemm.groups[g], groups);
    }
    bool ta, tb, tc;
    gemm_transposes(s, &ta, &tb, &tc);
    if (ta || tb || tc)
      ein_strbuf_printf(groups, " [%s%s%s]", ta ? "A^T" : "",
                        tb ? (ta ? ",B^T" : "B^T") : "",
                        tc ? (ta || tb ? ",C^T" : "C^T") : "");
    return;
  }
  int nr = 0;
  for (int k = 0; k < s->naxes; k++) {
    bool red = s->axes[k].stride[0] == 0 && s->kind != EIN_STEP_FILL;
    ein_strbuf_printf(groups, "%s%s%s=%lld", nr++ ? " " : "",
                      red ? "+" : "", ir->axis_labels[s->axes[k].axis],
                      (long long)s->axes[k].size);
  }
  if (!nr) ein_strbuf_printf(groups, "scalar");
}

static void report_text(const ein_plan_ir *ir, const char *expr,
                        const char *backend, const ein_device_model *m,
                        ein_strbuf *sb) {
  text_summary(ir, expr, backend, m, sb);
  ein_strbuf_printf(sb, "\n%-3s %-8s %-10s %-14s %-46s %10s %10s %7s %10s\n",
                    "#", "step", "role", "operands", "batch / M / N / K",
                    "FLOPs", "bytes", "FLOP/B", "predicted");
  for (int i = 0; i < ir->nsteps; i++) {
    const ein_step *s = &ir->steps[i];
    char ops[64];
    step_operands(ir, s, ops, sizeof ops);
    ein_strbuf groups = {0};
    step_groups(ir, s, &groups);
    double bytes = s->bytes_read + s->bytes_written;
    ein_strbuf_printf(sb, "%-3d %-8s %-10s %-14s %-46s %10.4g %10.4g %7.3g ",
                      i + 1, ein_step_name(s), ein_step_role_name(s->role),
                      ops, groups.data ? groups.data : "", s->flops, bytes,
                      bytes > 0 ? s->flops / bytes : 0.0);
    char t[32];
    time_text(t, sizeof t, step_seconds(m, s));
    append_right(sb, t, 10);
    ein_strbuf_printf(sb, "\n");
    if (groups.failed) sb->failed = true;
    ein_strbuf_free(&groups);
  }
}

static void json_group(const ein_plan_ir *ir, const char *key,
                       const ein_axis_group *g, ein_strbuf *sb) {
  ein_strbuf_printf(sb, "\"%s\":{\"axes\":[", key);
  for (int i = 0; i < g->n; i++) {
    if (i) ein_strbuf_printf(sb, ",");
    ein_strbuf_json_string(sb, ir->axis_labels[g->axes[i]]);
  }
  ein_strbuf_printf(sb, "],\"size\":%lld}", (long long)g->size);
}

/* "device_model": the model's name, description, source and rates, and
 * the rate of the plan's dtype (flops_per_s). */
static void json_model(const ein_plan_ir *ir, const ein_device_model *m,
                       ein_strbuf *sb) {
  ein_strbuf_printf(sb, "\"device_model\":{\"name\":");
  ein_strbuf_json_string(sb, m->name);
  ein_strbuf_printf(sb, ",\"description\":");
  ein_strbuf_json_string(sb, m->description);
  ein_strbuf_printf(sb, ",\"source\":");
  ein_strbuf_json_string(sb, m->source ? m->source : "caller");
  ein_strbuf_printf(sb,
                    ",\"flops_per_s\":%.6g,\"flops_half_per_s\":%.6g,"
                    "\"flops_f32_per_s\":%.6g,\"flops_f64_per_s\":%.6g,"
                    "\"bytes_per_s\":%.6g}",
                    peak_for(m, ir->dtype), m->flops_half, m->flops_f32,
                    m->flops_f64, m->bytes_per_s);
}

/* The plan's fields before its steps, up to the opening of "steps". */
static void json_summary(const ein_plan_ir *ir, const char *expr,
                         const char *backend, const ein_device_model *m,
                         ein_strbuf *sb) {
  ein_strbuf_printf(sb, "{\"expression\":");
  ein_strbuf_json_string(sb, expr);
  ein_strbuf_printf(sb, ",\"dtype\":\"%s\",\"compute_dtype\":\"%s\","
                        "\"backend\":\"%s\",\"reduction\":\"%s\",\"axes\":[",
                    ein_dtype_name(ir->dtype),
                    ein_dtype_name(ein_dtype_compute(ir->dtype)), backend,
                    ein_reduction_name(ir->reduction));
  for (int a = 0; a < ir->naxes; a++) {
    ein_strbuf_printf(sb, "%s{\"name\":", a ? "," : "");
    ein_strbuf_json_string(sb, ir->axis_labels[a]);
    ein_strbuf_printf(sb, ",\"size\":%lld,\"role\":\"%s\"}",
                      (long long)ir->axis_sizes[a],
                      role_word(ir->axis_roles[a]));
  }
  ein_strbuf_printf(sb, "],\"output_shape\":[");
  for (int d = 0; d < ir->out_ndim; d++)
    ein_strbuf_printf(sb, "%s%lld", d ? "," : "", (long long)ir->out_shape[d]);
  ein_strbuf_printf(sb, "],\"path_method\":\"%s\",\"path\":[",
                    ir->path_method);
  for (int i = 0; i < ir->npath; i++)
    ein_strbuf_printf(sb, "%s[%d,%d]", i ? "," : "", ir->path[i][0],
                      ir->path[i][1]);
  int (*lin)[2] = ir->path_linear;
  ein_strbuf_printf(sb, "],\"path_linear\":[");
  for (int i = 0; i < ir->npath; i++)
    ein_strbuf_printf(sb, "%s[%d,%d]", i ? "," : "", lin[i][0], lin[i][1]);
  /* A network's naive count can pass what a double holds: JSON has no
   * inf, so such a figure is null. */
  ein_strbuf_printf(sb, "]");
  json_number(sb, "naive_flops", ir->naive_flops, "%.17g");
  json_number(sb, "flops", ir->flops, "%.17g");
  json_number(sb, "speedup",
              ir->flops > 0 ? ir->naive_flops / ir->flops : 1.0, "%.6g");
  ein_strbuf_printf(sb,
                    ",\"largest_intermediate\":%lld,"
                    "\"workspace_bytes\":%lld",
                    (long long)ir->largest_intermediate,
                    (long long)ir->workspace_bytes);
  json_number(sb, "bytes_moved", ir->bytes_moved, "%.17g");
  ein_strbuf_printf(sb, ",");
  json_slicing(ir, sb);
  json_model(ir, m, sb);
  ein_strbuf_printf(sb, ",\"predicted_seconds\":%.6g,\"steps\":[",
                    ein_plan_predicted_seconds(ir, m));
}

/* A step's shape fields: a GEMM's groups and transposes, a LOOP's axes
 * and operation. */
static void json_step_axes(const ein_plan_ir *ir, const ein_step *s,
                           ein_strbuf *sb) {
  if (s->kind == EIN_STEP_GEMM) {
    bool ta, tb, tc;
    gemm_transposes(s, &ta, &tb, &tc);
    json_group(ir, "batch", &s->gemm.groups[EIN_GROUP_BATCH], sb);
    ein_strbuf_printf(sb, ",");
    json_group(ir, "m", &s->gemm.groups[EIN_GROUP_M], sb);
    ein_strbuf_printf(sb, ",");
    json_group(ir, "n", &s->gemm.groups[EIN_GROUP_N], sb);
    ein_strbuf_printf(sb, ",");
    json_group(ir, "k", &s->gemm.groups[EIN_GROUP_K], sb);
    ein_strbuf_printf(sb, ",\"batch_loops\":%d,\"trans_a\":%s,"
                          "\"trans_b\":%s,\"trans_c\":%s,\"alpha\":%.17g,",
                      s->gemm.nbatch, ta ? "true" : "false",
                      tb ? "true" : "false", tc ? "true" : "false",
                      s->alpha);
    return;
  }
  ein_strbuf_printf(sb, "\"axes\":[");
  for (int k = 0; k < s->naxes; k++) {
    ein_strbuf_printf(sb, "%s{\"name\":", k ? "," : "");
    ein_strbuf_json_string(sb, ir->axis_labels[s->axes[k].axis]);
    ein_strbuf_printf(sb, ",\"size\":%lld,\"reduced\":%s}",
                      (long long)s->axes[k].size,
                      s->axes[k].stride[0] == 0 && s->kind != EIN_STEP_FILL
                          ? "true"
                          : "false");
  }
  ein_strbuf_printf(sb, "],\"op\":\"%s\",\"alpha\":%.17g,",
                    ein_reduction_name(s->op), s->alpha);
}

static void json_step(const ein_plan_ir *ir, int i, const ein_device_model *m,
                      const ein_report_hook *hook, ein_strbuf *sb) {
  const ein_step *s = &ir->steps[i];
  char name[16];
  ein_strbuf_printf(sb, "%s{\"index\":%d,\"kind\":\"%s\",\"role\":\"%s\","
                        "\"reads\":[",
                    i ? "," : "", i + 1, ein_step_name(s),
                    ein_step_role_name(s->role));
  for (int k = 0; k < s->nsrc; k++) {
    buffer_name(ir, s->src[k].buffer, name, sizeof name);
    ein_strbuf_printf(sb, "%s\"%s\"", k ? "," : "", name);
  }
  buffer_name(ir, s->dst.buffer, name, sizeof name);
  ein_strbuf_printf(sb, "],\"writes\":\"%s\",\"dtype_in\":\"%s\","
                        "\"dtype_out\":\"%s\",",
                    name,
                    ein_dtype_name(s->nsrc ? s->src_dtype[0] : s->dst_dtype),
                    ein_dtype_name(s->dst_dtype));
  json_step_axes(ir, s, sb);
  if (hook && hook->step_json) hook->step_json(ir, hook->program, i, sb);
  double bytes = s->bytes_read + s->bytes_written;
  ein_strbuf_printf(sb, "\"flops\":%.17g,\"bytes_read\":%.17g,"
                        "\"bytes_written\":%.17g,\"intensity\":%.6g,"
                        "\"predicted_seconds\":%.6g}",
                    s->flops, s->bytes_read, s->bytes_written,
                    bytes > 0 ? s->flops / bytes : 0.0, step_seconds(m, s));
}

static void report_json(const ein_plan_ir *ir, const char *expr,
                        const char *backend, const ein_device_model *m,
                        const ein_report_hook *hook, ein_strbuf *sb) {
  json_summary(ir, expr, backend, m, sb);
  for (int i = 0; i < ir->nsteps; i++) json_step(ir, i, m, hook, sb);
  ein_strbuf_printf(sb, "]}\n");
}

void ein_plan_report(const ein_plan_ir *ir, const char *expr,
                     const char *backend, bool json,
                     const ein_device_model *m, const ein_report_hook *hook,
                     ein_strbuf *sb) {
  if (json)
    report_json(ir, expr, backend, m, hook, sb);
  else
    report_text(ir, expr, backend, m, sb);
}
