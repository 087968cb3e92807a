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
#include <string.h>

#include "alloc.h"

enum { MAX_PAIRS = EIN_MAX_OPERANDS - 1, MAX_PER_TUPLE = 8 };

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
      if (v > 9999999) v = 9999999; /* out of range either way */
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
                            ein_error_rec *err) {
  int pos[MAX_PER_TUPLE], k = 0;
  ein_status st = read_tuple(r, pos, &k, err);
  if (st) return st;
  if (k != 2)
    return ein_fail_argument(
        err, "path '%.80s': contraction %d names %d operand%s; einc "
             "contracts two at a time, (i, j)",
        r->text, *npairs + 1, k, k == 1 ? "" : "s");
  if (*npairs == MAX_PAIRS)
    return ein_fail_argument(err, "path '%.80s': more than %d contractions",
                             r->text, MAX_PAIRS);
  lin[*npairs][0] = pos[0];
  lin[(*npairs)++][1] = pos[1];
  return EIN_OK;
}

/* The whole text: a list of pairs, a trailing comma allowed (as Python
 * writes none but accepts one), nothing after it. */
static ein_status read_pairs(reader *r, int (*lin)[2], int *npairs,
                             ein_error_rec *err) {
  *npairs = 0;
  if (!take(r, '[') && !take(r, '('))
    return syntax(r, err, "'[' opening the list of contractions");
  char close = r->p[-1] == '[' ? ']' : ')';
  bool closed = take(r, close);
  while (!closed) {
    ein_status st = read_pair(r, lin, npairs, err);
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
                         int (*ssa)[2], ein_error_rec *err) {
  int *live = ein_malloc(((size_t)n + 1) * sizeof *live), nlive = n;
  if (!live) return ein_fail_memory(err, "out of memory reading a path");
  ein_status st = EIN_OK;
  for (int i = 0; i < n; i++) live[i] = i;
  for (int k = 0; k < npairs; k++) {
    int a = lin[k][0], b = lin[k][1];
    if (a >= nlive || b >= nlive) {
      st = ein_fail_argument(
          err, "path '%.80s': contraction %d names operand %d, but only %d "
               "operands are left at that point (0 to %d)",
          text, k + 1, a >= nlive ? a : b, nlive, nlive - 1);
      break;
    }
    if (a == b) {
      st = ein_fail_argument(
          err, "path '%.80s': contraction %d names operand %d twice", text,
          k + 1, a);
      break;
    }
    ssa[k][0] = live[a];
    ssa[k][1] = live[b];
    int kept = 0;
    for (int i = 0; i < nlive; i++)
      if (i != a && i != b) live[kept++] = live[i];
    live[kept] = n + k;
    nlive = kept + 1;
  }
  ein_free(live);
  return st;
}

ein_status ein_path_given(const char *text, int n, int (*ssa)[2],
                          ein_error_rec *err) {
  reader r = {text, text};
  int (*lin)[2] = ein_malloc(sizeof(int[MAX_PAIRS][2])), npairs;
  if (!lin) return ein_fail_memory(err, "out of memory reading a path");
  ein_status st = read_pairs(&r, lin, &npairs, err);
  if (!st && npairs != n - 1)
    st = ein_fail_argument(
        err, "path '%.80s' has %d contraction%s, but %d operand%s need%s %d",
        text, npairs, npairs == 1 ? "" : "s", n, n == 1 ? "" : "s",
        n == 1 ? "s" : "", n - 1);
  if (!st) st = to_ssa(text, n, lin, npairs, ssa, err);
  ein_free(lin);
  return st;
}
