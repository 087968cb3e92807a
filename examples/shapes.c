/*
 * shapes.c - what einc makes of an attention block's shapes, through the
 * public API only: bind expressions to DLTensor shapes, read the output
 * shape and the axes, assert shapes the way jaxtyping does, and print an
 * error the way the einc CLI does.
 */
#include <stdio.h>

#include <ein.h>

static void print_shape(const char *label, int ndim, const int64_t *shape) {
  printf("%-8s (", label);
  for (int d = 0; d < ndim; d++) printf("%s%lld", d ? ", " : "", (long long)shape[d]);
  printf(")\n");
}

int main(void) {
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) return 1;

  /* q and k: batch 2, 8 heads, 128 queries and keys, head dim 64 */
  int64_t q_shape[4] = {2, 8, 128, 64}, k_shape[4] = {2, 8, 128, 64};
  DLTensor q = {.ndim = 4, .shape = q_shape};
  DLTensor k = {.ndim = 4, .shape = k_shape};
  const DLTensor *inputs[2] = {&q, &k};

  ein_binding *scores;
  if (ein_bind(ctx, "b h i d, b h j d -> b h i j", inputs, 2, NULL, &scores)) {
    fprintf(stderr, "unexpected error: %s\n", ein_last_error(ctx)->message);
    return 1;
  }
  print_shape("scores", ein_binding_output_ndim(scores),
              ein_binding_output_shape(scores));
  for (int i = 0; i < ein_binding_naxes(scores); i++) {
    ein_axis_info a = ein_binding_axis(scores, i);
    printf("  axis %-2s %4lld%s\n", a.name, (long long)a.size,
           a.role == EIN_AXIS_REDUCED ? "  (summed)" : "");
  }
  ein_binding_destroy(scores);

  /* merging heads back: b h i d -> b i (h d) */
  int64_t merged[EIN_MAX_DIMS];
  int ndim;
  const DLTensor *one[1] = {&q};
  if (ein_output_shape(ctx, "b h i d -> b i (h d)", one, 1, NULL, merged,
                       &ndim))
    return 1;
  print_shape("merged", ndim, merged);

  /* a deliberate mistake: the keys have 4 heads, not 8 */
  k_shape[1] = 4;
  if (ein_bind(ctx, "b h i d, b h j d -> b h i j", inputs, 2, NULL,
               &scores) == EIN_ERR_SIZE_MISMATCH) {
    char text[512];
    ein_error_format(ein_last_error(ctx), text, sizeof text);
    printf("expected failure, status '%s':\n%s",
           ein_status_name(ein_last_error(ctx)->status), text);
  } else {
    return 1;
  }

  /* shape assertions for tests */
  ein_shape_memo *memo;
  if (ein_shape_memo_create(&memo)) return 1;
  if (EIN_SHAPE_CHECK(memo, "batch heads seq d", &q) != EIN_OK) return 1;
  if (EIN_SHAPE_CHECK(memo, "batch #heads seq d", &k) == EIN_OK) return 1;
  printf("shape check caught: %s\n", ein_shape_memo_error(memo)->message);
  printf("bound d = %lld\n", (long long)ein_shape_memo_size(memo, "d"));
  ein_shape_memo_destroy(memo);
  ein_ctx_destroy(ctx);
  return 0;
}
