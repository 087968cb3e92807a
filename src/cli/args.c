/* args.c - shared command-line parsing for einc; see args.h. */
#include "args.h"

#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

void cli_errorf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("einc: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void cli_print_error(const ein_error *err) {
  char small[1024];
  size_t need = ein_error_format(err, small, sizeof small);
  if (need < sizeof small) {
    fprintf(stderr, "einc: %s", small);
    return;
  }
  char *big = malloc(need + 1);
  if (!big) {
    fprintf(stderr, "einc: %s", small);
    return;
  }
  ein_error_format(err, big, need + 1);
  fprintf(stderr, "einc: %s", big);
  free(big);
}

void cli_numpy_hint(ein_status status, const char *expr,
                    const DLTensor *const *ins, int n, const ein_options *o) {
  if (o->dialect != EIN_DIALECT_EINOPS || cli_exit_status(status) != EXIT_INVALID)
    return;
  ein_options numpy = *o;
  numpy.dialect = EIN_DIALECT_NUMPY;
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) return; /* a hint is optional */
  ein_binding *b = NULL;
  /* only where the dialect is to blame: the einops binding fails (not a
   * later step, such as a memory limit) and the numpy one does not */
  if (ein_bind(ctx, expr, ins, n, o, &b) == EIN_OK) {
    ein_binding_destroy(b);
  } else if (ein_bind(ctx, expr, ins, n, &numpy, &b) == EIN_OK) {
    fputs("einc: hint: the expression is valid in the numpy dialect (one "
          "letter per axis): did you mean --numpy?\n",
          stderr);
    ein_binding_destroy(b);
  }
  ein_ctx_destroy(ctx);
}

int cli_exit_status(ein_status status) {
  switch (status) {
  case EIN_OK: return EXIT_OK;
  /* what the machine failed at, not what the user wrote */
  case EIN_ERR_NO_MEMORY:
  case EIN_ERR_DEVICE_MEMORY:
  case EIN_ERR_DEVICE:
  case EIN_ERR_BACKEND:
  case EIN_ERR_INTERNAL: return EXIT_INTERNAL;
  default: return EXIT_INVALID;
  }
}

/* Parses a non-negative decimal int64 filling all of [s, end). */
static bool parse_size(const char *s, size_t len, int64_t *out) {
  if (len == 0 || len > 19) return false;
  int64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    if (__builtin_mul_overflow(v, 10, &v) ||
        __builtin_add_overflow(v, s[i] - '0', &v))
      return false;
  }
  *out = v;
  return true;
}

bool cli_parse_shape(const char *text, cli_shape *out) {
  out->ndim = 0;
  out->dtype = EIN_DT_F32;
  if (strcmp(text, "scalar") == 0) return true;
  const char *p = text;
  for (;;) {
    const char *x = strchr(p, 'x');
    size_t len = x ? (size_t)(x - p) : strlen(p);
    if (out->ndim == EIN_MAX_DIMS) {
      cli_errorf("shape '%.80s' has more than %d dims", text, EIN_MAX_DIMS);
      return false;
    }
    if (!parse_size(p, len, &out->dims[out->ndim])) {
      cli_errorf("bad shape '%.80s': expected sizes of 0 or more (at most "
                 "9223372036854775807) separated by 'x', like 8x16x2048, or "
                 "'scalar' for a 0-d tensor",
                 text);
      return false;
    }
    out->ndim++;
    if (!x) return true;
    p = x + 1;
  }
}

/* "NAME=SIZE" into a length binding (name points into argv). */
static bool parse_length(const char *text, ein_length *out) {
  const char *eq = strchr(text, '=');
  if (!eq || eq == text) {
    cli_errorf("bad length binding '%.80s': expected NAME=SIZE, like r=4",
               text);
    return false;
  }
  if (!parse_size(eq + 1, strlen(eq + 1), &out->size)) {
    cli_errorf("bad length binding '%.80s': the size must be an integer of "
               "0 or more",
               text);
    return false;
  }
  /* the name must be NUL-terminated for the library: cut at '=' in place */
  *(char *)eq = '\0';
  out->name = text;
  return true;
}

/* The value of an option that takes one, from "--opt=value", "-Dvalue" or
 * the next argument. */
static const char *option_value(int argc, char **argv, int *i,
                                const char *opt) {
  const char *arg = argv[*i];
  size_t n = strlen(opt);
  if (arg[n] == '=') return arg + n + 1;
  if (arg[n] != '\0' && opt[1] != '-') return arg + n; /* -Dh=8 */
  if (*i + 1 >= argc) {
    cli_errorf("option %s needs a value", opt);
    return NULL;
  }
  return argv[++*i];
}

