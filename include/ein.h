/*
 * ein.h - the public C API of einc, an einsum/einops expression compiler.
 *
 * A caller creates one ein_ctx, then asks it about expressions such as
 * "b h i d, b h j d -> b h i j" or "b (heads d) -> b heads d". Tensors are
 * DLPack DLTensors, so arrays from numpy, PyTorch, CuPy or JAX pass through
 * without copies; shape-only functions never read the data pointer.
 *
 * Conventions, the same for every function here:
 *   - Every function that can fail returns an ein_status: EIN_OK (0) or a
 *     negative code. The library never prints and never exits.
 *   - A failing call on a context records the error on it (status, message,
 *     and the byte spans of the culprit in the expression); read it with
 *     ein_last_error() and render it with ein_error_format().
 *   - NULL options mean the defaults; a zero-initialised ein_options is the
 *     default too, so new fields appended later keep old callers working.
 *   - Threads may share a context: any calls may run at once, except
 *     ein_ctx_destroy, which must come last. Errors are per thread
 *     (ein_last_error shows the calling thread's own). docs/reliability.md
 *     says how.
 */
#ifndef EIN_H
#define EIN_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define EIN_API
#elif defined(__GNUC__)
#define EIN_API __attribute__((visibility("default")))
#else
#define EIN_API
#endif

/* EIN_NODISCARD marks every function that returns an ein_status: ignoring
 * one is a warning (-Wunused-result), and a deliberate ignore is written
 * (void)f(...). [[nodiscard]] is used where the compiler has it, because
 * GCC's older warn_unused_result is not silenced by a (void) cast. */
#if defined(__cplusplus) && __cplusplus >= 201703L
#define EIN_NODISCARD [[nodiscard]]
#elif defined(__has_c_attribute)
#if __has_c_attribute(nodiscard)
#define EIN_NODISCARD [[nodiscard]]
#endif
#endif
#if !defined(EIN_NODISCARD) && defined(__GNUC__)
#define EIN_NODISCARD __attribute__((warn_unused_result))
#elif !defined(EIN_NODISCARD)
#define EIN_NODISCARD
#endif

/* [[nodiscard]] in C before C23 is an extension that -pedantic reports;
 * the declarations below use it on purpose. */
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif

#define EIN_VERSION_MAJOR 0
#define EIN_VERSION_MINOR 1
#define EIN_VERSION_PATCH 0

/* The version of the library actually loaded, "MAJOR.MINOR.PATCH" (the
 * build's project version); the EIN_VERSION_* macros above give only the
 * header's, which differ when a program runs against another build.
 * Static storage; never NULL. */
EIN_API const char *ein_version(void);

/* Limits. Beyond them a call fails with EIN_ERR_LIMIT; it never crashes.
 * The operand and axis limits are far past any tensor network (a 10,000
 * operand network plans in well under a second; nothing is sized by them
 * at compile time): they only bound what a caller (or a fuzzer) can make
 * the library allocate. The expression text is the practical bound on a
 * large network: its axis names must fit in EIN_MAX_EXPR_BYTES. */
#define EIN_MAX_EXPR_BYTES (1u << 24) /* expression text, bytes (16 MiB) */
#define EIN_MAX_OPERANDS 65536        /* input operands of one expression */
#define EIN_MAX_DIMS 64               /* dims of one tensor or output */
#define EIN_MAX_AXES 1048576          /* distinct axes of one expression */

/* ---------------------------------------------------------------- status */

typedef enum ein_status {
  EIN_OK = 0,
  EIN_ERR_SYNTAX = -1,          /* malformed expression text */
  EIN_ERR_UNKNOWN_AXIS = -2,    /* a name used where it was never defined */
  EIN_ERR_SIZE_MISMATCH = -3,   /* two places give one axis different sizes */
  EIN_ERR_INDIVISIBLE = -4,     /* a split's known factors do not divide the dim */
  EIN_ERR_AMBIGUOUS_SPLIT = -5, /* a split has more than one unknown factor */
  EIN_ERR_RANK_MISMATCH = -6,   /* operand and tensor have different ranks */
  EIN_ERR_MISSING_LENGTH = -7,  /* an output-only axis has no size */
  EIN_ERR_BAD_ELLIPSIS = -8,    /* '...' twice, in an input group, or unmatched */
  EIN_ERR_DIALECT = -9,         /* construct not part of the chosen dialect */
  EIN_ERR_OVERFLOW = -10,       /* a size or product exceeds int64 */
  EIN_ERR_LIMIT = -11,          /* too many operands, dims, axes or bytes */
  EIN_ERR_DUPLICATE_AXIS = -12, /* a name twice in the output */
  EIN_ERR_OPERAND_COUNT = -13,  /* tensors given do not match the operands */
  EIN_ERR_BAD_REDUCTION = -14,  /* reduction not allowed here */
  EIN_ERR_BAD_SHAPE = -15,      /* negative size, or a malformed shape */
  EIN_ERR_INVALID_ARGUMENT = -16, /* NULL pointer or out-of-range argument */
  EIN_ERR_NO_MEMORY = -17,      /* a host allocation failed */
  EIN_ERR_INTERNAL = -18,       /* a bug in einc: please report it */
  EIN_ERR_DTYPE = -19,          /* unsupported or mismatched dtypes */
  EIN_ERR_DEVICE = -20,         /* tensor on a device the backend cannot
                                   use, or the backend is unavailable */
  EIN_ERR_BACKEND = -21,        /* a backend library call failed */
  EIN_ERR_DEVICE_MEMORY = -22   /* a device (GPU) allocation failed */
} ein_status;

/* A short constant name for a status, e.g. "size mismatch". Never NULL. */
EIN_API const char *ein_status_name(ein_status status);

/* -------------------------------------------------------------- errors */

