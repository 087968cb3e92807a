/*
 * call.c - the one entry of a call: einpy_call, which every way into a
 * computation takes (einc.einsum's fast() and evaluate(), fp8's
 * evaluate_scaled(), the builtins einc.rearrange and einc.reduce and the
 * drop-ins of builtins.c and dropin.c), and the Python functions that
 * read their arguments into its request.
 *
 * einpy_call falls through, each step an early exit:
 * 1. the plan table (plan_table.c: the extension's entries in the
 *    context's plan cache) for the common call: numpy arrays or
 *    torch CPU tensors in, a new array (or a view of an input, where the
 *    plan only re-reads it) out, no options. A hit takes the inputs
 *    through DLPack, allocates the output with one numpy.empty call and
 *    runs the plan, with the GIL released unless the plan is below about
 *    a microsecond of work. torch results are numpy's memory handed to
 *    torch.from_numpy; torch views are the input's own as_strided, so
 *    that autograd sees a view. Float contractions under torch's CPU
 *    autocast go back to Python (einc/_torch.py casts as torch would).
 * 2. eager torch calls that record autograd: fastgrad.c's function of
 *    torch operations.
 * 3. the general path: every tensor through DLPack, the output from the
 *    caller's allocator (the Python layer's, so numpy in gives numpy out)
 *    or out=, and ein_eval without the GIL on the caller's CUDA stream.
 * A request with no general part (fast(), the builtins) answers None
 * where step 1 and 2 do not serve it, and its Python caller takes the
 * general path, which gives the same result or the same error.
 */
#include <string.h>

#include "einpy.h"

/* ------------------------------------------------------- step 1's results */

/* The view e's plan reads numpy input in[e->view_input] (the array
 * `input`) as: numpy's own kind of view where numpy takes its memory as
 * a buffer, else made by numpy.from_dlpack, the input handed to the view
 * (views.c). */
