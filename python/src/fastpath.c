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
 * exported through DLPack's C exchange table (torch 2.10 on: C calls, no
 * Python call, no capsule) or else torch._C._to_dlpack (the C function
 * behind Tensor.__dlpack__, whose Python wrapper costs several times
 * more); the output is made by numpy.empty as for numpy and handed to
 * torch with torch.from_numpy (shared, not copied), about half of
 * torch.empty's cost. The plan does not depend on the framework, so numpy
 * and torch calls share entries.
 *
 * Where the plan only re-reads one input (ein_plan_output_view: a
 * transpose, a split or merge of adjacent axes, a diagonal), a hit runs
 * nothing: the result is a view of that input, as numpy.einsum and einops
 * give: for numpy a DLPack tensor made in views.c, for torch the input's
 * own Tensor.as_strided (torch_view), so that it is a torch view (its
 * _base, version counter and in-place checks are torch's). Axis lengths
 * (rearrange's h=8) are part of the key.
 *
 * einc.rearrange and einc.reduce themselves are C functions here
 * (fast_rearrange, fast_reduce), so a call the table serves runs no
 * Python frame; they hand every other call to the Python rearrange and
 * reduce (python/einc/_einops.py).
 *
 * Anything out of the ordinary answers None and the caller takes the
 * general path, which gives the same result or the same error: inputs
 * that are not exactly numpy.ndarray (or all exactly torch.Tensor),
 * numpy's DLPack refusals (bfloat16, byte-swapped), mixed dtypes, torch
 * tensors that need grad or are not on the CPU, complex ones with the
 * conjugate or negative bit, torch dtypes einc cannot map to numpy, more
 * than EINPY_FAST_MAX_OPERANDS inputs, and any failure to plan (so errors keep
 * the general path's messages). torch calls also go back to Python while
 * torch traces (torch.jit.trace, a dispatch mode such as make_fx's) and,
 * for contractions of float tensors, under autocast: einc/_torch.py
 * routes them (torch_guards, torch_autocast). Subclasses (nn.Parameter,
 * FakeTensor, FunctionalTensor) fail the exact-type test.
 *
 * The table is guarded by the GIL. An entry is counted while a call runs
 * its plan without the GIL, so evicting it from another thread meanwhile
 * only marks it; the last user frees it.
 */
#include <stdlib.h>
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
  unsigned rules;      /* ein_options.axis_rules */
  int ninputs;
  DLDataType dtype;    /* every input's */
  int ndims[EINPY_FAST_MAX_OPERANDS];
  int64_t dims[EINPY_FAST_MAX_OPERANDS][2 * EIN_MAX_DIMS]; /* shape, then strides */
  ein_plan *plan;
  PyObject *out_shape; /* tuple */
  PyObject *np_dtype;  /* the first input's dtype object */
  int users;           /* calls running the plan without the GIL */
  int keep_gil;        /* a plan too small to be worth a thread switch */
  int evicted;
  Py_hash_t hash;
  /* ein_plan_output_view's answer: the result is a view of an input. */
  int is_view, view_input;
  int autocast; /* floating contraction inputs autocast could recast */
  int64_t view_offset;
  int64_t view_strides[EIN_MAX_DIMS];
  PyObject *view_stride_tuple; /* view_strides as torch's as_strided takes
                                  them, made by the first torch view */
} fast_entry;

/* numpy.ndarray, numpy.empty and einc's numpy_dialect(expr, ranks), set by
 * fast_setup; NULL until numpy is in use. torch.Tensor, torch._C._to_dlpack,
 * torch.from_numpy and a function giving a tensor's numpy dtype, set by
 * fast_setup_torch; NULL until torch is in use. */
static PyObject *ndarray_type, *np_empty, *dialect_fn;
static PyObject *tensor_type, *to_dlpack, *from_numpy, *torch_np_dtype;
/* torch.nn.Parameter (a tensor like torch.Tensor here) and
 * torch.is_grad_enabled, set by fast_setup_torch: a tensor that requires
 * grad is read through DLPack when no gradient is recorded (torch.no_grad,
 * inference_mode: a model's weights at inference). */
static PyObject *parameter_type, *grad_enabled;

/* Whether obj is exactly a torch.Tensor or an nn.Parameter. */
static int is_torch_tensor(PyObject *obj) {
  PyObject *t = (PyObject *)Py_TYPE(obj);
  return tensor_type && (t == tensor_type || t == parameter_type);
}
/* numpy.from_dlpack (None before NumPy 2.1, which reads no versioned
 * DLPack: numpy results are then copies), for views (views.c's capsules),
 * and torch.Tensor.as_strided, for torch views: set by fast_setup and
 * fast_setup_torch. */
static PyObject *np_from_dlpack, *torch_as_strided;
/* torch.Tensor.__dlpack_c_exchange_api__ (torch 2.10 on) and its table,
 * which replaces _to_dlpack where torch has one. */
static PyObject *torch_api_capsule;
static const einpy_exchange_api *torch_api;
/* torch's states in which a plain CPU tensor must not be computed on
 * through DLPack (the result would be a constant to a tracer, or skip a
 * cast): callables whose truthy answer sends the call to Python (a
 * tuple: jit tracing, dispatch modes such as make_fx's), and one more
 * asked only for entries that autocast could change (CPU autocast on).
 * Set by fast_setup_torch; einc/_torch.py routes those calls. */
static PyObject *torch_guards, *torch_autocast;
/* torch.autograd.forward_ad, set by fast_setup_torch: while one of its
 * dual levels is open (_current_level >= 0) a tensor may carry a tangent
 * that DLPack drops, so torch calls go to einc/_torch.py, which asks each
 * tensor (issue 38). A module attribute read, not a call. */
static PyObject *forward_ad;
static fast_entry *slots[FAST_SLOTS];
static int next_victim;

/* One call's inputs. numpy arrays are taken (their capsules consumed), as
 * are torch tensors through torch's exchange table; without one, torch
 * tensors stay in their capsules from torch._C._to_dlpack, unused, and
 * dropping the capsule frees the rest. */
typedef struct fast_inputs {
  einpy_tensor t[EINPY_FAST_MAX_OPERANDS];
  PyObject *capsules[EINPY_FAST_MAX_OPERANDS]; /* torch's, owned; NULL for numpy */
  int n;
  int torch;
  int graph; /* a torch tensor needs grad while grad is recorded */
} fast_inputs;

static void inputs_release(fast_inputs *in) {
  einpy_tensors_release(in->t, in->n);
  for (int i = 0; i < in->n; i++) Py_CLEAR(in->capsules[i]);
  in->n = 0;
}

static void entry_free(fast_entry *e) {
  ein_plan_destroy(e->plan);
  Py_XDECREF(e->expr);
  Py_XDECREF(e->lengths);
  Py_XDECREF(e->out_shape);
  Py_XDECREF(e->np_dtype);
  Py_XDECREF(e->view_stride_tuple);
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
                          int reduction, unsigned rules, PyObject *lengths,
                          einpy_tensor *in, int n) {
  for (int s = 0; s < FAST_SLOTS; s++) {
    fast_entry *e = slots[s];
    if (!e || e->hash != hash || e->ninputs != n || e->dialect != dialect ||
        e->reduction != reduction || e->rules != rules)
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
  /* torch's autocast recasts float inputs of einsum's matrix products
   * (not doubles): such entries ask torch_autocast first. */
  e->autocast = n >= 2 && ((e->dtype.code == kDLFloat && e->dtype.bits < 64) ||
                           e->dtype.code == kDLBfloat);
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
  const DLTensor *ins[EINPY_FAST_MAX_OPERANDS];
  for (int i = 0; i < e->ninputs; i++) ins[i] = in[i].t;
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  if (ein_output_shape(einpy_ctx(), expr, ins, e->ninputs, o, shape, &ndim) !=
      EIN_OK)
    return -1;
  e->out_shape = einpy_shape_tuple(shape, ndim);
  e->np_dtype = is_torch_tensor(first)
                    ? PyObject_CallFunctionObjArgs(torch_np_dtype, first, NULL)
                    : PyObject_GetAttrString(first, "dtype");
  PyObject *out = e->out_shape && e->np_dtype
                      ? einpy_fast_empty(e->out_shape, e->np_dtype)
                      : NULL;
  einpy_tensor t = {0};
  int ok = out && einpy_tensor_import_numpy(out, &t) == 0;
  if (ok && e->dtype.code == kDLBfloat) t.t->dtype = e->dtype; /* uint16 */
  ok = ok && ein_plan_create(einpy_ctx(), expr, ins, e->ninputs, t.t, o,
                           &e->plan) == EIN_OK;
  einpy_tensor_release(&t);
  Py_XDECREF(out);
  /* Below about a microsecond of work, releasing and taking back the GIL
   * costs more than another thread could gain meanwhile. */
  e->keep_gil = ok && einpy_keep_gil(e->plan);
  e->is_view = ok && ein_plan_output_view(e->plan, &e->view_input,
                                          e->view_strides, &e->view_offset);
  return ok ? 0 : -1;
}

/* A new entry for these tensors, or NULL with no exception when the
 * general path should take the call (it raises the error, if any). */
static fast_entry *plan_entry(PyObject *expr, Py_hash_t hash, int dialect,
                              int reduction, unsigned rules,
                              PyObject *lengths, PyObject *first,
                              einpy_tensor *in, int n) {
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
  e->rules = o.opt.axis_rules = rules;
  record_layouts(e, in, n);
  int ok = make_plan(e, PyBytes_AsString(utf8), &o.opt, in, first) == 0;
  einpy_options_free(&o);
  Py_DECREF(utf8);
  if (ok) return e;
  entry_free(e);
  return NULL;
}

/* Whether every item of tuple[first, first + count) has exactly `type`
 * (or, with `also`, that type). */
static int all_of_type(PyObject *tuple, Py_ssize_t first, Py_ssize_t count,
                       PyObject *type, PyObject *also) {
  for (Py_ssize_t i = 0; i < count; i++) {
    PyObject *t = (PyObject *)Py_TYPE(PyTuple_GetItem(tuple, first + i));
    if (t != type && (!also || t != also)) return 0;
  }
  return type != NULL;
}

/* Whether tensor.<method>() is not False (an error counts as set). */
static int torch_bit(PyObject *tensor, const char *method) {
  PyObject *r = PyObject_CallMethod(tensor, method, NULL);
  Py_XDECREF(r);
  return r != Py_False;
}

/* Whether the fast path takes a torch tensor exported as t: on the CPU,
 * without the negative bit (any dtype: z.conj().imag has it) and, for
 * complex dtypes, without the conjugate bit. DLPack cannot say either, and
 * torch's exports drop them silently; the general path resolves them
 * (_arrays.as_tensor). bfloat16 results are made as numpy uint16 arrays
 * (run_fresh). */
static int torch_layout_ok(PyObject *tensor, const DLTensor *t) {
  return t->device.device_type == kDLCPU && !torch_bit(tensor, "is_neg") &&
         (t->dtype.code != kDLComplex || !torch_bit(tensor, "is_conj"));
}

static int asks_python(PyObject *f);

/* A torch CPU tensor that needs no grad (or needs it while none is
 * recorded), through torch's exchange table
 * (into *t, owned) or else torch._C._to_dlpack (its capsule, left unused,
 * *t pointing into it). 1 with *capsule set (NULL for the table), or 0
 * with nothing held and no exception for the general path. */
static int import_torch(PyObject *tensor, einpy_tensor *t,
                        PyObject **capsule, int *graph) {
  static PyObject *requires_grad;
  memset(t, 0, sizeof *t);
  *capsule = NULL;
  if (!requires_grad &&
      !(requires_grad = PyUnicode_InternFromString("requires_grad")))
    return 0;
  PyObject *grad = PyObject_GetAttr(tensor, requires_grad);
  Py_XDECREF(grad);
  einpy_managed_versioned *m = NULL;
  if (grad != Py_False &&
      (grad != Py_True || !grad_enabled || asks_python(grad_enabled))) {
    /* needs grad while grad is recorded, or the attribute failed: the
     * general path (einc/_torch.py's autograd), or fastgrad.c's table */
    *graph = grad == Py_True;
  } else if (torch_api) {
    if (torch_api->managed_tensor_from_py_object_no_sync(tensor, &m) == 0) {
      t->t = &m->dl_tensor, t->managed = m, t->versioned = 1;
      if (!(m->flags & EINPY_FLAG_IS_COPIED) && torch_layout_ok(tensor, t->t))
        return 1;
      einpy_tensor_release(t);
    }
  } else if ((*capsule = PyObject_CallFunctionObjArgs(to_dlpack, tensor,
                                                      NULL)) != NULL) {
    DLManagedTensor *lm = PyCapsule_GetPointer(*capsule, "dltensor");
    if (lm && torch_layout_ok(tensor, &lm->dl_tensor)) {
      t->t = &lm->dl_tensor;
      return 1;
    }
    Py_CLEAR(*capsule);
  }
  PyErr_Clear();
  return 0;
}

/* Whether callable f answers something true (an error counts as true). */
static int asks_python(PyObject *f) {
  PyObject *r = PyObject_CallObject(f, NULL);
  int yes = r ? PyObject_IsTrue(r) : 1;
  Py_XDECREF(r);
  if (yes) PyErr_Clear();
  return yes != 0;
}

/* Whether a forward-mode dual level is open (an error counts as yes). */
static int forward_ad_open(void) {
  static PyObject *name;
  if (!forward_ad) return 0;
  if (!name && !(name = PyUnicode_InternFromString("_current_level"))) {
    PyErr_Clear();
    return 1;
  }
  PyObject *level = PyObject_GetAttr(forward_ad, name);
  long value = level ? PyLong_AsLong(level) : 0;
  Py_XDECREF(level);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return 1;
  }
  return value >= 0;
}

/* Whether torch is tracing or in a mode (torch_guards, an open dual
 * level) where einc's DLPack result would bypass it. */
static int torch_declines(void) {
  if (forward_ad_open()) return 1;
  Py_ssize_t n = torch_guards ? PyTuple_Size(torch_guards) : 0;
  for (Py_ssize_t i = 0; i < n; i++)
    if (asks_python(PyTuple_GetItem(torch_guards, i))) return 1;
  return 0;
}

/* Whether the inputs are all of one dtype. */
static int one_dtype(const fast_inputs *in) {
  for (int i = 1; i < in->n; i++) {
    DLDataType a = in->t[0].t->dtype, b = in->t[i].t->dtype;
    if (a.code != b.code || a.bits != b.bits || a.lanes != b.lanes) return 0;
  }
  return 1;
}

/* Takes tuple items [first, first + count) through DLPack when all are
 * exactly numpy.ndarray (or, with torch_ok, all exactly torch.Tensor) of
 * one dtype: 1, or 0 with nothing held and no exception. */
static int import_items(PyObject *tuple, Py_ssize_t first, Py_ssize_t count,
                        int torch_ok, fast_inputs *in) {
  in->n = 0;
  in->graph = 0;
  if (count < 1 || count > EINPY_FAST_MAX_OPERANDS) return 0;
  in->torch = 0;
  if (!all_of_type(tuple, first, count, ndarray_type, NULL) &&
      !(in->torch = torch_ok && all_of_type(tuple, first, count, tensor_type,
                                            parameter_type)))
    return 0;
  for (; in->n < (int)count; in->n++) {
    PyObject *item = PyTuple_GetItem(tuple, first + in->n);
    einpy_tensor *t = &in->t[in->n];
    in->capsules[in->n] = NULL;
    int ok = in->torch ? import_torch(item, t, &in->capsules[in->n],
                                      &in->graph)
                       : einpy_tensor_import_numpy(item, t) == 0;
    if (!ok) {
      PyErr_Clear(); /* numpy refused (bfloat16, byte order): general path */
      inputs_release(in);
      return 0;
    }
  }
  /* asked once the inputs are known to be plain (tensors that need grad
   * were declined above, for nothing) */
  if (one_dtype(in) && !(in->torch && torch_declines())) return 1;
  inputs_release(in);
  return 0;
}

int einpy_fast_import(PyObject *tensors, einpy_tensor *out, int *n) {
  fast_inputs in;
  if (!PyTuple_Check(tensors) ||
      !import_items(tensors, 0, PyTuple_Size(tensors), 0, &in))
    return 0;
  memcpy(out, in.t, sizeof(einpy_tensor) * (size_t)in.n); /* numpy's: owned */
  *n = in.n;
  return 1;
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
    if (e->dtype.code == kDLBfloat) o.t->dtype = e->dtype; /* numpy: uint16 */
    const DLTensor *ins[EINPY_FAST_MAX_OPERANDS];
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

/* The view e's plan reads numpy input in[e->view_input] (the array
 * `input`) as: numpy's own kind of view where numpy takes its memory as
 * a buffer, else made by numpy.from_dlpack, the input handed to the view
 * (views.c). */
static PyObject *numpy_view(fast_entry *e, fast_inputs *in, PyObject *input) {
  PyObject *own = einpy_numpy_view(
      ndarray_type, input, &in->t[e->view_input], e->out_shape,
      ein_plan_output_ndim(e->plan), e->view_strides, e->view_offset);
  if (own) return own;
  PyObject *capsule = einpy_view_capsule(
      &in->t[e->view_input], ein_plan_output_ndim(e->plan),
      ein_plan_output_shape(e->plan), e->view_strides, e->view_offset);
  PyObject *producer = capsule ? einpy_view_exporter(capsule) : NULL;
  PyObject *result =
      producer
          ? PyObject_CallFunctionObjArgs(np_from_dlpack, producer, NULL)
          : NULL;
  Py_XDECREF(producer);
  Py_XDECREF(capsule);
  return result;
}

/* The view e's plan reads torch tensor `input` as, made by torch itself:
 * input.as_strided(shape, strides[, storage offset]). A tensor torch
 * imports from DLPack shares the memory but is no view to torch (no
 * _base, a version counter of its own), so a change to the input in
 * place would go unseen by autograd, which saved the old values: a wrong
 * gradient where einops' views raise torch's "modified by an inplace
 * operation" (issue 38). as_strided keeps the input's storage offset when
 * none is given; the plan's offset (in elements from the input's first
 * element) is added to it. */
static PyObject *torch_view(fast_entry *e, PyObject *input) {
  if (!e->view_stride_tuple &&
      !(e->view_stride_tuple = einpy_shape_tuple(
            e->view_strides, ein_plan_output_ndim(e->plan))))
    return NULL;
  if (e->view_offset == 0)
    return PyObject_CallFunctionObjArgs(torch_as_strided, input,
                                        e->out_shape, e->view_stride_tuple,
                                        NULL);
  PyObject *base = PyObject_CallMethod(input, "storage_offset", NULL);
  long long first = base ? PyLong_AsLongLong(base) : -1;
  Py_XDECREF(base);
  if (first == -1 && PyErr_Occurred()) return NULL;
  PyObject *offset = PyLong_FromLongLong(first + e->view_offset);
  PyObject *view = offset ? PyObject_CallFunctionObjArgs(
                                torch_as_strided, input, e->out_shape,
                                e->view_stride_tuple, offset, NULL)
                          : NULL;
  Py_XDECREF(offset);
  return view;
}

/* A new result for e: its plan run, the output handed to torch for torch
 * inputs (sharing numpy's memory; bfloat16's, a uint16 array, viewed as
 * the input's dtype). */
static PyObject *run_fresh(fast_entry *e, fast_inputs *in, PyObject *first) {
  PyObject *result = run_entry(e, in->t, in->n);
  if (result && in->torch) {
    PyObject *array = result;
    result = PyObject_CallFunctionObjArgs(from_numpy, array, NULL);
    Py_DECREF(array);
  }
  if (result && in->torch && e->dtype.code == kDLBfloat) {
    PyObject *bits = result, *dtype = PyObject_GetAttrString(first, "dtype");
    result = dtype ? PyObject_CallMethod(bits, "view", "O", dtype) : NULL;
    Py_XDECREF(dtype);
    Py_DECREF(bits);
  }
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
                             unsigned rules, PyObject *lengths,
                             PyObject *first, einpy_tensor *in, int n) {
  Py_hash_t hash = PyObject_Hash(expr);
  fast_entry *e =
      lookup(expr, hash, dialect, reduction, rules, lengths, in, n);
  if (e) return e;
  e = plan_entry(expr, hash, dialect, reduction, rules, lengths, first, in,
                 n);
  if (e)
    insert(e);
  else
    PyErr_Clear();
  return e;
}

/* DLPack's kDLBool, which older dlpack.h (Debian's 0.6) lacks by name. */
enum { FAST_DL_BOOL = 6 };

/* Whether a drop-in's contract refuses these inputs (EINPY_REFUSE_*). */
static int refused(const fast_inputs *in, unsigned refuse) {
  for (int i = 0; i < in->n; i++) {
    const DLTensor *t = in->t[i].t;
    if ((refuse & EINPY_REFUSE_BOOL) && t->dtype.code == FAST_DL_BOOL) return 1;
    if ((refuse & EINPY_REFUSE_INTEGER) &&
        (t->dtype.code == kDLInt || t->dtype.code == kDLUInt ||
         t->dtype.code == FAST_DL_BOOL))
      return 1;
    if ((refuse & EINPY_REFUSE_STRIDED) && t->ndim > 1 && t->strides &&
        t->strides[t->ndim - 1] != 1)
      return 1;
  }
  return 0;
}

/* The call of tuple items [first, first + count) on the table's plan:
 * the result (a view of an input where the plan only re-reads it, else a
 * new array), or None (a new reference) for the general path, which also
 * takes the inputs `refuse` names (EINPY_REFUSE_*: a drop-in's). */
static PyObject *fast_eval(PyObject *args, Py_ssize_t first, Py_ssize_t count,
                           PyObject *expr, int dialect, int reduction,
                           unsigned rules, PyObject *lengths,
                           unsigned refuse) {
  fast_inputs in;
  if (!import_items(args, first, count, 1, &in)) {
    /* (the guards asked here too: a tracer must see einc's own call) */
    if (in.graph && !refuse && !torch_declines() &&
        !(torch_autocast && asks_python(torch_autocast)))
      return einpy_fast_graph(args, first, count, expr, dialect, reduction,
                              rules, lengths);
    Py_RETURN_NONE;
  }
  if (refuse && refused(&in, refuse)) {
    inputs_release(&in);
    Py_RETURN_NONE;
  }
  PyObject *first_item = PyTuple_GetItem(args, first);
  fast_entry *e = entry_for(expr, dialect, reduction, rules, lengths,
                            first_item, in.t, in.n);
  PyObject *result;
  if (!e || (in.torch && e->autocast && torch_autocast &&
             asks_python(torch_autocast))) {
    Py_INCREF(Py_None);
    result = Py_None;
  } else if (e->is_view && in.torch) {
    result = torch_view(e, PyTuple_GetItem(args, first + e->view_input));
  } else if (e->is_view && np_from_dlpack != Py_None) {
    result =
        numpy_view(e, &in, PyTuple_GetItem(args, first + e->view_input));
  } else {
    result = run_fresh(e, &in, first_item);
  }
  inputs_release(&in);
  return result;
}

/* fast(args, numpy, reduce[, lengths[, rules]]) -> result, or None for
 * the general path. args is einsum's (expression first or last, then or
 * before the tensors); numpy None guesses the dialect, else its truth
 * picks it; reduce None is 'sum'; lengths, a tuple of (name, size) pairs
 * or None; rules, ein_options.axis_rules (an int, default 0). The result
 * is a view of an input where the plan says it can be, else a new
 * array. */
static PyObject *py_fast(PyObject *self, PyObject *fargs) {
  (void)self;
  Py_ssize_t nargs = PyTuple_Size(fargs);
  if (nargs < 3 || nargs > 5) {
    PyErr_SetString(PyExc_TypeError,
                    "fast(args, numpy, reduce[, lengths[, rules]])");
    return NULL;
  }
  unsigned long rules =
      nargs == 5 ? PyLong_AsUnsignedLong(PyTuple_GetItem(fargs, 4)) : 0;
  if (rules == (unsigned long)-1 && PyErr_Occurred()) return NULL;
  PyObject *args = PyTuple_GetItem(fargs, 0), *expr;
  PyObject *numpy = PyTuple_GetItem(fargs, 1);
  PyObject *reduce = PyTuple_GetItem(fargs, 2);
  PyObject *lengths = nargs >= 4 ? PyTuple_GetItem(fargs, 3) : Py_None;
  if (lengths == Py_None) lengths = NULL;
  else if (!PyTuple_Check(lengths)) Py_RETURN_NONE;
  Py_ssize_t first, count;
  int dialect = numpy == Py_None ? -1 : PyObject_IsTrue(numpy);
  int reduction = reduce == Py_None              ? (int)EIN_REDUCE_SUM
                  : PyUnicode_CheckExact(reduce) ? parse_reduction(reduce)
                                                 : -1;
  if (dialect < 0 && numpy != Py_None) return NULL; /* its __bool__ raised */
  if (!PyTuple_Check(args) || reduction < 0 ||
      !split_args(args, &expr, &first, &count))
    Py_RETURN_NONE;
  return fast_eval(args, first, count, expr, dialect, reduction,
                   (unsigned)rules, lengths, 0);
}

/* einops' axis lengths, ((name, size), ...) in keyword order as
 * einc._api._lengths gives them, or NULL (no exception) where Python
 * should read them: a size not exactly an int, or a name that is one of
 * the function's own parameters (`own`, NULL-terminated: Python's
 * TypeError, or a keyword reduction). */
static PyObject *lengths_of(PyObject *kwargs, const char *const *own) {
  PyObject *tuple = PyTuple_New(PyDict_Size(kwargs)), *name, *size;
  Py_ssize_t pos = 0, i = 0;
  while (tuple && PyDict_Next(kwargs, &pos, &name, &size)) {
    int mine = 0;
    for (int k = 0; own[k]; k++)
      mine |= PyUnicode_CompareWithASCIIString(name, own[k]) == 0;
    PyObject *pair =
        PyLong_CheckExact(size) && !mine ? PyTuple_Pack(2, name, size) : NULL;
    if (!pair) Py_CLEAR(tuple);
    else PyTuple_SetItem(tuple, i++, pair);
  }
  PyErr_Clear();
  return tuple;
}

/* The Python einc.rearrange, einc.reduce and einc.einops.rearrange the
 * builtins were made from. */
static PyObject *rearrange_general, *reduce_general, *einops_general;

/* The table's answer for (tensor, pattern[, reduction]) as args holds
 * them, with lengths from kwargs and the reduction `reduction`; NULL (no
 * exception) when the call is not one the table takes or it answered
 * None, so that the caller hands the call to Python. */
static PyObject *served(PyObject *args, PyObject *kwargs, int reduction,
                        unsigned rules, const char *const *own) {
  PyObject *lengths = NULL, *result = NULL;
  int plain = PyUnicode_CheckExact(PyTuple_GetItem(args, 1)) &&
              (!kwargs || PyDict_Size(kwargs) == 0 ||
               (lengths = lengths_of(kwargs, own)) != NULL);
  if (plain)
    result = fast_eval(args, 0, 1, PyTuple_GetItem(args, 1), 0, reduction,
                       rules, lengths, 0);
  Py_XDECREF(lengths);
  if (result == Py_None) Py_CLEAR(result);
  return result; /* a view, an array, or NULL with an error set */
}

/* einc.rearrange(tensor, pattern, **axes_lengths) in C, so that a call
 * the table serves runs no Python frame: fast_eval as fast((tensor,
 * pattern), False, None, lengths) gives it. Every other call, and every
 * miss the table cannot plan, goes to rearrange_general, which checks the
 * arguments and raises einc's errors (a pattern with no '->' among them:
 * the einops dialect never plans one). */
static PyObject *rearrange_call(PyObject *args, PyObject *kwargs,
                                unsigned rules, PyObject *general) {
  static const char *const own[] = {"tensor", "pattern", NULL};
  if (PyTuple_Size(args) == 2) {
    /* the rules are the binder's and part of the entry's key, so that no
     * plan in the table (einsum's own for the same pattern included)
     * serves a pattern they forbid */
    PyObject *result =
        served(args, kwargs, (int)EIN_REDUCE_SUM, rules, own);
    if (result || PyErr_Occurred()) return result;
  }
  return PyObject_Call(general, args, kwargs);
}

/* einc.rearrange: never reduces. */
static PyObject *fast_rearrange(PyObject *self, PyObject *args,
                                PyObject *kwargs) {
  (void)self;
  return rearrange_call(args, kwargs, EIN_RULE_NO_REDUCE, rearrange_general);
}

/* einc.einops.rearrange: einops' rule, neither reduces nor repeats; its
 * general function raises einops' error type. */
static PyObject *fast_rearrange_einops(PyObject *self, PyObject *args,
                                       PyObject *kwargs) {
  (void)self;
  return rearrange_call(args, kwargs, EIN_RULE_NO_REDUCE | EIN_RULE_NO_REPEAT,
                        einops_general);
}

/* einc.reduce(tensor, pattern, reduction, **axes_lengths) in C, as
 * fast_rearrange: a reduction named by an exact str that ein.h knows
 * ('max', ...) and given by position is served by the table; callables,
 * unknown names (the Python reduce's error) and everything else go to
 * reduce_general. */
static PyObject *fast_reduce(PyObject *self, PyObject *args,
                             PyObject *kwargs) {
  (void)self;
  static const char *const own[] = {"tensor", "pattern", "reduction", NULL};
  PyObject *name = PyTuple_Size(args) == 3 ? PyTuple_GetItem(args, 2) : NULL;
  int reduction = name && PyUnicode_CheckExact(name) ? parse_reduction(name)
                                                      : -1;
  if (reduction >= 0) {
    PyObject *result = served(args, kwargs, reduction, 0, own);
    if (result || PyErr_Occurred()) return result;
  }
  return PyObject_Call(reduce_general, args, kwargs);
}

/* A builtin named `def->ml_name` in module einc, made from args
 * (general, doc): general, the Python function it hands calls to, goes
 * in *general_slot; doc is its docstring, a signature line first
 * ("rearrange(tensor, ...)\n--\n\n"), kept for the life of the process
 * as builtins' docstrings are (the first one given). */
static PyObject *make_builtin(PyMethodDef *def, PyObject **general_slot,
                              PyObject *args) {
  PyObject *general, *doc, *module = NULL, *fn = NULL;
  if (!PyArg_ParseTuple(args, "OU", &general, &doc)) return NULL;
  if (!def->ml_doc) {
    PyObject *utf8 = PyUnicode_AsUTF8String(doc);
    char *copy = utf8 ? malloc((size_t)PyBytes_Size(utf8) + 1) : NULL;
    if (copy) strcpy(copy, PyBytes_AsString(utf8));
    Py_XDECREF(utf8);
    if (!copy) return utf8 ? PyErr_NoMemory() : NULL;
    def->ml_doc = copy;
  }
  Py_INCREF(general);
  Py_XDECREF(*general_slot);
  *general_slot = general;
  module = PyUnicode_FromString("einc");
  fn = module ? PyCFunction_NewEx(def, NULL, module) : NULL;
  Py_XDECREF(module);
  return fn;
}

/* fast_rearrange(general, doc) -> the builtin einc.rearrange. */
static PyObject *py_fast_rearrange(PyObject *self, PyObject *args) {
  (void)self;
  static PyMethodDef def = {"rearrange",
                            (PyCFunction)(void (*)(void))fast_rearrange,
                            METH_VARARGS | METH_KEYWORDS, NULL};
  return make_builtin(&def, &rearrange_general, args);
}

/* fast_rearrange_einops(general, doc) -> einc.einops.rearrange. */
static PyObject *py_fast_rearrange_einops(PyObject *self, PyObject *args) {
  (void)self;
  static PyMethodDef def = {"rearrange",
                            (PyCFunction)(void (*)(void))fast_rearrange_einops,
                            METH_VARARGS | METH_KEYWORDS, NULL};
  return make_builtin(&def, &einops_general, args);
}

/* fast_reduce(general, doc) -> the builtin einc.reduce. */
static PyObject *py_fast_reduce(PyObject *self, PyObject *args) {
  (void)self;
  static PyMethodDef def = {"reduce", (PyCFunction)(void (*)(void))fast_reduce,
                            METH_VARARGS | METH_KEYWORDS, NULL};
  return make_builtin(&def, &reduce_general, args);
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

/* The exchange table in `capsule` when it is one fastpath.c can use
 * (DLPack 1.2 or a later 1.x, with the import it uses), else NULL. */
static const einpy_exchange_api *exchange_api(PyObject *capsule) {
  const einpy_exchange_api *api =
      PyCapsule_IsValid(capsule, "dlpack_exchange_api")
          ? PyCapsule_GetPointer(capsule, "dlpack_exchange_api")
          : NULL;
  if (!api || api->version.major != 1 || api->version.minor < 2 ||
      !api->managed_tensor_from_py_object_no_sync)
    return NULL;
  return api;
}

/* fast_setup_torch(torch.Tensor, torch._C._to_dlpack, torch.from_numpy,
 *                  tensor -> numpy dtype, torch.Tensor.as_strided
 *                  [, torch.Tensor.__dlpack_c_exchange_api__ or None
 *                  [, guards (a tuple of callables), autocast
 *                  [, torch.nn.Parameter, torch.is_grad_enabled
 *                  [, torch.autograd.forward_ad]]]]) */
static PyObject *py_fast_setup_torch(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *objs[11] = {NULL,    NULL, NULL, NULL, NULL, Py_None,
                        NULL,    NULL, NULL, NULL, NULL};
  if (!PyArg_ParseTuple(args, "OOOOO|OO!OOOO:fast_setup_torch", &objs[0],
                        &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                        &PyTuple_Type, &objs[6], &objs[7], &objs[8],
                        &objs[9], &objs[10]))
    return NULL;
  PyObject **slots_[] = {&tensor_type,      &to_dlpack,
                         &from_numpy,       &torch_np_dtype,
                         &torch_as_strided, &torch_api_capsule,
                         &torch_guards,     &torch_autocast,
                         &parameter_type,   &grad_enabled,
                         &forward_ad};
  int n = 6;
  while (n < 11 && objs[n]) n++;
  keep(objs, slots_, n);
  torch_api = exchange_api(torch_api_capsule);
  Py_RETURN_NONE;
}

/* ------------------------------------------------ for dropin.c (einpy.h) */

int einpy_keep_gil(const ein_plan *plan) {
  return ein_plan_flops(plan) < KEEP_GIL_FLOPS &&
         ein_plan_min_bytes(plan) < KEEP_GIL_BYTES;
}

PyObject *einpy_fast_eval(PyObject *args, Py_ssize_t first, Py_ssize_t count,
                          PyObject *expr, int dialect, int reduction,
                          unsigned rules, PyObject *lengths,
                          unsigned refuse) {
  return fast_eval(args, first, count, expr, dialect, reduction, rules,
                   lengths, refuse);
}

PyObject *einpy_fast_served(PyObject *args, PyObject *kwargs, int reduction,
                            unsigned rules, const char *const *own) {
  return served(args, kwargs, reduction, rules, own);
}

int einpy_fast_reduction(PyObject *name) { return parse_reduction(name); }

PyObject *einpy_fast_builtin(PyMethodDef *def, PyObject **general_slot,
                             PyObject *args) {
  return make_builtin(def, general_slot, args);
}

int einpy_fast_is_ndarray(PyObject *obj) {
  return ndarray_type && (PyObject *)Py_TYPE(obj) == ndarray_type;
}

static PyMethodDef fast_methods[] = {
    {"fast", py_fast, METH_VARARGS,
     "fast(args, numpy, reduce[, lengths[, rules]]) -> result (a view of "
     "an input where the plan only re-reads it), or None when the call "
     "needs the general path"},
    {"fast_rearrange_einops", py_fast_rearrange_einops, METH_VARARGS,
     "fast_rearrange_einops(general, doc) -> einc.einops.rearrange: the "
     "fast path in C under einops' rules, general(tensor, pattern, "
     "**axes_lengths) for every other call"},
    {"fast_rearrange", py_fast_rearrange, METH_VARARGS,
     "fast_rearrange(general, doc) -> einc.rearrange: the fast path in C, "
     "general(tensor, pattern, **axes_lengths) for every other call"},
    {"fast_reduce", py_fast_reduce, METH_VARARGS,
     "fast_reduce(general, doc) -> einc.reduce: the fast path in C, "
     "general(tensor, pattern, reduction, **axes_lengths) for every other "
     "call"},
    {"fast_setup", py_fast_setup, METH_VARARGS,
     "fast_setup(ndarray, empty, numpy_dialect, from_dlpack): enables fast()"},
    {"fast_setup_torch", py_fast_setup_torch, METH_VARARGS,
     "fast_setup_torch(Tensor, _to_dlpack, from_numpy, numpy_dtype_of, "
     "Tensor.as_strided[, exchange_api[, guards, autocast[, Parameter, "
     "is_grad_enabled[, forward_ad]]]]): fast() takes "
     "torch CPU tensors too, except while a guard answers true (and, for "
     "float contractions, autocast)"},
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
  Py_CLEAR(parameter_type);
  Py_CLEAR(grad_enabled);
  Py_CLEAR(to_dlpack);
  Py_CLEAR(from_numpy);
  Py_CLEAR(torch_np_dtype);
  Py_CLEAR(np_from_dlpack);
  Py_CLEAR(torch_as_strided);
  Py_CLEAR(torch_api_capsule);
  Py_CLEAR(torch_guards);
  Py_CLEAR(torch_autocast);
  Py_CLEAR(forward_ad);
  torch_api = NULL;
  Py_CLEAR(last_reduction);
  Py_CLEAR(rearrange_general);
  Py_CLEAR(einops_general);
  Py_CLEAR(reduce_general);
}
