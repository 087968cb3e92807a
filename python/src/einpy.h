/*
 * einpy.h - the pieces of the extension einc._einc and what each owns.
 *
 * The extension is a thin layer over include/ein.h, written against
 * Python's limited API 3.9 (Meson defines Py_LIMITED_API). Its files in
 * the order they call each other (each calls only files listed before
 * it; tests/file_graph.py checks that no two call round a circle):
 *   errors.c     einc's errors as einc.EincError with the caret text
 *   options.c    Python option values into an ein_options; shape tuples
 *   tensors.c    DLPack capsules into DLTensors
 *   context.c    the process's one ein_ctx, runs without the GIL, the
 *                output from the caller's allocator, the classes' shape
 *   inputs.c     numpy and torch as einc knows them; a call's inputs
 *   views.c      numpy views of inputs through DLPack
 *   plan_table.c the plans of the common call, kept in the context's
 *                plan cache (ein.h: ein_cache_find)
 *   fastgrad.c   eager torch calls that record autograd
 *   call.c       einpy_call, the one entry of a call: the table, then
 *                fastgrad.c, then the general path (ein_eval)
 *   builtins.c   einc.rearrange and einc.reduce as C builtins
 *   dropin.c     the drop-ins (numpy, torch, opt_einsum, einops)
 *   plan_type.c, memo_type.c, grad.c   ein_plan, ein_shape_memo and the
 *                gradient program as Python values
 *   xla_ffi.c    JAX's XLA FFI handlers (ein_eval on XLA's buffers)
 *   module.c     the module: opens the context, adds everything
 * Everything friendly (einops' signatures, picking the array library of
 * the result) is Python, in python/einc/.
 *
 * Every function that can fail returns -1 (or NULL) with a Python
 * exception set, and 0 (or an object) otherwise.
 */
#ifndef EINPY_H
#define EINPY_H

#include <Python.h>
#include <string.h>

#include "ein.h"

/* PyMem_Calloc's work: n zeroed items of `size` bytes, or NULL (also on
 * overflow). PyMem_Calloc itself joined the limited API only after 3.9,
 * so 3.9's headers do not declare it to an abi3 build. */
static inline void *einpy_calloc(size_t n, size_t size) {
  if (size && n > (size_t)-1 / size) return NULL;
  size_t bytes = n * size;
  void *p = PyMem_Malloc(bytes > 0 ? bytes : 1);
  if (p) memset(p, 0, bytes);
  return p;
}

/* ----------------------------------------------------------- context.c */

/* The process's context: contexts are thread-safe and keep errors per
 * thread, so one serves every Python thread. Valid while the module is:
 * einpy_ctx_open (import; -1 when out of memory) to einpy_ctx_close. */
ein_ctx *einpy_ctx(void);
int einpy_ctx_open(void);
void einpy_ctx_close(void);

/* Whether a plan is too small (below about a microsecond of work) to be
 * worth releasing the GIL for: the switch would cost more. */
int einpy_keep_gil(const ein_plan *plan);

/* Adds to module the class `name` ("einc._einc.Name", a literal: the type
 * keeps pointing into it) of objects of `size` bytes, made by init, freed
 * by dealloc, with the given methods and docstring: the one shape every
 * class of the extension takes. */
int einpy_add_class(PyObject *module, const char *name, size_t size,
                    const char *doc, initproc init, destructor dealloc,
                    PyMethodDef *methods);

/* The end of such a class's dealloc, after its own parts: frees the
 * object and drops its reference to its type. */
void einpy_object_free(PyObject *self);


/* ------------------------------------------------------------ errors.c */

/* Creates einc._einc.EincError (a RuntimeError and a ValueError) and adds
 * it to the module. */
int einpy_errors_init(PyObject *module);

/* Raises EincError for a failed call: the caret text of `err` (ein.h's
 * ein_error_format) with .code, .status, .message, .span, .spans, .expr.
 * Returns NULL for `return einpy_raise(...)`. */
PyObject *einpy_raise(const ein_error *err);

/* Raises EincError with a plain message (no expression to point into). */
PyObject *einpy_raise_status(ein_status status, const char *fmt, ...);

/* ----------------------------------------------------------- tensors.c */

