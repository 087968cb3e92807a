/*
 * attention.c - a small attention block evaluated with einc on the CPU,
 * through the public API only: scores = q k^T / sqrt(d) with ein_eval,
 * a softmax in plain C, then the weighted sum of v merged back into
 * (heads d) with a plan compiled once and executed in a loop. Prints the
 * plans and checks one output element against a direct sum.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <ein.h>

enum { B = 2, H = 4, S = 16, D = 8 };

static DLTensor tensor(float *data, int ndim, int64_t *shape) {
  DLTensor t = {0};
  t.data = data;
  t.device = (DLDevice){kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = (DLDataType){kDLFloat, 32, 1};
  t.shape = shape;
  return t;
}

static int fail(ein_ctx *ctx) {
  char msg[1024];
  ein_error_format(ein_last_error(ctx), msg, sizeof msg);
  fprintf(stderr, "%s\n", msg);
  return 1;
}

int main(void) {
  static float q[B * H * S * D], k[B * H * S * D], v[B * H * S * D];
  static float scores[B * H * S * S], out[B * S * H * D];
  srand(7);
  for (int i = 0; i < B * H * S * D; i++) {
    q[i] = (float)rand() / RAND_MAX - 0.5f;
    k[i] = (float)rand() / RAND_MAX - 0.5f;
    v[i] = (float)rand() / RAND_MAX - 0.5f;
  }
  int64_t qkv_shape[4] = {B, H, S, D}, s_shape[4] = {B, H, S, S};
  int64_t o_shape[3] = {B, S, H * D};
  DLTensor tq = tensor(q, 4, qkv_shape), tk = tensor(k, 4, qkv_shape);
  DLTensor tv = tensor(v, 4, qkv_shape), ts = tensor(scores, 4, s_shape);
  DLTensor to = tensor(out, 3, o_shape);

  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) return 1;

  /* Scores: one call; the plan is cached on the context. */
  const DLTensor *qk[2] = {&tq, &tk};
  if (ein_eval(ctx, "b h i d, b h j d -> b h i j", qk, 2, &ts, NULL))
    return fail(ctx);
  for (int r = 0; r < B * H * S; r++) { /* softmax over j, scaled */
    float *row = scores + (size_t)r * S, mx = -INFINITY, sum = 0;
    for (int j = 0; j < S; j++) {
      row[j] /= sqrtf(D);
      mx = row[j] > mx ? row[j] : mx;
    }
    for (int j = 0; j < S; j++) sum += row[j] = expf(row[j] - mx);
    for (int j = 0; j < S; j++) row[j] /= sum;
  }

  /* Merge: compile once, run in a loop (here twice). */
  const DLTensor *sv[2] = {&ts, &tv};
  ein_plan *merge;
  if (ein_plan_create(ctx, "b h i j, b h j d -> b i (h d)", sv, 2, &to, NULL,
                      &merge))
    return fail(ctx);
  for (int it = 0; it < 2; it++)
    if (ein_plan_execute(ctx, merge, sv, 2, &to)) return fail(ctx);
  char report[4096];
  ein_plan_describe(merge, EIN_DESCRIBE_TEXT, NULL, report, sizeof report);
  fputs(report, stdout);

  /* Check out[b=1, i=3, h=2, d=5] by a direct sum. */
  int b = 1, i = 3, h = 2, d = 5;
  double want = 0;
  for (int j = 0; j < S; j++)
    want += (double)scores[((b * H + h) * S + i) * S + j] *
            v[((b * H + h) * S + j) * D + d];
  float got = out[(b * S + i) * H * D + h * D + d];
  printf("out[1,3,(2,5)] = %.6f, direct sum %.6f\n", got, want);
  ein_plan_destroy(merge);
  ein_ctx_destroy(ctx);
  return fabs(got - want) <= 1e-5 * (1 + fabs(want)) ? 0 : 1;
}
