/*
 * dump_bfe0368.c - the CUDA program of an expression as einc bfe0368
 * planned it (the commit of the 2026-11-23 H100 run), written out so that
 * today's emulated device and kernel model can run it (kernel_replay.c).
 *
 * Compiled by bench/model_validation.py against a checkout of bfe0368
 * (its internal headers and its build's libein_core.a), never by this
 * tree's build: it uses bfe0368's internal API as it was then.
 *
 * Usage: dump_bfe0368 OUTDIR EXPR SHAPE... [--dtype T] [-D N=S] [--reduce R]
 * Writes OUTDIR/program.tsv, one line per buffer and per step:
 *   buffer  ID  BYTES                 inputs, then the output, then the
 *                                     workspace
 *   cublas  STEP  FLOPS  BYTES  DTYPE
 *   kernel  STEP  KIND  FLOPS  BYTES  DTYPE  HAS_VEC  G0 G1 G2  B0 B1 B2
 *           V0 V1 V2  DBUF DOFF  S0BUF S0OFF  S1BUF S1OFF
 *   loop    STEP  FILL  NSRC  DST_DTYPE  S0_DTYPE  S1_DTYPE  NAXES
 *           (SIZE  DST_STRIDE  S0_STRIDE  S1_STRIDE)...
 *                                     after a kernel line: its step's
 *                                     iteration space, for the roofline's
 *                                     sector bytes (today's cost.c)
 *   none    STEP
 * (offsets in bytes; buffer -1: a NULL argument) and OUTDIR/stepN.cu, the
 * kernel source of step N as bfe0368 generated it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "codegen.h"
#include "ctx_internal.h"
#include "cuda_program.h"
#include "dtype.h"
#include "ein.h"
#include "plan.h"

static void help(void) {
  puts("usage: dump_bfe0368 OUTDIR EXPR SHAPE... [--dtype T] [-D N=S]...");
}

static int dtype_option(int argc, char **argv, int *i, void *state) {
  if (strcmp(argv[*i], "--dtype") != 0 || *i + 1 >= argc)
    return 0;
  return cli_parse_dtype(argv[++*i], state) ? 1 : -1;
}

/* Buffer id of a plan buffer: inputs 0..n-1, output n, workspace n+1. */
static int buffer_id(const ein_plan_ir *ir, int b, long long *base) {
  const ein_plan_buffer *pb = &ir->buffers[b];
  *base = 0;
  if (pb->kind == EIN_BUF_INPUT)
    return pb->input;
  if (pb->kind == EIN_BUF_OUTPUT)
    return ir->ninputs;
  *base = pb->offset;
  return ir->ninputs + 1;
}

static void operand(FILE *f, const ein_plan_ir *ir, const ein_ref *r,
                    ein_dtype dt, int present) {
  if (!present) {
    fprintf(f, "\t-1\t0");
    return;
  }
  long long base;
  int id = buffer_id(ir, r->buffer, &base);
  fprintf(f, "\t%d\t%lld", id,
          base + (long long)r->offset * (long long)ein_dtype_size(dt));
}

