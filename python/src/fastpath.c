/*
 * fastpath.c - the short way through einc.einsum and einc.rearrange for
 * the common call: numpy arrays in, a new numpy array out, no options.
 *
 * The general path (module.c's evaluate) works out the dialect and the
 * options in Python, binds the expression once for the output's shape and
 * again, by key, in ein_eval. On 8x8 inputs that costs several times the
 * work itself. Here one small table, keyed by the expression string, the
 * dialect and reduction asked for and every input's dtype, shape and
 * strides, keeps what the first call found: the plan (ein_plan_create on
 * those layouts, for a C-contiguous output), the output's shape as a tuple
 * and the numpy dtype of the result. A hit takes the inputs through
 * DLPack, allocates the output with one numpy.empty call and runs the plan
 * with the GIL released (kept for plans of a few thousand FLOPs and bytes,
 * where the switch would cost more than the work).
 *
 * torch CPU tensors take the same table once torch is imported: they are
 * exported by torch._C._to_dlpack (the C function behind Tensor.__dlpack__,
 * whose Python wrapper costs several times more), the output is made by
 * numpy.empty as for numpy and handed to torch with torch.from_numpy
 * (shared, not copied), about half of torch.empty's cost. The plan does
 * not depend on the framework, so numpy and torch calls share entries.
 *
 * Where the plan only re-reads one input (ein_plan_output_view: a
 * transpose, a split or merge of adjacent axes, a diagonal), a hit runs
 * nothing: the result is a view of that input (views.c), as numpy.einsum
 * and einops give. Axis lengths (rearrange's h=8) are part of the key.
 *
 * Anything out of the ordinary answers None and the caller takes the
 * general path, which gives the same result or the same error: inputs
 * that are not exactly numpy.ndarray (or all exactly torch.Tensor),
 * DLPack's refusals (bfloat16, byte-swapped), mixed dtypes, torch tensors
 * that need grad or are not on the CPU or of a dtype numpy lacks, more
 * than EIN_MAX_OPERANDS inputs, and any failure to plan (so errors keep
 * the general path's messages).
 *
 * The table is guarded by the GIL. An entry is counted while a call runs
 * its plan without the GIL, so evicting it from another thread meanwhile
 * only marks it; the last user frees it.
 */
#include <string.h>

#include "einpy.h"

#define FAST_SLOTS 64
#define KEEP_GIL_FLOPS 4096.0
#define KEEP_GIL_BYTES 4096.0

typedef struct fast_entry {
  PyObject *expr;      /* str, compared by value */
  PyObject *lengths;   /* ((name, size), ...) compared by value, or NULL */
  int dialect;         /* -1: detected, 0: einops, 1: numpy */
  int reduction;       /* ein_reduction */
  int ninputs;
  DLDataType dtype;    /* every input's */
  int ndims[EIN_MAX_OPERANDS];
  int64_t dims[EIN_MAX_OPERANDS][2 * EIN_MAX_DIMS]; /* shape, then strides */
  ein_plan *plan;
  PyObject *out_shape; /* tuple */
  PyObject *np_dtype;  /* the first input's dtype object */
  int users;           /* calls running the plan without the GIL */
  int keep_gil;        /* a plan too small to be worth a thread switch */
  int evicted;
  Py_hash_t hash;
  /* ein_plan_output_view's answer: the result is a view of an input. */
  int is_view, view_input;
  int64_t view_offset;
  int64_t view_strides[EIN_MAX_DIMS];
} fast_entry;

/* numpy.ndarray, numpy.empty and einc's numpy_dialect(expr, ranks), set by
 * fast_setup; NULL until numpy is in use. torch.Tensor, torch._C._to_dlpack,
 * torch.from_numpy and a function giving a tensor's numpy dtype, set by
 * fast_setup_torch; NULL until torch is in use. */
static PyObject *ndarray_type, *np_empty, *dialect_fn;
static PyObject *tensor_type, *to_dlpack, *from_numpy, *torch_np_dtype;
/* numpy.from_dlpack (None before NumPy 2.1, which reads no versioned
 * DLPack: numpy results are then copies) and torch._C._from_dlpack, for
 * views (views.c's capsules): set by fast_setup and fast_setup_torch. */
