/*
 * grad.c - grad_program(): the gradient program of an expression
 * (ein_grad_create, ein.h) as plain Python values, for the framework
 * layers (torch autograd formulas, JAX custom VJPs), which run its steps
 * on their own devices with their own tensors.
 */
#include "einpy.h"

/* numpy-style dtype names to DLPack (those einc knows; the library says
 * which have a gradient). */
static int dtype_parse(const char *name, DLDataType *out) {
  static const struct {
    const char *name;
    uint8_t code, bits;
  } table[] = {{"float16", kDLFloat, 16},   {"bfloat16", kDLBfloat, 16},
               {"float32", kDLFloat, 32},   {"float64", kDLFloat, 64},
               {"complex64", kDLComplex, 64},
               {"complex128", kDLComplex, 128},
               {"int8", kDLInt, 8},         {"int16", kDLInt, 16},
               {"int32", kDLInt, 32},       {"int64", kDLInt, 64},
               {"uint8", kDLUInt, 8},
               {"bool", 6 /* kDLBool, absent from older dlpack.h */, 8}};
  for (size_t i = 0; i < sizeof table / sizeof *table; i++)
    if (strcmp(name, table[i].name) == 0) {
      *out = (DLDataType){table[i].code, table[i].bits, 1};
      return 0;
    }
  return -1;
}

static const char *const op_names[] = {
    "einsum", "equal", "mul", "div", "scale", "is_zero", "zero_to_one",
    "prod_select", "scatter_diag"};
static const char *const value_names[] = {"dout", "input", "output", "step",
                                           "tangent"};

static PyObject *lengths_tuple(const ein_grad_step *s) {
  PyObject *t = PyTuple_New(s->nlengths);
  for (int k = 0; t && k < s->nlengths; k++) {
    PyObject *item = Py_BuildValue("(sL)", s->lengths[k].name,
                                   (long long)s->lengths[k].size);
    if (!item || PyTuple_SetItem(t, k, item) < 0) Py_CLEAR(t);
  }
  return t;
}

static PyObject *operands_tuple(const ein_grad_step *s) {
  PyObject *t = PyTuple_New(s->noperands);
  for (int k = 0; t && k < s->noperands; k++) {
    ein_grad_value v = s->operands[k];
    PyObject *item = Py_BuildValue("(si)", value_names[v.kind], v.index);
    if (!item || PyTuple_SetItem(t, k, item) < 0) Py_CLEAR(t);
  }
  return t;
}

static PyObject *step_dict(const ein_grad_step *s) {
  PyObject *expr = s->expr ? PyUnicode_FromString(s->expr) : Py_None;
  if (expr == Py_None) Py_INCREF(expr);
  PyObject *lengths = lengths_tuple(s), *operands = operands_tuple(s);
  PyObject *shape = einpy_shape_tuple(s->shape, s->ndim);
  PyObject *view = einpy_shape_tuple(s->view_strides, s->ndim_view);
  PyObject *d = NULL;
  if (expr && lengths && operands && shape && view)
    d = Py_BuildValue(
        "{s:s,s:O,s:s,s:O,s:O,s:d,s:O,s:O,s:d,s:d}", "op", op_names[s->op],
        "expr", expr, "reduction", ein_reduction_name(s->reduction),
        "lengths", lengths, "operands", operands, "scale", s->scale, "shape",
        shape, "view_strides", view, "flops", s->flops, "bytes", s->bytes);
  Py_XDECREF(expr);
  Py_XDECREF(lengths);
  Py_XDECREF(operands);
  Py_XDECREF(shape);
  Py_XDECREF(view);
  return d;
}

static PyObject *program_dict(const ein_grad *g) {
  int n = ein_grad_nsteps(g);
  PyObject *steps = PyList_New(n);
  for (int i = 0; steps && i < n; i++) {
    PyObject *s = step_dict(ein_grad_step_at(g, i));
    if (!s || PyList_SetItem(steps, i, s) < 0) Py_CLEAR(steps);
  }
  if (!steps) return NULL;
  PyObject *d = Py_BuildValue(
      "{s:O,s:O,s:d,s:d,s:O}", "needs_output",
      ein_grad_needs_output(g) ? Py_True : Py_False, "conjugates",
      ein_grad_conjugates(g) ? Py_True : Py_False, "flops", ein_grad_flops(g),
      "bytes", ein_grad_bytes(g), "steps", steps);
  Py_DECREF(steps);
  return d;
}

/* grad_program(expr, shapes, numpy, reduction, lengths, wrt, dtype[, jvp])
 *   -> {"needs_output", "conjugates", "flops", "bytes", "steps": [...]}:
 * the gradient program, or with jvp true the JVP's (ein_jvp_create). */
/* The per-call arrays of grad_program (PyMem_Free takes NULL). */
static void free_arrays(void *dims, void *ndims, void *ts, const void *tp) {
  PyMem_Free(dims);
  PyMem_Free(ndims);
  PyMem_Free(ts);
  PyMem_Free((void *)tp);
}

PyObject *einpy_grad_program(PyObject *self, PyObject *args) {
  (void)self;
  const char *expr, *reduction, *dtype;
  PyObject *shapes, *numpy, *lengths;
  int wrt, jvp = 0;
  if (!PyArg_ParseTuple(args, "sOOsOis|p:grad_program", &expr, &shapes,
                        &numpy, &reduction, &lengths, &wrt, &dtype, &jvp))
    return NULL;
  DLDataType dl;
  if (dtype_parse(dtype, &dl) < 0)
    return einpy_raise_status(EIN_ERR_DTYPE, "unknown dtype '%.40s'", dtype);
  int64_t(*dims)[EIN_MAX_DIMS] =
      einpy_calloc(EINPY_MAX_OPERANDS, sizeof *dims);
  int *ndims = einpy_calloc(EINPY_MAX_OPERANDS, sizeof *ndims);
  DLTensor *ts = einpy_calloc(EINPY_MAX_OPERANDS, sizeof *ts);
  const DLTensor **tp = einpy_calloc(EINPY_MAX_OPERANDS, sizeof *tp);
  int n = 0;
  einpy_options o;
  if (!dims || !ndims || !ts || !tp) {
    free_arrays(dims, ndims, ts, tp);
    return PyErr_NoMemory();
  }
  if (einpy_shapes_parse(shapes, dims, ndims, &n) < 0 ||
      einpy_options_parse(numpy, reduction, "cpu", lengths, &o) < 0) {
    free_arrays(dims, ndims, ts, tp);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    ts[i] = (DLTensor){.device = {kDLCPU, 0}, .ndim = ndims[i], .dtype = dl,
                       .shape = dims[i]};
    tp[i] = &ts[i];
  }
  ein_ctx *ctx = einpy_ctx();
  ein_grad *g = NULL;
  ein_status st = (jvp ? ein_jvp_create : ein_grad_create)(
      ctx, expr, tp, n, &o.opt, wrt, &g);
  einpy_options_free(&o);
  free_arrays(dims, ndims, ts, tp);
  if (st != EIN_OK) return einpy_raise(ein_last_error(ctx));
  PyObject *d = program_dict(g);
  ein_grad_destroy(g);
  return d;
}
