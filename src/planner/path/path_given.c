/*
 * path_given.c - opt_einsum's linear path read from text and turned into
 * the planner's SSA pairs (path_given.h).
 *
 * Reading and checking are two passes: the text is read into positions
 * first (so a syntax error is reported before a count or range error), then
 * the positions are replayed against the shrinking operand list, which is
 * where a position can be out of range.
 */
#include "path_given.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PER_TUPLE = 8 };

/* The text being read and where the reader is. */
typedef struct reader {
  const char *text, *p;
} reader;

static void skip_space(reader *r) {
  while (isspace((unsigned char)*r->p)) r->p++;
}

/* Consumes c (after spaces) when it is next. */
static bool take(reader *r, char c) {
  skip_space(r);
  if (*r->p != c) return false;
  r->p++;
  return true;
}

static ein_status syntax(reader *r, ein_error_rec *err, const char *expected) {
  return ein_fail_argument(
      err,
      "path '%.80s': expected %s at character %d; give opt_einsum's linear "
      "form, e.g. [(0, 1), (0, 1)]",
      r->text, expected, (int)(r->p - r->text) + 1);
}

/* One tuple "(i, j, ...)" or "[i, j]": its positions into pos, count in *k
 * (any count is read here; the caller wants two). */
static ein_status read_tuple(reader *r, int *pos, int *k, ein_error_rec *err) {
  skip_space(r);
  char close = *r->p == '(' ? ')' : *r->p == '[' ? ']' : 0;
  if (!close) return syntax(r, err, "'(' or '[' opening a contraction");
  r->p++;
  *k = 0;
  if (take(r, close)) return EIN_OK;
  for (;;) {
    skip_space(r);
    if (!isdigit((unsigned char)*r->p))
      return syntax(r, err, "an operand position (0, 1, ...)");
    long v = 0;
    while (isdigit((unsigned char)*r->p)) {
      v = v * 10 + (*r->p++ - '0');
      if (v > 999999999) v = 999999999; /* out of range either way */
    }
    if (*k < MAX_PER_TUPLE) pos[*k] = (int)v;
    (*k)++;
    bool comma = take(r, ',');
    if (take(r, close)) return EIN_OK; /* "(0, 1)", or "(0,)" as Python */
    if (!comma)
      return syntax(r, err, close == ')' ? "',' or ')'" : "',' or ']'");
  }
}

/* One contraction into lin[*npairs]: a tuple of exactly two positions. */
static ein_status read_pair(reader *r, int (*lin)[2], int *npairs,
                            int max_pairs, ein_error_rec *err) {
  int pos[MAX_PER_TUPLE], k = 0;
  ein_status st = read_tuple(r, pos, &k, err);
  if (st) return st;
  if (k != 2)
    return ein_fail_argument(
        err, "path '%.80s': contraction %d names %d operand%s; einc "
             "contracts two at a time, (i, j)",
        r->text, *npairs + 1, k, k == 1 ? "" : "s");
  if (*npairs == max_pairs)
    return ein_fail_argument(err, "path '%.80s': more than %d contractions",
                             r->text, max_pairs);
  lin[*npairs][0] = pos[0];
  lin[(*npairs)++][1] = pos[1];
  return EIN_OK;
}

/* The whole text: a list of pairs, a trailing comma allowed (as Python
 * writes none but accepts one), nothing after it. */
static ein_status read_pairs(reader *r, int (*lin)[2], int *npairs,
                             int max_pairs, ein_error_rec *err) {
  *npairs = 0;
  if (!take(r, '[') && !take(r, '('))
    return syntax(r, err, "'[' opening the list of contractions");
  char close = r->p[-1] == '[' ? ']' : ')';
  bool closed = take(r, close);
  while (!closed) {
    ein_status st = read_pair(r, lin, npairs, max_pairs, err);
    if (st) return st;
    bool comma = take(r, ',');
    closed = take(r, close);
    if (!comma && !closed)
      return syntax(r, err, close == ']' ? "',' or ']'" : "',' or ')'");
  }
  skip_space(r);
  if (*r->p) return syntax(r, err, "the end of the path");
  return EIN_OK;
}

/* Replays the linear positions on the list of live operands (SSA ids),
 * checking each against the list's length at that point. */
static ein_status to_ssa(const char *text, int n, int (*lin)[2], int npairs,
                         int (*ssa)[2], int *live, ein_error_rec *err) {
  int nlive = n;
  for (int i = 0; i < n; i++) live[i] = i;
  for (int k = 0; k < npairs; k++) {
    int a = lin[k][0], b = lin[k][1];
    if (a >= nlive || b >= nlive)
      return ein_fail_argument(
          err, "path '%.80s': contraction %d names operand %d, but only %d "
               "operands are left at that point (0 to %d)",
          text, k + 1, a >= nlive ? a : b, nlive, nlive - 1);
    if (a == b)
      return ein_fail_argument(
          err, "path '%.80s': contraction %d names operand %d twice", text,
          k + 1, a);
    ssa[k][0] = live[a];
    ssa[k][1] = live[b];
    int kept = 0;
    for (int i = 0; i < nlive; i++)
      if (i != a && i != b) live[kept++] = live[i];
    live[kept] = n + k;
    nlive = kept + 1;
  }
  return EIN_OK;
}

