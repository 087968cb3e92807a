/*
 * path_memo.c - the unlimited search's result kept across the searches of
 * one planning call (path.h's ein_path_memo): a copy of the query it
 * answered (the key) and of its result, both in the memo's own arena.
 */
#include <string.h>

#include "path_internal.h"

void ein_path_memo_init(ein_path_memo *m) {
  memset(m, 0, sizeof *m);
  ein_arena_init(&m->arena);
}

void ein_path_memo_destroy(ein_path_memo *m) {
  ein_arena_destroy(&m->arena);
  memset(m, 0, sizeof *m);
}

static bool same_ints(const int *a, const int *b, int n) {
  return !n || !memcmp(a, b, (size_t)n * sizeof *a);
}

/* Whether a and b pose the same unlimited search: the same network and
 * the same options the search reads. */
static bool same_search(const ein_path_query *a, const ein_path_query *b) {
  if (a->n != b->n || a->total_axes != b->total_axes ||
      a->output_naxes != b->output_naxes || a->seed != b->seed ||
      a->time_budget != b->time_budget || a->trials != b->trials ||
      a->objective != b->objective || a->combo_alpha != b->combo_alpha ||
      a->flat_bisection != b->flat_bisection ||
      !same_ints(a->naxes, b->naxes, a->n) ||
      !same_ints(a->output_axes, b->output_axes, a->output_naxes) ||
      memcmp(a->sizes, b->sizes, (size_t)a->total_axes * sizeof *a->sizes))
    return false;
  for (int i = 0; i < a->n; i++)
    if (!same_ints(a->axes[i], b->axes[i], a->naxes[i])) return false;
  return true;
}

static void *copy_of(ein_arena *arena, const void *src, size_t count,
                     size_t size) {
  void *dst = ein_arena_alloc(arena, count + 1, size);
  if (dst && count) memcpy(dst, src, count * size);
  return dst;
}

/* The key: q's network and options, in the memo's arena. */
static bool copy_key(ein_path_memo *m, const ein_path_query *q) {
  ein_arena *a = &m->arena;
  int **axes = ein_arena_alloc(a, (size_t)q->n, sizeof *axes);
  if (!axes) return false;
  for (int i = 0; i < q->n; i++)
    if (!(axes[i] = copy_of(a, q->axes[i], (size_t)q->naxes[i], sizeof(int))))
      return false;
  m->key = *q;
  m->key.axes = (const int *const *)axes;
  m->key.naxes = copy_of(a, q->naxes, (size_t)q->n, sizeof(int));
  m->key.output_axes =
      copy_of(a, q->output_axes, (size_t)q->output_naxes, sizeof(int));
  m->key.sizes = copy_of(a, q->sizes, (size_t)q->total_axes, sizeof(int64_t));
  m->key.no_slice = NULL, m->key.memo = NULL;
  return m->key.naxes && m->key.output_axes && m->key.sizes;
}

bool path_memo_find(ein_path_memo *m, const ein_path_query *q,
                    ein_arena *arena, ein_path_result *r) {
  if (!m || !m->have || !same_search(&m->key, q)) return false;
  int(*pairs)[2] = copy_of(arena, m->free.pairs, (size_t)(q->n - 1),
                           sizeof *pairs);
  if (!pairs) return false; /* searched again: no memory is reported there */
  *r = m->free;
  r->pairs = pairs;
  m->reused++;
  return true;
}

bool path_memo_keep(ein_path_memo *m, const ein_path_query *q,
                    const ein_path_result *r) {
  ein_arena_destroy(&m->arena); /* one entry: the last query's */
  ein_arena_init(&m->arena);
  m->have = false;
  if (!copy_key(m, q)) return false;
  m->free = *r;
  m->free.pairs = copy_of(&m->arena, r->pairs, (size_t)(q->n - 1),
                          sizeof *r->pairs);
  m->have = m->free.pairs != NULL;
  return m->have;
}
