/*
 * fp8_gemm.c - the FP8 GEMM plan (fp8_gemm.h).
 */
#include "fp8_gemm.h"

#include <stdint.h>
#include <string.h>

#include "cost.h"
#include "loop_axes.h"

enum { MAX_STEPS = 6, MAX_BUFFERS = 8 };

static int64_t round16(int64_t v) { return (v + 15) / 16 * 16; }
static bool mult16(int64_t v) { return v % 16 == 0; }

/* A K-contiguous fp8 operand: unit stride along k, k and the leading
 * dimension ld (between its vectors of k) multiples of 16 with ld >= k,
 * and a batch stride (nb batch axes, 0 or 1) positive and a multiple of
 * 16. */
static bool kvec_fits(int64_t ks, int64_t ld, int64_t k, int nb, int64_t bs) {
  return ks == 1 && mult16(k) && mult16(ld) && ld >= k &&
         (nb == 0 || (bs > 0 && mult16(bs)));
}

/* C as cuBLASLt's D (column-major n x m: unit stride along n), n (its
 * rows) a multiple of 16, ld and batch stride multiples of 16 bytes. */
static bool d_fits(const ein_gemm *g, int64_t csize, int nb, int64_t bs) {
  return mult16(g->n) && g->c_ns == 1 && mult16(g->c_ms * csize) &&
         g->c_ms >= g->n && (nb == 0 || (bs > 0 && mult16(bs * csize)));
}

bool ein_fp8_gemm_fits(const ein_gemm *g, int64_t csize) {
  if (g->nbatch > 1) return false;
  int nb = g->nbatch;
  const int64_t *st = nb ? g->batch[0].stride : NULL;
  return kvec_fits(g->a_ks, g->a_ms, g->k, nb, nb ? st[1] : 0) &&
         kvec_fits(g->b_ks, g->b_ns, g->k, nb, nb ? st[2] : 0) &&
         d_fits(g, csize, nb, nb ? st[0] : 0);
}

/* The plan being made. */
typedef struct builder {
  const ein_step *f;       /* the f32 plan's GEMM, or `t` */
  ein_step t;              /* it as C^T = B^T A^T, when that fits better */
  ein_loop_axis tbatch[EIN_LOOP_MAXAX];
  int in_of[2];            /* input numbers of the step's A and B */
  ein_dtype dt[2];         /* their fp8 dtypes */
  ein_dtype in[2];         /* inputs 0's and 1's */
  ein_dtype out;
  int64_t csize;
  ein_loop_axes batch;     /* the step's batch axes (C, A, B), fused */
  int64_t vol;             /* matrices in the batch */
  int64_t k16, n16;
  bool copy[2], temp_d;
  int buf_of[3];           /* buffers of the GEMM's A, B and C */
  ein_plan_ir *ir;
} builder;

/* The f32 plan's one GEMM of inputs 0 and 1 into the output, or NULL. */
static const ein_step *lone_gemm(const ein_plan_ir *f, int in_of[2]) {
  if (f->nsteps != 1 || f->ninputs != 2 || f->slicing.n || f->view.is_view)
    return NULL;
  const ein_step *s = &f->steps[0];
  if (s->kind != EIN_STEP_GEMM || s->nsrc != 2 || s->gemm.m <= 0 ||
      s->gemm.n <= 0 || s->gemm.k <= 0 ||
      f->buffers[s->dst.buffer].kind != EIN_BUF_OUTPUT)
    return NULL;
  for (int j = 0; j < 2; j++) {
    const ein_plan_buffer *b = &f->buffers[s->src[j].buffer];
    if (b->kind != EIN_BUF_INPUT) return NULL;
    in_of[j] = b->input;
  }
  return in_of[0] != in_of[1] ? s : NULL;
}

