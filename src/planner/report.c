/*
 * report.c - a plan described for people (text) and programs (JSON), with a
 * roofline estimate of its time on a device model. See report.h.
 */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "shape_text.h"

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

/* "780 TFLOP/s (measured; data sheet 990 TFLOP/s)": a rate used and
 * where it comes from. */
static void rate_source(ein_strbuf *sb, const ein_device_model *m,
                        bool given, double used, double measured,
                        double sheet, const char *unit) {
  char a[32], b[32];
  rate_text(a, sizeof a, used, unit);
  if (!(measured > 0)) {
    ein_strbuf_printf(sb, "%s (%s)", a,
                      given ? "given" : m->source ? m->source : "caller");
    return;
  }
  rate_text(b, sizeof b, sheet, unit);
  if (sheet > 0 && sheet != measured)
    ein_strbuf_printf(sb, "%s (measured; data sheet %s)", a, b);
  else
    ein_strbuf_printf(sb, "%s (measured)", a);
}

/* The predicted time and what it is made of: the overheads, the rate of
 * the plan's arithmetic and the bandwidth, each with its source. */
static void text_prediction(const ein_plan_ir *ir, const ein_device_model *m,
                            ein_strbuf *sb) {
  char t[32], call[32], step[32];
  ein_peak_kind k = ein_cost_plan_kind(ir);
  bool cx = ein_dtype_is_complex(ir->dtype);
  time_text(t, sizeof t, ein_cost_predicted_seconds(ir, m));
  time_text(call, sizeof call, m->call_seconds);
  time_text(step, sizeof step, m->step_seconds);
  ein_strbuf_printf(sb, "predicted    %s on %s%s%s\n", t, m->name,
                    m->description[0] ? ": " : "", m->description);
  /* complex steps run at a quarter of their parts' rate: named as c64 */
  const char *what = cx ? ein_dtype_name(ir->dtype) : ein_cost_kind_name(k);
  ein_strbuf_printf(sb, "             = %s per call + %s per step + roofline "
                        "at %s ",
                    call, step, what);
  rate_source(sb, m, m->given >> k & 1, ein_cost_rate(m, k, cx),
              m->measured[k] / (cx ? 4 : 1), m->peak[k] / (cx ? 4 : 1),
              "FLOP/s");
  ein_strbuf_printf(sb, " and ");
  rate_source(sb, m, m->given >> EIN_NPEAK & 1, ein_cost_bandwidth(m),
              m->measured_bytes_per_s,
              m->bytes_per_s, "B/s");
  char pk[32];
  double peak = ein_cost_plan_peak(ir, m);
  rate_text(pk, sizeof pk, peak, "FLOP/s");
  ein_strbuf_printf(sb, "\nMFU peak     %s %s (%s)\n", what,
                    peak > 0 ? pk : "none",
                    m->given >> k & 1 ? "given"
                    : m->measured[k] > 0 && m->measured[k] == peak
                        ? "measured: this device has no data sheet here"
                        : "data sheet, dense");
}

/* The bytes of one execute: inputs, output, temporaries, workspace and
 * peaks (cost.h). At most 8 temporaries are named. */
static void text_memory(const ein_plan_ir *ir, ein_strbuf *sb) {
  ein_plan_memory mem;
  ein_cost_memory(ir, &mem);
  double sc;
  const char *u = size_unit((double)mem.input_bytes, &sc);
  ein_strbuf_printf(sb, "memory       inputs %.3g %s", sc, u);
  u = size_unit((double)mem.output_bytes, &sc);
  ein_strbuf_printf(sb, "   output %.3g %s", sc, u);
  u = size_unit((double)mem.workspace_bytes, &sc);
  ein_strbuf_printf(sb, "   workspace %.3g %s", sc, u);
  u = size_unit((double)mem.peak_bytes, &sc);
  ein_strbuf_printf(sb, "   peak %.3g %s", sc, u);
  u = size_unit((double)mem.peak_live_bytes, &sc);
  ein_strbuf_printf(sb, " (live at once %.3g %s)\n", sc, u);
  int n = ein_cost_ntemps(ir);
  if (!n) return;
  ein_strbuf_printf(sb, "temporaries ");
  for (int t = 0; t < n && t < 8; t++) {
    u = size_unit((double)ein_cost_temp_bytes(ir, t), &sc);
    ein_strbuf_printf(sb, " t%d %.3g %s%s", t + 1, sc, u, t + 1 < n ? "," : "");
  }
  if (n > 8) ein_strbuf_printf(sb, " ... (%d in all)", n);
  ein_strbuf_printf(sb, "\n");
}

