/*
 * test_fork.c - einc in processes forked after the parent ran threaded
 * work (issue 25; docs/design.md, "Fork safety"). GNU libgomp's team does
 * not survive fork(): without the CPU backend's fork handler a child's
 * first OpenMP region waits forever for threads that only the parent has.
 *
 * The parent runs a GEMM large enough for OpenBLAS's threads, a batch of
 * small GEMMs the backend splits over threads of its own, a reduction and
 * a transpose (OpenMP regions), on the CPU and on the emulated device
 * (whose helper threads are started then), and opens the CUDA backend
 * (which loads the CUDA runtime even without a GPU). Then it forks
 * CHILDREN children; each runs the same cases on the inherited context
 * and on a fresh one, on the CPU and the emulated device, against the
 * naive reference; checks that it runs the CPU backend on one thread;
 * checks that asking for CUDA gives EIN_ERR_DEVICE; child 0 forks a
 * grandchild that does the same. Meanwhile the parent runs the cases
 * again with its threads. Every process is waited for with a timeout, so
 * a hang is a reported failure rather than a hung test.
 *
 * EINC_NUM_THREADS: as set (tests/meson.build runs this unset and with 2).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu_rates.h"
#include "cpu_threads.h"
#include "cuda_backend.h"
#include "ctx_internal.h"
#include "harness.h"
#include "reference.h"

/* A child that has not exited after TIMEOUT_S is taken as hung: its work
 * takes about a second, but ten times more or worse under sanitizers on a
 * loaded machine (the naive reference above all). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
enum { TIMEOUT_S = 400 };
#else
enum { TIMEOUT_S = 60 };
#endif
enum { CHILDREN = 3, MAX_FAILURES = 100 };

typedef struct fork_case {
  const char *expr;
  int n;
  int ndims[2];
  int64_t shapes[2][3];
} fork_case;

static const fork_case cases[] = {
    /* 160 x 144 x 128 multiply-adds: above OpenBLAS's threading
     * threshold (4 x 65536), so its threads start */
    {"i k, k j -> i j", 2, {2, 2}, {{160, 128}, {128, 144}}},
    /* 160 calls of 32^3: split over the backend's own threads */
    {"b i k, b k j -> b i j", 2, {3, 3}, {{160, 32, 32}, {160, 32, 32}}},
    /* the loops' OpenMP regions: a reduction and a transpose */
    {"a b -> a", 1, {2}, {{384, 1024}}},
    {"a b c -> c a b", 1, {3}, {{64, 48, 80}}},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* What the children learn from the parent before the fork. */
typedef struct parent_state {
  ein_ctx *ctx;     /* opened its CPU, emulated and CUDA backends */
  bool emu;         /* the emulated device runs kernels in this build */
  bool cuda_loaded; /* the parent loaded the CUDA runtime */
  int threads;      /* the CPU backend's, in the parent */
} parent_state;

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0 * 2 - 1;
}

static int64_t numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

static DLTensor host_tensor(double *data, int ndim, const int64_t *shape) {
  return (DLTensor){.data = data, .device = {kDLCPU, 0}, .ndim = ndim,
                    .dtype = {kDLFloat, 64, 1}, .shape = (int64_t *)shape};
}

/* |got - want| / |want| over the whole output within f64's 1e-12. */
static bool close_to(const double *got, const double *want, int64_t n) {
  double err = 0, norm = 0;
  for (int64_t i = 0; i < n; i++) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return sqrt(err) <= 1e-12 * (sqrt(norm) > 1 ? sqrt(norm) : 1);
}

/* Evaluates on the emulated device: inputs copied into its memory, the
 * output copied back into out's data. */
static ein_status eval_emu(ein_ctx *ctx, const char *expr, DLTensor *x,
                           int n, DLTensor *out) {
  DLTensor dev[3];
  const DLTensor *ptrs[2];
  void *buf[3] = {NULL, NULL, NULL};
  ein_status st = EIN_OK;
  for (int i = 0; i <= n && !st; i++) {
    DLTensor *h = i < n ? &x[i] : out;
    size_t bytes = (size_t)numel(h->ndim, h->shape) * sizeof(double);
    st = ein_device_alloc(ctx, EIN_BACKEND_EMU, 0, bytes, &buf[i]);
    if (!st)
      st = ein_device_copy(ctx, EIN_BACKEND_EMU, 0, buf[i], h->data, bytes,
                           EIN_COPY_HOST_TO_DEVICE);
    dev[i] = *h;
    dev[i].data = buf[i];
    dev[i].device = ein_backend_dl_device(EIN_BACKEND_EMU, 0);
    if (i < n) ptrs[i] = &dev[i];
  }
  if (!st) st = ein_eval(ctx, expr, ptrs, n, &dev[n], NULL);
  if (!st)
    st = ein_device_copy(ctx, EIN_BACKEND_EMU, 0, out->data, buf[n],
                         (size_t)numel(out->ndim, out->shape) * sizeof(double),
                         EIN_COPY_DEVICE_TO_HOST);
  for (int i = 0; i <= n; i++) ein_device_free(ctx, EIN_BACKEND_EMU, 0, buf[i]);
  return st;
}

