/*
 * test_path_options.c - the order search's options end to end (issue 26):
 * ein_options.plan_time, .seed and .objective reach the search through
 * ein_plan_create and ein_eval, and each changes what it should:
 *   - seed: the same seed gives the same path (two contexts); other seeds
 *     give other paths, each valid and each evaluating to the reference;
 *   - plan_time: a tiny budget runs one greedy trial, the default many;
 *     over networks a long budget finds no worse paths in total;
 *   - objective: on networks the exact DP solves, 'size' gives the least
 *     largest intermediate and 'flops' the least FLOPs, 'combo' lies in
 *     between (checked per case where exact, in total over the cases);
 *     on 40-operand networks (the heuristic) 'size' lowers the largest;
 *   - bad values fail with EIN_ERR_INVALID_ARGUMENT.
 * Results of every option against the direct-sum reference (reference.h),
 * f64 1e-12 relative to its norm.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "path_internal.h"
#include "reference.h"

enum { MAXN = 64, MAXAX = 128, MAXD = 8 };

static uint64_t rng_state = 0x2026112500000001ull;
static int pick(int m) { return (int)(prng_next(&rng_state) % (uint64_t)m); }

/* A network by axis ids, and its einc expression (axes "x0", "x1", ...). */
typedef struct net {
  int n, naxes, nout;
  int nd[MAXN], ax[MAXN][MAXD], out[4];
  int64_t size[MAXAX], shape[MAXN][MAXD];
  char expr[4096];
} net;

static void net_text(net *g) {
  size_t len = 0;
  for (int i = 0; i < g->n; i++)
    for (int d = 0; d < g->nd[i]; d++) {
      len += (size_t)snprintf(g->expr + len, sizeof g->expr - len, "%sx%d",
                              d ? " " : (i ? ", " : ""), g->ax[i][d]);
      g->shape[i][d] = g->size[g->ax[i][d]];
    }
  len += (size_t)snprintf(g->expr + len, sizeof g->expr - len, " ->");
  for (int k = 0; k < g->nout; k++)
    len += (size_t)snprintf(g->expr + len, sizeof g->expr - len, " x%d",
                            g->out[k]);
}

/* Random 3-regular graph, n operands, every bond `bond`, scalar output. */
static void gen_regular(net *g, int n, int64_t bond) {
  memset(g, 0, sizeof *g);
  int stubs[3 * MAXN], m = 3 * n;
  for (int k = 0; k < m; k++) stubs[k] = k / 3;
  for (int k = m - 1; k > 0; k--) {
    int j = pick(k + 1), t = stubs[k];
    stubs[k] = stubs[j], stubs[j] = t;
  }
  g->n = n;
  for (int k = 0; k + 1 < m; k += 2) {
    int a = stubs[k], b = stubs[k + 1];
    if (a == b) continue;
    g->size[g->naxes] = bond;
    g->ax[a][g->nd[a]++] = g->naxes;
    g->ax[b][g->nd[b]++] = g->naxes++;
  }
  for (int i = 0; i < n; i++)
    if (!g->nd[i]) { /* an operand left alone: a private axis of size 2 */
      g->size[g->naxes] = 2;
      g->ax[i][g->nd[i]++] = g->naxes++;
    }
  net_text(g);
}

/* rand_equation-like: n operands of 2-4 axes among 1.5 n ids (sizes 2-7),
 * every axis on at least two operands or the output, 0-2 output axes. */