/* A byte range in the expression (or shape spec) text. */
typedef struct ein_span {
  size_t offset;
  size_t length;
} ein_span;

/* The last error recorded on a context or a shape memo. `expr` is a copy of
 * the text the spans point into (NULL when the error has no text, e.g. an
 * invalid argument). spans[0] is the culprit; spans[1], when nspans is 2, is
 * the other place that disagrees with it. Valid until the next call on the
 * same object (for a context: by the same thread). */
typedef struct ein_error {
  ein_status status;
  const char *message;
  const char *expr;
  size_t expr_len;
  int nspans;
  ein_span spans[2];
} ein_error;

/* Renders an error the way compilers do:
 *   error: axis 'h' is 16 in operand 2 but 8 in operand 1
 *     b h i d, b h j d -> b h i j
 *       ^~       ^~
 * Long expressions are shown as a window around the culprit. Writes at most
 * `cap` bytes including the terminating NUL (when cap > 0) and returns the
 * length the full text needs, as snprintf does. */
EIN_API size_t ein_error_format(const ein_error *err, char *buf, size_t cap);

/* ------------------------------------------------------------- context */

typedef struct ein_ctx ein_ctx;

/* Creates a context. *out is NULL on failure. */
EIN_NODISCARD
EIN_API ein_status ein_ctx_create(ein_ctx **out);

/* Destroys a context and everything it owns. NULL is allowed. Waits for
 * work the context queued on its own CUDA streams. */
EIN_API void ein_ctx_destroy(ein_ctx *ctx);

/* CUDA: later evaluations on ctx queue their work on `stream` (a
 * cudaStream_t) instead of the context's own stream; NULL goes back to the
 * own one. The own stream is a blocking stream, so it is ordered with the
 * legacy default stream (plain cudaMemcpy waits for it). Without the CUDA
 * backend this does nothing. */
EIN_API void ein_ctx_set_cuda_stream(ein_ctx *ctx, void *stream);

/* Waits until every evaluation ctx queued on a GPU has finished, and
 * reports an error that happened while it ran (EIN_ERR_BACKEND). EIN_OK at
 * once when nothing ran on a GPU. */
EIN_NODISCARD
EIN_API ein_status ein_ctx_synchronize(ein_ctx *ctx);

/* The error of the calling thread's last call on ctx; status EIN_OK if
 * that call succeeded (or the thread has made none). Valid until the same
 * thread's next call on ctx. */
EIN_API const ein_error *ein_last_error(const ein_ctx *ctx);

/* ------------------------------------------------------------- options */

typedef enum ein_dialect {
  EIN_DIALECT_EINOPS = 0, /* named axes, groups, numbers: "b (h d) -> b h d" */
  EIN_DIALECT_NUMPY = 1   /* one letter per axis, implicit output: "ij,jk" */
} ein_dialect;

/* How input axes absent from the output are reduced. Non-sum reductions take
 * a single operand. */
typedef enum ein_reduction {
  EIN_REDUCE_SUM = 0,
  EIN_REDUCE_MEAN,
  EIN_REDUCE_MAX,
  EIN_REDUCE_MIN,
  EIN_REDUCE_PROD,
  EIN_REDUCE_ANY,
  EIN_REDUCE_ALL
} ein_reduction;

/* "sum", "mean", ...; NULL for an unknown value. */
EIN_API const char *ein_reduction_name(ein_reduction reduction);

/* Parses "sum", "mean", "max", "min", "prod", "any" or "all". */
EIN_NODISCARD
EIN_API ein_status ein_reduction_parse(const char *name, ein_reduction *out);

/* What the contraction-order search minimises (cotengra's names):
 * FLOPS, opt_einsum's FLOP count (ties: the largest intermediate); SIZE,
 * the largest intermediate (ties: FLOPs); COMBO, FLOPs + 64 x the elements
 * written to intermediates (ties: the largest), between the two. */
typedef enum ein_objective {
  EIN_OBJECTIVE_FLOPS = 0,
  EIN_OBJECTIVE_SIZE,
  EIN_OBJECTIVE_COMBO
} ein_objective;

/* "flops", "size", "combo"; NULL for an unknown value. */
EIN_API const char *ein_objective_name(int objective);

/* Parses "flops", "size" or "combo"; EIN_ERR_INVALID_ARGUMENT for others. */
EIN_NODISCARD
EIN_API ein_status ein_objective_parse(const char *name, ein_objective *out);

/* A length binding "name=size": defines an output-only (repeat) axis or
 * checks an axis that the tensors also define. */
typedef struct ein_length {
  const char *name;
  int64_t size;
} ein_length;

/* Where a plan runs. AUTO picks the backend whose memory the tensors live
 * in (the CPU backend for host memory). EMU is the emulated CUDA device:
 * it runs exactly what the CUDA backend would (the same generated kernels,
 * compiled for the host, and a reference cuBLAS) on the CPU, on tensors in
 * its own memory (kDLExtDev, from ein_device_alloc), so the GPU path can
 * be tested and debugged on a machine without a GPU. */
typedef enum ein_backend_kind {
  EIN_BACKEND_AUTO = 0,
  EIN_BACKEND_CPU = 1,
  EIN_BACKEND_CUDA = 2,
  EIN_BACKEND_EMU = 3
} ein_backend_kind;

/* ein_options.memory_limit: whatever fits the device the call runs on.
 * Resolved when the plan is made, on the device the tensors (or
 * ein_options.backend) name: its free memory now (CUDA: cudaMemGetInfo's
 * free bytes; the CPU and the emulated device: the host's available
 * memory, /proc/meminfo's MemAvailable) x EIN_MEMORY_FREE_SHARE, kept to
 * its 3 leading bits (so plans are cached by it, not made again for every
 * byte the device's free memory moves). A third: a pairwise step holds
 * two operands and its result at once, and the rest is the margin for
 * what else the device runs. Planning for a device that cannot be opened
 * (a CUDA plan with no GPU) fails with EIN_ERR_DEVICE. */
