/*
 * test_plan_view.c - ein_plan_output_view: which plans are views of an
 * input, with which strides and offset. Each case states the answer
 * (view or not, strides); every view is also checked against the plan
 * itself: the output the plan writes must equal the input read through
 * the reported strides and offset, element by element.
 *
 * The planner decides it (ein_plan_ir.view) and the report follows: a view
 * plan has 0 FLOPs and 0 bytes, its one step is named "view", and
 * ein_plan_is_view and the JSON's "is_view" say so; every other plan's
 * steps count what they run (a dtype conversion reads and writes its
 * bytes, 0 FLOPs).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ctx_internal.h"
#include "harness.h"
#include "plan.h"

typedef struct vcase {
  const char *expr;
  int ndim;
  int64_t shape[4];
  int64_t strides[4]; /* all 0: compact */
  int64_t base;       /* element of the buffer the input starts at */
  const char *length; /* one axis length, "name=size", or NULL */
  int want;           /* 1: a view */
  int64_t want_strides[4];
} vcase;

static const vcase CASES[] = {
    {"a b -> b a", 2, {3, 4}, {0}, 0, NULL, 1, {1, 4}},
    {"a b c -> a (b c)", 3, {2, 3, 4}, {0}, 0, NULL, 1, {12, 1}},
    {"a b c -> (a b) c", 3, {2, 3, 4}, {0}, 0, NULL, 1, {4, 1}},
    {"a b c -> (a c) b", 3, {2, 3, 4}, {0}, 0, NULL, 0, {0}},
    {"a b -> (b a)", 2, {3, 4}, {0}, 0, NULL, 0, {0}},
    {"a (b c) -> c a b", 2, {2, 6}, {0}, 0, "b=3", 1, {1, 6, 2}},
    {"i i -> i", 2, {4, 4}, {0}, 0, NULL, 1, {5}},
    {"a b -> a b c", 2, {2, 3}, {0}, 0, "c=3", 0, {0}},
    {"a b -> a b c", 2, {2, 3}, {0}, 0, "c=1", 1, {3, 1, 1}},
    {"a b -> a", 2, {2, 3}, {0}, 0, NULL, 0, {0}},
    {"a b c -> c (a b)", 3, {1, 3, 2}, {0}, 0, NULL, 1, {1, 2}},
    /* a negative stride: the input starts at the last row */
    {"a b -> b a", 2, {3, 4}, {-4, 1}, 8, NULL, 1, {1, -4}},
    {"a b -> (a b)", 2, {3, 4}, {-4, 1}, 8, NULL, 0, {0}},
    /* a strided input: merging a and b still chains (8 = 2 * 4) */
    {"a b -> (a b)", 2, {3, 4}, {8, 2}, 0, NULL, 1, {2}},
    {"a b -> (a b)", 2, {3, 4}, {9, 2}, 0, NULL, 0, {0}},
    {"->", 0, {0}, {0}, 5, NULL, 1, {0}},
};

enum { BUF = 64 };

/* Runs the plan and compares its output with the input read through the
 * view; the number of elements that differ. */
static int64_t mismatches(ein_ctx *ctx, const ein_plan *plan,
                          const DLTensor *in, const int64_t *vs,
                          int64_t voff) {
  int nd = ein_plan_output_ndim(plan);
  const int64_t *shape = ein_plan_output_shape(plan);
  double out[BUF];
  DLTensor o = {out, {kDLCPU, 0}, nd, {kDLFloat, 64, 1},
                (int64_t *)shape, NULL, 0};
  if (ein_plan_execute(ctx, plan, &in, 1, &o) != EIN_OK) return -1;
  const double *x = (const double *)in->data;
  int64_t n = 1, bad = 0;
  for (int d = 0; d < nd; d++) n *= shape[d];
  for (int64_t flat = 0; flat < n; flat++) {
    int64_t rest = flat, at = voff;
    for (int d = nd - 1; d >= 0; d--) {
      at += rest % shape[d] * vs[d];
      rest /= shape[d];
    }
    bad += out[flat] != x[at];
  }
  return bad;
}