/* Which operands are copied and whether C goes through a temporary. */
static void decide_layout(builder *b, const bool aligned[3]) {
  const ein_gemm *g = &b->f->gemm;
  ein_loop_axes *la = &b->batch;
  memset(la, 0, sizeof *la);
  for (int i = 0; i < g->nbatch; i++) {
    if (g->batch[i].size == 1) continue;
    la->size[la->n] = g->batch[i].size;
    memcpy(la->st[la->n++], g->batch[i].stride, sizeof la->st[0]);
  }
  ein_loop_axes_sort(la, 0);
  ein_loop_axes_fuse(la);
  b->vol = ein_loop_axes_volume(la);
  /* more than one batch axis left: every operand is made compact */
  bool many = la->n > 1;
  int nb = la->n;
  b->k16 = round16(g->k);
  b->n16 = round16(g->n);
  b->copy[0] = many || !aligned[b->in_of[0]] ||
               !kvec_fits(g->a_ks, g->a_ms, g->k, nb, nb ? la->st[0][1] : 0);
  b->copy[1] = many || !aligned[b->in_of[1]] || !mult16(g->n) ||
               !kvec_fits(g->b_ks, g->b_ns, g->k, nb, nb ? la->st[0][2] : 0);
  b->temp_d = many || !aligned[2] ||
              !d_fits(g, b->csize, nb, nb ? la->st[0][0] : 0);
}

/* cuBLASLt takes the batch count as an int32 (and einc's map the sizes):
 * beyond, the decode path. */
static bool fits_call(const builder *b) {
  const ein_gemm *g = &b->f->gemm;
  return g->m <= INT32_MAX && b->n16 <= INT32_MAX && b->k16 <= INT32_MAX &&
         b->vol <= INT32_MAX;
}

/* The step as C^T = B^T A^T: m and n, A and B (and their inputs)
 * exchanged, so a C of unit stride along m becomes one along n. */
static void transpose_step(builder *b) {
  const ein_step *f = b->f;
  ein_step *t = &b->t;
  *t = *f;
  t->src[0] = f->src[1], t->src[1] = f->src[0];
  t->operand[0] = f->operand[1], t->operand[1] = f->operand[0];
  ein_gemm *g = &t->gemm;
  const ein_gemm *o = &f->gemm;
  g->m = o->n, g->n = o->m;
  g->a_ms = o->b_ns, g->a_ks = o->b_ks;
  g->b_ks = o->a_ks, g->b_ns = o->a_ms;
  g->c_ms = o->c_ns, g->c_ns = o->c_ms;
  g->groups[EIN_GROUP_M] = o->groups[EIN_GROUP_N];
  g->groups[EIN_GROUP_N] = o->groups[EIN_GROUP_M];
  g->batch = b->tbatch;
  for (int i = 0; i < o->nbatch; i++) {
    b->tbatch[i] = o->batch[i];
    b->tbatch[i].stride[1] = o->batch[i].stride[2];
    b->tbatch[i].stride[2] = o->batch[i].stride[1];
  }
  int in0 = b->in_of[0];
  b->in_of[0] = b->in_of[1], b->in_of[1] = in0;
  b->dt[0] = b->in[b->in_of[0]], b->dt[1] = b->in[b->in_of[1]];
  b->f = t;
}

/* The step as it is, or transposed when only that lets C be cuBLASLt's
 * D without a temporary (an output of unit stride along m). */
static void orient(builder *b, const bool aligned[3]) {
  decide_layout(b, aligned);
  if (!b->temp_d) return;
  builder t = *b;
  transpose_step(&t);
  decide_layout(&t, aligned);
  if (t.temp_d) return;
  *b = t;
  b->f = &b->t; /* t's own copy moved with it */
  b->t.gemm.batch = b->tbatch;
}

/* A new plan with room for the FP8 GEMM's buffers and steps. */
static ein_plan_ir *new_plan(const ein_plan_ir *f) {
  return ein_plan_ir_alloc(MAX_BUFFERS, MAX_STEPS, f->out_ndim);
}