#define EIN_MEMORY_FREE ((int64_t)-1)
#define EIN_MEMORY_FREE_SHARE 0.3

/* CUDA tensors (kDLCUDA, kDLCUDAManaged) are evaluated by the CUDA
 * backend on the device they live on, asynchronously on the context's
 * stream (ein_ctx_set_cuda_stream); host tensors (kDLCPU, kDLCUDAHost)
 * by the CPU backend; kDLExtDev tensors by the emulated device. A backend
 * given tensors outside its memory, or tensors on two devices, fail with
 * EIN_ERR_DEVICE; so does any CUDA evaluation on a machine without a
 * usable GPU, driver or CUDA libraries. Plans (ein_plan_create) for the
 * CUDA backend can be made without a GPU: only executing them needs one. */
typedef struct ein_options {
  ein_dialect dialect;
  ein_reduction reduction;
  const ein_length *lengths;
  int nlengths;
  ein_backend_kind backend;
  int allow_tf32;       /* nonzero: f32 GEMMs may use TF32 (CUDA only) */
  int64_t memory_limit; /* bytes one intermediate may take; 0: no limit;
                         EIN_MEMORY_FREE: a share of the free memory of
                         the device the call runs on. The planner picks a
                         contraction order within it; where no order keeps
                         within it, it slices axes (the plan then runs in
                         units, each within the limit: ein_plan_units).
                         Only when even slicing every axis leaves an
                         intermediate past the limit does it fail, with
                         EIN_ERR_LIMIT naming the sizes and the limit
                         that would fit */
  const char *path;     /* the contraction order to take instead of the
                         search's, in opt_einsum's linear form: "[(0, 1),
                         (0, 1)]" (each pair names two operands by their
                         place in a list from which every contraction
                         removes its two and appends its result; spaces
                         optional, lists as well as tuples: "[[0,1],[0,1]]").
                         n operands need n-1 pairs ("[]" for one); anything
                         else fails with EIN_ERR_INVALID_ARGUMENT. The
                         report's path is printed in this form. NULL or "":
                         searched. Copied where the plan needs it */
  const char *slice_axes; /* axes to slice, by name, comma-separated
                         ("a,b"; spaces allowed): the plan runs once per
                         value of them (docs/design.md, "Sliced
                         plans"), each run planned for that value alone,
                         so each intermediate shrinks by their sizes.
                         "a:4" slices a into 4 chunks of size(a)/4 (4 must
                         divide it): fewer, larger slices, each paying the
                         fixed costs of a run once. Axes the planner slices
                         itself (under memory_limit) take the fewest
                         chunks the limit allows.
                         Sliced output axes write their piece of the
                         output; sliced summed axes add up the runs'
                         results (reduction sum or mean only). An unknown
                         name, or one twice, is EIN_ERR_INVALID_ARGUMENT.
                         NULL or "": no slicing */
  unsigned axis_rules;  /* EIN_RULE_* bits; 0: every axis may be reduced or
                         repeated (the expression alone decides) */
  const double *scales; /* fp8 inputs (ein_eval only): the real value of
                         input i's elements is stored x scales[i]; nscales
                         must equal the number of inputs, every input is
                         fp8, every scale finite. NULL: all 1. Per call,
                         not part of a plan (docs/design.md, "fp8") */
  int nscales;
  int devices;          /* ein_eval of a sliced plan on CUDA (or the
                         emulated device): spread its units over devices
                         0 .. devices-1 of the backend, one thread each,
                         the inputs copied to each once, the partials
                         summed on the output's device (docs/design.md,
                         "Units of work"). 0 or 1: the tensors' device
                         alone. More than the backend has, or above 1 on
                         the CPU, is an error before anything runs */
  /* The contraction-order search past the exact DP (more than 12
   * operands; docs/design.md, "Contraction order at scale"). */
  double plan_time;     /* seconds it may spend; 0: a default growing with
                         the operand count (about 45 ms at 100 operands).
                         Counted as work calibrated to seconds, not read
                         from the clock, so the order depends only on the
                         seed and the problem (a slow machine takes longer;
                         the clock stops it only at 10x, or 2 s past the
                         budget when that is later). Negative, NaN or
                         infinite: EIN_ERR_INVALID_ARGUMENT */
  uint64_t seed;        /* the search's random choices are a function of
                         it (0 is a seed like any other) */
  ein_objective objective; /* what the search minimises; 0: FLOPs */
} ein_options;

/* DLPack 1.1's float8 type codes (DLDataType {code, 8, 1}), spelled out
 * because dlpack.h before 1.1 (Debian's 0.6) lacks kDLFloat8_e4m3fn and
 * kDLFloat8_e5m2; the values are DLPack's. */
#define EIN_DL_FLOAT8_E4M3FN 10
#define EIN_DL_FLOAT8_E5M2 12

/* ein_options.axis_rules: what an expression may not do, for callers whose
 * contract forbids it (einops' rearrange neither reduces nor repeats, its
 * repeat never reduces). The binder fails with the axis under a caret:
 * EIN_ERR_BAD_REDUCTION for an input axis missing from the output (a
 * unit dim, '1' or '()', is no axis and is always free to go),
 * EIN_ERR_UNKNOWN_AXIS for an output axis in no input. */
#define EIN_RULE_NO_REDUCE 1u
#define EIN_RULE_NO_REPEAT 2u

/* ------------------------------------------------------------ backends */

/* "auto", "cpu", "cuda" or "emu"; NULL for an unknown value. */
EIN_API const char *ein_backend_name(int kind);

