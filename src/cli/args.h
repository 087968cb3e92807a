/*
 * args.h - parsing of the command-line pieces that several einc commands
 * share: shapes ("8x16x2048", "scalar"), length bindings ("-D h=8"), the
 * reduction and the dialect. Only the CLI includes this.
 */
#ifndef EINC_ARGS_H
#define EINC_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "dtype.h"
#include "ein.h"

/* Operands of the commands that take them as arguments (check, eval,
 * bench, cuda-src; the bound keeps their per-call arrays static or on the
 * stack), and length bindings (-D) of one command. `einc plan --input`
 * reads more, up to the library's EIN_MAX_OPERANDS. */
enum { CLI_MAX_OPERANDS = 1024, CLI_MAX_LENGTHS = 256 };

/* An operand's shape, from text ("8x16") or a .npy file's header. */
typedef struct cli_shape {
  int ndim;
  int64_t dims[EIN_MAX_DIMS];
  ein_dtype dtype; /* the file's dtype; f32 for a shape in text */
} cli_shape;

/* Options common to the commands that take an expression. */
typedef struct cli_common {
  ein_options options;
  ein_length lengths[CLI_MAX_LENGTHS];
  bool verbose;
  bool takes_path; /* the command plans: --path sets options.path */
} cli_common;

/* Parses "8x16x2048" or "scalar". On failure prints a message naming `text`
 * to stderr and returns false. */
bool cli_parse_shape(const char *text, cli_shape *out);

/* Tries to consume a common option at argv[*i] (-D, --reduce, --numpy, -v,
 * and --path where common->takes_path);
 * advances *i past any value it takes. Returns 1 when consumed, 0 when the
 * argument is not a common option, -1 on a malformed one (message printed). */
int cli_common_option(int argc, char **argv, int *i, cli_common *common);

/* A command's own options: like cli_common_option (1 consumed, 0 not
 * this command's, -1 malformed with the message printed). */
typedef int (*cli_option_fn)(int argc, char **argv, int *i, void *state);

/* The --help lines of --path (plan, eval, bench, cuda-src). */
#define CLI_HELP_PATH                                                        \
  "  --memory-limit B  the bytes one intermediate may take (B: a count, or\n" \
  "                  with K, M, G, T: 512M; 'free': a third of the free\n"   \
  "                  memory of the device the plan runs on): the path\n"   \
  "                  keeps within it, slicing axes where no order does\n"  \
  "                  (in the fewest chunks that fit; eval -v says how\n"    \
  "                  many slices ran), or the plan fails (exit 2)\n"        \
  "  --path P        the contraction order to take instead of searching,\n" \
  "                  in opt_einsum's linear form, as `einc plan` prints\n"   \
  "                  it: '[(0, 1), (0, 1)]' (n operands: n-1 pairs)\n"     \
  "  --slice A,B     run the plan slice by slice over the named axes (each\n" \
  "                  slice fixes them to one value and is planned for it;\n" \
  "                  sliced output axes write their piece, sliced summed\n"  \
  "                  axes add up): smaller intermediates, same result;\n"  \
  "                  A:N slices A into N chunks (N divides its size)\n"   \
  "  --plan-time S   seconds the order search may spend past the exact DP\n" \
  "                  (more than 12 operands; default about 45 ms at 100),\n" \
  "                  counted as work, so the order is the same each run\n"   \
  "  --seed N        the search's random choices follow N (default 0)\n"     \
  "  --objective O   what the search minimises: flops (default), size\n"     \
  "                  (the largest intermediate) or combo (flops + 64 x\n"    \
  "                  elements written to intermediates)\n"

/* The lines of every command's --help on operands and option values. */
#define CLI_HELP_OPERANDS                                                     \
  "  --              ends the options: every later argument is an operand\n" \
  "  An argument holding '->' or ',' is always the expression, even when it\n" \
  "  starts with '-' ('-> a', '-a, b'), unless it is a long option glued to\n" \
  "  its value ('--path=[(0,1)]'); other expressions that start with '-'\n" \
  "  follow '--'.\n"                                                        \
  "  An option's value follows it ('--dtype f16') or is glued with '='\n"    \
  "  ('--dtype=f16'); -D also takes it glued ('-Dr=3').\n"

enum { CLI_ARGS_OK, CLI_ARGS_HELP, CLI_ARGS_ERROR };

/* The argument loop every command shares: "--" ends the options, and an
 * argument holding "->" or ',' is never an option (CLI_HELP_OPERANDS);
 * -h/--help prints `help` (CLI_ARGS_HELP); `extra` (may be NULL) and then
 * the common options consume options; any other option is an error naming
 * `command`; the remaining arguments are positionals, at most `maxpos`,
 * stored in pos[0..*npos). Messages are printed; CLI_ARGS_ERROR on error. */
int cli_parse_args(int argc, char **argv, const char *command,
                   void (*help)(void), cli_common *common, cli_option_fn extra,
                   void *state, const char **pos, int maxpos, int *npos);

