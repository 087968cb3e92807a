/*
 * mpi_slices.c - a sliced contraction over MPI ranks (issue 29, item 3).
 *
 *   mpirun -n 2 ./example_mpi_slices
 *
 * Every rank makes the same plan (the planner is deterministic), rank 0's
 * inputs are broadcast once, each rank runs its contiguous range of the
 * plan's units (slices) into a partial of its own (ein_plan_run_units),
 * and MPI_Allreduce sums the partials, so every rank holds the result.
 * Rank 0 then checks it against the same contraction in one piece
 * (ein_eval, unsliced) and a plain loop in double precision, in f64
 * (1e-12) and f32 (1e-5), and the program exits 1 on a mismatch.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ein.h"

enum { I = 6, J = 8, K = 6, L = 5, M = 4, N = 3 };
static const char *expr = "i j k, k l m, m n i -> j l n";

/* The output in double precision: out[j l n] = sum a[i j k] b[k l m]
 * c[m n i], the inputs read as doubles. */
static void reference(const double *a, const double *b, const double *c,
                      double *out) {
  for (int j = 0; j < J; j++)
    for (int l = 0; l < L; l++)
      for (int n = 0; n < N; n++) {
        double s = 0;
        for (int i = 0; i < I; i++)
          for (int k = 0; k < K; k++)
            for (int m = 0; m < M; m++)
              s += a[(i * J + j) * K + k] * b[(k * L + l) * M + m] *
                   c[(m * N + n) * I + i];
        out[(j * L + l) * N + n] = s;
      }
}

static double load(const void *p, int f32, int e) {
  return f32 ? (double)((const float *)p)[e] : ((const double *)p)[e];
}

/* One dtype: broadcast, units of this rank, allreduce, check on rank 0.
 * Returns 0 when the result matches (every rank gets rank 0's verdict). */
static int run(ein_ctx *ctx, int rank, int size, int f32) {
  static const int64_t sa[3] = {I, J, K}, sb[3] = {K, L, M}, sc[3] = {M, N, I},
                       so[3] = {J, L, N};
  const int64_t *shapes[3] = {sa, sb, sc};
  const int count[3] = {I * J * K, K * L * M, M * N * I}, nout = J * L * N;
  size_t es = f32 ? 4 : 8;
  MPI_Datatype mt = f32 ? MPI_FLOAT : MPI_DOUBLE;
  DLDataType dt = {kDLFloat, (uint8_t)(es * 8), 1};
  void *data[3], *partial = calloc(nout, es), *sum = calloc(nout, es),
                 *whole = calloc(nout, es);
  DLTensor t[3];
  const DLTensor *in[3];
  double *dd[3];
  for (int x = 0; x < 3; x++) {
    data[x] = malloc((size_t)count[x] * es);
    dd[x] = malloc(sizeof(double) * (size_t)count[x]);
    if (rank == 0) {
      unsigned s = 12345u + (unsigned)x;
      for (int e = 0; e < count[x]; e++) {
        s = s * 1103515245u + 12345u;
        double v = (double)(s >> 16 & 0x7fff) / 16384.0 - 1.0;
        if (f32) ((float *)data[x])[e] = (float)v;
        else ((double *)data[x])[e] = v;
      }
    }
    MPI_Bcast(data[x], count[x], mt, 0, MPI_COMM_WORLD); /* inputs once */
    for (int e = 0; e < count[x]; e++) dd[x][e] = load(data[x], f32, e);
    t[x] = (DLTensor){.data = data[x], .device = {kDLCPU, 0}, .ndim = 3,
                      .dtype = dt, .shape = (int64_t *)shapes[x]};
    in[x] = &t[x];
  }
  DLTensor out = {.data = partial, .device = {kDLCPU, 0}, .ndim = 3,
                  .dtype = dt, .shape = (int64_t *)so};
  ein_options o = {.slice_axes = "j:4,k:3"}; /* 12 units */
  ein_plan *plan = NULL;
  ein_status st = ein_plan_create(ctx, expr, in, 3, &out, &o, &plan);
  int64_t units = st ? 0 : ein_plan_units(plan);
  int64_t first = units * rank / size, last = units * (rank + 1) / size;
  if (!st && last > first)
    st = ein_plan_run_units(ctx, plan, in, 3, &out, first, last - first);
  if (st) fprintf(stderr, "rank %d: %s\n", rank, ein_last_error(ctx)->message);
  /* a rank with no units contributes the zeros it was given */
  MPI_Allreduce(partial, sum, nout, mt, MPI_SUM, MPI_COMM_WORLD);
  int bad = st != EIN_OK;
  if (rank == 0) {
    double *want = malloc(sizeof(double) * nout), err = 0, werr = 0, norm = 0;
    reference(dd[0], dd[1], dd[2], want);
    out.data = whole;
    bad |= ein_eval(ctx, expr, in, 3, &out, NULL) != EIN_OK;
    for (int e = 0; e < nout; e++) {
      err = fmax(err, fabs(load(sum, f32, e) - want[e]));
      werr = fmax(werr, fabs(load(whole, f32, e) - want[e]));
      norm = fmax(norm, fabs(want[e]));
    }
    double tol = f32 ? 1e-5 : 1e-12;
    bad |= !(err <= tol * norm && werr <= tol * norm);
    printf("%s: %lld units over %d ranks: error %.3g, in one piece %.3g "
           "(relative to the norm; tolerance %g) %s\n",
           f32 ? "f32" : "f64", (long long)units, size, err / norm,
           werr / norm, tol, bad ? "FAIL" : "ok");
    free(want);
  }
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  ein_plan_destroy(plan);
  for (int x = 0; x < 3; x++) free(data[x]), free(dd[x]);
  free(partial), free(sum), free(whole);
  return bad;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ein_ctx *ctx = NULL;
  int bad = ein_ctx_create(&ctx) != EIN_OK;
  if (!bad) bad = run(ctx, rank, size, 0) | run(ctx, rank, size, 1);
  ein_ctx_destroy(ctx);
  MPI_Finalize();
  return bad;
}