/* An execute of a view plan copies the output into the caller's: it is
 * predicted as that copy (the output's bytes read and written at the
 * model's bandwidth, beside the call and step overheads), not as the 0
 * bytes of taking the view. */
static void check_view_predicted(const ein_plan *plan, const char *expr) {
  ein_device_model m = {.name = "test", .bytes_per_s = 1e9,
                        .call_seconds = 1e-6, .step_seconds = 2e-6,
                        .backend = EIN_BACKEND_CPU};
  for (int k = 0; k < EIN_NPEAK; k++) m.peak[k] = 1e12;
  double bytes = (double)ein_dtype_size(ein_plan_ir_of(plan)->dtype);
  for (int d = 0; d < ein_plan_output_ndim(plan); d++)
    bytes *= (double)ein_plan_output_shape(plan)[d];
  double want = 1e-6 + 2e-6 + 2 * bytes / 1e9;
  double got = ein_plan_predicted_seconds(plan, &m);
  CHECK(fabs(got - want) <= 1e-9 * want, "%s: a view's execute predicted %g s, "
        "want %g (a copy of %g bytes)", expr, got, want, bytes);
}

/* The report of a plan: is_view as the plan says, and a view's costs 0. */
static void check_report(const ein_plan *plan, const char *expr, int view) {
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  CHECK(ein_plan_is_view(plan) == view, "%s: ein_plan_is_view %d, want %d",
        expr, ein_plan_is_view(plan), view);
  char json[8192];
  ein_plan_describe(plan, EIN_DESCRIBE_JSON, "cpu", json, sizeof json);
  CHECK(strstr(json, view ? "\"is_view\":true" : "\"is_view\":false") != NULL,
        "%s: JSON %.200s", expr, json);
  if (!view) return;
  const ein_step *s = &ir->steps[0];
  CHECK(ir->nsteps == 1 && ein_plan_flops(plan) == 0 && ir->bytes_moved == 0 &&
            s->flops == 0 && s->bytes_read == 0 && s->bytes_written == 0 &&
            strcmp(ein_step_name(s), "view") == 0,
        "%s: a view costs %g FLOPs, %g bytes, step %s", expr,
        ein_plan_flops(plan), ir->bytes_moved, ein_step_name(s));
  CHECK(strstr(json, "\"kind\":\"view\"") && strstr(json, "\"bytes_moved\":0,"),
        "%s: JSON %.400s", expr, json);
  check_view_predicted(plan, expr);
}

static void run_case(ein_ctx *ctx, const vcase *c) {
  static double buf[BUF];
  for (int i = 0; i < BUF; i++) buf[i] = i;
  int compact = c->ndim == 0 || c->strides[0] == 0;
  DLTensor in = {buf + c->base, {kDLCPU, 0}, c->ndim, {kDLFloat, 64, 1},
                 (int64_t *)c->shape, compact ? NULL : (int64_t *)c->strides,
                 0};
  const DLTensor *ins[1] = {&in};
  char name[16] = "";
  ein_length len = {name, 0};
  if (c->length) sscanf(c->length, "%15[^=]=%ld", name, (long *)&len.size);
  ein_options o = {.dialect = EIN_DIALECT_EINOPS, .lengths = &len,
                   .nlengths = c->length ? 1 : 0};
  ein_plan *plan = NULL;
  REQUIRE_OK(ein_plan_create(ctx, c->expr, ins, 1, NULL, &o, &plan));
  int input = -1;
  int64_t vs[4] = {0}, voff = -1;
  int got = ein_plan_output_view(plan, &input, vs, &voff);
  CHECK(got == c->want, "%s: view %d, want %d", c->expr, got, c->want);
  check_report(plan, c->expr, c->want);
  if (got && c->want) {
    int nd = ein_plan_output_ndim(plan);
    CHECK(input == 0 && voff == 0, "%s: input %d offset %ld", c->expr,
          input, (long)voff);
    CHECK(memcmp(vs, c->want_strides, sizeof(int64_t) * (size_t)nd) == 0,
          "%s: strides %ld %ld %ld", c->expr, (long)vs[0], (long)vs[1],
          (long)vs[2]);
    CHECK(mismatches(ctx, plan, &in, vs, voff) == 0,
          "%s: the plan's output is not the view", c->expr);
  }
  ein_plan_destroy(plan);
}