static void write_step(FILE *f, const char *dir, const ein_plan_ir *ir,
                       const ein_cuda_step *cs, int i) {
  const ein_step *s = &ir->steps[i];
  ein_dtype dt = s->nsrc ? s->src_dtype[0] : s->dst_dtype;
  double bytes = s->bytes_read + s->bytes_written;
  if (cs->cublas) {
    fprintf(f, "cublas\t%d\t%.17g\t%.17g\t%s\n", i + 1, s->flops, bytes,
            ein_dtype_name(dt));
    return;
  }
  const ein_kernel_src *k = &cs->kernel;
  if (k->kind == EIN_KERNEL_NONE) {
    fprintf(f, "none\t%d\n", i + 1);
    return;
  }
  fprintf(f, "kernel\t%d\t%s\t%.17g\t%.17g\t%s\t%d", i + 1,
          ein_kernel_kind_name(k->kind), s->flops, bytes, ein_dtype_name(dt),
          k->has_vec);
  for (int j = 0; j < 3; j++)
    fprintf(f, "\t%u", k->grid[j]);
  for (int j = 0; j < 3; j++)
    fprintf(f, "\t%u", k->block[j]);
  for (int j = 0; j < 3; j++)
    fprintf(f, "\t%u", k->grid_vec[j]);
  operand(f, ir, &s->dst, s->dst_dtype, 1);
  for (int j = 0; j < 2; j++)
    operand(f, ir, &s->src[j], s->src_dtype[j], j < s->nsrc);
  fputc('\n', f);
  fprintf(f, "loop\t%d\t%d\t%d\t%s\t%s\t%s\t%d", i + 1,
          s->kind == EIN_STEP_FILL, s->nsrc, ein_dtype_name(s->dst_dtype),
          ein_dtype_name(s->nsrc > 0 ? s->src_dtype[0] : s->dst_dtype),
          ein_dtype_name(s->nsrc > 1 ? s->src_dtype[1] : s->dst_dtype),
          s->naxes);
  for (int a = 0; a < s->naxes; a++)
    fprintf(f, "\t%lld\t%lld\t%lld\t%lld", (long long)s->axes[a].size,
            (long long)s->axes[a].stride[0], (long long)s->axes[a].stride[1],
            (long long)s->axes[a].stride[2]);
  fputc('\n', f);
  char path[4096];
  snprintf(path, sizeof path, "%s/step%d.cu", dir, i + 1);
  FILE *src = fopen(path, "w");
  if (src) {
    fputs(k->source, src);
    fclose(src);
  }
}

static void write_buffers(FILE *f, const ein_plan *plan,
                          const ein_plan_ir *ir, const cli_shape *shapes,
                          ein_dtype dt) {
  for (int i = 0; i < ir->ninputs; i++) {
    long long n = 1;
    for (int d = 0; d < shapes[i].ndim; d++)
      n *= shapes[i].dims[d];
    fprintf(f, "buffer\t%d\t%lld\n", i, n * (long long)ein_dtype_size(dt));
  }
  long long out = (long long)ein_dtype_size(dt);
  for (int d = 0; d < ein_plan_output_ndim(plan); d++)
    out *= ein_plan_output_shape(plan)[d];
  fprintf(f, "buffer\t%d\t%lld\n", ir->ninputs, out);
  fprintf(f, "buffer\t%d\t%lld\n", ir->ninputs + 1,
          (long long)ir->workspace_bytes);
  fprintf(f, "min_bytes\t%.17g\nflops\t%.17g\n", ir->min_bytes, ir->flops);
}

int main(int argc, char **argv) {
  static cli_common common;
  static cli_shape shapes[EIN_MAX_OPERANDS];
  ein_dtype dt = EIN_DT_F32;
  const char *pos[EIN_MAX_OPERANDS + 2];
  int npos, nshapes;
  if (cli_parse_args(argc - 1, argv + 1, "dump", help, &common,
                     dtype_option, &dt,
                     pos, EIN_MAX_OPERANDS + 2, &npos) != CLI_ARGS_OK ||
      npos < 3 ||
      !cli_expr_and_shapes("dump", pos + 1, npos - 1, shapes, &nshapes))
    return 2;
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK)
    return 3;
  DLTensor tensors[EIN_MAX_OPERANDS];
  const DLTensor *ins[EIN_MAX_OPERANDS];
  cli_shape_tensors(shapes, nshapes, ein_dtype_to_dl(dt), kDLCUDA, tensors,
                    ins);
  common.options.backend = EIN_BACKEND_CUDA;
  ein_plan *plan;
  if (ein_plan_create(ctx, pos[1], ins, nshapes, NULL, &common.options,
                      &plan)) {
    cli_print_error(ein_last_error(ctx));
    return 1;
  }
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  char path[4096];
  snprintf(path, sizeof path, "%s/program.tsv", pos[0]);
  FILE *f = fopen(path, "w");
  if (!f)
    return 4;
  write_buffers(f, plan, ir, shapes, dt);
  for (int i = 0; i < prog->nsteps; i++)
    write_step(f, pos[0], ir, &prog->steps[i], i);
  fclose(f);
  ein_plan_destroy(plan);
  ein_ctx_destroy(ctx);
  return 0;
}