/* Parses a backend name ("auto", "cpu", "cuda", "emu");
 * EIN_ERR_INVALID_ARGUMENT for others. */
EIN_NODISCARD
EIN_API ein_status ein_backend_parse(const char *name, ein_backend_kind *out);

/* The backend AUTO means for data that can be put anywhere (the CLI's
 * .npy files): CUDA when its libraries load and GPU 0 exists, else the
 * CPU. */
EIN_API ein_backend_kind ein_backend_default(void);

/* Checks that backend `kind` can run on `device` here: EIN_OK, or
 * EIN_ERR_DEVICE with the reason (what is missing, how to get it) in
 * ein_last_error(ctx). Opens the device on success. */
EIN_NODISCARD
EIN_API ein_status ein_backend_check(ein_ctx *ctx, ein_backend_kind kind,
                                     int device);

/* The DLPack device of tensors in backend `kind`'s memory on `device`. */
EIN_API DLDevice ein_backend_dl_device(ein_backend_kind kind, int device);

typedef enum ein_copy_kind {
  EIN_COPY_HOST_TO_DEVICE = 0,
  EIN_COPY_DEVICE_TO_HOST = 1
} ein_copy_kind;

/* Memory of backend `kind` on `device` (host memory for the CPU). bytes
 * may be 0. EIN_ERR_DEVICE when the backend cannot run here,
 * EIN_ERR_DEVICE_MEMORY when the allocation fails. */
EIN_NODISCARD
EIN_API ein_status ein_device_alloc(ein_ctx *ctx, ein_backend_kind kind,
                                    int device, size_t bytes, void **ptr);

/* Frees what ein_device_alloc gave; NULL is allowed. */
EIN_API void ein_device_free(ein_ctx *ctx, ein_backend_kind kind, int device,
                             void *ptr);

/* Copies between host memory and backend `kind`'s memory, synchronously
 * and after the work already queued on the context. */
EIN_NODISCARD
EIN_API ein_status ein_device_copy(ein_ctx *ctx, ein_backend_kind kind,
                                   int device, void *dst, const void *src,
                                   size_t bytes, ein_copy_kind dir);

/* ------------------------------------------------------ shape binding */

/* What an expression makes of a set of input shapes: every axis with its
 * size, and the output shape. Created by ein_bind(), freed with
 * ein_binding_destroy(). Independent of the context once created. */
typedef struct ein_binding ein_binding;

/* The role of an axis in the expression. */
typedef enum ein_axis_role {
  EIN_AXIS_KEPT = 0,    /* in an input and in the output */
  EIN_AXIS_REDUCED = 1, /* in an input only: reduced */
  EIN_AXIS_REPEATED = 2 /* in the output only: a repeat (broadcast) */
} ein_axis_role;

typedef struct ein_axis_info {
  const char *name;   /* "h", "2" for an anonymous axis, "...0" for the
                         first ellipsis dim; NUL-terminated, owned by the
                         binding */
  int64_t size;
  ein_axis_role role;
} ein_axis_info;

/* Binds `expr` to the shapes of `ninputs` tensors (only ndim and shape are
 * read; data may be NULL) and solves every axis size. On success *out owns
 * the result; on failure the error is on ctx and *out is NULL. */
EIN_NODISCARD
EIN_API ein_status ein_bind(ein_ctx *ctx, const char *expr,
                            const DLTensor *const *inputs, int ninputs,
                            const ein_options *options, ein_binding **out);

/* The same, from plain shapes: shapes[i] has ndims[i] entries. */
EIN_NODISCARD
EIN_API ein_status ein_bind_shapes(ein_ctx *ctx, const char *expr,
                                   const int64_t *const *shapes,
                                   const int *ndims, int ninputs,
                                   const ein_options *options,
                                   ein_binding **out);

EIN_API void ein_binding_destroy(ein_binding *binding);

/* Rank of the output and its shape (dims has room for EIN_MAX_DIMS). */
EIN_API int ein_binding_output_ndim(const ein_binding *binding);
EIN_API const int64_t *ein_binding_output_shape(const ein_binding *binding);

/* Axes in order of first appearance in the expression (ellipsis dims where
 * the ellipsis first appears). */
EIN_API int ein_binding_naxes(const ein_binding *binding);
EIN_API ein_axis_info ein_binding_axis(const ein_binding *binding, int i);

/* How each dim is made of axes: operands are the inputs, 0 to
 * ein_binding_ninputs() - 1, then the output. ein_binding_dim_axes writes
 * the axes (indices for ein_binding_axis, outermost first) of dim d of
 * operand k into ids, at most cap of them, and returns their count; -1
 * when k or d is out of range. With the axis sizes this says how every size
 * follows from the inputs' sizes, which a tracer with symbolic sizes needs
 * (torch.compile's dynamic shapes: einc/_torch.py). An input dim of size 1
 * may stand for a longer axis (broadcast): compare the sizes. */
EIN_API int ein_binding_ninputs(const ein_binding *binding);
EIN_API int ein_binding_operand_ndim(const ein_binding *binding, int k);
EIN_API int ein_binding_dim_axes(const ein_binding *binding, int k, int d,
                                 int *ids, int cap);

/* Convenience: the output shape of `expr` applied to `inputs`, without
 * keeping a binding. out_shape needs room for EIN_MAX_DIMS entries. */
EIN_NODISCARD
EIN_API ein_status ein_output_shape(ein_ctx *ctx, const char *expr,
                                    const DLTensor *const *inputs,
                                    int ninputs, const ein_options *options,
                                    int64_t *out_shape, int *out_ndim);

/* -------------------------------------------------- plans and evaluation */