static bool has_prefix_option(const char *arg, const char *opt) {
  size_t n = strlen(opt);
  if (strncmp(arg, opt, n) != 0) return false;
  return arg[n] == '\0' || arg[n] == '=' || (opt[1] != '-');
}

/* --memory-limit's value: bytes, with an optional K, M, G or T (powers
 * of 1024), or "free" (EIN_MEMORY_FREE). False with the message said. */
static bool parse_memory_limit(const char *v, int64_t *out) {
  if (strcmp(v, "free") == 0) {
    *out = EIN_MEMORY_FREE;
    return true;
  }
  static const char units[] = "KMGT";
  errno = 0;
  char *end;
  long long b = strtoll(v, &end, 10);
  const char *unit = *end ? strchr(units, *end) : NULL;
  int shift = unit ? 10 * (int)(unit - units + 1) : 0;
  if (unit) end++;
  if (end != v && !*end && !errno && b >= 0 && *v != '-' &&
      b <= (INT64_MAX >> shift)) {
    *out = (int64_t)b << shift;
    return true;
  }
  cli_errorf("--memory-limit takes a byte count (4096, 512M, 2G) or 'free' "
             "(the device's free memory), not '%.40s'", v);
  return false;
}

/* --plan-time S, --seed N, --objective O: the path search's options.
 * 1: consumed, 0: not one of them, -1: a bad value (said on stderr). */
static int search_option(int argc, char **argv, int *i, ein_options *o) {
  const char *arg = argv[*i];
  const char *names[3] = {"--plan-time", "--seed", "--objective"};
  int which = 0;
  while (which < 3 && !has_prefix_option(arg, names[which])) which++;
  if (which == 3) return 0;
  const char *v = option_value(argc, argv, i, names[which]);
  if (!v) return -1;
  char *end = NULL;
  if (which == 0) {
    double t = strtod(v, &end);
    if (end != v && !*end && t >= 0 && !isinf(t)) {
      o->plan_time = t;
      return 1;
    }
    cli_errorf("--plan-time takes seconds (0 or more, e.g. 0.5), not '%.40s'",
               v);
  } else if (which == 1) {
    errno = 0;
    unsigned long long s = strtoull(v, &end, 10);
    if (end != v && !*end && !errno && *v != '-') {
      o->seed = (uint64_t)s;
      return 1;
    }
    cli_errorf("--seed takes a whole number from 0 to 2^64-1, not '%.40s'",
               v);
  } else {
    if (ein_objective_parse(v, &o->objective) == EIN_OK) return 1;
    cli_errorf("unknown objective '%.40s': expected flops, size or combo", v);
  }
  return -1;
}

int cli_common_option(int argc, char **argv, int *i, cli_common *common) {
  const char *arg = argv[*i];
  if (strcmp(arg, "--numpy") == 0) {
    common->options.dialect = EIN_DIALECT_NUMPY;
    return 1;
  }
  if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
    common->verbose = true;
    return 1;
  }
  if (has_prefix_option(arg, "-D")) {
    const char *v = option_value(argc, argv, i, "-D");
    if (!v) return -1;
    if (common->options.nlengths == CLI_MAX_LENGTHS) {
      cli_errorf("more than %d length bindings", CLI_MAX_LENGTHS);
      return -1;
    }
    if (!parse_length(v, &common->lengths[common->options.nlengths]))
      return -1;
    common->options.nlengths++;
    common->options.lengths = common->lengths;
    return 1;
  }
  if (common->takes_path && has_prefix_option(arg, "--path")) {
    /* checked by the planner, which knows the operand count */
    common->options.path = option_value(argc, argv, i, "--path");
    return common->options.path ? 1 : -1;
  }
  if (common->takes_path) {
    int r = search_option(argc, argv, i, &common->options);
    if (r) return r;
  }
  if (common->takes_path && has_prefix_option(arg, "--memory-limit")) {
    const char *v = option_value(argc, argv, i, "--memory-limit");
    return v && parse_memory_limit(v, &common->options.memory_limit) ? 1 : -1;
  }
  if (common->takes_path && has_prefix_option(arg, "--slice")) {
    /* names checked by the planner, which knows the axes */
    common->options.slice_axes = option_value(argc, argv, i, "--slice");
    return common->options.slice_axes ? 1 : -1;
  }
  if (has_prefix_option(arg, "--reduce")) {
    const char *v = option_value(argc, argv, i, "--reduce");
    if (!v) return -1;
    if (ein_reduction_parse(v, &common->options.reduction) != EIN_OK) {
      cli_errorf("unknown reduction '%.40s': expected sum, mean, max, min, "
                 "prod, any or all",
                 v);
      return -1;
    }
    return 1;
  }
  return 0;
}

