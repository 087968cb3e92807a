/*
 * path_driver.c - runs the contraction-order search (src/planner/path/path.h) on
 * a network read from standard input and prints one JSON object, for
 * bench/paths.py.
 *
 * Input (whitespace-separated integers): n total_axes; total_axes sizes;
 * n operands, each as k followed by k axis ids; the output as k then ids.
 * Options: --limit ELEMENTS, --budget SECONDS, --seed S, --trials T,
 * --objective flops|size|combo, --slice-trees K, --flat-bisection 1 (the
 * search before issue 36), --limited plain|windowed (under a limit the
 * unlimited tree does not meet, one limited search alone; default both).
 * Output: {"flops", "largest", "seconds", "method", "nsliced", "nslices",
 * "sliced_flops", "slice_largest", "work", "work_budget" (the search's
 * work units spent and allowed), "ssa": [[i, j], ...]}.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "path.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int read_ids(int **ids) {
  int k;
  if (scanf("%d", &k) != 1 || k < 0) return -1;
  *ids = malloc(((size_t)k + 1) * sizeof **ids);
  for (int j = 0; j < k; j++)
    if (scanf("%d", &(*ids)[j]) != 1) return -1;
  return k;
}

static void options(int argc, char **argv, ein_path_query *q) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--limit")) q->memory_limit = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--budget")) q->time_budget = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) q->seed = strtoull(argv[i + 1], 0, 10);
    else if (!strcmp(argv[i], "--trials")) q->trials = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--flat-bisection"))
      q->flat_bisection = atoi(argv[i + 1]) != 0;
    else if (!strcmp(argv[i], "--limited"))
      q->limited = !strcmp(argv[i + 1], "plain") ? EIN_PATH_LIMITED_PLAIN
                   : !strcmp(argv[i + 1], "windowed") ? EIN_PATH_LIMITED_WINDOWED
                                                      : 0;
    else if (!strcmp(argv[i], "--slice-trees"))
      q->slice_trees = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--objective"))
      q->objective = !strcmp(argv[i + 1], "size")    ? EIN_PATH_SIZE
                     : !strcmp(argv[i + 1], "combo") ? EIN_PATH_COMBO
                                                     : EIN_PATH_FLOPS;
  }
}

int main(int argc, char **argv) {
  ein_path_query q = {0};
  if (scanf("%d %d", &q.n, &q.total_axes) != 2 || q.n < 1) return 2;
  int64_t *sizes = malloc(((size_t)q.total_axes + 1) * sizeof *sizes);
  for (int a = 0; a < q.total_axes; a++)
    if (scanf("%ld", &sizes[a]) != 1) return 2;
  int **axes = malloc((size_t)q.n * sizeof *axes);
  int *naxes = malloc((size_t)q.n * sizeof *naxes);
  for (int i = 0; i < q.n; i++)
    if ((naxes[i] = read_ids(&axes[i])) < 0) return 2;
  int *out;
  if ((q.output_naxes = read_ids(&out)) < 0) return 2;
  q.axes = (const int *const *)axes, q.naxes = naxes, q.sizes = sizes;
  q.output_axes = out;
  options(argc, argv, &q);
  ein_arena arena;
  ein_arena_init(&arena);
  ein_path_result r;
  double t0 = now();
  ein_path_status st = ein_path_search(&q, &arena, &r);
  double dt = now() - t0;
  printf("{\"status\": %d, \"flops\": %.17g, \"largest\": %.17g, "
         "\"seconds\": %.6f, \"method\": \"%s\", \"nsliced\": %d, "
         "\"nslices\": %.17g, \"sliced_flops\": %.17g, "
         "\"slice_largest\": %.17g, \"work\": %.17g, "
         "\"work_budget\": %.17g, \"ssa\": [",
         (int)st, r.flops, r.largest, dt, r.method ? r.method : "",
         r.nsliced, r.nslices, r.sliced_flops, r.slice_largest, r.work,
         r.work_budget);
  for (int k = 0; k < q.n - 1; k++)
    printf("%s[%d, %d]", k ? ", " : "", r.pairs[k][0], r.pairs[k][1]);
  printf("], \"sliced\": [");
  for (int k = 0; k < r.nsliced; k++) printf("%s%d", k ? ", " : "", r.sliced[k]);
  printf("]}\n");
  ein_arena_destroy(&arena);
  for (int i = 0; i < q.n; i++) free(axes[i]);
  free(axes), free(naxes), free(out), free(sizes);
  return st == EIN_PATH_OK ? 0 : 1;
}