/*
 * Evaluation. Inputs and output are DLTensors with any strides (NULL
 * strides mean C-contiguous; DLTensor.byte_offset is honoured). All inputs
 * share one dtype; the output has that dtype and the shape that
 * ein_output_shape() gives. The output must not overlap an input or itself
 * (no two elements at one address).
 *
 * dtypes: f32, f64, f16 and bf16 for everything (f16/bf16 are computed in
 * f32 and rounded once); complex64 and complex128 (DLPack kDLComplex, 64
 * and 128 bits) for rearrange, repeat, contractions, sum, mean and prod
 * (computed in their own precision; max, min, any and all fail with
 * EIN_ERR_DTYPE); integers for rearrange, repeat, reductions and
 * contractions (computed in int64, wrapping); bool for rearrange, repeat,
 * any, all, max and min. fp8 inputs (EIN_DL_FLOAT8_E4M3FN, _E5M2; every
 * input fp8, ein_eval only) with per-input scales (ein_options.scales)
 * are decoded once to f32, evaluated in f32, and rounded once into an
 * f32, bf16 or f16 output (never fp8).
 *
 * A plan is compiled for one expression, options, and the exact dtypes,
 * shapes and strides of its tensors; executing it with tensors of another
 * layout fails with EIN_ERR_BAD_SHAPE. ein_eval keeps the plans it makes
 * in a cache on the context (keyed by all of the above and the backend),
 * so a repeated call skips parsing and planning.
 */
typedef struct ein_plan ein_plan;

/* Evaluates expr on inputs into output. On failure the error is on ctx
 * and the output's contents are unspecified. */
EIN_NODISCARD
EIN_API ein_status ein_eval(ein_ctx *ctx, const char *expr,
                            const DLTensor *const *inputs, int ninputs,
                            DLTensor *output, const ein_options *options);

/* Compiles a plan once for a hot loop. Only the inputs' dtype, shape and
 * strides are read (data may be NULL). `output` gives the output's layout
 * (only strides, dtype and shape are read); NULL means a C-contiguous
 * output. The plan is independent of ctx once created. */
EIN_NODISCARD
EIN_API ein_status ein_plan_create(ein_ctx *ctx, const char *expr,
                                   const DLTensor *const *inputs, int ninputs,
                                   const DLTensor *output,
                                   const ein_options *options,
                                   ein_plan **out);

/* Runs a plan with tensors of the layouts it was compiled for. */
EIN_NODISCARD
EIN_API ein_status ein_plan_execute(ein_ctx *ctx, const ein_plan *plan,
                                    const DLTensor *const *inputs,
                                    int ninputs, DLTensor *output);

/* Called on the calling thread before each step of a run starts,
 * mark(arg, i) for step i of ein_plan_nsteps(), and mark(arg, nsteps)
 * after the last one. */
typedef void (*ein_step_mark_fn)(void *arg, int step);

/* ein_plan_execute with a mark around each step, to time steps one by one
 * (`einc bench --steps`). On the CPU a step has finished when the next mark
 * comes, so the clock between marks is its time. A GPU backend only queues
 * a step, on the stream the context queues on (ein_ctx_set_cuda_stream):
 * record an event there at each mark and read the times between them once
 * the stream is done. */
EIN_NODISCARD
EIN_API ein_status ein_plan_execute_marked(ein_ctx *ctx, const ein_plan *plan,
                                           const DLTensor *const *inputs,
                                           int ninputs, DLTensor *output,
                                           ein_step_mark_fn mark, void *arg);

EIN_API void ein_plan_destroy(ein_plan *plan);

/* The output's rank and shape. */
EIN_API int ein_plan_output_ndim(const ein_plan *plan);
EIN_API const int64_t *ein_plan_output_shape(const ein_plan *plan);

/* FLOPs counted as opt_einsum counts them (a multiply-add is 2): the naive
 * single-loop evaluation and this plan. */
EIN_API double ein_plan_naive_flops(const ein_plan *plan);
EIN_API double ein_plan_flops(const ein_plan *plan);

/* The least traffic any evaluation needs, in bytes: every input element
 * the expression reads, once (a diagonal only its diagonal), plus every
 * output element written once. Benchmarks divide it by copy bandwidth for
 * the memory floor. */
EIN_API double ein_plan_min_bytes(const ein_plan *plan);

/* Elements of the largest intermediate and bytes of temporary memory. */
EIN_API int64_t ein_plan_largest_intermediate(const ein_plan *plan);
EIN_API int64_t ein_plan_workspace_bytes(const ein_plan *plan);

/* Number of steps, and the number of each kind. */
EIN_API int ein_plan_nsteps(const ein_plan *plan);
EIN_API int ein_plan_count_steps(const ein_plan *plan, const char *kind);

/* Whether the plan's output is a strided view of one input: the plan is
 * one plain copy (same dtype, no arithmetic, nothing reduced, no axis
 * repeated) from that input into a C-contiguous output (ein_plan_create
 * with a NULL output, or compact strides), so a caller may hand back the
 * input's memory instead of running the plan. Then returns 1 with
 * *input (the input's index), view_strides[0..ein_plan_output_ndim) (in
 * elements, possibly negative or 0 where the input's are; a size-1 dim
 * gets the stride that keeps a compact view compact) and *view_offset
 * (elements from the input's first element to the view's). Returns 0
 * otherwise: arithmetic, a copy that strides cannot express (merging
 * axes that are not adjacent in memory), a repeat, an empty output, or
 * any other output layout. Transposes, splits and merges of adjacent
 * axes, squeezes and diagonals ('i i -> i') are views. */
EIN_API int ein_plan_output_view(const ein_plan *plan, int *input,
                                 int64_t *view_strides, int64_t *view_offset);

/* 1 when the plan is such a view (ein_plan_output_view's answer): the
 * planner decides it once. Such a plan reports 0 FLOPs and 0 bytes (its
 * one step is named "view"; the JSON says "is_view": true): einc's
 * Python functions return the view and run nothing. ein_plan_execute,
 * which writes the caller's separate output, still copies. */
