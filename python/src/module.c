/*
 * module.c - the module einc._einc: the top of the extension. It opens
 * the process's context (context.c) at import, adds every file's
 * functions and classes, and holds the functions that only read the
 * library (bind, backend_check, device_model_backend, the XLA handlers'
 * capsules). A call's computation enters at call.c's einpy_call; no file
 * calls back into this one.
 */
#include <string.h>

#include "einpy.h"
#include "xla_ffi.h"

#define STR_(x) #x
#define STR(x) STR_(x)
/* libein's version, "0.1.0", from ein.h. */
#define C_VERSION                                                \
  STR(EIN_VERSION_MAJOR) "." STR(EIN_VERSION_MINOR) "." STR( \
      EIN_VERSION_PATCH)

/* The axes of a binding as [(name, size, role), ...]. */
static PyObject *axis_list(const ein_binding *b) {
  static const char *roles[] = {"kept", "reduced", "repeated"};
  int n = ein_binding_naxes(b);
  PyObject *list = PyList_New(0);
  for (int i = 0; list && i < n; i++) {
    ein_axis_info a = ein_binding_axis(b, i);
    const char *role = a.role <= EIN_AXIS_REPEATED ? roles[a.role] : "?";
    PyObject *item = Py_BuildValue("(sLs)", a.name, (long long)a.size, role);
    if (!item || PyList_Append(list, item) < 0) Py_CLEAR(list);
    Py_XDECREF(item);
  }
  return list;
}

/* Each operand's dims (inputs, then the output) as tuples of axis
 * indices: [((0,), (1, 2)), ...]. */
static PyObject *dim_list(const ein_binding *b) {
  int nops = ein_binding_ninputs(b) + 1;
  PyObject *list = PyList_New(0);
  for (int k = 0; list && k < nops; k++) {
    int nd = ein_binding_operand_ndim(b, k);
    PyObject *dims = PyTuple_New(nd);
    for (int d = 0; dims && d < nd; d++) {
      int ids[EIN_MAX_DIMS];
      int c = ein_binding_dim_axes(b, k, d, ids, EIN_MAX_DIMS);
      PyObject *axes = PyTuple_New(c);
      for (int i = 0; axes && i < c; i++) {
        PyObject *id = PyLong_FromLong(ids[i]);
        if (!id) Py_CLEAR(axes);
        else if (PyTuple_SetItem(axes, i, id) < 0) Py_CLEAR(axes);
      }
      if (!axes) Py_CLEAR(dims);
      else if (PyTuple_SetItem(dims, d, axes) < 0) Py_CLEAR(dims);
    }
    if (!dims || PyList_Append(list, dims) < 0) Py_CLEAR(list);
    Py_XDECREF(dims);
  }
  return list;
}

/* bind(expr, shapes, numpy, reduction, backend, lengths[, rules[, dims]])
 *   -> (output_shape, [(axis, size, role), ...]), and with dims true a
 *   third item: each operand's dims as axis indices (dim_list). */
static PyObject *py_bind(PyObject *self, PyObject *args) {
  (void)self;
  const char *expr, *reduction, *backend;
  PyObject *shapes, *numpy, *lengths;
  unsigned int rules = 0;
  int with_dims = 0;
  if (!PyArg_ParseTuple(args, "sOOssO|Ip:bind", &expr, &shapes, &numpy,
                        &reduction, &backend, &lengths, &rules, &with_dims))
    return NULL;
  static int64_t dims[EINPY_MAX_OPERANDS][EIN_MAX_DIMS]; /* GIL-protected */
  int ndims[EINPY_MAX_OPERANDS], n;
  const int64_t *shape_ptrs[EINPY_MAX_OPERANDS];
  if (einpy_shapes_parse(shapes, dims, ndims, &n) < 0) return NULL;
  for (int i = 0; i < n; i++) shape_ptrs[i] = dims[i];
  einpy_options o;
  if (einpy_options_parse(numpy, reduction, backend, lengths, &o) < 0)
    return NULL;
  o.opt.axis_rules = rules;
  ein_binding *b = NULL;
  ein_status st =
      ein_bind_shapes(einpy_ctx(), expr, shape_ptrs, ndims, n, &o.opt, &b);
  einpy_options_free(&o);
  if (st != EIN_OK) return einpy_raise(ein_last_error(einpy_ctx()));
  PyObject *out_shape = einpy_shape_tuple(ein_binding_output_shape(b),
                                          ein_binding_output_ndim(b));
  PyObject *axes = axis_list(b);
  PyObject *operands = with_dims ? dim_list(b) : NULL;
  ein_binding_destroy(b);
  PyObject *result = !out_shape || !axes || (with_dims && !operands) ? NULL
                     : with_dims ? PyTuple_Pack(3, out_shape, axes, operands)
                                 : PyTuple_Pack(2, out_shape, axes);
  Py_XDECREF(out_shape);
  Py_XDECREF(axes);
  Py_XDECREF(operands);
  return result;
}

/* cuda_available() -> None, or the reason the CUDA backend cannot run. */
static PyObject *py_backend_check(PyObject *self, PyObject *args) {
  (void)self;
  const char *name;
  int device = 0;
  ein_backend_kind kind;
  if (!PyArg_ParseTuple(args, "s|i:backend_check", &name, &device)) return NULL;
  if (ein_backend_parse(name, &kind) != EIN_OK)
    return einpy_raise_status(EIN_ERR_INVALID_ARGUMENT,
                              "unknown backend '%.40s'", name);
  if (ein_backend_check(einpy_ctx(), kind, device) == EIN_OK) Py_RETURN_NONE;
  return PyUnicode_FromString(ein_last_error(einpy_ctx())->message);
}