static void gen_rand(net *g, int n, int maxsize) {
  memset(g, 0, sizeof *g);
  g->n = n;
  g->naxes = n + n / 2;
  for (int a = 0; a < g->naxes; a++) g->size[a] = 2 + pick(maxsize - 1);
  int uses[MAXAX] = {0};
  for (int i = 0; i < n; i++) {
    int want = 2 + pick(3);
    for (int t = 0; t < 20 && g->nd[i] < want; t++) {
      int a = pick(g->naxes), dup = 0;
      for (int d = 0; d < g->nd[i]; d++) dup |= g->ax[i][d] == a;
      if (!dup) g->ax[i][g->nd[i]++] = a, uses[a]++;
    }
  }
  g->nout = pick(3);
  for (int k = 0; k < g->nout; k++) {
    int a = pick(g->naxes);
    for (int t = 0; t < g->naxes && !uses[a]; t++) a = (a + 1) % g->naxes;
    g->out[k] = a;
    for (int j = 0; j < k; j++)
      if (g->out[j] == a) g->nout = k; /* stop at a repeat */
  }
  /* an axis on one operand only: give it to a second one */
  for (int a = 0; a < g->naxes; a++)
    if (uses[a] == 1) {
      int i = pick(n), has = 0;
      for (int d = 0; d < g->nd[i]; d++) has |= g->ax[i][d] == a;
      if (!has && g->nd[i] < MAXD) g->ax[i][g->nd[i]++] = a;
    }
  net_text(g);
}

/* --------------------------------------------------------- public API */

static ein_status plan_of(ein_ctx *ctx, const net *g, const ein_options *o,
                          ein_plan **out) {
  DLTensor t[MAXN];
  const DLTensor *p[MAXN];
  for (int i = 0; i < g->n; i++) {
    t[i] = (DLTensor){.device = {kDLCPU, 0}, .ndim = g->nd[i],
                      .dtype = {kDLFloat, 64, 1},
                      .shape = (int64_t *)g->shape[i]};
    p[i] = &t[i];
  }
  *out = NULL;
  return ein_plan_create(ctx, g->expr, p, g->n, NULL, o, out);
}

/* The plan's JSON (path and method) into buf. */
static void plan_json(const ein_plan *plan, char *buf, size_t cap) {
  ein_plan_describe(plan, EIN_DESCRIBE_JSON, NULL, buf, cap);
}

/* The "path":[...] member of a plan's JSON, as text. */
static void path_text(const char *json, char *buf, size_t cap) {
  const char *p = strstr(json, "\"path\":[");
  buf[0] = 0;
  if (!p) return;
  const char *end = strstr(p, "]]");
  size_t len = end ? (size_t)(end - p) + 2 : strlen(p);
  if (len >= cap) len = cap - 1;
  memcpy(buf, p, len);
  buf[len] = 0;
}

static char json_a[1 << 17], json_b[1 << 17];

/* Evaluates g (f64, random inputs) with options o; the error relative to
 * the reference's norm, or -1 when the evaluation fails. */
static double eval_error(ein_ctx *ctx, const net *g, const ein_options *o) {
  const int64_t *shp[MAXN];
  for (int i = 0; i < g->n; i++) shp[i] = g->shape[i];
  ein_binding *b;
  if (ein_bind_shapes(ctx, g->expr, shp, g->nd, g->n, o, &b)) return -1;
  const ein_problem *p = ein_binding_problem(b);
  DLTensor t[MAXN + 1];
  const DLTensor *in[MAXN];
  double *data[MAXN + 1];
  int64_t oshape[4], numel_out = 1;
  for (int i = 0; i <= g->n; i++) {
    bool is_out = i == g->n;
    int nd = is_out ? p->output.ndim : g->nd[i];
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) {
      int64_t s = is_out ? (oshape[d] = p->output.dims[d].size) : g->shape[i][d];
      numel *= s;
    }
    data[i] = calloc((size_t)numel + 1, sizeof(double));
    t[i] = (DLTensor){.data = data[i], .device = {kDLCPU, 0}, .ndim = nd,
                      .dtype = {kDLFloat, 64, 1},
                      .shape = is_out ? oshape : (int64_t *)g->shape[i]};
    if (is_out) numel_out = numel;
    else {
      in[i] = &t[i];
      for (int64_t e = 0; e < numel; e++)
        data[i][e] = (double)pick(2000) / 1000.0 - 1.0;
    }
  }
  double *want = malloc(sizeof(double) * (size_t)(numel_out + 1));
  ref_eval(p, in, want, numel_out);
  double err = -1;
  if (ein_eval(ctx, g->expr, in, g->n, &t[g->n], o) == EIN_OK) {
    double e = 0, norm = 0;
    for (int64_t k = 0; k < numel_out; k++) {
      e = fmax(e, fabs(data[g->n][k] - want[k]));
      norm = fmax(norm, fabs(want[k]));
    }
    err = e / fmax(norm, 1e-300);
  }
  free(want);
  for (int i = 0; i <= g->n; i++) free(data[i]);
  ein_binding_destroy(b);
  return err;
}