EIN_API int ein_plan_is_view(const ein_plan *plan);

/* ------------------------------------------------------- the plan cache */

/* The context's plan cache, which ein_eval fills, open to callers that key
 * plans their own way (einc's Python extension): their entries and
 * ein_eval's share its slots, one least-recently-used eviction, one lock
 * and the counts; a caller's key meets only callers' keys. hash: the
 * caller's hash of its key, any function of its bytes used alike by find
 * and put (equal hashes only lead to comparing bytes). Thread-safe.
 * put: caches plan (the cache takes a reference) and the caller's data
 * (not NULL) under a copy of key, evicting the least recently used entry
 * when full. When an entry leaves the table (evicted by any thread's put
 * or ein_eval, or ein_ctx_destroy) its reference is dropped and
 * release(data) runs on that thread, outside the lock: it must be safe on
 * any thread. 1, or 0 if the key is there (data not kept), the copy failed
 * or an argument is NULL. find: the data under key, or NULL (a hit or a
 * miss); it takes no reference, so release must defer freeing what a find
 * may still use (the extension frees only under the GIL, held from its
 * find to its last use). key_tensor: t's layout as ein's keys write it
 * (dtype, rank, each dim's size and stride, 0 for size 1): 2 + 16 * ndim
 * bytes, or 0 (cap short, not einc's dtype, rank out of range). */
#define EIN_PLAN_CACHE_ENTRIES 128
#define EIN_CACHE_KEY_TENSOR_MAX (2 + 16 * EIN_MAX_DIMS)
EIN_API int ein_cache_put(ein_ctx *ctx, uint64_t hash, const void *key,
                          size_t len, ein_plan *plan, void *data,
                          void (*release)(void *data));
EIN_API void *ein_cache_find(ein_ctx *ctx, uint64_t hash, const void *key,
                             size_t len);
EIN_API size_t ein_cache_key_tensor(const DLTensor *t, void *buf, size_t cap);
typedef struct ein_cache_stats { /* since the context was made */
  uint64_t hits, misses, evictions;
  int entries, capacity; /* cached now; EIN_PLAN_CACHE_ENTRIES */
} ein_cache_stats;
EIN_NODISCARD
EIN_API ein_status ein_cache_stats_get(ein_ctx *ctx, ein_cache_stats *out);

typedef enum ein_describe_format {
  EIN_DESCRIBE_TEXT = 0, /* a report for people, one line per step */
  EIN_DESCRIBE_JSON = 1  /* the same as one JSON object */
} ein_describe_format;

/* The arithmetic a step's peak rate is taken for: its dtype, with f32
 * GEMMs on TF32 tensor cores where the caller allowed TF32 (CUDA).
 * Integers take f32's; complex types a quarter of their parts' rate (a
 * complex multiply-add is four real ones). */
typedef enum ein_peak_kind {
  EIN_PEAK_F64 = 0,
  EIN_PEAK_F32 = 1,
  EIN_PEAK_TF32 = 2,
  EIN_PEAK_BF16 = 3,
  EIN_PEAK_F16 = 4,
  EIN_PEAK_FP8 = 5,
  EIN_NPEAK = 6
} ein_peak_kind;

/* A device as einc prices work on it (docs/design.md, "Resource
 * accounting"). Two kinds of rate:
 *   peak[]      the data sheet's dense FLOP/s per arithmetic (no
 *               sparsity): MFU's denominator, as everyone computes it;
 *   measured[]  what einc measured a large GEMM at on that device (0:
 *               never measured); this CPU's figures are all measured.
 * The predicted time of a plan is
 *   call_seconds + sum over steps of (step_seconds + roofline), the
 *   roofline max(FLOPs / rate, bytes read and written / bandwidth),
 * at the measured rate where there is one, else the peak (likewise the
 * bandwidth). A caller's own figure (ein_device_model_set_peak) replaces
 * the peak and clears the measured one, so it is used for both. Built-in
 * models are {name, description, peak, measured, bytes_per_s,
 * measured_bytes_per_s, call_seconds, step_seconds, backend, given,
 * source}. */
typedef struct ein_device_model {
  char name[32];         /* "h100", "a100", "cpu", or a caller's */
  char description[160]; /* the device: "NVIDIA H100 SXM5 80GB",
                            "Intel(R) Xeon(R) ..., 2 threads"; may be "" */
  double peak[EIN_NPEAK];     /* FLOP/s, data sheet, dense; 0: none */
  double measured[EIN_NPEAK]; /* FLOP/s einc measured; 0: none */
  double bytes_per_s;          /* memory bandwidth, data sheet: bytes read
                                  plus written per second */
  double measured_bytes_per_s; /* einc's copy measurement; 0: none */
  double call_seconds; /* host time of one execute (validation, dispatch) */
  double step_seconds; /* fixed time per step (a kernel launch, a library
                          call) beside its roofline */
  int backend;         /* the ein_backend_kind whose plans it prices:
                          EIN_BACKEND_CPU or EIN_BACKEND_CUDA (whose plans
                          the emulated device runs too); EIN_BACKEND_AUTO
                          (0): any */
  unsigned given;      /* figures the caller set: bit k for peak[k]
                          (ein_device_model_set_peak), bit EIN_NPEAK for
                          the bandwidth; reports call them "given" */
  const char *source;    /* where the rates come from (static text):
                            "data sheet" (built-in: the peaks are the
                            vendor's, and `measured` says what einc
                            measured), "measured" (by this call), "cache"
                            (measured earlier), "assumed" (a GPU with no
                            model in einc, or none: h100's), "caller" */
  double measured_at[EIN_NPEAK]; /* Unix seconds when measured[k] was
                                    measured (or last raised by a faster
                                    run: "cpu"); 0: unknown */
} ein_device_model;