/* Case c on `kind` with fresh random inputs against the reference; 0 or
 * 1 failure (reported on stderr, naming the process). */
static int run_case(ein_ctx *ctx, ein_backend_kind kind, const fork_case *c,
                    const char *who) {
  double *in[2] = {NULL, NULL}, *out = NULL, *want = NULL;
  DLTensor x[2];
  const DLTensor *xs[2];
  const int64_t *shp[2];
  for (int i = 0; i < c->n; i++) {
    int64_t ne = numel(c->ndims[i], c->shapes[i]);
    in[i] = malloc((size_t)ne * sizeof(double));
    for (int64_t e = 0; e < ne; e++) in[i][e] = uniform();
    x[i] = host_tensor(in[i], c->ndims[i], c->shapes[i]);
    xs[i] = &x[i];
    shp[i] = c->shapes[i];
  }
  ein_binding *b = NULL;
  ein_status st = ein_bind_shapes(ctx, c->expr, shp, c->ndims, c->n, NULL, &b);
  int failed = 0;
  if (!st) {
    int ond = ein_binding_output_ndim(b);
    const int64_t *oshape = ein_binding_output_shape(b);
    int64_t on = numel(ond, oshape);
    out = malloc((size_t)on * sizeof(double));
    want = malloc((size_t)on * sizeof(double));
    ref_eval(ein_binding_problem(b), xs, want, on);
    DLTensor o = host_tensor(out, ond, oshape);
    st = kind == EIN_BACKEND_EMU ? eval_emu(ctx, c->expr, x, c->n, &o)
                                 : ein_eval(ctx, c->expr, xs, c->n, &o, NULL);
    failed = !st && !close_to(out, want, on);
  }
  if (st || failed)
    fprintf(stderr, "FAIL %s: %s on %s: %s\n", who, c->expr,
            ein_backend_name(kind),
            st ? ein_last_error(ctx)->message : "wrong result");
  ein_binding_destroy(b);
  free(in[0]), free(in[1]), free(out), free(want);
  return st || failed;
}

static int run_cases(ein_ctx *ctx, ein_backend_kind kind, const char *who) {
  int failures = 0;
  for (int i = 0; i < NCASES; i++) failures += run_case(ctx, kind, &cases[i], who);
  return failures;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 0 when pid exits with status 0 before `deadline` (now_s's clock); else
 * 1, and a pid still running then is killed (a hang is a failure, not a
 * hung test). */
static int wait_child(pid_t pid, double deadline, const char *who) {
  struct timespec tick = {0, 10 * 1000 * 1000};
  int status = 0;
  while (now_s() < deadline) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
      if (WIFEXITED(status))
        fprintf(stderr, "FAIL %s: %d failures\n", who, WEXITSTATUS(status));
      else
        fprintf(stderr, "FAIL %s: killed by signal %d\n", who,
                WTERMSIG(status));
      return 1;
    }
    if (r < 0 && errno != EINTR) {
      fprintf(stderr, "FAIL %s: waitpid: %s\n", who, strerror(errno));
      return 1;
    }
    nanosleep(&tick, NULL);
  }
  fprintf(stderr, "FAIL %s: still running after %d s (hung), killed\n", who,
          TIMEOUT_S);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return 1;
}

/* CUDA in a forked child: EIN_ERR_DEVICE, saying why when the parent had
 * loaded the CUDA runtime (never a hang or a crash). */
static int check_cuda(ein_ctx *ctx, const parent_state *ps, const char *who) {
  ein_status st = ein_backend_check(ctx, EIN_BACKEND_CUDA, 0);
  const char *msg = ein_last_error(ctx)->message;
  bool ok = st == EIN_ERR_DEVICE &&
            (!ps->cuda_loaded || strstr(msg, "fork") != NULL);
  if (!ok)
    fprintf(stderr, "FAIL %s: CUDA: want EIN_ERR_DEVICE%s, got %s: %s\n",
            who, ps->cuda_loaded ? " naming fork()" : "",
            ein_status_name(st), msg);
  return !ok;
}

static int child_work(const parent_state *ps, const char *who);

/* Forks a process that runs child_work and exits with its failures. */
static pid_t spawn(const parent_state *ps, const char *who) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int failures = child_work(ps, who);
    _exit(failures > MAX_FAILURES ? MAX_FAILURES : failures);
  }
  if (pid < 0) fprintf(stderr, "FAIL %s: fork: %s\n", who, strerror(errno));
  return pid;
}

