/*
 * grad_kernels_src.c - prints, as one CUDA file, the generated kernels of
 * every elementwise gradient step (planner/grad_plan.c: each ein_grad_op
 * but EINSUM, and the conjugating and strided copies) in every dtype
 * with a gradient, after the NVRTC prelude, each kernel in a namespace
 * of its own as `einc cuda-src` prints a program. tests/grad_kernels.sh
 * compiles the file with nvcc for sm_80 and sm_90 (no GPU needed).
 */
#include <stdio.h>

#include "codegen.h"
#include "grad.h"

static int kernels, failures;

static void print_step(const ein_step *s, const char *what) {
  ein_step_kernels k;
  if (ein_codegen_step(s, &k)) {
    fprintf(stderr, "codegen failed: %s\n", what);
    failures++;
    return;
  }
  const ein_kernel_src *src[2] = {&k.main, &k.finish};
  for (int j = 0; j < 2; j++) {
    if (src[j]->kind == EIN_KERNEL_NONE) continue;
    char tag[32];
    snprintf(tag, sizeof tag, "k%d", ++kernels);
    printf("// %s\n#define ein_main ein_main_%s\n#define ein_vec "
           "ein_vec_%s\nnamespace %s {\n%s}\n#undef ein_main\n#undef "
           "ein_vec\n",
           what, tag, tag, tag, src[j]->source);
  }
  ein_step_kernels_free(&k);
}

static void print_plan(ein_plan_ir *ir, const char *what) {
  for (int i = 0; i < ir->nsteps; i++) print_step(&ir->steps[i], what);
  ein_plan_ir_destroy(ir);
}

/* Every elementwise op of a 5x7 step in dtype dt. */
static void ops_of(ein_dtype dt) {
  static const int64_t shape[2] = {5, 7}, diag[1] = {5},
                       view[1] = {8}; /* 5x7's (i, i): 7 + 1 */
  static const ein_grad_value ops[4] = {{EIN_GRAD_VALUE_DOUT, 0},
                                        {EIN_GRAD_VALUE_INPUT, 0},
                                        {EIN_GRAD_VALUE_INPUT, 1},
                                        {EIN_GRAD_VALUE_INPUT, 2}};
  for (int op = EIN_GRAD_EQUAL; op <= EIN_GRAD_SCATTER_DIAG; op++) {
    bool scatter = op == EIN_GRAD_SCATTER_DIAG;
    int n = op == EIN_GRAD_PROD_SELECT                            ? 4
            : op == EIN_GRAD_EQUAL || op == EIN_GRAD_MUL ||
                    op == EIN_GRAD_DIV                            ? 2
                                                                  : 1;
    ein_grad_step s = {.op = (ein_grad_op)op, .noperands = n,
                       .operands = ops, .scale = 0.25, .ndim = 2,
                       .shape = shape, .ndim_view = scatter ? 1 : 0,
                       .view_strides = view};
    int nd[4] = {2, 2, 2, 2};
    const int64_t *sh[4] = {shape, shape, shape, shape};
    if (scatter) {
      nd[0] = 1;
      sh[0] = diag;
    }
    ein_plan_ir *ir;
    ein_error_rec err = {0};
    char what[64];
    snprintf(what, sizeof what, "%s %s", ein_grad_op_name(s.op),
             ein_dtype_name(dt));
    if (ein_plan_grad_map(&s, nd, sh, dt, &err, &ir)) {
      fprintf(stderr, "planning failed: %s\n", what);
      failures++;
      continue;
    }
    print_plan(ir, what);
  }
  static const int64_t strides[2] = {1, 5}; /* column-major */
  for (int conj = 0; conj < 2; conj++) {
    ein_plan_ir *ir;
    ein_error_rec err = {0};
    if (ein_plan_grad_copy(2, shape, NULL, strides, dt, conj, &err, &ir)) {
      failures++;
      continue;
    }
    print_plan(ir, conj ? "conjugating copy" : "strided copy");
  }
}

int main(void) {
  static const ein_dtype dts[] = {EIN_DT_F16, EIN_DT_BF16, EIN_DT_F32,
                                  EIN_DT_F64, EIN_DT_C64,  EIN_DT_C128};
  printf("// the gradient's elementwise kernels (tests/grad_kernels.sh)\n%s",
         ein_codegen_prelude(false));
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) ops_of(dts[i]);
  fprintf(stderr, "%d kernels, %d failures\n", kernels, failures);
  return failures ? 1 : 0;
}