static PyObject *np_from_dlpack, *torch_from_dlpack;
static fast_entry *slots[FAST_SLOTS];
static int next_victim;

static void entry_free(fast_entry *e) {
  ein_plan_destroy(e->plan);
  Py_XDECREF(e->expr);
  Py_XDECREF(e->lengths);
  Py_XDECREF(e->out_shape);
  Py_XDECREF(e->np_dtype);
  PyMem_Free(e);
}

/* Whether a tensor's layout is what the entry saw as input i. */
static int same_layout(const fast_entry *e, int i, const DLTensor *t) {
  if (t->ndim != e->ndims[i] || t->dtype.code != e->dtype.code ||
      t->dtype.bits != e->dtype.bits || t->dtype.lanes != e->dtype.lanes)
    return 0;
  int64_t compact = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t stride = t->strides ? t->strides[d] : compact;
    if (t->shape[d] != e->dims[i][d] ||
        stride != e->dims[i][EIN_MAX_DIMS + d])
      return 0;
    compact *= t->shape[d];
  }
  return 1;
}

/* Whether the entry was made for these axis lengths (NULL: none). */
static int same_lengths(const fast_entry *e, PyObject *lengths) {
  if (!e->lengths || !lengths) return e->lengths == lengths;
  int r = PyObject_RichCompareBool(e->lengths, lengths, Py_EQ);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

static fast_entry *lookup(PyObject *expr, Py_hash_t hash, int dialect,
                          int reduction, PyObject *lengths, einpy_tensor *in,
                          int n) {
  for (int s = 0; s < FAST_SLOTS; s++) {
    fast_entry *e = slots[s];
    if (!e || e->hash != hash || e->ninputs != n || e->dialect != dialect ||
        e->reduction != reduction)
      continue;
    int same = 1;
    for (int i = 0; same && i < n; i++) same = same_layout(e, i, in[i].t);
    if (!same) continue;
    if (e->expr != expr &&
        PyUnicode_Compare(e->expr, expr) != 0) /* equal hashes, other str */
      continue;
    if (!same_lengths(e, lengths)) continue;
    return e;
  }
  return NULL;
}

/* numpy_dialect(expr, ranks) for dialect -1; the asked one otherwise. */
static int resolve_dialect(PyObject *expr, int dialect, einpy_tensor *in,
                           int n) {
  if (dialect >= 0) return dialect;
  PyObject *ranks = PyList_New(n);
  for (int i = 0; ranks && i < n; i++)
    PyList_SetItem(ranks, i, PyLong_FromLong(in[i].t->ndim));
  PyObject *r =
      ranks ? PyObject_CallFunctionObjArgs(dialect_fn, expr, ranks, NULL)
            : NULL;
  Py_XDECREF(ranks);
  int is_numpy = r ? PyObject_IsTrue(r) : -1;
  Py_XDECREF(r);
  return is_numpy;
}

/* Puts e in a free slot or in place of the oldest entry. */
static void insert(fast_entry *e) {
  int s = 0;
  while (s < FAST_SLOTS && slots[s]) s++;
  if (s == FAST_SLOTS) {
    s = next_victim;
    next_victim = (next_victim + 1) % FAST_SLOTS;
    if (slots[s]->users)
      slots[s]->evicted = 1;
    else
      entry_free(slots[s]);
  }
  slots[s] = e;
}

/* Copies the inputs' layouts into e (strides in elements, never NULL). */
static void record_layouts(fast_entry *e, einpy_tensor *in, int n) {
  e->ninputs = n;
  e->dtype = in[0].t->dtype;
  for (int i = 0; i < n; i++) {
    const DLTensor *t = in[i].t;
    e->ndims[i] = t->ndim;
    int64_t compact = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
      e->dims[i][d] = t->shape[d];
      e->dims[i][EIN_MAX_DIMS + d] = t->strides ? t->strides[d] : compact;
      compact *= t->shape[d];
    }
  }
}