static PyObject *numpy_view(einpy_entry *e, einpy_inputs *in, PyObject *input) {
  PyObject *own = einpy_numpy_view(
      einpy_fw.ndarray_type, input, &in->t[e->view_input], e->out_shape,
      ein_plan_output_ndim(e->plan), e->view_strides, e->view_offset);
  if (own) return own;
  PyObject *capsule = einpy_view_capsule(
      &in->t[e->view_input], ein_plan_output_ndim(e->plan),
      ein_plan_output_shape(e->plan), e->view_strides, e->view_offset);
  PyObject *producer = capsule ? einpy_view_exporter(capsule) : NULL;
  PyObject *result = producer ? PyObject_CallFunctionObjArgs(
                                    einpy_fw.np_from_dlpack, producer, NULL)
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
static PyObject *torch_view(einpy_entry *e, PyObject *input) {
  if (!e->view_stride_tuple &&
      !(e->view_stride_tuple = einpy_shape_tuple(
            e->view_strides, ein_plan_output_ndim(e->plan))))
    return NULL;
  if (e->view_offset == 0)
    return PyObject_CallFunctionObjArgs(einpy_fw.torch_as_strided, input,
                                        e->out_shape, e->view_stride_tuple,
                                        NULL);
  PyObject *base = PyObject_CallMethod(input, "storage_offset", NULL);
  long long first = base ? PyLong_AsLongLong(base) : -1;
  Py_XDECREF(base);
  if (first == -1 && PyErr_Occurred()) return NULL;
  PyObject *offset = PyLong_FromLongLong(first + e->view_offset);
  PyObject *view = offset ? PyObject_CallFunctionObjArgs(
                                einpy_fw.torch_as_strided, input, e->out_shape,
                                e->view_stride_tuple, offset, NULL)
                          : NULL;
  Py_XDECREF(offset);
  return view;
}

/* A new result for e: its plan run, the output handed to torch for torch
 * inputs (sharing numpy's memory; bfloat16's, a uint16 array, viewed as
 * the input's dtype). */
static PyObject *run_fresh(einpy_entry *e, einpy_inputs *in, PyObject *first) {
  PyObject *result = einpy_table_run(e, in->t, in->n);
  if (result && in->torch) {
    PyObject *array = result;
    result = PyObject_CallFunctionObjArgs(einpy_fw.from_numpy, array, NULL);
    Py_DECREF(array);
  }
  if (result && in->torch && e->dtype.code == kDLBfloat) {
    static PyObject *dtype_name;
    PyObject *bits = result, *dtype = einpy_attr(first, &dtype_name, "dtype");
    result = dtype ? PyObject_CallMethod(bits, "view", "O", dtype) : NULL;
    Py_XDECREF(dtype);
    Py_DECREF(bits);
  }
  return result;
}

/* ---------------------------------------------------- the general path */

/* What the general path holds; held_release gives it back. */
typedef struct held {
  einpy_tensor in[EINPY_MAX_OPERANDS];
  int nin;
  einpy_tensor out;
  PyObject *out_obj; /* owned */
} held;

static void held_release(held *h) {
  einpy_tensors_release(h->in, h->nin);
  einpy_tensor_release(&h->out);
  Py_CLEAR(h->out_obj);
}

/* Per-input retypes: types[i] is (code, bits) or None (as imported). */
static int retype_each(held *h, PyObject *types) {
  if (!types || types == Py_None) return 0;
  if (!PyTuple_Check(types) || PyTuple_Size(types) != h->nin) {
    PyErr_SetString(PyExc_TypeError, "types: one entry per tensor");
    return -1;
  }
  for (int i = 0; i < h->nin; i++) {
    PyObject *ty = PyTuple_GetItem(types, i);
    int code, bits;
    if (ty == Py_None) continue;
    if (!PyArg_ParseTuple(ty, "ii", &code, &bits)) return -1;
    einpy_tensors_retype(&h->in[i], 1, code, bits);
  }
  return 0;
}

/* The output, the caller's or alloc(shape) for the shape einc works out,
 * taken through DLPack; it must be writable. */
static int take_output(held *h, const einpy_general *g) {
  if (g->out != Py_None) {
    Py_INCREF(g->out);
    h->out_obj = g->out;
  } else {
    h->out_obj = einpy_output_for(g->expr, h->in, h->nin, &g->options.opt,
                                  g->alloc);
  }
  if (!h->out_obj || einpy_tensor_import(h->out_obj, g->stream, &h->out) < 0)
    return -1;
  if (h->out.read_only) {
    PyErr_SetString(PyExc_ValueError, "out= is read-only");
    return -1;
  }
  return 0;
}

/* Step 3: the request's tensors (the whole tuple r->args) through DLPack,
 * retyped as asked, into the output; ein_eval without the GIL. */
static PyObject *general_call(const einpy_request *r) {
  const einpy_general *g = r->general;
  held h;
  memset(&h, 0, sizeof h);
  int ok = einpy_tensors_import(r->args, g->stream, h.in, &h.nin) == 0;
  if (g->types) ok = ok && retype_each(&h, g->types) == 0;
  else einpy_tensors_retype(h.in, h.nin, g->code, g->bits);
  ok = ok && take_output(&h, g) == 0;
  if (ok) einpy_tensors_retype(&h.out, 1, g->code, g->bits);
  ok = ok && einpy_run(g->expr, NULL, h.in, h.nin, &h.out, &g->options.opt,
                       g->stream, g->sync) == 0;
  PyObject *result = ok ? h.out_obj : NULL;
  Py_XINCREF(result);
  held_release(&h);
  return result;
}

/* ------------------------------------------------------- the one entry */

/* Steps 1 and 2: the table's answer for r, or None (a new reference) for
 * the general path, which also takes the inputs r->refuse names. */
static PyObject *table_call(const einpy_request *r) {
  einpy_inputs in;
  if (!einpy_inputs_take(r->args, r->first, r->count, 1, &in)) {
    /* (the guards asked here too: a tracer must see einc's own call) */
    if (in.graph && (!r->refuse || (r->refuse & EINPY_KEEP_GRAPH)) &&
        !einpy_torch_declines() &&
        !(einpy_fw.torch_autocast &&
          einpy_asks_python(einpy_fw.torch_autocast)))
      return einpy_fast_graph(r->args, r->first, r->count, r->expr,
                              r->dialect, r->reduction, r->rules,
                              r->lengths);
    Py_RETURN_NONE;
  }
  if (r->refuse && einpy_refused(&in, r->refuse)) {
    einpy_inputs_release(&in);
    Py_RETURN_NONE;
  }
  PyObject *first = PyTuple_GetItem(r->args, r->first);
  einpy_entry *e = einpy_table_entry(r->expr, r->dialect, r->reduction,
                                     r->rules, r->lengths, first, in.t, in.n);
  PyObject *result;
  if (!e || (in.torch && e->autocast && einpy_fw.torch_autocast &&
             einpy_asks_python(einpy_fw.torch_autocast))) {
    Py_INCREF(Py_None);
    result = Py_None;
  } else if (e->is_view && in.torch) {
    result = torch_view(e, PyTuple_GetItem(r->args, r->first + e->view_input));
  } else if (e->is_view && einpy_fw.np_from_dlpack != Py_None) {
    result = numpy_view(
        e, &in, PyTuple_GetItem(r->args, r->first + e->view_input));
  } else {
    result = run_fresh(e, &in, first);
  }
  if (e) einpy_table_done(e);
  einpy_inputs_release(&in);
  return result;
}

PyObject *einpy_call(const einpy_request *r) {
  if (r->table) {
    PyObject *result = table_call(r);
    if (result != Py_None || !r->general) return result;
    Py_DECREF(result);
  }
  if (!r->general) Py_RETURN_NONE;
  return general_call(r);
}

/* ------------------------------------------- the module's entry points */

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
                  : PyUnicode_CheckExact(reduce) ? einpy_reduction_of(reduce)
                                                 : -1;
  if (dialect < 0 && numpy != Py_None) return NULL; /* its __bool__ raised */
  if (!PyTuple_Check(args) || reduction < 0 ||
      !split_args(args, &expr, &first, &count))
    Py_RETURN_NONE;
  einpy_request r = {args, first, count, expr, dialect, reduction,
                     (unsigned)rules, lengths, 0, 1, NULL};
  return einpy_call(&r);
}

