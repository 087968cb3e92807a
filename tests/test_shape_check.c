/* test_shape_check.c - the jaxtyping-style memo: binding, checking, runs,
 * broadcastable dims, expressions, groups, transactional failure, messages
 * that name the earlier tensor. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ein.h"

static ein_status chk(ein_shape_memo *m, const char *spec, int nd,
                      const int64_t *shape) {
  return ein_shape_check_dims(m, spec, nd, shape, NULL, NULL, 0);
}

/* Runs EIN_SHAPE_ASSERT(spec) on a tensor of `shape` after binding `bind`
 * in a child process; *sig is the signal that ended it (0: a normal exit)
 * and err[] what it wrote to stderr. */
static void assert_in_child(const char *bind, const char *spec, int nd,
                            int64_t *shape, int *sig, char *err, size_t cap) {
  int fds[2];
  *sig = -1;
  err[0] = '\0';
  if (pipe(fds) != 0) return;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    ein_shape_memo *m;
    REQUIRE_OK(ein_shape_memo_create(&m));
    DLTensor t = {.ndim = nd, .shape = shape};
    if (bind) REQUIRE_OK(EIN_SHAPE_CHECK(m, bind, &t));
    EIN_SHAPE_ASSERT(m, spec, &t);
    _exit(0);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < cap && (r = read(fds[0], err + n, cap - 1 - n)) > 0)
    n += (size_t)r;
  err[n] = '\0';
  close(fds[0]);
  int status;
  if (waitpid(pid, &status, 0) == pid)
    *sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/* EIN_SHAPE_ASSERT passes silently, and aborts with the caret message on
 * an ambiguous split and on a mismatch. */