/* The plan for e's inputs and the output numpy.empty makes for them: its
 * layout (strides of empty or size-1 dims included) is part of the plan,
 * and numpy.empty gives the same one for the same shape and dtype. */
static int make_plan(fast_entry *e, const char *expr, const ein_options *o,
                     einpy_tensor *in, PyObject *first) {
  const DLTensor *ins[EIN_MAX_OPERANDS];
  for (int i = 0; i < e->ninputs; i++) ins[i] = in[i].t;
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  if (ein_output_shape(einpy_ctx(), expr, ins, e->ninputs, o, shape, &ndim) !=
      EIN_OK)
    return -1;
  e->out_shape = einpy_shape_tuple(shape, ndim);
  e->np_dtype = (PyObject *)Py_TYPE(first) == tensor_type
                    ? PyObject_CallFunctionObjArgs(torch_np_dtype, first, NULL)
                    : PyObject_GetAttrString(first, "dtype");
  PyObject *out = e->out_shape && e->np_dtype
                      ? einpy_fast_empty(e->out_shape, e->np_dtype)
                      : NULL;
  einpy_tensor t = {0};
  int ok = out && einpy_tensor_import_numpy(out, &t) == 0 &&
           ein_plan_create(einpy_ctx(), expr, ins, e->ninputs, t.t, o,
                           &e->plan) == EIN_OK;
  einpy_tensor_release(&t);
  Py_XDECREF(out);
  /* Below about a microsecond of work, releasing and taking back the GIL
   * costs more than another thread could gain meanwhile. */
  e->keep_gil = ok && ein_plan_flops(e->plan) < KEEP_GIL_FLOPS &&
                ein_plan_min_bytes(e->plan) < KEEP_GIL_BYTES;
  e->is_view = ok && ein_plan_output_view(e->plan, &e->view_input,
                                          e->view_strides, &e->view_offset);
  return ok ? 0 : -1;
}

/* A new entry for these tensors, or NULL with no exception when the
 * general path should take the call (it raises the error, if any). */
static fast_entry *plan_entry(PyObject *expr, Py_hash_t hash, int dialect,
                              int reduction, PyObject *lengths,
                              PyObject *first, einpy_tensor *in, int n) {
  static PyObject *no_lengths;
  if (!no_lengths && !(no_lengths = PyTuple_New(0))) return NULL;
  int is_numpy = resolve_dialect(expr, dialect, in, n);
  PyObject *utf8 = is_numpy < 0 ? NULL : PyUnicode_AsUTF8String(expr);
  fast_entry *e = utf8 ? einpy_calloc(1, sizeof *e) : NULL;
  einpy_options o;
  if (!e || einpy_options_parse(is_numpy ? Py_True : Py_False,
                                ein_reduction_name((ein_reduction)reduction),
                                "auto", lengths ? lengths : no_lengths,
                                &o) < 0) {
    Py_XDECREF(utf8);
    if (e) PyMem_Free(e);
    return NULL;
  }
  Py_INCREF(expr);
  e->expr = expr;
  Py_XINCREF(lengths);
  e->lengths = lengths;
  e->hash = hash;
  e->dialect = dialect;
  e->reduction = reduction;
  record_layouts(e, in, n);
  int ok = make_plan(e, PyBytes_AsString(utf8), &o.opt, in, first) == 0;
  einpy_options_free(&o);
  Py_DECREF(utf8);
  if (ok) return e;
  entry_free(e);
  return NULL;
}

/* Whether every item of tuple[first, first + count) has exactly `type`. */
static int all_of_type(PyObject *tuple, Py_ssize_t first, Py_ssize_t count,
                       PyObject *type) {
  for (Py_ssize_t i = 0; i < count; i++)
    if ((PyObject *)Py_TYPE(PyTuple_GetItem(tuple, first + i)) != type)
      return 0;
  return type != NULL;
}

/* A torch CPU tensor that needs no grad, through torch._C._to_dlpack; 0,
 * or -1 (no exception) for the general path. */