/* The general part of evaluate() and evaluate_scaled(): options from the
 * Python values; -1 with an exception. */
static int general_options(einpy_general *g, PyObject *numpy,
                           const char *reduction, const char *backend,
                           PyObject *lengths, unsigned rules) {
  if (g->stream == Py_None) g->stream = NULL;
  if (einpy_options_parse(numpy, reduction, backend, lengths, &g->options) <
      0)
    return -1;
  g->options.opt.axis_rules = rules;
  return 0;
}

/* evaluate(expr, tensors, out, alloc, numpy, reduction, backend, lengths,
 *          dtype_code, dtype_bits, stream, sync) -> out
 * dtype_code >= 0 retypes every tensor (numpy bfloat16 as uint16); stream
 * and sync as einpy_run takes them (None and False for host tensors);
 * rules, ein_options.axis_rules (0 when left out); memory_limit,
 * ein_options.memory_limit (bytes, -1 for EIN_MEMORY_FREE; 0: none).
 * The table is not asked: einc's Python layer asked fast() first. */
static PyObject *py_evaluate(PyObject *self, PyObject *args) {
  (void)self;
  const char *reduction, *backend;
  PyObject *tensors, *numpy, *lengths;
  einpy_general g;
  memset(&g, 0, sizeof g);
  unsigned int rules = 0;
  long long memory_limit = 0;
  if (!PyArg_ParseTuple(args, "sOOOOssOiiOp|IL:evaluate", &g.expr, &tensors,
                        &g.out, &g.alloc, &numpy, &reduction, &backend,
                        &lengths, &g.code, &g.bits, &g.stream, &g.sync,
                        &rules, &memory_limit) ||
      general_options(&g, numpy, reduction, backend, lengths, rules) < 0)
    return NULL;
  PyObject *result = NULL;
  if (einpy_options_set_slicing(&g.options, NULL, memory_limit) == 0) {
    einpy_request r = {tensors, 0, 0, NULL, 0, 0, rules, NULL, 0, 0, &g};
    result = einpy_call(&r);
  }
  einpy_options_free(&g.options);
  return result;
}