/* "--name=value": a long option glued to its value, whatever the value
 * holds (--path's pairs hold ','). No expression starts that way. */
static bool glued_long_option(const char *arg) {
  if (strncmp(arg, "--", 2) != 0) return false;
  const char *p = arg + 2;
  while ((*p >= 'a' && *p <= 'z') || *p == '-') p++;
  return p > arg + 2 && *p == '=';
}

/* An argument that starts with '-' is an option, unless it holds "->" or ','
 * and so can only be an expression ('-> a', '-a, b'): no option name has
 * either, and only a glued value may. */
static bool looks_like_option(const char *arg) {
  if (glued_long_option(arg)) return true;
  return arg[0] == '-' && arg[1] != '\0' && !strstr(arg, "->") &&
         !strchr(arg, ',');
}

int cli_parse_args(int argc, char **argv, const char *command,
                   void (*help)(void), cli_common *common, cli_option_fn extra,
                   void *state, const char **pos, int maxpos, int *npos) {
  bool options_done = false;
  *npos = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (!options_done && looks_like_option(arg)) {
      if (strcmp(arg, "--") == 0) {
        options_done = true;
        continue;
      }
      if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
        help();
        return CLI_ARGS_HELP;
      }
      int r = extra ? extra(argc, argv, &i, state) : 0;
      if (r == 0) r = cli_common_option(argc, argv, &i, common);
      if (r < 0) return CLI_ARGS_ERROR;
      if (r > 0) continue;
      cli_errorf("unknown option '%.80s' for %s (see einc %s --help)", arg,
                 command, command);
      return CLI_ARGS_ERROR;
    }
    if (*npos == maxpos) {
      cli_errorf("too many arguments for %s: einc %s takes at most %d "
                 "operands as arguments; `einc plan --input FILE` reads a "
                 "network of up to %d from a file, and the C and Python "
                 "APIs evaluate as many",
                 command, command, maxpos - 1, EIN_MAX_OPERANDS);
      return CLI_ARGS_ERROR;
    }
    pos[(*npos)++] = arg;
  }
  return CLI_ARGS_OK;
}

/* The shape and dtype in the header of the .npy file at path. */
static int npy_shape(const char *path, cli_shape *out) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    cli_errorf("cannot open '%.200s': %s", path, strerror(errno));
    return EXIT_INTERNAL;
  }
  char msg[1024];
  bool ok = npy_read_header(f, path, &out->dtype, &out->ndim, out->dims, msg,
                            sizeof msg);
  fclose(f);
  if (ok) return EXIT_OK;
  cli_errorf("%s", msg);
  return EXIT_INVALID;
}

static bool is_npy_path(const char *arg) {
  size_t n = strlen(arg);
  return n > 4 && strcmp(arg + n - 4, ".npy") == 0;
}

int cli_expr_and_shapes(const char *command, const char *const *pos, int npos,
                        cli_shape *shapes, int *nshapes) {
  if (npos == 0) {
    cli_errorf("%s needs an expression (see einc %s --help)", command,
               command);
    return EXIT_INVALID;
  }
  *nshapes = npos - 1;
  for (int i = 0; i < *nshapes; i++) {
    const char *arg = pos[i + 1];
    int rc = is_npy_path(arg) ? npy_shape(arg, &shapes[i])
             : cli_parse_shape(arg, &shapes[i]) ? EXIT_OK
                                                : EXIT_INVALID;
    if (rc != EXIT_OK) return rc;
  }
  return EXIT_OK;
}

void cli_shapes_set_dtype(cli_shape *shapes, int n, ein_dtype dt) {
  for (int i = 0; i < n; i++) shapes[i].dtype = dt;
}

bool cli_parse_backend(const char *v, ein_backend_kind *out) {
  if (ein_backend_parse(v, out) == EIN_OK) return true;
  cli_errorf("unknown backend '%.40s' (auto, cpu, cuda, emu)", v);
  return false;
}