static void test_shape_assert(void) {
  int64_t shape[3] = {2, 10, 512};
  char err[2048];
  int sig;
  assert_in_child(NULL, "batch seq (heads 8)", 3, shape, &sig, err,
                  sizeof err);
  CHECK(sig == 0 && err[0] == '\0', "a pass: signal %d, stderr '%s'", sig,
        err);
  assert_in_child(NULL, "batch seq (heads d)", 3, shape, &sig, err,
                  sizeof err);
  CHECK(sig == SIGABRT, "an ambiguous split aborts: signal %d", sig);
  CHECK(strncmp(err, "error: ", 7) == 0 &&
            strstr(err, "\n  batch seq (heads d)\n") != NULL,
        "the caret message on stderr: '%s'", err);
  assert_in_child("a b c", "a b 7", 3, shape, &sig, err, sizeof err);
  CHECK(sig == SIGABRT && strstr(err, "a b 7\n      ^") != NULL,
        "a mismatch aborts with a caret: signal %d, '%s'", sig, err);
}

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define N(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define OK(m, spec, ...)                                                      \
  CHECK(chk(m, spec, N(__VA_ARGS__), S(__VA_ARGS__)) == EIN_OK,               \
        "'%s' should pass: %s", spec, ein_shape_memo_error(m)->message)
#define BAD(m, spec, want, ...)                                               \
  CHECK(chk(m, spec, N(__VA_ARGS__), S(__VA_ARGS__)) == (want),               \
        "'%s' should fail with %d: got %d %s", spec, want,                    \
        ein_shape_memo_error(m)->status, ein_shape_memo_error(m)->message)

int main(void) {
  ein_shape_memo *m;
  CHECK(ein_shape_memo_create(&m) == EIN_OK, "create");

  /* names bind on first sight and are checked afterwards */
  /* a group with two unknown factors cannot be checked: an error */
  BAD(m, "batch seq (heads d)", EIN_ERR_AMBIGUOUS_SPLIT, 2, 10, 512);
  CHECK(ein_shape_memo_size(m, "batch") == -1, "nothing bound on failure");
  OK(m, "batch heads seq d", 2, 8, 10, 64);
  CHECK(ein_shape_memo_size(m, "batch") == 2, "batch bound");
  OK(m, "batch seq (heads d)", 2, 10, 512); /* now checked */
  BAD(m, "batch seq (heads d)", EIN_ERR_SIZE_MISMATCH, 2, 10, 256);
  BAD(m, "batch heads seq d", EIN_ERR_SIZE_MISMATCH, 2, 16, 10, 64);
  BAD(m, "batch seq", EIN_ERR_RANK_MISMATCH, 2, 10, 1);
  /* a failed check binds nothing */
  BAD(m, "fresh batch", EIN_ERR_SIZE_MISMATCH, 7, 3);
  CHECK(ein_shape_memo_size(m, "fresh") == -1, "failed check left no binding");
  OK(m, "fresh batch", 7, 2);
  CHECK(ein_shape_memo_size(m, "fresh") == 7, "fresh bound");

  /* fixed sizes, wildcards, units */
  OK(m, "3 _ batch", 3, 99, 2);
  BAD(m, "3 _ batch", EIN_ERR_SIZE_MISMATCH, 4, 99, 2);
  CHECK(chk(m, "", 0, NULL) == EIN_OK, "scalar spec");
  CHECK(chk(m, "_", 0, NULL) == EIN_ERR_RANK_MISMATCH, "scalar vs one dim");

  /* runs: *name and ... bind tuples */
  ein_shape_memo_clear(m);
  OK(m, "*lead n", 2, 3, 4);
  OK(m, "*lead n n", 2, 3, 4, 4);
  BAD(m, "*lead n", EIN_ERR_SIZE_MISMATCH, 2, 5, 4);
  BAD(m, "*lead n", EIN_ERR_RANK_MISMATCH, 3, 4);
  OK(m, "... x", 9, 1);
  OK(m, "... y", 9, 5);
  BAD(m, "... x", EIN_ERR_RANK_MISMATCH, 1);
  OK(m, "*_ n", 4);
  OK(m, "*_ n", 1, 2, 3, 4);
  OK(m, "*#lead z", 1, 3, 0);
  BAD(m, "*#lead z", EIN_ERR_SIZE_MISMATCH, 2, 2, 0);
  BAD(m, "lead", EIN_ERR_SIZE_MISMATCH, 2);
  BAD(m, "*n", EIN_ERR_SIZE_MISMATCH, 4);

  /* broadcastable dims */
  ein_shape_memo_clear(m);
  OK(m, "#c h", 1, 5);
  CHECK(ein_shape_memo_size(m, "c") == -1, "#c with 1 does not bind");
  OK(m, "#c h", 3, 5);
  OK(m, "#c h", 1, 5);
  OK(m, "c h", 3, 5);
  BAD(m, "#c h", EIN_ERR_SIZE_MISMATCH, 2, 5);

  /* size expressions */
  ein_shape_memo_clear(m);
  OK(m, "n h", 4, 8);
  OK(m, "n+1 2*h h-1 n*h+n", 5, 16, 7, 36);
  BAD(m, "n+1", EIN_ERR_SIZE_MISMATCH, 4);
  BAD(m, "k+1", EIN_ERR_UNKNOWN_AXIS, 4);
  OK(m, "k k+1", 3, 4); /* bound earlier in the same spec */
  OK(m, "k+1 k", 4, 3); /* order inside a spec does not matter */
  BAD(m, "9223372036854775807+1", EIN_ERR_OVERFLOW, 1);

  /* groups: products, one unknown solved by exact division */
  ein_shape_memo_clear(m);
  OK(m, "(h 2) w", 8, 3);
  CHECK(ein_shape_memo_size(m, "h") == 4, "h solved from (h 2)");
  OK(m, "(h w)", 12);
  BAD(m, "(h w)", EIN_ERR_SIZE_MISMATCH, 13);
  BAD(m, "(p q)", EIN_ERR_AMBIGUOUS_SPLIT, 12);
  BAD(m, "(p 5)", EIN_ERR_INDIVISIBLE, 12);
  OK(m, "(p h) p", 8, 2);
  OK(m, "(h+1 2)", 10);
  OK(m, "()", 1);

  /* spec syntax errors come back with their place */
  BAD(m, "a (b", EIN_ERR_SYNTAX, 1, 2);
  BAD(m, "n + 1", EIN_ERR_SYNTAX, 1, 2, 3);
  BAD(m, "*a *b", EIN_ERR_BAD_ELLIPSIS, 1, 2);

  /* messages name the axis, both sizes and who bound it */
  ein_shape_memo_clear(m);
  int64_t xs[3] = {2, 10, 512}, qs[4] = {2, 16, 10, 64};
  DLTensor x = {.ndim = 3, .shape = xs}, q = {.ndim = 4, .shape = qs};
  CHECK(ein_shape_check_tensor(m, "batch seq", &x, "x", "model.c", 12) ==
            EIN_ERR_RANK_MISMATCH,
        "rank");
  CHECK(ein_shape_check_tensor(m, "batch seq _", &x, "x", "model.c", 12) ==
            EIN_OK,
        "x binds batch and seq");
  CHECK(ein_shape_check_tensor(m, "batch heads seq d", &q, "q", "model.c",
                               20) == EIN_OK,
        "q binds heads=16 d=64: %s", ein_shape_memo_error(m)->message);
  /* heads*d = 1024 != 512: the group check fails on x */
  int line = __LINE__ + 1;
  ein_status st = EIN_SHAPE_CHECK(m, "batch seq (heads d)", &x);
  CHECK(st == EIN_ERR_SIZE_MISMATCH, "macro check");
  const ein_error *e = ein_shape_memo_error(m);
  char want[512];
  snprintf(want, sizeof want,
           "dim 2 is 512 but the group is 1024 ['&x', shape (2, 10, 512), "
           "at %s:%d]",
           __FILE__, line);
  CHECK_STR(e->message, want, "group mismatch message");
  CHECK(e->nspans == 1 && e->spans[0].offset == 10 &&
            e->spans[0].length == 9,
        "span on the group: %zu+%zu", e->spans[0].offset,
        e->spans[0].length);
  int64_t ys[2] = {3, 10};
  DLTensor y = {.ndim = 2, .shape = ys};
  CHECK(ein_shape_check_tensor(m, "batch seq", &y, "y", "model.c", 30) ==
            EIN_ERR_SIZE_MISMATCH,
        "y mismatch");
  CHECK_STR(ein_shape_memo_error(m)->message,
            "axis 'batch' is 3 at dim 0 but 2 as bound by 'x' at model.c:12 "
            "['y', shape (3, 10), at model.c:30]",
            "names the earlier tensor");
  char out[1024];
  ein_error_format(ein_shape_memo_error(m), out, sizeof out);
  CHECK(strstr(out, "  batch seq\n  ^~~~~\n") != NULL, "caret: %s", out);

  /* invalid arguments */
  CHECK(ein_shape_check_dims(NULL, "a", 0, NULL, NULL, NULL, 0) ==
            EIN_ERR_INVALID_ARGUMENT,
        "NULL memo");
  CHECK(chk(m, NULL, 0, NULL) == EIN_ERR_INVALID_ARGUMENT, "NULL spec");
  CHECK(chk(m, "a", 1, NULL) == EIN_ERR_INVALID_ARGUMENT, "NULL shape");
  CHECK(chk(m, "a", -1, S(1)) == EIN_ERR_INVALID_ARGUMENT, "negative rank");
  BAD(m, "a", EIN_ERR_BAD_SHAPE, -4);
  CHECK(ein_shape_check_tensor(m, "a", NULL, NULL, NULL, 0) ==
            EIN_ERR_INVALID_ARGUMENT,
        "NULL tensor");
  ein_shape_memo_destroy(m);
  ein_shape_memo_destroy(NULL);
  test_shape_assert();
  return test_summary("shape_check");
}