static int import_torch(PyObject *t, einpy_tensor *out) {
  static PyObject *requires_grad;
  if (!requires_grad &&
      !(requires_grad = PyUnicode_InternFromString("requires_grad")))
    return -1;
  PyObject *grad = PyObject_GetAttr(t, requires_grad);
  PyObject *capsule = grad == Py_False
                          ? PyObject_CallFunctionObjArgs(to_dlpack, t, NULL)
                          : NULL;
  Py_XDECREF(grad);
  int ok = capsule && einpy_tensor_from_capsule(capsule, out) == 0;
  Py_XDECREF(capsule);
  if (ok && (out->t->device.device_type != kDLCPU ||
             out->t->dtype.code == kDLBfloat ||
             out->t->dtype.code == kDLComplex)) {
    einpy_tensor_release(out);
    ok = 0;
  }
  PyErr_Clear();
  return ok ? 0 : -1;
}

/* Takes tuple items [first, first + count) through DLPack when all are
 * exactly numpy.ndarray (or, with torch_ok, all exactly torch.Tensor) of
 * one dtype: 1, or 0 with nothing held and no exception. */
static int import_items(PyObject *tuple, Py_ssize_t first, Py_ssize_t count,
                        int torch_ok, einpy_tensor *in, int *n) {
  if (count < 1 || count > EIN_MAX_OPERANDS) return 0;
  int torch = 0;
  if (!all_of_type(tuple, first, count, ndarray_type) &&
      !(torch = torch_ok && all_of_type(tuple, first, count, tensor_type)))
    return 0;
  for (*n = 0; *n < (int)count; ++*n) {
    PyObject *item = PyTuple_GetItem(tuple, first + *n);
    int r = torch ? import_torch(item, &in[*n])
                  : einpy_tensor_import_numpy(item, &in[*n]);
    if (r < 0) {
      PyErr_Clear(); /* numpy refused (bfloat16, byte order): general path */
      einpy_tensors_release(in, *n);
      *n = 0;
      return 0;
    }
  }
  for (int i = 1; i < *n; i++) {
    DLDataType a = in[0].t->dtype, b = in[i].t->dtype;
    if (a.code != b.code || a.bits != b.bits || a.lanes != b.lanes) {
      einpy_tensors_release(in, *n);
      return 0;
    }
  }
  return 1;
}

int einpy_fast_import(PyObject *tensors, einpy_tensor *in, int *n) {
  return PyTuple_Check(tensors) &&
         import_items(tensors, 0, PyTuple_Size(tensors), 0, in, n);
}

PyObject *einpy_fast_empty(PyObject *shape, PyObject *dtype) {
  return PyObject_CallFunctionObjArgs(np_empty, shape, dtype, NULL);
}

/* Allocates the output and runs e's plan on it; the new array or NULL. */
static PyObject *run_entry(fast_entry *e, einpy_tensor *in, int n) {
  e->users++; /* numpy.empty may run other Python code (a GC pass) too */
  PyObject *out = einpy_fast_empty(e->out_shape, e->np_dtype);
  einpy_tensor o = {0};
  if (out && einpy_tensor_import_numpy(out, &o) == 0) {
    const DLTensor *ins[EIN_MAX_OPERANDS];
    for (int i = 0; i < n; i++) ins[i] = in[i].t;
    ein_status st;
    if (e->keep_gil) {
      st = ein_plan_execute(einpy_ctx(), e->plan, ins, n, o.t);
    } else {
      Py_BEGIN_ALLOW_THREADS st =
          ein_plan_execute(einpy_ctx(), e->plan, ins, n, o.t);
      Py_END_ALLOW_THREADS
    }
    if (st != EIN_OK) {
      einpy_raise(ein_last_error(einpy_ctx()));
      Py_CLEAR(out);
    }
    einpy_tensor_release(&o);
  } else {
    Py_CLEAR(out);
  }
  if (--e->users == 0 && e->evicted) entry_free(e);
  return out;
}

/* The view e's plan reads in[e->view_input] as, made by the input's own
 * library; the input is handed to the view (in[] keeps nothing of it). */
