/*
 * cmd_cuda_src.c - `einc cuda-src EXPR SHAPE...`: plans an expression for
 * the CUDA backend and prints, step by step, the cuBLAS call or the full
 * CUDA C source of the generated kernel with its launch geometry. Needs
 * no GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "inspect.h"
#include "codegen.h"
#include "cuda_program.h"
#include "dtype.h"
#include "plan.h"

void cmd_cuda_src_help(void) {
  puts("usage: einc cuda-src EXPR SHAPE|FILE.npy... [--dtype T] [--path P]\n"
       "                     [--memory-limit B] [-D NAME=SIZE]...\n"
       "                     [--reduce R] [--numpy]\n"
       "\n"
       "Plans EXPR for the CUDA backend and prints each step: the cuBLAS\n"
       "call of a GEMM step, or the CUDA C source einc generates (and NVRTC\n"
       "compiles at run time) with its grid and block: one file nvcc\n"
       "compiles, each kernel in a namespace of its own (stepN, stepN_pass2)\n"
       "with its ein_main and ein_vec renamed by #define. Needs no GPU.\n"
       "\n"
       "  FILE.npy        in place of a shape: the shape and dtype in a .npy\n"
       "                  file's header (its data is not read)\n"
       "  --dtype T       every input's dtype: f32 (default for shapes; a\n"
       "                  file's own otherwise), f64, f16, bf16, c64, c128,\n"
       "                  integers\n"
       CLI_HELP_PATH
       CLI_HELP_TAIL
       "  einc cuda-src 'b s d -> b s' 32x4096x1024 --reduce sum --dtype bf16");
}

typedef struct src_opts {
  bool retype;     /* --dtype given */
  ein_dtype dtype; /* its value */
} src_opts;

static int src_option(int argc, char **argv, int *i, void *state) {
  src_opts *so = state;
  if (!cli_is_option(argv[*i], "--dtype")) return 0;
  const char *v = cli_option_value(argc, argv, i);
  if (!v) return -1;
  so->retype = true;
  return cli_parse_dtype(v, &so->dtype) ? 1 : -1;
}

/* A GEMM step: the cuBLAS call it makes. */
static void print_cublas(const ein_cublas_gemm *g) {
  printf("// cublasGemmStridedBatchedEx(%s, %s, m=%lld, n=%lld, k=%lld, "
         "lda=%lld, ldb=%lld, ldc=%lld, strides %lld/%lld/%lld, "
         "batch=%lld) x %lld, %s,%s->%s compute %s\n",
         g->trans_a ? "T" : "N", g->trans_b ? "T" : "N", (long long)g->m,
         (long long)g->n, (long long)g->k, (long long)g->lda,
         (long long)g->ldb, (long long)g->ldc, (long long)g->stride_a,
         (long long)g->stride_b, (long long)g->stride_c,
         (long long)g->count, (long long)ein_loop_axes_volume(&g->loops),
         ein_dtype_name(g->ab_dtype), ein_dtype_name(g->ab_dtype),
         ein_dtype_name(g->c_dtype), ein_gemm_compute_name(g->compute));
}

/* One kernel's source, as NVRTC compiles it after the prelude, inside a
 * namespace of its own with its entry points renamed by #define: every
 * kernel is ein_main (and ein_vec) over a struct ein_main_step, so two
 * kernels (two steps, or a split reduction's two passes) printed bare
 * would define them twice, and the printout must be one file that nvcc
 * compiles (tests/cuda_src_compiles.sh). The source itself is unchanged. */
static void print_source(const char *source, const char *tag) {
  printf("#define ein_main ein_main_%s\n#define ein_vec ein_vec_%s\n"
         "namespace %s {\n%s}  // namespace %s\n"
         "#undef ein_main\n#undef ein_vec\n",
         tag, tag, tag, source, tag);
}

/* A kernel step: launch geometry and source. NVRTC compiles each source
 * after the prelude printed once at the top (prelude + one step's source
 * compile alone). */
static void print_kernels(const ein_cuda_step *cs, int step) {
  const ein_kernel_src *k = &cs->kernel;
  printf("// ein_main<<<(%u,%u,%u), (%u,%u,%u)>>>", k->grid[0], k->grid[1],
         k->grid[2], k->block[0], k->block[1], k->block[2]);
  if (k->has_vec)
    printf("; ein_vec<<<(%u,%u,%u), same>>> when 16-byte aligned",
           k->grid_vec[0], k->grid_vec[1], k->grid_vec[2]);
  char tag[32];
  snprintf(tag, sizeof tag, "step%d", step);
  printf("\n");
  print_source(k->source, tag);
  const ein_kernel_src *f = &cs->finish;
  if (f->kind == EIN_KERNEL_NONE) return;
  printf("\n// pass 2: ein_main<<<(%u,%u,%u), (%u,%u,%u)>>>(dst, "
         "scratch of %lld bytes, NULL)\n",
         f->grid[0], f->grid[1], f->grid[2], f->block[0], f->block[1],
         f->block[2], (long long)cs->scratch_bytes);
  snprintf(tag, sizeof tag, "step%d_pass2", step);
  print_source(f->source, tag);
}

static void print_program(const char *expr, ein_dtype dt,
                          const ein_plan *plan) {
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  printf("// einc cuda-src: %s (%s), %d step%s\n", expr, ein_dtype_name(dt),
         ir->nsteps, ir->nsteps == 1 ? "" : "s");
  printf("\n// ---- the prelude and kernel templates NVRTC compiles before "
         "each step's source\n%s",
         ein_codegen_prelude(false));
  for (int i = 0; i < prog->nsteps; i++) {
    const ein_cuda_step *cs = &prog->steps[i];
    const ein_step *s = &ir->steps[i];
    printf("\n// ---- step %d: %s (%s)\n", i + 1, ein_step_name(s),
           ein_step_role_name(s->role));
    if (cs->cublas)
      print_cublas(&cs->gemm);
    else if (cs->kernel.kind == EIN_KERNEL_NONE)
      printf("// nothing to run: an axis has size 0\n");
    else
      print_kernels(cs, i + 1);
  }
}

int cmd_cuda_src(int argc, char **argv) {
  static cli_common common;
  static cli_shape shapes[CLI_MAX_OPERANDS];
  memset(&common, 0, sizeof common);
  common.takes_path = true;
  src_opts so = {false, EIN_DT_F32};
  const char *pos[CLI_MAX_OPERANDS + 1];
  int npos, nshapes;
  int r = cli_parse_args(argc, argv, "cuda-src", cmd_cuda_src_help, &common,
                         src_option, &so, pos, CLI_MAX_OPERANDS + 1, &npos);
  if (r != CLI_ARGS_OK)
    return r == CLI_ARGS_HELP ? EXIT_OK : EXIT_INVALID;
  int rc = cli_expr_and_shapes("cuda-src", pos, npos, shapes, &nshapes);
  if (rc != EXIT_OK) return rc;
  if (so.retype) cli_shapes_set_dtype(shapes, nshapes, so.dtype);
  ein_dtype dt = nshapes ? shapes[0].dtype : so.dtype; /* for the title */
  common.options.backend = EIN_BACKEND_CUDA;
  ein_ctx *ctx;
  ein_plan *plan;
  rc = cli_plan_shapes(pos[0], shapes, nshapes, kDLCUDA, &common.options,
                       &ctx, &plan);
  if (rc != EXIT_OK) return rc;
  print_program(pos[0], dt, plan);
  ein_plan_destroy(plan);
  ein_ctx_destroy(ctx);
  return EXIT_OK;
}