/* Same seed, same path (a second context: no cache between them); seeds
 * 0..7 give several paths, each valid. */
static void check_seed(void) {
  ein_ctx *c1, *c2;
  REQUIRE_OK(ein_ctx_create(&c1));
  REQUIRE_OK(ein_ctx_create(&c2));
  net g;
  gen_regular(&g, 40, 2);
  char paths[8][4096];
  int distinct = 0;
  for (int s = 0; s < 8; s++) {
    ein_options o = {.seed = (uint64_t)s * 977};
    ein_plan *p1, *p2;
    REQUIRE_OK(plan_of(c1, &g, &o, &p1));
    REQUIRE_OK(plan_of(c2, &g, &o, &p2));
    plan_json(p1, json_a, sizeof json_a);
    plan_json(p2, json_b, sizeof json_b);
    path_text(json_a, paths[s], sizeof paths[s]);
    char other[4096];
    path_text(json_b, other, sizeof other);
    CHECK(paths[s][0] && !strcmp(paths[s], other),
          "seed %d: two contexts planned different paths", s);
    CHECK(isfinite(ein_plan_flops(p1)) && ein_plan_flops(p1) > 0,
          "seed %d: flops %g", s, ein_plan_flops(p1));
    int same = 0;
    for (int k = 0; k < s; k++) same |= !strcmp(paths[k], paths[s]);
    distinct += !same;
    ein_plan_destroy(p1);
    ein_plan_destroy(p2);
  }
  CHECK(distinct >= 2, "8 seeds gave %d distinct paths", distinct);
  printf("seeds: 8 seeds, %d distinct paths on a 40-operand 3-regular "
         "network, each the same in two contexts\n",
         distinct);
  ein_ctx_destroy(c1);
  ein_ctx_destroy(c2);
}

/* A tiny budget runs the plain greedy alone; over 6 networks the default
 * and a long budget each find paths no worse in total than the tiny one. */
static void check_plan_time(ein_ctx *ctx) {
  double total[3] = {0, 0, 0}, times[3] = {1e-7, 0, 0.5};
  for (int c = 0; c < 6; c++) {
    net g;
    gen_regular(&g, 26 + 6 * c, 2);
    for (int k = 0; k < 3; k++) {
      ein_options o = {.plan_time = times[k], .seed = 5};
      ein_plan *p;
      REQUIRE_OK(plan_of(ctx, &g, &o, &p));
      total[k] += log10(ein_plan_flops(p));
      plan_json(p, json_a, sizeof json_a);
      bool one = strstr(json_a, "\"greedy+reconf\"") != NULL;
      CHECK(one == (k == 0), "network %d, plan_time %g: method %s", c,
            times[k], one ? "one greedy trial" : "several trials");
      ein_plan_destroy(p);
    }
  }
  /* a heuristic's result is not monotone in its budget: the default and
   * the long budget each against the single greedy trial */
  CHECK(total[1] <= total[0] + 1e-9 && total[2] <= total[0] + 1e-9,
        "sum of log10 flops: tiny budget %.3f, default %.3f, 0.5 s %.3f",
        total[0], total[1], total[2]);
  printf("plan_time: sum of log10 flops over 6 networks: 1e-7 s %.3f, "
         "default %.3f, 0.5 s %.3f\n", total[0], total[1], total[2]);
}

/* The three objectives through the public API on networks the DP solves
 * (exact: per-case orderings) and their results against the reference. */
