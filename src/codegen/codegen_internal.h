/*
 * codegen_internal.h - what the kernel generator's three files share:
 * codegen_emit.c writes the pieces every kernel's Step struct is made of
 * (types, loads and stores, index decompositions, a term's value, the
 * reduction's operations); codegen_reduce.c chooses and writes the
 * reduction kernels; codegen.c the maps and transposes and the entry,
 * ein_codegen_step. Each calls only the files before it.
 */
#ifndef EIN_CODEGEN_INTERNAL_H
#define EIN_CODEGEN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen.h"
#include "loop_axes.h"
#include "strbuf.h"

enum {
  MAP_BLOCK = 256,
  TILE = 32,         /* transpose tile edge */
  TILE_ROWS = 8,     /* threads per tile column */
  TILE2 = 2 * TILE,  /* 2-byte transpose tile edge: TILE threads move pairs */
  HALF_VEC = 8,      /* 2-byte map variant: elements per thread */
  RED_OUT_LANES = 8, /* reduce_outer: lanes per output element */
  SHORT_RED = 8,     /* fewer terms: a thread per output (Inductor) */
  /* a reduction over a transposed plane of up to this many terms folds
   * them in a transpose's tile (transpose_axes) */
  TILE_RED_MAX = 64,
  /* A split's pass 1 aims at two waves of 132 SMs, 8 blocks of 256
   * threads each (the H100; PyTorch's rule gives ~2100 blocks too). */
  SPLIT_TARGET = 2 * 132 * 8,
  SPLIT_MIN_TERMS = 16, /* per lane in each chunk: less is launch-bound */
  /* An odd-pitch 2-byte transpose takes 64x64 tiles of aligned runs from
   * this many tiles (one block per SM of an H100): on fewer, the 32x32
   * tile's four times as many blocks are worth more than its sectors. */
  RUNS_MIN_TILES = SPLIT_TARGET / 16,
  FINISH_BLOCK = 256,
  /* A staged copy's block moves tiles of this many elements at most
   * (whole tiles, at least one): 8 per thread of a MAP_BLOCK block. */
  STAGE_ELEMS = 8 * MAP_BLOCK,
  STAGE_MAX_BYTES = 16384 /* one tile's shared memory at most */
};

/* Grid-stride loops make any grid correct; this bounds the grid. */
static const int64_t MAX_BLOCKS = 1 << 16;

/* The generator's state for one step (codegen.c makes it). */
typedef struct gen {
  const ein_step *s;
  ein_strbuf *sb;
  ein_loop_axes kept, red;
  ein_acc acc;
  bool wide;       /* 64-bit indices */
  const char *idx; /* "int" or "long long" */
} gen;

/* The C types a kernel's pointers d, s0 and s1 point to; "void" for a
 * source the kernel does not have. */
typedef struct operand_types {
  const char *d, *s0, *s1;
} operand_types;

/* The map family (kernels/map.cuh) instantiated for one step: a struct
 * of the step's constants and inline functions, then the kernel calling
 * the family's template with it. */
typedef enum map_form { MAP_VALUE, MAP_RAW, MAP_HALF_VEC } map_form;

/* How a reduction spreads over the machine, chosen from the sizes alone
 * (cg_choose_reduction): the rule of PyTorch's Reduce.cuh and Inductor,
 * written once. */
typedef struct red_shape {
  ein_kernel_kind kind; /* REDUCE_THREAD, _INNER, _OUTER or _SPLIT */
  bool inner;           /* lanes along x share an output */
  int lanes, per_block; /* lanes per output, outputs per block */
  int64_t nout, nred;
  int64_t blocks;        /* along x */
  int64_t splits, chunk; /* split: blocks along y, terms of each */
} red_shape;

/* ---- codegen_emit.c ---- */
const char *cg_storage_type(ein_dtype dt);
const char *cg_word_type(int64_t bytes);
const char *cg_acc_type(ein_acc a);
size_t cg_acc_size(ein_acc a);
void cg_emit_load(ein_strbuf *sb, ein_dtype dt, ein_acc acc, const char *x);
void cg_emit_store_value(ein_strbuf *sb, ein_dtype dt, const char *v);
void cg_emit_constant(ein_strbuf *sb, double v, ein_acc acc);
void cg_emit_combine(ein_strbuf *sb, ein_reduction op, ein_acc acc);
void cg_emit_identity(ein_strbuf *sb, ein_reduction op, ein_acc acc);
void cg_emit_int(gen *g, int64_t v);
void cg_emit_decompose(gen *g, const ein_loop_axes *la, const char *var,
                       const char *prefix, unsigned ops);
void cg_emit_offsets_fn(gen *g, const char *name, const char *var,
                        const char *prefix, unsigned params,
                        const ein_loop_axes *la, unsigned ops);
void cg_emit_map_op(gen *g, const char *x0, const char *x1);
void cg_emit_value_of(gen *g, const char *x0, const char *x1);
void cg_emit_value(gen *g, const char *o1, const char *o2);
void cg_emit_post(gen *g, const char *v, bool normalise);
const char *cg_src_type(const ein_step *s, int k);
operand_types cg_step_types(const ein_step *s, const char *dtype);
void cg_emit_signature(gen *g, const char *name, unsigned threads,
                       operand_types t);
int64_t cg_blocks_for(int64_t work, int64_t per_block);
void cg_emit_step_types(gen *g, const char *step, int64_t n, operand_types t);
void cg_emit_step_result(gen *g);
void cg_emit_step_value(gen *g, map_form form, const ein_loop_axes *la);
void cg_emit_red_ops(gen *g);

/* ---- codegen_reduce.c ---- */
red_shape cg_choose_reduction(const gen *g, bool inner);
void cg_gen_reduce(gen *g, ein_kernel_src *k, red_shape *r);
void cg_gen_reduce_thread(gen *g, ein_kernel_src *k, const red_shape *r);
void cg_gen_finish(gen *g, ein_kernel_src *k, const red_shape *r);

#endif