/* xla_ffi_targets() -> {platform: capsule of an XLA FFI handler} for
 * jax.ffi.register_ffi_target ("cpu", "CUDA"): always both (the handlers
 * are built against einc's own declaration of the FFI ABI). */
static PyObject *py_xla_ffi_targets(PyObject *self, PyObject *noargs) {
  (void)self;
  (void)noargs;
  PyObject *targets = PyDict_New();
  const struct {
    const char *platform;
    void *handler;
  } table[] = {{"cpu", einxla_handler_cpu()}, {"CUDA", einxla_handler_cuda()}};
  for (size_t i = 0; targets && i < sizeof table / sizeof table[0]; i++) {
    PyObject *capsule = PyCapsule_New(table[i].handler, NULL, NULL);
    if (!capsule ||
        PyDict_SetItemString(targets, table[i].platform, capsule) < 0)
      Py_CLEAR(targets);
    Py_XDECREF(capsule);
  }
  return targets;
}

/* device_model_backend(name) -> "cpu" or "cuda": the backend whose plans
 * the device model prices; EincError listing the known names when there
 * is no such model. */
static PyObject *py_device_model_backend(PyObject *self, PyObject *args) {
  (void)self;
  const char *name;
  if (!PyArg_ParseTuple(args, "s:device_model_backend", &name)) return NULL;
  ein_device_model m;
  ein_status st = ein_device_model_get(name, &m);
  if (st == EIN_ERR_INVALID_ARGUMENT)
    return einpy_raise_status(st, "unknown device model '%.40s' (%s)", name,
                              ein_device_model_names());
  if (st)
    return einpy_raise_status(st, "the device model '%.40s' could not be made",
                              name);
  return PyUnicode_FromString(ein_backend_name(m.backend));
}

/* cache_stats() -> the context's plan cache counts (ein_cache_stats). */
static PyObject *py_cache_stats(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  ein_cache_stats s;
  if (ein_cache_stats_get(einpy_ctx(), &s) != EIN_OK)
    return einpy_raise(ein_last_error(einpy_ctx()));
  return Py_BuildValue("{sKsKsKsisi}", "hits", (unsigned long long)s.hits,
                       "misses", (unsigned long long)s.misses, "evictions",
                       (unsigned long long)s.evictions, "entries", s.entries,
                       "capacity", s.capacity);
}

static PyMethodDef methods[] = {
    {"device_model_backend", py_device_model_backend, METH_VARARGS,
     "device_model_backend(name) -> 'cpu' or 'cuda'"},
    {"bind", py_bind, METH_VARARGS,
     "bind(expr, shapes, numpy, reduction, backend, lengths[, rules[, dims]]) "
     "-> (output_shape, [(axis, size, role), ...][, dims of each operand])"},
    {"grad_program", einpy_grad_program, METH_VARARGS,
     "grad_program(expr, shapes, numpy, reduction, lengths, wrt, dtype[, "
     "jvp]) -> "
     "{'needs_output', 'conjugates', 'flops', 'bytes', 'steps': [...]}"},
    {"grad_run", einpy_grad_run, METH_VARARGS, "grad_run(key, expr, inputs, output, dout, dinput, numpy, reduction, lengths, wrt, jvp[, stream]) -> dinput"},
    {"backend_check", py_backend_check, METH_VARARGS,
     "backend_check(name, device=0) -> None, or why it cannot run here"},
    {"cache_stats", py_cache_stats, METH_NOARGS,
     "cache_stats() -> {'hits', 'misses', 'evictions', 'entries', "
     "'capacity'} of the context's plan cache, which einc's calls and "
     "ein_eval share"},
    {"xla_ffi_targets", py_xla_ffi_targets, METH_NOARGS,
     "xla_ffi_targets() -> {platform: PyCapsule} of einc's XLA FFI handlers"},
    {NULL, NULL, 0, NULL}};

static void module_free(void *module) {
  (void)module;
  einpy_builtins_free();
  einpy_reduction_forget();
  einpy_inputs_free();
  einpy_fast_graph_free();
  einpy_dropin_free();
  einpy_ctx_close();
  einpy_table_free(); /* what closing the context's cache released */
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "einc._einc",
    "The C layer of einc over libein (see the package einc).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    module_free};

static int add_constants(PyObject *m) {
  return PyModule_AddIntConstant(m, "MAX_OPERANDS", EINPY_MAX_OPERANDS) < 0 ||
                 PyModule_AddIntConstant(m, "MAX_DIMS", EIN_MAX_DIMS) < 0 ||
                 PyModule_AddStringConstant(m, "C_VERSION", C_VERSION) < 0
             ? -1
             : 0;
}

PyMODINIT_FUNC PyInit__einc(void) {
  if (einpy_ctx_open() < 0) return PyErr_NoMemory();
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (einpy_errors_init(m) < 0 || einpy_plan_type_init(m) < 0 ||
      einpy_memo_type_init(m) < 0 || einpy_inputs_init(m) < 0 ||
      einpy_call_init(m) < 0 || einpy_builtins_init(m) < 0 ||
      einpy_fast_graph_init(m) < 0 || einpy_views_init(m) < 0 ||
      einpy_dropin_init(m) < 0 ||
      add_constants(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
