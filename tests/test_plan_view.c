/*
 * test_plan_view.c - ein_plan_output_view: which plans are views of an
 * input, with which strides and offset. Each case states the answer
 * (view or not, strides); every view is also checked against the plan
 * itself: the output the plan writes must equal the input read through
 * the reported strides and offset, element by element.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

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
  ein_plan_destroy(plan);
  CHECK(!ein_plan_output_view(NULL, &input, vs, &voff), "NULL plan");
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    run_case(ctx, &CASES[i]);
  non_compact_output(ctx);
  ein_ctx_destroy(ctx);
  return test_summary("plan_view");
}