/* A temporary of `elems` elements of dt where cuBLASLt may read it. */
static int add_temp(ein_plan_ir *ir, ein_dtype dt, int64_t elems) {
  int64_t at = ein_plan_ir_append_temp(ir, dt, elems, EIN_TEMP_ALIGN_CUBLASLT);
  ir->buffers[ir->nbuffers] = (ein_plan_buffer){
      .kind = EIN_BUF_TEMP, .dtype = dt, .elems = elems, .offset = at};
  return ir->nbuffers++;
}

/* The next step, zeroed, with no path operands. */
static ein_step *add_step(ein_plan_ir *ir, ein_step_kind kind,
                          ein_step_role role) {
  ein_step *s = &ir->steps[ir->nsteps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->role = role;
  s->alpha = 1;
  s->op = EIN_REDUCE_SUM;
  s->operand[0] = s->operand[1] = s->result = -1;
  return s;
}

/* Axes of a copy: the batch axes (the step's strides `which` of them on
 * one side, compact matrices of `mat` elements on the other), then rows
 * and columns given as {size, temp stride, step stride}. to_temp: the
 * temporary is the destination. */
static ein_loop_axis *copy_axes(builder *b, int which, int64_t mat,
                                const int64_t rc[2][3], bool to_temp) {
  ein_loop_axes *la = &b->batch;
  ein_loop_axis *ax =
      ein_arena_alloc(&b->ir->arena, (size_t)la->n + 2, sizeof *ax);
  if (!ax) return NULL;
  int64_t compact = mat;
  for (int i = la->n - 1; i >= 0; i--) {
    int64_t st[2] = {compact, la->st[i][which]};
    ax[i] = (ein_loop_axis){-1, la->size[i],
                            {st[!to_temp], st[to_temp], 0}};
    compact *= la->size[i];
  }
  for (int d = 0; d < 2; d++)
    ax[la->n + d] = (ein_loop_axis){-1, rc[d][0],
                                    {rc[d][!to_temp + 1], rc[d][to_temp + 1], 0}};
  return ax;
}

/* Operand j (0: the step's A, m x k; 1: its B, n x k as cuBLASLt reads
 * it) copied into a K-contiguous temporary of leading dimension k16,
 * padded with zeros to k16 (and B to n16 rows). */
static ein_status copy_operand(builder *b, int j) {
  const ein_gemm *g = &b->f->gemm;
  int64_t rows = j ? b->n16 : g->m;
  int64_t mat = rows * b->k16;
  int t = add_temp(b->ir, b->dt[j], mat * b->vol);
  if (b->k16 != g->k || rows != (j ? g->n : g->m)) {
    ein_step *z = add_step(b->ir, EIN_STEP_FILL, EIN_ROLE_LAYOUT);
    z->dst = (ein_ref){t, 0};
    z->dst_dtype = EIN_DT_U8;
    z->acc_dtype = EIN_DT_I64;
    z->naxes = 1;
    z->axes = ein_arena_alloc(&b->ir->arena, 1, sizeof *z->axes);
    if (!z->axes) return EIN_ERR_NO_MEMORY;
    z->axes[0] = (ein_loop_axis){-1, mat * b->vol, {1, 0, 0}};
    z->bytes_written = (double)(mat * b->vol);
  }
  const int64_t rc[2][3] = {
      {j ? g->n : g->m, b->k16, j ? g->b_ns : g->a_ms},
      {g->k, 1, j ? g->b_ks : g->a_ks}};
  ein_step *s = add_step(b->ir, EIN_STEP_LOOP, EIN_ROLE_LAYOUT);
  s->axes = copy_axes(b, 1 + j, mat, rc, true);
  if (!s->axes) return EIN_ERR_NO_MEMORY;
  s->naxes = b->batch.n + 2;
  s->nsrc = 1;
  s->src[0] = (ein_ref){b->in_of[j], b->f->src[j].offset};
  s->dst = (ein_ref){t, 0};
  s->src_dtype[0] = s->dst_dtype = EIN_DT_U8;
  s->acc_dtype = EIN_DT_I64;
  s->plain_copy = true;
  double elems = (double)(rc[0][0] * rc[1][0] * b->vol);
  s->bytes_read = s->bytes_written = elems;
  b->buf_of[j] = t;
  return EIN_OK;
}

/* The step's batch in the new GEMM: one axis over every matrix, each
 * operand's stride its own where it reads the caller's tensor (one batch
 * axis then), else its temporary's matrix size. */
static ein_status gemm_batch(builder *b, ein_step *s, const int64_t mat[3]) {
  if (b->batch.n == 0) return EIN_OK;
  s->gemm.batch = ein_arena_alloc(&b->ir->arena, 1, sizeof *s->gemm.batch);
  if (!s->gemm.batch) return EIN_ERR_NO_MEMORY;
  s->gemm.nbatch = 1;
  ein_loop_axis *ax = s->gemm.batch;
  *ax = (ein_loop_axis){-1, b->vol, {0, 0, 0}};
  bool temp[3] = {b->temp_d, b->copy[0], b->copy[1]};
  for (int o = 0; o < 3; o++)
    ax->stride[o] = temp[o] ? mat[o] : b->batch.st[0][o];
  return EIN_OK;
}

/* The FP8 GEMM: A and B from the caller's tensors or their copies, C
 * into the output or a temporary. */
static ein_status add_gemm(builder *b) {
  const ein_step *f = b->f;
  const ein_gemm *g = &f->gemm;
  int out_buf = 4;
  if (b->temp_d)
    b->buf_of[2] = add_temp(b->ir, b->out, g->m * b->n16 * b->vol);
  else
    b->buf_of[2] = out_buf;
  ein_step *s = add_step(b->ir, EIN_STEP_GEMM, EIN_ROLE_CONTRACT);
  s->nsrc = 2;
  for (int j = 0; j < 2; j++) {
    s->src[j] = b->copy[j] ? (ein_ref){b->buf_of[j], 0}
                           : (ein_ref){b->in_of[j], f->src[j].offset};
    s->src_dtype[j] = b->dt[j];
  }
  s->dst = b->temp_d ? (ein_ref){b->buf_of[2], 0}
                     : (ein_ref){out_buf, f->dst.offset};
  s->dst_dtype = b->out;
  s->alpha = f->alpha;
  s->acc_dtype = EIN_DT_F32;
  s->operand[0] = f->operand[0], s->operand[1] = f->operand[1];
  s->result = f->result;
  ein_gemm *n = &s->gemm;
  n->m = g->m, n->n = b->n16, n->k = b->k16;
  n->a_ms = b->copy[0] ? b->k16 : g->a_ms, n->a_ks = 1;
  n->b_ns = b->copy[1] ? b->k16 : g->b_ns, n->b_ks = 1;
  n->c_ms = b->temp_d ? b->n16 : g->c_ms, n->c_ns = 1;
  n->scaled = true;
  n->scale_input[0] = 2 + b->in_of[0];
  n->scale_input[1] = 2 + b->in_of[1];
  for (int i = 0; i < 4; i++) n->groups[i].size = g->groups[i].size;
  const int64_t mat[3] = {g->m * b->n16, g->m * b->k16, b->n16 * b->k16};
  s->flops = f->flops;
  s->bytes_read = (double)(mat[1] + mat[2]) * (double)b->vol;
  s->bytes_written = (double)(mat[0] * b->vol * b->csize);
  return gemm_batch(b, s, mat);
}

/* The result's temporary copied into the caller's output. */
static ein_status store_result(builder *b) {
  const ein_gemm *g = &b->f->gemm;
  const int64_t rc[2][3] = {{g->m, b->n16, g->c_ms}, {g->n, 1, g->c_ns}};
  ein_step *s = add_step(b->ir, EIN_STEP_LOOP, EIN_ROLE_STORE);
  s->axes = copy_axes(b, 0, g->m * b->n16, rc, false);
  if (!s->axes) return EIN_ERR_NO_MEMORY;
  s->naxes = b->batch.n + 2;
  s->nsrc = 1;
  s->src[0] = (ein_ref){b->buf_of[2], 0};
  s->dst = (ein_ref){4, b->f->dst.offset};
  s->src_dtype[0] = s->dst_dtype = b->out;
  s->acc_dtype = EIN_DT_F32;
  s->plain_copy = true;
  s->bytes_read = s->bytes_written =
      (double)(g->m * g->n * b->vol * b->csize);
  return EIN_OK;
}

/* The plan's header: inputs, scales, output, totals from the f32 plan. */
static void plan_header(builder *b, const ein_plan_ir *f) {
  ein_plan_ir *ir = b->ir;
  ir->dtype = b->out;
  ir->reduction = f->reduction;
  ir->ninputs = 4;
  for (int i = 0; i < 4; i++)
    ir->buffers[i] = (ein_plan_buffer){
        .kind = EIN_BUF_INPUT, .input = i,
        .dtype = i < 2 ? b->in[i] : EIN_DT_F32};
  ir->buffers[4] = (ein_plan_buffer){.kind = EIN_BUF_OUTPUT, .dtype = b->out};
  ir->nbuffers = 5;
  ir->out_ndim = f->out_ndim;
  memcpy(ir->out_shape, f->out_shape, sizeof *f->out_shape * (size_t)f->out_ndim);
  ir->path_method = "fp8 gemm";
  ir->naive_flops = f->naive_flops;
  ir->flops = f->flops;
  ir->largest_intermediate = f->largest_intermediate;
  ir->input_bytes = f->input_bytes / 4; /* fp8 elements of f32 ones */
  ir->output_bytes = f->output_bytes / 4 * b->csize;
  ir->min_bytes = f->min_bytes; /* an upper bound: read as f32 */
}

ein_status ein_fp8_gemm_plan(const ein_plan_ir *f32, const ein_dtype in[2],
                             ein_dtype out_dtype, const bool aligned[3],
                             ein_error_rec *err, ein_plan_ir **out) {
  *out = NULL;
  builder b = {.out = out_dtype,
               .csize = (int64_t)ein_dtype_size(out_dtype)};
  b.f = lone_gemm(f32, b.in_of);
  if (!b.f || (in[0] == EIN_DT_F8E5M2 && in[1] == EIN_DT_F8E5M2) ||
      b.f->gemm.nbatch > EIN_LOOP_MAXAX)
    return EIN_OK;
  b.in[0] = in[0], b.in[1] = in[1];
  b.dt[0] = in[b.in_of[0]], b.dt[1] = in[b.in_of[1]];
  orient(&b, aligned);
  if (!fits_call(&b)) return EIN_OK;
  b.ir = new_plan(f32);
  if (!b.ir) return ein_fail_memory(err, "out of memory planning an FP8 GEMM");
  plan_header(&b, f32);
  ein_status st = EIN_OK;
  for (int j = 0; j < 2 && !st; j++)
    if (b.copy[j]) st = copy_operand(&b, j);
  if (!st) st = add_gemm(&b);
  if (!st && b.temp_d) st = store_result(&b);
  if (st) {
    ein_plan_ir_destroy(b.ir);
    return ein_fail_memory(err, "out of memory planning an FP8 GEMM");
  }
  ein_cost_record_sectors(b.ir);
  for (int i = 0; i < b.ir->nsteps; i++)
    b.ir->bytes_moved +=
        b.ir->steps[i].bytes_read + b.ir->steps[i].bytes_written;
  *out = b.ir;
  return EIN_OK;
}