/* cotengra's SSA form: pair k names inputs (0..n-1) or earlier results
 * (n + j, j < k), each once. */
static bool valid_ssa(int n, int (*pairs)[2], int npairs, char *used) {
  if (npairs != n - 1) return false;
  memset(used, 0, (size_t)(2 * n));
  for (int k = 0; k < npairs; k++)
    for (int s = 0; s < 2; s++) {
      int id = pairs[k][s];
      if (id < 0 || id >= n + k || used[id]) return false;
      used[id] = 1;
    }
  return true;
}

/* cotengra's tree as nested pairs, "((0, 1), (2, (3, 4)))": every tuple
 * holds exactly two items, each an operand (all n, once each) or a tuple.
 * Tuples are closed left to right, so the pairs come in post-order. The
 * open tuples are a stack (depth up to n), not recursion. */
typedef struct tree_reader {
  int n, npairs, depth;
  int *acc, *count; /* per open tuple: its first item, items so far */
  char *used;
} tree_reader;

/* An item (operand or closed tuple, as an SSA id) joins the open tuple. */
static bool tree_item(tree_reader *t, int id, int (*ssa)[2]) {
  if (t->depth == 0) return t->npairs == t->n - 1; /* the whole tree */
  int d = t->depth - 1;
  if (t->count[d] == 0) {
    t->acc[d] = id;
  } else if (t->count[d] == 1) {
    if (t->npairs >= t->n - 1) return false;
    ssa[t->npairs][0] = t->acc[d];
    ssa[t->npairs][1] = id;
    t->acc[d] = t->n + t->npairs++;
  } else {
    return false;
  }
  t->count[d]++;
  return true;
}

static bool read_tree(const char *text, int n, int (*ssa)[2], tree_reader *t) {
  reader r = {text, text};
  memset(t->used, 0, (size_t)n);
  t->npairs = 0, t->depth = 0;
  bool done = false;
  while (!done) {
    skip_space(&r);
    char c = *r.p;
    if (c == '(' || c == '[') {
      if (t->depth == n) return false;
      t->count[t->depth++] = 0;
      r.p++;
    } else if (isdigit((unsigned char)c)) {
      long v = 0;
      while (isdigit((unsigned char)*r.p)) {
        v = v * 10 + (*r.p++ - '0');
        if (v >= n) v = n;
      }
      if (v >= n || t->used[v] || t->depth == 0) return false;
      t->used[v] = 1;
      if (!tree_item(t, (int)v, ssa)) return false;
      take(&r, ',');
    } else if (c == ')' || c == ']') {
      r.p++;
      if (t->depth == 0 || t->count[t->depth - 1] != 2) return false;
      int id = t->acc[--t->depth];
      if (t->depth == 0) {
        done = true;
      } else if (!tree_item(t, id, ssa)) {
        return false;
      }
      take(&r, ',');
    } else {
      return false;
    }
  }
  skip_space(&r);
  return !*r.p && t->npairs == n - 1;
}

/* The other forms cotengra writes, tried when the linear form fails. */
static bool given_cotengra(const char *text, int n, int (*lin)[2], int npairs,
                           bool parsed, int (*ssa)[2]) {
  tree_reader t = {.n = n};
  t.acc = malloc((size_t)(n + 1) * sizeof *t.acc);
  t.count = malloc((size_t)(n + 1) * sizeof *t.count);
  t.used = malloc((size_t)(2 * n + 1));
  bool ok = false;
  if (t.acc && t.count && t.used) {
    if (parsed && valid_ssa(n, lin, npairs, t.used)) {
      memcpy(ssa, lin, (size_t)npairs * sizeof *lin);
      ok = true;
    } else {
      ok = n >= 2 && read_tree(text, n, ssa, &t);
    }
  }
  free(t.acc), free(t.count), free(t.used);
  return ok;
}

/* opt_einsum's linear form; failing that, cotengra's SSA form or tree; the
 * linear form's error when none reads. */
ein_status ein_path_given(const char *text, int n, int (*ssa)[2],
                          ein_error_rec *err) {
  reader r = {text, text};
  int max_pairs = (int)(strlen(text) / 4) + 1; /* "(i,j)" is 5 characters */
  int (*lin)[2] = malloc((size_t)max_pairs * sizeof *lin);
  int *live = malloc((size_t)(n + 1) * sizeof *live);
  if (!lin || !live) {
    free(lin), free(live);
    return ein_fail_memory(err, "out of memory reading the path");
  }
  int npairs = 0;
  ein_status st = read_pairs(&r, lin, &npairs, max_pairs, err);
  bool parsed = st == EIN_OK;
  if (!st && npairs != n - 1)
    st = ein_fail_argument(
        err, "path '%.80s' has %d contraction%s, but %d operand%s need%s %d",
        text, npairs, npairs == 1 ? "" : "s", n, n == 1 ? "" : "s",
        n == 1 ? "s" : "", n - 1);
  if (!st) st = to_ssa(text, n, lin, npairs, ssa, live, err);
  if (st && given_cotengra(text, n, lin, npairs, parsed, ssa)) {
    ein_error_clear(err);
    st = EIN_OK;
  }
  free(lin), free(live);
  return st;
}