static PyObject *make_view(fast_entry *e, einpy_tensor *in, int torch) {
  PyObject *capsule = einpy_view_capsule(
      &in[e->view_input], !torch, ein_plan_output_ndim(e->plan),
      ein_plan_output_shape(e->plan), e->view_strides, e->view_offset);
  if (!capsule) return NULL;
  PyObject *result = NULL;
  if (torch) {
    result = PyObject_CallFunctionObjArgs(torch_from_dlpack, capsule, NULL);
  } else {
    PyObject *producer = einpy_view_exporter(capsule);
    result = producer ? PyObject_CallFunctionObjArgs(np_from_dlpack,
                                                     producer, NULL)
                      : NULL;
    Py_XDECREF(producer);
  }
  Py_DECREF(capsule);
  return result;
}

/* The ein_reduction a name gives, or -1 (no exception). The last name
 * seen is remembered by identity: callers pass the same str constant. */
static PyObject *last_reduction; /* owned */
static int last_reduction_value;

static int parse_reduction(PyObject *name) {
  if (name == last_reduction) return last_reduction_value;
  PyObject *utf8 = PyUnicode_AsUTF8String(name);
  ein_reduction r;
  int ok = utf8 && ein_reduction_parse(PyBytes_AsString(utf8), &r) == EIN_OK;
  Py_XDECREF(utf8);
  if (!ok) {
    PyErr_Clear();
    return -1;
  }
  Py_INCREF(name);
  Py_XDECREF(last_reduction);
  last_reduction = name;
  last_reduction_value = (int)r;
  return last_reduction_value;
}

/* The call's expression and where its tensors are in args: einc's order
 * (expression first) or einops' (last). 0 when neither is a str. */
static int split_args(PyObject *args, PyObject **expr, Py_ssize_t *first,
                      Py_ssize_t *count) {
  Py_ssize_t n = PyTuple_Size(args);
  if (n < 2) return 0;
  *count = n - 1;
  *expr = PyTuple_GetItem(args, 0);
  *first = 1;
  if (PyUnicode_CheckExact(*expr)) return 1;
  *expr = PyTuple_GetItem(args, n - 1);
  *first = 0;
  return PyUnicode_CheckExact(*expr);
}

/* The table's entry for this call, planned on a miss; NULL (no exception)
 * for the general path. */
static fast_entry *entry_for(PyObject *expr, int dialect, int reduction,
                             PyObject *lengths, PyObject *first,
                             einpy_tensor *in, int n) {
  Py_hash_t hash = PyObject_Hash(expr);
  fast_entry *e = lookup(expr, hash, dialect, reduction, lengths, in, n);
  if (e) return e;
  e = plan_entry(expr, hash, dialect, reduction, lengths, first, in, n);
  if (e)
    insert(e);
  else
    PyErr_Clear();
  return e;
}

/* fast(args, numpy, reduce[, lengths]) -> result, or None for the
 * general path. args is einsum's (expression first or last, then or
 * before the tensors); numpy None guesses the dialect, else its truth
 * picks it; reduce None is 'sum'; lengths, a tuple of (name, size) pairs
 * or None. The result is a view of an input where the plan says it can
 * be (views.c), else a new array. */
static PyObject *py_fast(PyObject *self, PyObject *fargs) {
  (void)self;
  Py_ssize_t nargs = PyTuple_Size(fargs);
  if (nargs != 3 && nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "fast(args, numpy, reduce[, lengths])");
    return NULL;
  }
  PyObject *args = PyTuple_GetItem(fargs, 0), *expr;
  PyObject *numpy = PyTuple_GetItem(fargs, 1);
  PyObject *reduce = PyTuple_GetItem(fargs, 2);
  PyObject *lengths = nargs == 4 ? PyTuple_GetItem(fargs, 3) : Py_None;
  if (lengths == Py_None) lengths = NULL;
  else if (!PyTuple_Check(lengths)) Py_RETURN_NONE;
  Py_ssize_t first, count;
  int dialect = numpy == Py_None ? -1 : PyObject_IsTrue(numpy);
  int reduction = reduce == Py_None              ? (int)EIN_REDUCE_SUM
                  : PyUnicode_CheckExact(reduce) ? parse_reduction(reduce)
                                                 : -1;
  einpy_tensor in[EIN_MAX_OPERANDS];
  int n = 0;
  if (dialect < 0 && numpy != Py_None) return NULL; /* its __bool__ raised */
  if (!PyTuple_Check(args) || reduction < 0 ||
      !split_args(args, &expr, &first, &count) ||
      !import_items(args, first, count, 1, in, &n))
    Py_RETURN_NONE;
  PyObject *first_item = PyTuple_GetItem(args, first);
  int torch = (PyObject *)Py_TYPE(first_item) == tensor_type;
  fast_entry *e =
      entry_for(expr, dialect, reduction, lengths, first_item, in, n);
  if (e && e->is_view && (torch || np_from_dlpack != Py_None)) {
    PyObject *view = make_view(e, in, torch);
    einpy_tensors_release(in, n);
    return view;
  }
  PyObject *result = e ? run_entry(e, in, n) : NULL;
  einpy_tensors_release(in, n);
  if (!e) Py_RETURN_NONE;
  if (result && torch) {
    PyObject *array = result; /* the torch tensor shares its memory */
    result = PyObject_CallFunctionObjArgs(from_numpy, array, NULL);
    Py_DECREF(array);
  }
  return result;
}