/* A tuple of floats as a PyMem array (NULL and *n = 0 for None). */
static int parse_scales(PyObject *scales, double **out, int *n) {
  *out = NULL;
  *n = 0;
  if (scales == Py_None) return 0;
  Py_ssize_t count = PyTuple_Check(scales) ? PyTuple_Size(scales) : -1;
  if (count < 0 || count > EINPY_MAX_OPERANDS) {
    PyErr_SetString(PyExc_TypeError, "scales: a tuple of floats");
    return -1;
  }
  *out = PyMem_Malloc(sizeof(double) * (size_t)(count ? count : 1));
  if (!*out) return PyErr_NoMemory(), -1;
  for (Py_ssize_t i = 0; i < count; i++) {
    (*out)[i] = PyFloat_AsDouble(PyTuple_GetItem(scales, i));
    if ((*out)[i] == -1.0 && PyErr_Occurred()) return -1;
  }
  *n = (int)count;
  return 0;
}

/* evaluate_scaled(expr, tensors, types, out, alloc, numpy, reduction,
 *                 backend, lengths, scales, out_code, out_bits, stream,
 *                 sync, rules) -> out
 * fp8 inputs (docs/design.md, "fp8 dtypes"): types retypes each input
 * (ml_dtypes arrays come as uint8), scales is a tuple of one float per
 * input or None, out_code >= 0 retypes the output (bf16 as uint16). */
static PyObject *py_evaluate_scaled(PyObject *self, PyObject *args) {
  (void)self;
  const char *reduction, *backend;
  PyObject *tensors, *numpy, *lengths, *scales;
  einpy_general g;
  memset(&g, 0, sizeof g);
  unsigned int rules;
  if (!PyArg_ParseTuple(args, "sOOOOOssOOiiOpI:evaluate_scaled", &g.expr,
                        &tensors, &g.types, &g.out, &g.alloc, &numpy,
                        &reduction, &backend, &lengths, &scales, &g.code,
                        &g.bits, &g.stream, &g.sync, &rules) ||
      general_options(&g, numpy, reduction, backend, lengths, rules) < 0)
    return NULL;
  double *sc = NULL;
  PyObject *result = NULL;
  if (parse_scales(scales, &sc, &g.options.opt.nscales) == 0) {
    g.options.opt.scales = sc;
    einpy_request r = {tensors, 0, 0, NULL, 0, 0, rules, NULL, 0, 0, &g};
    result = einpy_call(&r);
  }
  einpy_options_free(&g.options);
  PyMem_Free(sc);
  return result;
}

static PyMethodDef call_methods[] = {
    {"fast", py_fast, METH_VARARGS,
     "fast(args, numpy, reduce[, lengths[, rules]]) -> result (a view of "
     "an input where the plan only re-reads it), or None when the call "
     "needs the general path"},
    {"evaluate", py_evaluate, METH_VARARGS,
     "evaluate(expr, tensors, out, alloc, numpy, reduction, backend, "
     "lengths, dtype_code, dtype_bits, stream, sync[, rules]) -> out"},
    {"evaluate_scaled", py_evaluate_scaled, METH_VARARGS,
     "evaluate_scaled(expr, tensors, types, out, alloc, numpy, reduction, "
     "backend, lengths, scales, out_code, out_bits, stream, sync, rules) "
     "-> out (fp8 inputs with scales)"},
    {NULL, NULL, 0, NULL}};

int einpy_call_init(PyObject *module) {
  return PyModule_AddFunctions(module, call_methods);
}