/* A device model by name:
 *   "h100" (= "h100-sxm"), "h100-pcie", "h200", "a100" (SXM 80GB), "l4",
 *   "b200"          the data sheet's peaks and bandwidth, and einc's
 *                   measurements where it has them (h100: bf16 and f32
 *                   GEMM, copy bandwidth);
 *   "cpu"           this host as the CPU backend uses it: the GEMM rate
 *                   (f32, f64; bf16 and f16 through the backend's half
 *                   GEMM where it has one, else f32's; tf32 and fp8 are
 *                   computed in f32) and the copy bandwidth with the
 *                   backend's threads, measured (about 0.3 s: the best
 *                   of several short runs) by each of the first 3
 *                   processes that use it, the best of each rate kept (a
 *                   busy machine measures low; a faster run of `einc
 *                   bench` raises a peak, measured_at says when), in the
 *                   einc cache directory ($EINC_CACHE_DIR, else
 *                   $XDG_CACHE_HOME/einc, else ~/.cache/einc) under the
 *                   CPU's model name and the thread count; an entry that
 *                   is damaged or holds impossible rates is measured
 *                   again; its peaks are these measurements (a CPU has no
 *                   data sheet here);
 *   "cuda"          GPU 0 of this machine, by its name; another GPU, or
 *                   none, gets h100's rates with source "assumed" and the
 *                   reason in the description.
 * EIN_ERR_INVALID_ARGUMENT for other names (out is then untouched;
 * ein_device_model_names lists the known ones), EIN_ERR_NO_MEMORY when the
 * measurement cannot get its buffers. Safe from several threads: a
 * process measures at most once. */
EIN_NODISCARD
EIN_API ein_status ein_device_model_get(const char *name,
                                        ein_device_model *out);

/* The names ein_device_model_get knows, for error messages:
 * "cpu, cuda, h100, ...". */
EIN_API const char *ein_device_model_names(void);

/* The caller's own figures: a peak FLOP/s for one arithmetic (it becomes
 * the rate predictions use and MFU's denominator: the measured rate is
 * cleared), or the bandwidth (likewise). Values that are not positive and
 * finite leave the model as it was and return EIN_ERR_INVALID_ARGUMENT. */
EIN_NODISCARD
EIN_API ein_status ein_device_model_set_peak(ein_device_model *m,
                                             ein_peak_kind kind,
                                             double flops_per_s);
EIN_NODISCARD
EIN_API ein_status ein_device_model_set_bandwidth(ein_device_model *m,
                                                  double bytes_per_s);

/* The backend a plan was made for (an ein_backend_kind: CPU, CUDA, EMU). */
EIN_API int ein_plan_backend(const ein_plan *plan);

/* The arithmetic the plan's heaviest steps run at (its dtype; f32 with
 * TF32 allowed on CUDA: tf32), whose peak MFU is against. */
EIN_API ein_peak_kind ein_plan_peak_kind(const ein_plan *plan);
EIN_API const char *ein_peak_kind_name(ein_peak_kind kind); /* "bf16" */

/* The model's data-sheet peak (FLOP/s) for the plan's arithmetic, as MFU
 * divides by; 0 when the model has none (fp8 on an A100). */
EIN_API double ein_plan_peak_flops(const ein_plan *plan,
                                   const ein_device_model *model);

/* The predicted time of one execute on the model (see ein_device_model;
 * an execute of a view plan writes the output: a copy, priced so):
 * a number of seconds, or -1 when the model prices another backend's
 * plans (a CPU model for a CUDA plan, or the reverse) or is unusable. */
EIN_API double ein_plan_predicted_seconds(const ein_plan *plan,
                                          const ein_device_model *model);

/* Model and hardware FLOPs utilization of a run that took `seconds`:
 * FLOPs / seconds / data-sheet peak of the plan's arithmetic. MFU counts
 * the FLOPs the expression needs (ein_plan_unsliced_flops: the path's,
 * once), HFU those the plan does (ein_plan_flops: a sliced plan repeats
 * work). 0 when seconds is not positive or the model has no peak. */
EIN_API double ein_plan_mfu(const ein_plan *plan, double seconds,
                            const ein_device_model *model);
EIN_API double ein_plan_hfu(const ein_plan *plan, double seconds,
                            const ein_device_model *model);

/* Memory of one execute (what a caching allocator's peak would show, in
 * bytes): the inputs, the output, the workspace the run allocates (its
 * temporaries share it by lifetime; a sliced plan's accumulators
 * included), and the peak of live bytes across the steps (inputs, output
 * and the temporaries alive at the step: written already, read later).
 * peak_bytes is inputs + output + workspace. Each temporary's bytes:
 * ein_plan_ntemps, ein_plan_temp_bytes. A BLAS library's own scratch
 * (cuBLAS's workspace) is not counted. */
typedef struct ein_plan_memory {
  int64_t input_bytes, output_bytes, workspace_bytes;
  int64_t peak_live_bytes, peak_bytes;
} ein_plan_memory;
EIN_API ein_status ein_plan_memory_get(const ein_plan *plan,
                                       ein_plan_memory *out);
EIN_API int ein_plan_ntemps(const ein_plan *plan);
EIN_API int64_t ein_plan_temp_bytes(const ein_plan *plan, int i);

/* Slicing (ein_options.slice_axes): the number of sliced axes (0 when
 * the plan runs once), the name of sliced axis i (NULL out of range), the
 * number of slices (the product of their sizes; 1 when unsliced), the
 * FLOPs of the same expression planned without slicing (ein_plan_flops
 * counts every slice, so the overhead is their ratio), and the bytes one
 * slice needs beside the inputs and output: its workspace and, when
 * summed axes are sliced, three buffers of one output slice (the running
 * sum, the slice's result and the next sum). */