/* What a forked child does; child 0 forks a grandchild as well. */
static int child_work(const parent_state *ps, const char *who) {
  /* Each child its own data, the same in every run (seeded by its name,
   * not its pid: CI must be deterministic). */
  for (const char *c = who; *c; c++)
    rng = (rng ^ (uint64_t)(unsigned char)*c) * 0x100000001B3ull;
  int failures = run_cases(ps->ctx, EIN_BACKEND_CPU, who);
  /* One thread, for a context opened before the fork too. */
  int now = ein_cpu_threads_now(ps->threads);
  if (ein_cpu_threads() != 1 || now != 1) {
    fprintf(stderr, "FAIL %s: the CPU backend's threads in a forked child "
            "are %d (%d for a context opened before), not 1\n", who,
            ein_cpu_threads(), now);
    failures++;
  }
  ein_ctx *fresh;
  if (ein_ctx_create(&fresh) != EIN_OK) return failures + 1;
  failures += run_cases(fresh, EIN_BACKEND_CPU, who);
  if (ps->emu) {
    failures += run_cases(ps->ctx, EIN_BACKEND_EMU, who);
    failures += run_cases(fresh, EIN_BACKEND_EMU, who);
  }
  failures += check_cuda(fresh, ps, who);
  ein_ctx_destroy(fresh);
  if (strcmp(who, "child 0") == 0) {
    pid_t g = spawn(ps, "grandchild");
    failures += g < 0 || wait_child(g, now_s() + TIMEOUT_S, "grandchild");
  }
  return failures;
}

/* A team of the process's libgomp that einc did not start (torch's, say,
 * which shares it), then a child whose first einc call runs the cases:
 * einc ran nothing in the parent yet. 0 or 1 failure. */
static int foreign_team_child(void) {
  int ran = 1;
#ifdef _OPENMP
#pragma omp parallel num_threads(2)
  {
#pragma omp atomic
    ran++;
  }
#endif
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    ein_ctx *ctx;
    int failures = ein_ctx_create(&ctx) != EIN_OK;
    if (!failures) failures = run_cases(ctx, EIN_BACKEND_CPU, "child of a "
                                        "foreign team");
    if (!failures) ein_ctx_destroy(ctx);
    _exit(failures);
  }
  printf("a foreign OpenMP team of %d threads before the first fork\n",
         ran - 1);
  return pid < 0 || wait_child(pid, now_s() + TIMEOUT_S,
                               "child of a foreign team");
}

/* The parent's threaded work before the fork; fills ps. */
static void parent_work(parent_state *ps) {
  REQUIRE_OK(ein_ctx_create(&ps->ctx));
  ps->threads = ein_cpu_threads();
  CHECK(run_cases(ps->ctx, EIN_BACKEND_CPU, "parent") == 0, "parent, CPU");
  int failures = 0;
  for (int i = 0; i < NCASES && !failures; i++)
    failures += run_case(ps->ctx, EIN_BACKEND_EMU, &cases[i], "parent");
  /* Kernels do not run under ThreadSanitizer: the children skip them. */
  ps->emu = failures == 0;
  CHECK(ps->emu || strstr(ein_last_error(ps->ctx)->message,
                          "ThreadSanitizer"),
        "parent, emulated device: %s", ein_last_error(ps->ctx)->message);
  ein_status st = ein_backend_check(ps->ctx, EIN_BACKEND_CUDA, 0);
  ps->cuda_loaded = st == EIN_OK || !strstr(ein_last_error(ps->ctx)->message,
                                           "could not be loaded");
  ps->cuda_loaded = ps->cuda_loaded && ein_cuda_built();
  printf("parent: %d CPU threads, emulated device %s, CUDA runtime %s "
         "(%s)\n",
         ein_cpu_threads(), ps->emu ? "runs" : "skipped",
         ps->cuda_loaded ? "loaded" : "not loaded", ein_status_name(st));
}

int main(void) {
  CHECK(foreign_team_child() == 0, "a child after a foreign OpenMP team");
  parent_state ps;
  parent_work(&ps);
  pid_t kids[CHILDREN];
  char names[CHILDREN][32];
  for (int i = 0; i < CHILDREN; i++) {
    snprintf(names[i], sizeof names[i], "child %d", i);
    kids[i] = spawn(&ps, names[i]);
  }
  /* The parent keeps its threads and its results. */
  CHECK(run_cases(ps.ctx, EIN_BACKEND_CPU, "parent after fork") == 0,
        "parent after fork");
  CHECK(ein_cpu_threads_now(ein_cpu_threads()) == ps.threads,
        "parent's threads %d, were %d", ein_cpu_threads_now(ein_cpu_threads()),
        ps.threads);
  /* One deadline for all: hung children time out together. Child 0
   * waits for its grandchild up to the same limit, so it gets twice. */
  double deadline = now_s() + TIMEOUT_S;
  for (int i = 0; i < CHILDREN; i++)
    CHECK(kids[i] > 0 &&
              wait_child(kids[i], deadline + (i == 0 ? TIMEOUT_S : 0),
                         names[i]) == 0,
          "%s (and its grandchild for child 0): see above", names[i]);
  ein_ctx_destroy(ps.ctx);
  return test_summary("fork");
}