/* DLPack 1.0's versioned managed tensor, which Debian's dlpack.h (older)
 * lacks, as the standard lays it out. */
typedef struct einpy_dlpack_version {
  uint32_t major;
  uint32_t minor;
} einpy_dlpack_version;

typedef struct einpy_managed_versioned {
  einpy_dlpack_version version;
  void *manager_ctx;
  void (*deleter)(struct einpy_managed_versioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} einpy_managed_versioned;

enum { EINPY_FLAG_READ_ONLY = 1, EINPY_FLAG_IS_COPIED = 2 };

/* DLPack 1.2's C exchange table, which a framework puts on its tensor type
 * as __dlpack_c_exchange_api__ (a "dlpack_exchange_api" capsule; torch
 * 2.10 on): C functions that give a tensor's managed tensor and make a
 * tensor from one with no Python call and no capsule. Laid out as the
 * standard's DLPackExchangeAPI; inputs.c uses the import. */
typedef struct einpy_exchange_api {
  einpy_dlpack_version version;
  void *prev_api;
  void *managed_tensor_allocator;
  int (*managed_tensor_from_py_object_no_sync)(void *py_object,
                                               einpy_managed_versioned **out);
  int (*managed_tensor_to_py_object_no_sync)(einpy_managed_versioned *tensor,
                                             void **out_py_object);
  void *dltensor_from_py_object_no_sync;
  void *current_work_stream;
} einpy_exchange_api;


/* A tensor taken from a DLPack producer. `t` points into the managed
 * struct, which this owns until einpy_tensor_release (the producer's
 * deleter). `dtype_code`/`bits` below 0 in einpy_tensor_import leave the
 * dtype as the producer gave it. */
/* Operands of one call through the Python layer (its arrays of them live
 * on the stack: 4096 tensors are about 100 KiB), and of a call the fast
 * path serves (more go the general path). The library's own limit,
 * EIN_MAX_OPERANDS, is far larger. */
enum { EINPY_MAX_OPERANDS = 4096, EINPY_FAST_MAX_OPERANDS = 16 };

typedef struct einpy_tensor {
  DLTensor *t;
  void *managed; /* DLManagedTensor or its versioned form; NULL: empty */
  int versioned;
  int read_only;
} einpy_tensor;

/* Takes `obj` (anything with __dlpack__, or a "dltensor" capsule)
 * zero-copy. `stream` (a Python int, or NULL for none) is passed as
 * __dlpack__(stream=...): the CUDA stream the consumer will use. */
int einpy_tensor_import(PyObject *obj, PyObject *stream, einpy_tensor *out);

/* The same for a numpy array, a little faster: the legacy __dlpack__()
 * (no keyword to parse, no bound method made), and the versioned form only
 * for the read-only arrays that numpy exports no other way. read_only is
 * then 0 for writable arrays and arrays taken the legacy way alike, so
 * this is for inputs and for outputs einc allocated itself. */
int einpy_tensor_import_numpy(PyObject *obj, einpy_tensor *out);

/* Takes the managed tensor out of a "dltensor" or "dltensor_versioned"
 * capsule and marks the capsule used, as einpy_tensor_import does. */
int einpy_tensor_from_capsule(PyObject *capsule, einpy_tensor *out);

/* Calls the producer's deleter (needs the GIL) and empties *t, keeping a
 * pending Python error as it was (a deleter running Python code would
 * otherwise turn it into a SystemError). Safe on an empty tensor. */
void einpy_tensor_release(einpy_tensor *t);

/* The same without touching Python's error state, for a caller that may
 * not hold the GIL (a view's deleter, views.c): the deleter takes the GIL
 * itself where it needs it. */
void einpy_tensor_release_raw(einpy_tensor *t);

/* Imports every item of a tuple into ts[0..n) (at most EINPY_MAX_OPERANDS);
 * on failure releases what it took. */
int einpy_tensors_import(PyObject *tuple, PyObject *stream, einpy_tensor *ts,
                         int *n);
void einpy_tensors_release(einpy_tensor *ts, int n);

/* Gives tensors the dtype (code, bits) when code >= 0: numpy's bfloat16
 * travels as uint16 (NumPy refuses to export it) and is typed here. */
void einpy_tensors_retype(einpy_tensor *ts, int n, int code, int bits);

/* (context.c) alloc(shape) for the shape `expr` gives on these inputs (a
 * new reference), or NULL with einc's error raised. */
PyObject *einpy_output_for(const char *expr, const einpy_tensor *in, int nin,
                           const ein_options *o, PyObject *alloc);

/* (context.c) Runs ein_plan_execute (plan not NULL) or ein_eval on the
 * process's context without the GIL. `stream` None (or NULL) queues CUDA
 * work on the context's own stream; an int queues it on that stream as
 * DLPack numbers them (1: the legacy default stream, 2: per-thread, else
 * a cudaStream_t), under a lock because the context's stream is shared by
 * every thread; `sync` nonzero then waits for the work (for JAX, which
 * has no stream to order with). Returns 0, or -1 with EincError set. */
int einpy_run(const char *expr, const ein_plan *plan, einpy_tensor *in,
              int nin, einpy_tensor *out, const ein_options *o,
              PyObject *stream, int sync);

/* (context.c) fn(arg) on the process's context without the GIL, with
 * `stream` and `sync` as einpy_run takes them: the one place the
 * context's CUDA stream is set. Returns 0, or -1 with EincError set from
 * the context's last error when fn fails. */
int einpy_on_stream(PyObject *stream, int sync, ein_status (*fn)(void *),
                    void *arg);

/* ----------------------------------------------------------- options.c */

/* An ein_options that owns its length names. */
typedef struct einpy_options {
  ein_options opt;
  ein_length *lengths;
  char **names;
  int nlengths;
  char *path; /* owned copy of opt.path (einpy_options_set_path), or NULL */
  char *slice; /* owned copy of opt.slice_axes, or NULL */
} einpy_options;

/* Fills *o from Python values: numpy (truthy: the numpy dialect),
 * reduction ("sum", ...), backend ("auto", "cpu", ...), and lengths (a
 * tuple of (name, size) pairs). Release with einpy_options_free. */
int einpy_options_parse(PyObject *numpy, const char *reduction,
                        const char *backend, PyObject *lengths,
                        einpy_options *o);
void einpy_options_free(einpy_options *o);

/* Sets o->opt.path to a copy of `path` (opt_einsum's linear form, see
 * ein.h); NULL or "" leaves the search to the planner. */
int einpy_options_set_path(einpy_options *o, const char *path);

/* Sets o->opt.slice_axes to a copy of `slice` (ein.h's form, "a:4,b";
 * NULL or "": none) and o->opt.memory_limit (bytes; 0: none). */
int einpy_options_set_slicing(einpy_options *o, const char *slice,
                              long long memory_limit);
/* Sets the path search's options (ein.h's plan_time, seed, objective by
 * name); -1 with an EincError for a bad value. */
int einpy_options_set_search(einpy_options *o, double plan_time,
                             unsigned long long seed, const char *objective);

/* The length of `tuple`; -1 with a TypeError `not_tuple` where it is no
 * tuple, or an EincError from `too_long` (a format of the length, %zd, and
 * of `most`, %d) where it is longer than `most`. */
Py_ssize_t einpy_tuple_len(PyObject *tuple, int most, const char *not_tuple,
                           const char *too_long);

/* Reads a tuple of ints into shape[0..*ndim) (at most EIN_MAX_DIMS). */
int einpy_shape_parse(PyObject *tuple, int64_t *shape, int *ndim);

/* Reads a tuple of shapes into dims[0..*n), ndims[0..*n) (at most
 * EINPY_MAX_OPERANDS). */
int einpy_shapes_parse(PyObject *shapes, int64_t (*dims)[EIN_MAX_DIMS],
                       int *ndims, int *n);

/* A tuple of Python ints from n int64s. */
PyObject *einpy_shape_tuple(const int64_t *shape, int n);

/* obj.<name> (a new reference, or NULL with an exception), the name made
 * an interned str once into *slot (the caller's static): an attribute
 * read on every call then makes no str (PyObject_GetAttrString does, and
 * took about a sixth of a numpy view call's instructions). */
PyObject *einpy_attr(PyObject *obj, PyObject **slot, const char *name);

/* The ein_reduction a str names, or -1 (no exception); the last name is
 * kept until einpy_reduction_forget (module teardown). */
int einpy_reduction_of(PyObject *name);
void einpy_reduction_forget(void);

/* -------------------------------------------------------------- grad.c */

/* grad_program(expr, shapes, numpy, reduction, lengths, wrt, dtype): the
 * gradient program (ein_grad_create) as a dict of plain values. */
PyObject *einpy_grad_program(PyObject *self, PyObject *args);
PyObject *einpy_grad_run(PyObject *self, PyObject *args); /* grad_interp.c */

/* ------------------------------------------------------------ inputs.c */

/* The array libraries' objects einc's Python layer hands over at import
 * (fast_setup: numpy; fast_setup_torch: torch), NULL until then. */
typedef struct einpy_frameworks {
  /* numpy.ndarray, numpy.empty, einc's numpy_dialect(expr, ranks) and
   * numpy.from_dlpack (None before NumPy 2.1: numpy results are copies) */
  PyObject *ndarray_type, *np_empty, *dialect_fn, *np_from_dlpack;
  /* torch.Tensor, torch.nn.Parameter, torch._C._to_dlpack,
   * torch.from_numpy, a tensor's numpy dtype, torch.Tensor.as_strided */
  PyObject *tensor_type, *parameter_type, *to_dlpack, *from_numpy,
      *torch_np_dtype, *torch_as_strided;
  /* torch.Tensor.__dlpack_c_exchange_api__ (torch 2.10 on) and its
   * table, which replaces _to_dlpack where torch has one */
  PyObject *torch_api_capsule;
  const einpy_exchange_api *torch_api;
  /* torch's states in which a plain CPU tensor must not be computed on
   * through DLPack: callables whose truthy answer sends the call to
   * Python (a tuple: jit tracing, dispatch modes), one asked only for
   * plans autocast could change, torch.is_grad_enabled, and
   * torch.autograd.forward_ad (a dual level open: a tangent DLPack would
   * drop) */
  PyObject *torch_guards, *torch_autocast, *grad_enabled, *forward_ad;
} einpy_frameworks;
extern einpy_frameworks einpy_fw;

/* Adds fast_setup() and fast_setup_torch() (which fill einpy_fw);
 * einpy_inputs_free drops what they kept (module teardown). */
int einpy_inputs_init(PyObject *module);
void einpy_inputs_free(void);

/* Whether obj is exactly a numpy.ndarray (numpy in use), or exactly a
 * torch.Tensor or nn.Parameter (torch in use). */
int einpy_is_ndarray(PyObject *obj);
int einpy_is_torch_tensor(PyObject *obj);

/* Whether callable f answers something true (an error counts as true);
 * whether torch is tracing, in a dispatch mode or with a dual level open
 * (einpy_fw's guards), where einc's DLPack result would bypass it. */
int einpy_asks_python(PyObject *f);
int einpy_torch_declines(void);

/* One call's inputs. numpy arrays are taken (their capsules consumed), as
 * are torch tensors through torch's exchange table; without one, torch
 * tensors stay in their capsules from torch._C._to_dlpack, unused, and
 * dropping the capsule frees the rest. */
typedef struct einpy_inputs {
  einpy_tensor t[EINPY_FAST_MAX_OPERANDS];
  PyObject *capsules[EINPY_FAST_MAX_OPERANDS]; /* torch's, owned; or NULL */
  int n;
  int torch;
  int graph; /* a torch tensor needs grad while grad is recorded */
} einpy_inputs;

/* Takes tuple items [first, first + count) through DLPack when all are
 * exactly numpy.ndarray (or, with torch_ok, all exactly torch.Tensor on
 * the CPU, no torch guard answering true) of one dtype: 1, or 0 with
 * nothing held and no exception (in->graph set where a tensor needs
 * grad while grad is recorded). einpy_inputs_release gives them back. */
int einpy_inputs_take(PyObject *tuple, Py_ssize_t first, Py_ssize_t count,
                      int torch_ok, einpy_inputs *in);
void einpy_inputs_release(einpy_inputs *in);

/* What a drop-in's contract sends back to Python (EINPY_REFUSE_*): bool
 * inputs (numpy's bool einsum is an or of ands), integer and bool inputs
 * (torch promotes their sums), inputs of more than one dim whose last
 * stride is not one element (numpy's order='K' follows their layout).
 * A request that refuses anything skips the graph path (tensors that
 * need grad) unless it also says EINPY_KEEP_GRAPH: its refusals concern
 * only tensors that never need grad (integers, bools).
 * einpy_refused: whether the inputs are such. */
enum {
  EINPY_REFUSE_BOOL = 1,
  EINPY_REFUSE_INTEGER = 2,
  EINPY_REFUSE_STRIDED = 4,
  EINPY_KEEP_GRAPH = 8,
};
int einpy_refused(const einpy_inputs *in, unsigned refuse);

/* Takes a tuple of exactly-numpy.ndarray inputs of one dtype through
 * DLPack: 1 with them in in[0..*n), or 0 with nothing held and no
 * exception when the tuple is anything else (the general path's case). */
int einpy_fast_import(PyObject *tensors, einpy_tensor *in, int *n);

/* numpy.empty(shape, dtype); only once numpy is in use. */
PyObject *einpy_fast_empty(PyObject *shape, PyObject *dtype);

/* -------------------------------------------------------- plan_table.c */

/* What the first call of a kind found: the data of its entry in the
 * context's plan cache (plan_table.c). */
typedef struct einpy_entry {
  ein_plan *plan;      /* a reference of the entry's own */
  PyObject *expr;      /* str; the key holds its hash, a hit compares it */
  PyObject *lengths;   /* ((name, size), ...) or NULL, the same */
  DLDataType dtype;    /* every input's */
  PyObject *out_shape; /* tuple */
  PyObject *np_dtype;  /* the first input's dtype object */
  int keep_gil;        /* a plan too small to be worth a thread switch */
  /* ein_plan_output_view's answer: the result is a view of an input. */
  int is_view, view_input;
  int autocast; /* floating contraction inputs autocast could recast */
  int64_t view_offset;
  int64_t view_strides[EIN_MAX_DIMS];
  PyObject *view_stride_tuple; /* view_strides as torch's as_strided takes
                                  them, made by the first torch view */
  int users;   /* calls using it (from the find to einpy_table_done) */
  int evicted; /* out of the cache: the last user frees it */
  struct einpy_entry *next;    /* queued to be freed (plan_table.c) */
} einpy_entry;

/* The entry for this call (first: its first tensor), found in the
 * context's plan cache or planned and cached, in use until
 * einpy_table_done (valid until then, whatever other threads evict);
 * NULL (no exception) where it cannot be planned: the general path then
 * raises the error, if any. With the GIL. */
einpy_entry *einpy_table_entry(PyObject *expr, int dialect, int reduction,
                               unsigned rules, PyObject *lengths,
                               PyObject *first, einpy_tensor *in, int n);

/* Allocates e's output with numpy.empty and runs e's plan on it: the new
 * array, or NULL with an exception. */
PyObject *einpy_table_run(einpy_entry *e, einpy_tensor *in, int n);

/* Ends the use einpy_table_entry began. */
void einpy_table_done(einpy_entry *e);

/* Frees the entries whose plans are gone (module teardown, after the
 * context is closed). */
void einpy_table_free(void);

/* ---------------------------------------------------------- fastgrad.c */

/* Adds fast_setup_graph() and fast_graph_clear(): eager torch calls that
 * record autograd, run as the functions of einc/_torch_lower.py found by
 * call structure. einpy_fast_graph is call.c's way in: the result,
 * None (a new reference) for the general path, or NULL with an error
 * that the function raised. */
int einpy_fast_graph_init(PyObject *module);
void einpy_fast_graph_free(void);
PyObject *einpy_fast_graph(PyObject *args, Py_ssize_t first,
                           Py_ssize_t count, PyObject *expr, int dialect,
                           int reduction, unsigned rules, PyObject *lengths);

/* -------------------------------------------------------------- call.c */

/* The general path's part of a request: what evaluate() and
 * evaluate_scaled() take beyond the tensors (call.c documents them). */
typedef struct einpy_general {
  const char *expr;
  einpy_options options; /* the caller's, parsed */
  PyObject *out, *alloc; /* out= or None; alloc(shape) makes the output */
  PyObject *types;       /* per-input (code, bits) or None; NULL: code */
  int code, bits;        /* dtype of every tensor (code < 0: as given) */
  PyObject *stream;      /* NULL: the context's stream */
  int sync;
} einpy_general;

/* One call: the tensors args[first, first + count), the expression and
 * what the plan table keys on; refuse, a drop-in's EINPY_REFUSE_*; table,
 * whether the table is asked; general, NULL where the caller's Python
 * function takes what the table does not serve (the answer is then
 * None), else the general path's part (args then is the whole tuple of
 * tensors). */
typedef struct einpy_request {
  PyObject *args;
  Py_ssize_t first, count;
  PyObject *expr; /* str */
  int dialect;    /* -1: guess (numpy_dialect), 0: einops, 1: numpy */
  int reduction;  /* ein_reduction */
  unsigned rules; /* ein_options.axis_rules */
  PyObject *lengths; /* ((name, size), ...) or NULL */
  unsigned refuse;
  int table;
  const einpy_general *general;
} einpy_request;

/* The one entry of a call: the result, None (a new reference) where a
 * request with no general part is not served, or NULL with an
 * exception. */
PyObject *einpy_call(const einpy_request *r);

/* Adds fast(), evaluate() and evaluate_scaled(). */
int einpy_call_init(PyObject *module);

/* ---------------------------------------------------------- builtins.c */

/* Adds fast_rearrange(), fast_rearrange_einops() and fast_reduce(): the
 * builtins einc.rearrange, einc.einops.rearrange and einc.reduce over
 * their Python functions. einpy_builtins_free drops what they kept. */
int einpy_builtins_init(PyObject *module);
void einpy_builtins_free(void);

/* For dropin.c: einpy_served is the table's answer for (tensor,
 * pattern[, reduction]) with lengths from kwargs (none of `own`) and the
 * inputs `refuse` (EINPY_REFUSE_*) sent back: a result, or NULL (an
 * exception set, or none for the general path).
 * einpy_builtin(def, general_slot, (general, doc)): a builtin of module
 * einc that hands calls to general. */
PyObject *einpy_served(PyObject *args, PyObject *kwargs, int reduction,
                       unsigned rules, unsigned refuse,
                       const char *const *own);
PyObject *einpy_builtin(PyMethodDef *def, PyObject **general_slot,
                        PyObject *args);

/* ------------------------------------------------------------ dropin.c */

/* Adds fast_numpy_einsum(), fast_torch_einsum(), fast_contract(),
 * fast_einops_reduce() and fast_einops_einsum() to the module: the
 * drop-ins as builtins over their Python functions. */
int einpy_dropin_init(PyObject *module);
void einpy_dropin_free(void);

/* ------------------------------------------------------------- views.c */

/* A "dltensor_versioned" capsule for a strided view of `source` (a host
 * numpy array): the view's ndim, shape, strides (elements) and the element
 * offset of its first element from source's, with source's read-only
 * flag. Takes source over (it is emptied; the capsule's tensor releases it
 * when its consumer is done, or the capsule when it was never consumed).
 * NULL with an exception on failure (source then released). */
PyObject *einpy_view_capsule(einpy_tensor *source, int ndim,
                             const int64_t *shape, const int64_t *strides,
                             int64_t offset);

/* An object whose __dlpack__ gives `capsule` once: numpy.from_dlpack
 * takes producers, not capsules. */
PyObject *einpy_view_exporter(PyObject *capsule);

/* The view of numpy array `a` (imported as `source`) with this shape (a
 * tuple of ndim ints), strides (elements) and element offset from a's
 * first element, made as numpy makes its own views of a: its .base is
 * numpy's (the owner of a's memory, or the first array in a's chain of
 * bases whose base is not an ndarray) and it is read-only where a is.
 * NULL with no exception where numpy takes no buffer for it: the caller
 * then makes the view through DLPack (einpy_view_capsule). */
PyObject *einpy_numpy_view(PyObject *ndarray_type, PyObject *a,
                           const einpy_tensor *source, PyObject *shape,
                           int ndim, const int64_t *strides,
                           int64_t offset);

int einpy_views_init(PyObject *module);

/* ------------------------------------------------- plan_type.c, memo.c */

int einpy_plan_type_init(PyObject *module);
int einpy_memo_type_init(PyObject *module);

#endif