/* The memory limit the plan was made within, in bytes, EIN_MEMORY_FREE
 * resolved on the device; 0: none (and for NULL). */
EIN_API int64_t ein_plan_memory_limit(const ein_plan *plan);

EIN_API int ein_plan_nsliced(const ein_plan *plan);
EIN_API const char *ein_plan_sliced_axis(const ein_plan *plan, int i);
EIN_API double ein_plan_nslices(const ein_plan *plan);
EIN_API double ein_plan_unsliced_flops(const ein_plan *plan);
EIN_API int64_t ein_plan_slice_bytes(const ein_plan *plan);

/* Units of work: a sliced plan's slices, for a caller that
 * spreads them over threads, processes, devices or machines. Unit u is
 * slice u in the plan's order (the sliced axes' odometer, last axis
 * fastest). ein_plan_units: how many (1 when unsliced; -1 when more than
 * int64 counts; 0 for NULL).
 *
 * ein_plan_run_units runs units [first, first + count) into `partial`, a
 * tensor the caller owns with the layout the plan was made for (as
 * ein_plan_execute's output): it is overwritten with their contribution,
 * zeros where none of them writes, so that the sum of the partials of
 * ranges covering every unit once is ein_plan_execute's output (up to
 * rounding: the order of the sum differs). Safe from many threads at
 * once on one context and plan (each call its own partial), and from
 * many processes (each with its own context and plan). A range outside
 * 0 .. units-1, or count < 1, is EIN_ERR_INVALID_ARGUMENT before
 * anything runs.
 *
 * Summing partials, on the CPU or a device: give each partial its row p of
 * one tensor P of shape (parts, output shape...) on that device, and
 * reduce the rows with einc itself, e.g. ein_eval(ctx, "p ... -> ...",
 * &P, 1, &out, NULL) (docs/design.md, "Units of work"). */
EIN_API int64_t ein_plan_units(const ein_plan *plan);
EIN_NODISCARD
EIN_API ein_status ein_plan_run_units(ein_ctx *ctx, const ein_plan *plan,
                                      const DLTensor *const *inputs,
                                      int ninputs, DLTensor *partial,
                                      int64_t first, int64_t count);

/* What spreading a sliced plan's units over `workers` devices or nodes
 * would take, by a model (docs/design.md, "Cost of spreading units"): the
 * plan's predicted time on `model` (as ein_plan_describe_model predicts)
 * split evenly by units, each worker running ceil(units / workers) of
 * them; the inputs sent to every worker by a broadcast tree and the
 * partials summed by a reduction tree, ceil(log2 workers) rounds each at
 * `link_bytes_per_s` (a network's or a GPU link's bandwidth); no overlap
 * of transfers with compute. */
typedef struct ein_spread_cost {
  int workers;
  double units, units_per_worker;
  double one_seconds;      /* every unit on one worker */
  double compute_seconds;  /* one worker's units */
  double input_seconds;    /* the inputs to every worker */
  double partial_seconds;  /* the partials summed */
  double seconds;          /* the three above */
  double speedup;          /* one_seconds / seconds */
  double efficiency;       /* speedup / workers */
} ein_spread_cost;

/* Fills *out; EIN_ERR_INVALID_ARGUMENT for workers < 1 or a bandwidth that
 * is not positive. A NULL model means h100's. */
EIN_NODISCARD
EIN_API ein_status ein_plan_spread_cost(const ein_plan *plan,
                                        const ein_device_model *model,
                                        int workers, double link_bytes_per_s,
                                        ein_spread_cost *out);

/* Describes the plan: axes, naive and optimised FLOPs, the largest
 * intermediate, one entry per step (kind, operands, batch/M/N/K groups,
 * transposes, FLOPs, bytes, arithmetic intensity) and a predicted time on
 * a device model: a name for ein_device_model_get (NULL: the device the
 * plan targets, "cpu" for a CPU plan, "cuda" for a CUDA or emulated one;
 * an unknown name, or a model of another backend, describes nothing and
 * returns 0). The JSON's "device_model" carries the model's name,
 * description, source, every rate (data sheet and measured), the overheads
 * and the rates used for the plan's arithmetic; "memory" has
 * ein_plan_memory's figures and each temporary's bytes; the predicted
 * time is given in total and per step (ein_plan_predicted_seconds). A plan for
 * CUDA (or the emulated device) adds per step what it runs: in text, a
 * "cuda:" section with each step's cuBLAS call or kernels; in JSON, a
 * "cuda" member of each step with "cublas" (types, compute, transposes,
 * m/n/k, leading dimensions, strides, batch, loops and their form, or null),
 * "kernels" (kind, pass, grid, block, vector_variant), "direct_contraction",
 * "scratch_bytes" and "empty". Returns the
 * full length as snprintf does, writing at most cap bytes with the NUL. */
EIN_API size_t ein_plan_describe(const ein_plan *plan,
                                 ein_describe_format format,
                                 const char *device_model, char *buf,
                                 size_t cap);

/* ein_plan_describe with the caller's model (from ein_device_model_get,
 * or rates of its own). NULL, a model with no usable f32 rate or
 * bandwidth, or one that prices another backend's plans, describes
 * nothing and returns 0. */
EIN_API size_t ein_plan_describe_model(const ein_plan *plan,
                                       ein_describe_format format,
                                       const ein_device_model *model,
                                       char *buf, size_t cap);

#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic pop
#endif

#ifdef __cplusplus
}
#endif

/* The rest of the API, in headers of its own so that each part can be
 * read alone; each includes this one, so either order works. */
#include "ein_grad.h"
#include "ein_shapecheck.h"

#endif /* EIN_H */