bool cli_parse_dtype(const char *v, ein_dtype *out) {
  if (ein_dtype_parse(v, out)) return true;
  cli_errorf("unknown dtype '%.40s' (f32, f64, f16, bf16, c64, c128, "
             "i8..i64, u8..u64, bool, float8_e4m3fn, float8_e5m2)",
             v);
  return false;
}

bool cli_is_option(const char *arg, const char *name) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0) return false;
  /* only long options glue their value with '=': "-o=x" names "=x" */
  return arg[n] == '\0' || (arg[n] == '=' && name[1] == '-');
}

const char *cli_option_value(int argc, char **argv, int *i) {
  const char *arg = argv[*i];
  const char *eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
  if (eq) return eq + 1;
  if (*i + 1 >= argc) {
    cli_errorf("%s needs a value", arg);
    return NULL;
  }
  return argv[++*i];
}

void cli_shape_tensors(const cli_shape *shapes, int n, DLDeviceType device,
                       DLTensor *tensors, const DLTensor **ptrs) {
  for (int i = 0; i < n; i++) {
    memset(&tensors[i], 0, sizeof tensors[i]);
    tensors[i].device = (DLDevice){device, 0};
    tensors[i].ndim = shapes[i].ndim;
    tensors[i].shape = (int64_t *)shapes[i].dims;
    tensors[i].dtype = ein_dtype_to_dl(shapes[i].dtype);
    ptrs[i] = &tensors[i];
  }
}

int cli_plan_shapes(const char *expr, const cli_shape *shapes, int n,
                    DLDeviceType device, const ein_options *o, ein_ctx **ctx,
                    ein_plan **plan) {
  if (ein_ctx_create(ctx) != EIN_OK) {
    cli_errorf("out of memory");
    return EXIT_INTERNAL;
  }
  DLTensor *tensors = malloc(((size_t)n + 1) * sizeof *tensors);
  const DLTensor **ins = malloc(((size_t)n + 1) * sizeof *ins);
  ein_status st = EIN_ERR_NO_MEMORY;
  if (tensors && ins) {
    cli_shape_tensors(shapes, n, device, tensors, ins);
    st = ein_plan_create(*ctx, expr, ins, n, NULL, o, plan);
    if (st) {
      cli_print_error(ein_last_error(*ctx));
      cli_numpy_hint(st, expr, ins, n, o);
    }
  } else {
    cli_errorf("out of memory");
  }
  free(tensors);
  free(ins);
  if (!st) return EXIT_OK;
  ein_ctx_destroy(*ctx);
  *ctx = NULL;
  return cli_exit_status(st);
}

/* The whole of a file, or of standard input for "-", NUL-terminated. */
static char *read_all(const char *path) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) return NULL;
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  while (buf) {
    len += fread(buf + len, 1, cap - 1 - len, f);
    if (len < cap - 1) break;
    char *grown = realloc(buf, cap * 2);
    if (!grown) free(buf);
    buf = grown;
    cap *= 2;
  }
  bool failed = ferror(f);
  if (f != stdin) fclose(f);
  if (!buf || failed) {
    free(buf);
    return NULL;
  }
  buf[len] = '\0';
  return buf;
}

/* Splits text into its lines in place, skipping blank ones and comments
 * ('#' first), with the surrounding spaces trimmed; returns their count,
 * the pointers in pos (room for as many as text has lines). */
static int input_lines(char *text, const char **pos) {
  int n = 0;
  for (char *line = text; line;) {
    char *next = strchr(line, '\n');
    if (next) *next++ = '\0';
    while (*line == ' ' || *line == '\t') line++;
    size_t len = strlen(line);
    while (len && strchr(" \t\r", line[len - 1])) line[--len] = '\0';
    if (*line && *line != '#') pos[n++] = line;
    line = next;
  }
  return n;
}

int cli_read_input(const char *path, char **text, const char ***pos,
                   int *npos) {
  *pos = NULL;
  *text = read_all(path);
  if (!*text) {
    cli_errorf("cannot read --input '%.200s'", path);
    return EXIT_INTERNAL;
  }
  size_t lines = 1;
  for (const char *c = *text; *c; c++) lines += *c == '\n';
  *pos = malloc(lines * sizeof **pos);
  if (!*pos) {
    cli_errorf("out of memory");
    return EXIT_INTERNAL;
  }
  *npos = input_lines(*text, *pos);
  if (*npos == 0) {
    cli_errorf("--input '%.200s' holds no expression (the first line that "
               "is not blank or a comment)",
               path);
    return EXIT_INVALID;
  }
  return EXIT_OK;
}