/* For commands taking EXPR SHAPE...: checks that pos[0] (the expression)
 * exists and reads pos[1..npos) into shapes: an operand ending in ".npy"
 * is a file whose header gives the shape and dtype (the data is not read),
 * any other a shape in text (cli_parse_shape). EXIT_OK, or the exit status
 * with the message printed: EXIT_INVALID for a missing expression, a
 * malformed shape or file, EXIT_INTERNAL for a file that cannot be read. */
int cli_expr_and_shapes(const char *command, const char *const *pos, int npos,
                        cli_shape *shapes, int *nshapes);

/* --dtype: every shape's dtype is dt, whatever a file's header says. */
void cli_shapes_set_dtype(cli_shape *shapes, int n, ein_dtype dt);

/* Prints "einc: error: ..." with the caret display of an error record. */
void cli_print_error(const ein_error *err);

/* Prints "einc: error: <formatted message>". */
void cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* After an expression error in the einops dialect: prints a hint to try
 * --numpy when the expression binds to the same inputs (only their shapes
 * are read) in the numpy dialect, as 'ij,jk->ik' does. */
void cli_numpy_hint(ein_status status, const char *expr,
                    const DLTensor *const *ins, int n, const ein_options *o);

/* Exit statuses of einc, the same for every command (CLI_HELP_EXIT). */
enum {
  EXIT_OK = 0,
  EXIT_INTERNAL = 1, /* a runtime failure: a file cannot be read or
                        written, the device is missing or fails, memory
                        (host or device) runs out, an internal error */
  EXIT_INVALID = 2   /* usage, or invalid input: an unknown option or bad
                        value, a malformed shape or .npy file, an
                        expression that is invalid or does not fit the
                        inputs, a memory limit no plan keeps */
};

/* The lines of every --help on exit statuses. */
#define CLI_HELP_EXIT                                                        \
  "Exit status: 0 success; 1 runtime failure (a file cannot be read or\n"   \
  "written, no device or a device error, out of memory); 2 usage or\n"     \
  "expression error (bad option or value, malformed shape or .npy file,\n" \
  "invalid expression or one that does not fit the inputs).\n"

/* How the --help of a command taking operands ends, after its own
 * options: the pointer to the options check documents, the exit statuses
 * and the heading of the example that follows. */
#define CLI_HELP_TAIL                                                        \
  "  (see einc check --help for -D, --reduce, --numpy, --)\n"                \
  "\n" CLI_HELP_EXIT "\n"                                                    \
  "example:\n"

/* The exit status for a library status: EXIT_INTERNAL for memory, device,
 * backend and internal failures, EXIT_INVALID for the rest. */
int cli_exit_status(ein_status status);

/* True when arg is the option `name` of a command's own options, alone
 * ("--dtype") or, for a long option, with its value after '='
 * ("--dtype=f16"): the two spellings every option takes. */
bool cli_is_option(const char *arg, const char *name);

/* The value of the option at argv[*i] (one cli_is_option matched): the text
 * after '=' ("--dtype=f16"), else the next argument, advancing *i past it;
 * NULL, with "<option> needs a value" printed, when there is none. */
const char *cli_option_value(int argc, char **argv, int *i);

/* Parses "auto", "cpu" or "cuda" into *out; prints an error and returns
 * false for anything else. */
bool cli_parse_backend(const char *v, ein_backend_kind *out);

/* Parses a dtype name ("f32", "bf16", "i64", ...) into *out; prints an
 * error listing the names and returns false for anything else. */
bool cli_parse_dtype(const char *v, ein_dtype *out);

/* --input FILE: reads an expression and its shapes from a file ("-":
 * standard input) in the format docs/cli.md gives: the expression on the
 * first line, then one shape (or .npy file) per line; blank lines and
 * lines starting with '#' are skipped. *text owns the lines (free it);
 * *pos, a new array (free it), holds pointers into it, the expression
 * first, as cli_expr_and_shapes takes them. EXIT_OK, or the exit status
 * with the message printed. */
int cli_read_input(const char *path, char **text, const char ***pos,
                   int *npos);

/* Shape-only tensors (data NULL) of each shape's dtype on `device` for
 * planning: tensors[i] describes shapes[i], ptrs[i] points at it. */
void cli_shape_tensors(const cli_shape *shapes, int n, DLDeviceType device,
                       DLTensor *tensors, const DLTensor **ptrs);

/* Plans expr for the shapes alone (cli_shape_tensors' tensors on `device`)
 * in a new context. EXIT_OK with *ctx and *plan the caller's to destroy;
 * else the exit status, with the message printed and nothing left to
 * destroy. */
int cli_plan_shapes(const char *expr, const cli_shape *shapes, int n,
                    DLDeviceType device, const ein_options *o, ein_ctx **ctx,
                    ein_plan **plan);

#endif