static void check_objectives_dp(ein_ctx *ctx) {
  double lf[3] = {0}, ls[3] = {0};
  int lower = 0, cases = 0;
  for (int c = 0; c < 40; c++) {
    net g;
    gen_rand(&g, 7 + c % 5, 7);
    double fl[3], big[3];
    bool ok = true;
    for (int k = 0; k < 3; k++) {
      ein_options o = {.objective = (ein_objective)k};
      ein_plan *p;
      if (plan_of(ctx, &g, &o, &p)) {
        ok = false;
        break;
      }
      fl[k] = ein_plan_flops(p);
      big[k] = (double)ein_plan_largest_intermediate(p);
      ein_plan_destroy(p);
    }
    CHECK(ok, "'%s': %s", g.expr, ein_last_error(ctx)->message);
    if (!ok) continue;
    cases++;
    /* FLOPS: least flops; SIZE: least largest (the plan's largest buffer
     * can hold a layout copy beside the path's intermediates, so the
     * per-case check is on the path: check_objectives_exact) */
    CHECK(fl[0] <= fl[1] * (1 + 1e-9) && fl[0] <= fl[2] * (1 + 1e-9),
          "'%s': flops objective %g flops, size %g, combo %g", g.expr, fl[0],
          fl[1], fl[2]);
    lower += big[1] < big[0];
    for (int k = 0; k < 3; k++) {
      lf[k] += log2(fl[k]);
      ls[k] += log2(fmax(big[k], 1));
    }
  }
  CHECK(lower >= 3, "size objective lowered the largest buffer in %d of %d",
        lower, cases);
  /* combo between on the largest; its FLOPs need not be below size's
   * (it weighs every write, size only the largest): check_objectives_exact
   * checks its own score */
  CHECK(ls[1] <= ls[2] && ls[2] <= ls[0] && lf[0] <= lf[2],
        "in total (log2): largest flops/combo/size %.1f %.1f %.1f, flops "
        "%.1f %.1f %.1f",
        ls[0], ls[2], ls[1], lf[0], lf[2], lf[1]);
  printf("objectives (%d DP cases, sums of log2): flops obj. %.1f flops / "
         "%.1f largest; combo %.1f / %.1f; size %.1f / %.1f; size lowered "
         "the largest in %d\n",
         cases, lf[0], ls[0], lf[2], ls[2], lf[1], ls[1], lower);
}

/* ---------------------------------------------------- the search itself */

static ein_path_query query_of(const net *g, const int *axp[], int naxes[],
                               int64_t sizes[]) {
  for (int i = 0; i < g->n; i++) axp[i] = g->ax[i], naxes[i] = g->nd[i];
  for (int a = 0; a < g->naxes; a++) sizes[a] = g->size[a];
  return (ein_path_query){.n = g->n, .axes = axp, .naxes = naxes,
                          .output_axes = g->out, .output_naxes = g->nout,
                          .total_axes = g->naxes, .sizes = sizes};
}

/* FLOPs + 64 x elements written to intermediates (cotengra's combo) of
 * each result's path. */
static bool combo_scores(const ein_path_query *q, const ein_path_result *r,
                         double *score) {
  ein_arena a;
  ein_arena_init(&a);
  pnet net;
  bool ok = pnet_init(&net, q, &a);
  plist *nodes = ein_arena_alloc(&a, (size_t)(2 * q->n), sizeof *nodes);
  for (int k = 0; ok && nodes && k < 3; k++) {
    pcost c;
    ok = ptree_eval(&net, (const int(*)[2])r[k].pairs, &a, nodes, &c);
    score[k] = c.flops + 64 * c.write;
  }
  ein_arena_destroy(&a);
  return ok && nodes;
}

/* ein_path_search with each objective: exact per-case orderings where the
 * DP solves it; 'size' lowers the largest on heuristic-sized networks. */