/* A plan past int64 (ir->needs_limit_elems): what its order needs and
 * how to run it; the sliced lines that follow are the report's only. */
static void text_needs_limit(const ein_plan_ir *ir, ein_strbuf *sb) {
  if (!(ir->needs_limit_elems > 0)) return;
  double bytes = ir->needs_limit_elems *
                 (double)ein_dtype_size(ein_dtype_compute(ir->dtype));
  ein_strbuf_printf(
      sb,
      "needs a memory limit: the best order's largest intermediate holds "
      "%.4g elements (%.4g bytes, 2^%.1f), more than int64 counts;\n"
      "             it runs only sliced: give one (--memory-limit B or "
      "'free', memory_limit=); the plan below is sliced at 2^60 bytes for "
      "this report and is refused at execution\n",
      ir->needs_limit_elems, bytes, log2(bytes));
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
  if (ir->view.is_view)
    ein_strbuf_printf(sb, "   a view of in%d: nothing runs, 0 bytes move "
                      "(an execute into an output copies it: predicted so)",
                      ir->view.input + 1);
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
  text_needs_limit(ir, sb);
  text_slicing(ir, sb);
  text_memory(ir, sb);
  text_prediction(ir, m, sb);
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
    double bytes = ein_cost_step_bytes(s, ein_cost_model_sectors(m));
    ein_strbuf_printf(sb, "%-3d %-8s %-10s %-14s %-46s %10.4g %10.4g %7.3g ",
                      i + 1, ein_step_name(s), ein_step_role_name(s->role),
                      ops, groups.data ? groups.data : "", s->flops, bytes,
                      bytes > 0 ? s->flops / bytes : 0.0);
    char t[32];
    time_text(t, sizeof t, ein_cost_step_seconds(ir, s, m));
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

/* {"f64":..,...}: one rate per arithmetic, null where the model has none. */
static void json_rates(ein_strbuf *sb, const char *key, const double *r) {
  ein_strbuf_printf(sb, ",\"%s\":{", key);
  for (int k = 0; k < EIN_NPEAK; k++) {
    ein_strbuf_printf(sb, "%s\"%s\":", k ? "," : "",
                      ein_cost_kind_name((ein_peak_kind)k));
    if (r[k] > 0) ein_strbuf_printf(sb, "%.6g", r[k]);
    else ein_strbuf_printf(sb, "null");
  }
  ein_strbuf_printf(sb, "}");
}

/* "device_model": the model's name, description, source, every rate (data
 * sheet and measured), its overheads, and for the plan's arithmetic
 * (peak_kind) the data-sheet peak (peak_flops_per_s, MFU's denominator)
 * and the rates the prediction uses (flops_per_s, bytes_per_s). */
static void json_model(const ein_plan_ir *ir, const ein_device_model *m,
                       ein_strbuf *sb) {
  ein_peak_kind k = ein_cost_plan_kind(ir);
  ein_strbuf_printf(sb, "\"device_model\":{\"name\":");
  ein_strbuf_json_string(sb, m->name);
  ein_strbuf_printf(sb, ",\"description\":");
  ein_strbuf_json_string(sb, m->description);
  ein_strbuf_printf(sb, ",\"source\":");
  ein_strbuf_json_string(sb, m->source ? m->source : "caller");
  json_rates(sb, "peak", m->peak);
  json_rates(sb, "measured", m->measured);
  ein_strbuf_printf(sb, ",\"peak_bytes_per_s\":%.6g", m->bytes_per_s);
  json_number(sb, "measured_bytes_per_s",
              m->measured_bytes_per_s > 0 ? m->measured_bytes_per_s : NAN,
              "%.6g");
  ein_strbuf_printf(sb,
                    ",\"call_seconds\":%.6g,\"step_seconds\":%.6g,"
                    "\"peak_kind\":\"%s\"",
                    m->call_seconds, m->step_seconds, ein_cost_kind_name(k));
  double peak = ein_cost_plan_peak(ir, m);
  json_number(sb, "peak_flops_per_s", peak > 0 ? peak : NAN, "%.6g");
  ein_strbuf_printf(sb, ",\"flops_per_s\":%.6g,\"bytes_per_s\":%.6g}",
                    ein_cost_rate(m, k, ein_dtype_is_complex(ir->dtype)),
                    ein_cost_bandwidth(m));
}

/* "memory": ein_plan_memory's figures and each temporary's bytes. */
static void json_memory(const ein_plan_ir *ir, ein_strbuf *sb) {
  ein_plan_memory mem;
  ein_cost_memory(ir, &mem);
  ein_strbuf_printf(sb, "\"memory\":{\"input_bytes\":%lld,"
                        "\"output_bytes\":%lld,\"temporaries\":[",
                    (long long)mem.input_bytes, (long long)mem.output_bytes);
  for (int b = 0, t = 0; b < ir->nbuffers; b++) /* one pass: networks */
    if (ir->buffers[b].kind == EIN_BUF_TEMP) {
      ein_strbuf_printf(sb, "%s{\"name\":\"t%d\",\"bytes\":%lld}",
                        t ? "," : "", t + 1,
                        (long long)ein_cost_buffer_bytes(&ir->buffers[b]));
      t++;
    }
  ein_strbuf_printf(sb, "],\"workspace_bytes\":%lld,\"peak_live_bytes\":%lld,"
                        "\"peak_bytes\":%lld},",
                    (long long)mem.workspace_bytes,
                    (long long)mem.peak_live_bytes, (long long)mem.peak_bytes);
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
  ein_strbuf_printf(sb, "],\"is_view\":%s",
                    ir->view.is_view ? "true" : "false");
  ein_strbuf_printf(sb, ",\"path_method\":\"%s\",\"path\":[",
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
  json_number(sb, "model_flops", ein_cost_model_flops(ir), "%.17g");
  /* past int64: the elements the order's largest intermediate needs (the
   * plan runs only under a memory limit); null otherwise */
  if (ir->needs_limit_elems > 0)
    json_number(sb, "needs_memory_limit", ir->needs_limit_elems, "%.17g");
  else
    ein_strbuf_printf(sb, ",\"needs_memory_limit\":null");
  ein_strbuf_printf(sb, ",");
  json_slicing(ir, sb);
  json_memory(ir, sb);
  json_model(ir, m, sb);
  ein_strbuf_printf(sb, ",\"predicted_seconds\":%.6g,\"steps\":[",
                    ein_cost_predicted_seconds(ir, m));
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
  double bytes = ein_cost_step_bytes(s, ein_cost_model_sectors(m));
  ein_strbuf_printf(sb, "\"flops\":%.17g,\"bytes_read\":%.17g,"
                        "\"bytes_written\":%.17g,\"sector_bytes\":%.17g,"
                        "\"intensity\":%.6g,"
                        "\"roofline_seconds\":%.6g,\"predicted_seconds\":%.6g}",
                    s->flops, s->bytes_read, s->bytes_written, s->sector_bytes,
                    bytes > 0 ? s->flops / bytes : 0.0,
                    ein_cost_step_roofline(ir, s, m),
                    ein_cost_step_seconds(ir, s, m));
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