/* Keeps n new references in the given slots, dropping the old ones. */
static void keep(PyObject **objs, PyObject ***slots_, int n) {
  for (int i = 0; i < n; i++) {
    Py_INCREF(objs[i]);
    Py_CLEAR(*slots_[i]);
    *slots_[i] = objs[i];
  }
}

/* fast_setup(numpy.ndarray, numpy.empty, numpy_dialect, numpy.from_dlpack) */
static PyObject *py_fast_setup(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *objs[4];
  if (!PyArg_ParseTuple(args, "OOOO:fast_setup", &objs[0], &objs[1],
                        &objs[2], &objs[3]))
    return NULL;
  PyObject **slots_[] = {&ndarray_type, &np_empty, &dialect_fn,
                         &np_from_dlpack};
  keep(objs, slots_, 4);
  Py_RETURN_NONE;
}

/* fast_setup_torch(torch.Tensor, torch._C._to_dlpack, torch.from_numpy,
 *                  tensor -> numpy dtype, torch._C._from_dlpack) */
static PyObject *py_fast_setup_torch(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *objs[5];
  if (!PyArg_ParseTuple(args, "OOOOO:fast_setup_torch", &objs[0], &objs[1],
                        &objs[2], &objs[3], &objs[4]))
    return NULL;
  PyObject **slots_[] = {&tensor_type, &to_dlpack, &from_numpy,
                         &torch_np_dtype, &torch_from_dlpack};
  keep(objs, slots_, 5);
  Py_RETURN_NONE;
}

static PyMethodDef fast_methods[] = {
    {"fast", py_fast, METH_VARARGS,
     "fast(args, numpy, reduce[, lengths]) -> result (a view of an input "
     "where the plan only re-reads it), or None when the call needs the "
     "general path"},
    {"fast_setup", py_fast_setup, METH_VARARGS,
     "fast_setup(ndarray, empty, numpy_dialect, from_dlpack): enables fast()"},
    {"fast_setup_torch", py_fast_setup_torch, METH_VARARGS,
     "fast_setup_torch(Tensor, _to_dlpack, from_numpy, numpy_dtype_of, "
     "_from_dlpack): fast() takes torch CPU tensors too"},
    {NULL, NULL, 0, NULL}};

int einpy_fast_init(PyObject *module) {
  return PyModule_AddFunctions(module, fast_methods);
}

void einpy_fast_free(void) {
  for (int s = 0; s < FAST_SLOTS; s++)
    if (slots[s] && !slots[s]->users) entry_free(slots[s]);
  memset(slots, 0, sizeof slots);
  Py_CLEAR(ndarray_type);
  Py_CLEAR(np_empty);
  Py_CLEAR(dialect_fn);
  Py_CLEAR(tensor_type);
  Py_CLEAR(to_dlpack);
  Py_CLEAR(from_numpy);
  Py_CLEAR(torch_np_dtype);
  Py_CLEAR(np_from_dlpack);
  Py_CLEAR(torch_from_dlpack);
  Py_CLEAR(last_reduction);
}