/* A plan made for a non-compact output is never called a view. */
static void non_compact_output(ein_ctx *ctx) {
  double x[12], y[12];
  int64_t shape[2] = {3, 4}, oshape[2] = {4, 3}, ostrides[2] = {1, 4};
  DLTensor in = {x, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, shape, NULL, 0};
  DLTensor out = {y, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, oshape, ostrides, 0};
  const DLTensor *ins[1] = {&in};
  ein_plan *plan = NULL;
  REQUIRE_OK(ein_plan_create(ctx, "a b -> b a", ins, 1, &out, NULL, &plan));
  int input;
  int64_t vs[2], voff;
  CHECK(!ein_plan_output_view(plan, &input, vs, &voff),
        "a plan for a transposed output is not a view");
  check_report(plan, "a b -> b a (strided output)", 0);
  const ein_step *s = &ein_plan_ir_of(plan)->steps[0];
  CHECK(strcmp(ein_step_name(s), "copy") == 0 &&
            s->bytes_read == 12 * 8 && s->bytes_written == 12 * 8,
        "the copy into a strided output runs and moves its bytes: %s %g %g",
        ein_step_name(s), s->bytes_read, s->bytes_written);
  ein_plan_destroy(plan);
  CHECK(!ein_plan_output_view(NULL, &input, vs, &voff), "NULL plan");
}

/* f16 inputs of a CPU matmul are converted to f32 and the result back:
 * each conversion reads numel x 2 bytes and writes numel x 4 (or the
 * reverse), 0 FLOPs; the plan's bytes are the sum of its steps'. */
static void conversion_bytes(ein_ctx *ctx) {
  int64_t sa[2] = {64, 48}, sb[2] = {48, 32}; /* big enough for a GEMM */
  DLTensor a = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 16, 1}, sa, NULL, 0};
  DLTensor b = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 16, 1}, sb, NULL, 0};
  const DLTensor *ins[2] = {&a, &b};
  ein_options o = {.backend = EIN_BACKEND_CPU};
  ein_plan *plan = NULL;
  REQUIRE_OK(ein_plan_create(ctx, "i j, j k -> i k", ins, 2, NULL, &o, &plan));
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  int converts = 0;
  double sum = 0;
  for (int i = 0; i < ir->nsteps; i++) {
    const ein_step *s = &ir->steps[i];
    sum += s->bytes_read + s->bytes_written;
    if (s->role != EIN_ROLE_CONVERT && s->role != EIN_ROLE_STORE) continue;
    converts++;
    double n = 1;
    for (int k = 0; k < s->naxes; k++) n *= (double)s->axes[k].size;
    CHECK(s->flops == 0 &&
              s->bytes_read == n * (double)ein_dtype_size(s->src_dtype[0]) &&
              s->bytes_written == n * (double)ein_dtype_size(s->dst_dtype) &&
              s->bytes_read != s->bytes_written,
          "step %d (%s): %g FLOPs, read %g, wrote %g for %g elements", i + 1,
          ein_step_role_name(s->role), s->flops, s->bytes_read,
          s->bytes_written, n);
  }
  CHECK(converts == 3 && !ein_plan_is_view(plan) && sum == ir->bytes_moved,
        "%d conversions; bytes %g, plan %g", converts, sum, ir->bytes_moved);
  ein_plan_destroy(plan);
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    run_case(ctx, &CASES[i]);
  non_compact_output(ctx);
  conversion_bytes(ctx);
  ein_ctx_destroy(ctx);
  return test_summary("plan_view");
}