static void check_objectives_exact(void) {
  ein_arena arena;
  ein_arena_init(&arena);
  int strict = 0, cases = 0;
  for (int c = 0; c < 60; c++) {
    net g;
    if (c < 50) gen_rand(&g, 6 + c % 7, 7);
    else gen_regular(&g, 40, c % 2 ? 2 : 4);
    const int *axp[MAXN];
    int naxes[MAXN];
    int64_t sizes[MAXAX];
    ein_path_query q = query_of(&g, axp, naxes, sizes);
    ein_path_result r[3];
    bool ok = true;
    for (int k = 0; k < 3 && ok; k++) {
      q.objective = (ein_path_objective)k;
      q.seed = 3;
      ok = ein_path_search(&q, &arena, &r[k]) == EIN_PATH_OK &&
           ein_path_valid(g.n, (const int(*)[2])r[k].pairs);
    }
    CHECK(ok, "network %d: search failed or invalid", c);
    if (!ok) continue;
    cases++;
    double f0 = r[0].flops, f1 = r[1].flops, f2 = r[2].flops;
    double s0 = r[0].largest, s1 = r[1].largest, s2 = r[2].largest;
    if (g.n <= EIN_PATH_DP_MAX) {
      double combo[3];
      CHECK(combo_scores(&q, r, combo), "network %d: no memory", c);
      CHECK(f0 <= f1 * (1 + 1e-9) && f0 <= f2 * (1 + 1e-9) &&
                s1 <= s0 * (1 + 1e-9) && s1 <= s2 * (1 + 1e-9) &&
                combo[2] <= combo[0] * (1 + 1e-9) &&
                combo[2] <= combo[1] * (1 + 1e-9),
            "'%s': flops %g %g %g, largest %g %g %g, flops + 64 x written "
            "%g %g %g (flops, size, combo objectives)",
            g.expr, f0, f1, f2, s0, s1, s2, combo[0], combo[1], combo[2]);
    } else {
      CHECK(s1 <= s0, "'%s' (heuristic): size objective largest %g, flops "
            "objective's %g", g.expr, s1, s0);
    }
    strict += s1 < s0;
  }
  CHECK(strict >= 5, "size objective strictly lower in %d of %d", strict,
        cases);
  printf("objectives on the search: %d cases, size strictly lower largest "
         "in %d\n", cases, strict);
  ein_arena_destroy(&arena);
}

/* Several seeds and objectives on a 14-operand 3-regular network (the
 * heuristic runs) and 8-operand rand_equation-like ones (sizes 2-3: the
 * reference sums over every axis): every result equals the reference. */
static void check_results(ein_ctx *ctx) {
  int ran = 0;
  for (int c = 0; c < 4; c++) {
    net g;
    if (c == 0) gen_regular(&g, 14, 2);
    else gen_rand(&g, 8, 3);
    for (int k = 0; k < 3; k++)
      for (int s = 0; s < 3; s++) {
        ein_options o = {.objective = (ein_objective)k, .seed = (uint64_t)s,
                         .plan_time = s == 2 ? 0.01 : 0};
        double e = eval_error(ctx, &g, &o);
        CHECK(e >= 0 && e <= 1e-12, "'%s' objective %s seed %d: error %.3g",
              g.expr, ein_objective_name(k), s, e);
        ran++;
      }
  }
  printf("results: %d option sets on 4 networks equal the reference (f64 "
         "1e-12)\n", ran);
}

static void check_bad_values(ein_ctx *ctx) {
  net g;
  gen_regular(&g, 14, 2);
  ein_options bad[4] = {{.plan_time = -1}, {.plan_time = NAN},
                        {.plan_time = INFINITY}, {.objective = 3}};
  for (int k = 0; k < 4; k++) {
    ein_plan *p;
    ein_status st = plan_of(ctx, &g, &bad[k], &p);
    CHECK(st == EIN_ERR_INVALID_ARGUMENT && !p, "bad option %d: status %d",
          k, st);
  }
  ein_objective o = EIN_OBJECTIVE_FLOPS;
  CHECK(ein_objective_parse("size", &o) == EIN_OK && o == EIN_OBJECTIVE_SIZE &&
            ein_objective_parse("combo", &o) == EIN_OK &&
            o == EIN_OBJECTIVE_COMBO &&
            ein_objective_parse("memory", &o) == EIN_ERR_INVALID_ARGUMENT &&
            !strcmp(ein_objective_name(EIN_OBJECTIVE_FLOPS), "flops") &&
            !ein_objective_name(7),
        "ein_objective_parse / ein_objective_name");
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  check_seed();
  check_plan_time(ctx);
  check_objectives_dp(ctx);
  check_objectives_exact();
  check_results(ctx);
  check_bad_values(ctx);
  ein_ctx_destroy(ctx);
  return test_summary("path_options");
}
