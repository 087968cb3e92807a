/*
 * module.c - the module einc._einc: its context and its functions.
 *
 * One ein_ctx serves the whole process. ein.h lets threads share a context
 * (its plan cache is locked, errors are kept per thread), so every Python
 * thread uses the same one, and the plans one thread compiled are found by
 * the others. The context lives as long as the module.
 *
 * evaluate() is the one path of einsum, rearrange, reduce and repeat: it
 * takes the tensors through DLPack, asks the caller's allocator for the
 * output when none was given (the Python layer allocates it with the
 * inputs' own library, so numpy in gives numpy out), and runs ein_eval
 * with the GIL released so other threads go on meanwhile. CUDA tensors
 * run on the stream the Python layer names (the framework's current
 * one): the context's stream is set for the call, under a lock.
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

static ein_ctx *the_ctx;

ein_ctx *einpy_ctx(void) { return the_ctx; }

/* What one evaluate() call holds; call_release gives all of it back. */
typedef struct call {
  einpy_options options;
  einpy_tensor in[EINPY_MAX_OPERANDS];
  int nin;
  einpy_tensor out;
  PyObject *out_obj; /* owned */
} call;

static void call_release(call *c) {
  einpy_tensors_release(c->in, c->nin);
  einpy_tensor_release(&c->out);
  einpy_options_free(&c->options);
  Py_CLEAR(c->out_obj);
}

PyObject *einpy_output_for(const char *expr, const einpy_tensor *in, int nin,
                           const ein_options *o, PyObject *alloc) {
  const DLTensor *ins[EINPY_MAX_OPERANDS];
  for (int i = 0; i < nin; i++) ins[i] = in[i].t;
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  if (ein_output_shape(the_ctx, expr, ins, nin, o, shape, &ndim) != EIN_OK) {
    einpy_raise(ein_last_error(the_ctx));
    return NULL;
  }
  PyObject *shape_tuple = einpy_shape_tuple(shape, ndim);
  if (!shape_tuple) return NULL;
  PyObject *r = PyObject_CallFunctionObjArgs(alloc, shape_tuple, NULL);
  Py_DECREF(shape_tuple);
  return r;
}

/* The output: the caller's, or alloc(shape) for the shape einc works out. */
static int obtain_output(call *c, const char *expr, PyObject *out,
                         PyObject *alloc) {
  if (out != Py_None) {
    Py_INCREF(out);
    c->out_obj = out;
    return 0;
  }
  c->out_obj = einpy_output_for(expr, c->in, c->nin, &c->options.opt, alloc);
  return c->out_obj ? 0 : -1;
}

/* Takes the output through DLPack; it must be writable. */
static int import_output(call *c, PyObject *stream) {
  if (einpy_tensor_import(c->out_obj, stream, &c->out) < 0) return -1;
  if (c->out.read_only) {
    PyErr_SetString(PyExc_ValueError, "out= is read-only");
    return -1;
  }
  return 0;
}

/* Serialises the calls that queue on a caller's CUDA stream: setting it
 * is context-wide. Made at import, never freed (the module may be the
 * last thing a thread touches at exit). */
static PyThread_type_lock stream_lock;

/* ein_plan_execute or ein_eval; the status. */
static ein_status run_unlocked(const char *expr, const ein_plan *plan,
                               const DLTensor **ins, int nin, DLTensor *out,
                               const ein_options *o) {
  return plan ? ein_plan_execute(the_ctx, plan, ins, nin, out)
              : ein_eval(the_ctx, expr, ins, nin, out, o);
}

/* Without the GIL: the tensors' memory is held by the capsules' owners,
 * not by Python objects this thread could lose meanwhile. */
int einpy_run(const char *expr, const ein_plan *plan, einpy_tensor *in,
              int nin, einpy_tensor *out, const ein_options *o,
              PyObject *stream, int sync) {
  const DLTensor *ins[EINPY_MAX_OPERANDS];
  for (int i = 0; i < nin; i++) ins[i] = in[i].t;
  void *s = NULL;
  if (stream && stream != Py_None) {
    s = PyLong_AsVoidPtr(stream);
    if (!s && PyErr_Occurred()) return -1;
  }
  ein_status st;
  if (!s) {
    Py_BEGIN_ALLOW_THREADS st = run_unlocked(expr, plan, ins, nin, out->t, o);
    Py_END_ALLOW_THREADS
  } else {
    Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(stream_lock, WAIT_LOCK);
    ein_ctx_set_cuda_stream(the_ctx, s);
    st = run_unlocked(expr, plan, ins, nin, out->t, o);
    if (st == EIN_OK && sync) st = ein_ctx_synchronize(the_ctx);
    ein_ctx_set_cuda_stream(the_ctx, NULL);
    PyThread_release_lock(stream_lock);
    Py_END_ALLOW_THREADS
  }
  if (st == EIN_OK) return 0;
  einpy_raise(ein_last_error(the_ctx));
  return -1;
}

/* evaluate(expr, tensors, out, alloc, numpy, reduction, backend, lengths,
 *          dtype_code, dtype_bits, stream, sync) -> out
 * dtype_code >= 0 retypes every tensor (numpy bfloat16 as uint16); stream
 * and sync as einpy_run takes them (None and False for host tensors);
 * rules, ein_options.axis_rules (0 when left out); memory_limit,
 * ein_options.memory_limit (bytes, -1 for EIN_MEMORY_FREE; 0: none). */
static PyObject *py_evaluate(PyObject *self, PyObject *args) {
  (void)self;
  const char *expr, *reduction, *backend;
  PyObject *tensors, *out, *alloc, *numpy, *lengths, *stream;
  int code, bits, sync;
  unsigned int rules = 0;
  long long memory_limit = 0;
  if (!PyArg_ParseTuple(args, "sOOOOssOiiOp|IL:evaluate", &expr, &tensors,
                        &out, &alloc, &numpy, &reduction, &backend, &lengths,
                        &code, &bits, &stream, &sync, &rules, &memory_limit))
    return NULL;
  if (stream == Py_None) stream = NULL;
  call c;
  memset(&c, 0, sizeof c);
  if (einpy_options_parse(numpy, reduction, backend, lengths, &c.options) < 0)
    return NULL;
  c.options.opt.axis_rules = rules;
  if (einpy_options_set_slicing(&c.options, NULL, memory_limit) < 0) {
    einpy_options_free(&c.options);
    return NULL;
  }
  int ok = einpy_tensors_import(tensors, stream, c.in, &c.nin) == 0;
  einpy_tensors_retype(c.in, c.nin, code, bits);
  ok = ok && obtain_output(&c, expr, out, alloc) == 0 &&
       import_output(&c, stream) == 0;
  if (ok) einpy_tensors_retype(&c.out, 1, code, bits);
  ok = ok && einpy_run(expr, NULL, c.in, c.nin, &c.out, &c.options.opt,
                       stream, sync) == 0;
  PyObject *result = ok ? c.out_obj : NULL;
  Py_XINCREF(result);
  call_release(&c);
  return result;
}

/* Per-input retypes: types[i] is (code, bits) or None (as imported). */
static int retype_each(call *c, PyObject *types) {
  if (types == Py_None) return 0;
  if (!PyTuple_Check(types) || PyTuple_Size(types) != c->nin) {
    PyErr_SetString(PyExc_TypeError, "types: one entry per tensor");
    return -1;
  }
  for (int i = 0; i < c->nin; i++) {
    PyObject *ty = PyTuple_GetItem(types, i);
    int code, bits;
    if (ty == Py_None) continue;
    if (!PyArg_ParseTuple(ty, "ii", &code, &bits)) return -1;
    einpy_tensors_retype(&c->in[i], 1, code, bits);
  }
  return 0;
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
  const char *expr, *reduction, *backend;
  PyObject *tensors, *types, *out, *alloc, *numpy, *lengths, *scales,
      *stream;
  int code, bits, sync;
  unsigned int rules;
  if (!PyArg_ParseTuple(args, "sOOOOOssOOiiOpI:evaluate_scaled", &expr,
                        &tensors, &types, &out, &alloc, &numpy, &reduction,
                        &backend, &lengths, &scales, &code, &bits, &stream,
                        &sync, &rules))
    return NULL;
  if (stream == Py_None) stream = NULL;
  call c;
  memset(&c, 0, sizeof c);
  if (einpy_options_parse(numpy, reduction, backend, lengths, &c.options) < 0)
    return NULL;
  double *sc = NULL;
  c.options.opt.axis_rules = rules;
  int ok = parse_scales(scales, &sc, &c.options.opt.nscales) == 0;
  c.options.opt.scales = sc;
  ok = ok && einpy_tensors_import(tensors, stream, c.in, &c.nin) == 0;
  ok = ok && retype_each(&c, types) == 0;
  ok = ok && obtain_output(&c, expr, out, alloc) == 0 &&
       import_output(&c, stream) == 0;
  if (ok) einpy_tensors_retype(&c.out, 1, code, bits);
  ok = ok && einpy_run(expr, NULL, c.in, c.nin, &c.out, &c.options.opt,
                       stream, sync) == 0;
  PyObject *result = ok ? c.out_obj : NULL;
  Py_XINCREF(result);
  call_release(&c);
  PyMem_Free(sc);
  return result;
}

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
      ein_bind_shapes(the_ctx, expr, shape_ptrs, ndims, n, &o.opt, &b);
  einpy_options_free(&o);
  if (st != EIN_OK) return einpy_raise(ein_last_error(the_ctx));
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
  if (ein_backend_check(the_ctx, kind, device) == EIN_OK) Py_RETURN_NONE;
  return PyUnicode_FromString(ein_last_error(the_ctx)->message);
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

static PyMethodDef methods[] = {
    {"device_model_backend", py_device_model_backend, METH_VARARGS,
     "device_model_backend(name) -> 'cpu' or 'cuda'"},
    {"evaluate", py_evaluate, METH_VARARGS,
     "evaluate(expr, tensors, out, alloc, numpy, reduction, backend, "
     "lengths, dtype_code, dtype_bits, stream, sync[, rules]) -> out"},
    {"evaluate_scaled", py_evaluate_scaled, METH_VARARGS,
     "evaluate_scaled(expr, tensors, types, out, alloc, numpy, reduction, "
     "backend, lengths, scales, out_code, out_bits, stream, sync, rules) "
     "-> out (fp8 inputs with scales)"},
    {"bind", py_bind, METH_VARARGS,
     "bind(expr, shapes, numpy, reduction, backend, lengths[, rules[, dims]]) "
     "-> (output_shape, [(axis, size, role), ...][, dims of each operand])"},
    {"grad_program", einpy_grad_program, METH_VARARGS,
     "grad_program(expr, shapes, numpy, reduction, lengths, wrt, dtype[, "
     "jvp]) -> "
     "{'needs_output', 'conjugates', 'flops', 'bytes', 'steps': [...]}"},
    {"grad_run", einpy_grad_run, METH_VARARGS, "grad_run(key, expr, inputs, output, dout, dinput, numpy, reduction, lengths, wrt, jvp) -> dinput"},
    {"backend_check", py_backend_check, METH_VARARGS,
     "backend_check(name, device=0) -> None, or why it cannot run here"},
    {"xla_ffi_targets", py_xla_ffi_targets, METH_NOARGS,
     "xla_ffi_targets() -> {platform: PyCapsule} of einc's XLA FFI handlers"},
    {NULL, NULL, 0, NULL}};

static void module_free(void *module) {
  (void)module;
  einpy_fast_free();
  einpy_fast_graph_free();
  einpy_dropin_free();
  ein_ctx_destroy(the_ctx);
  the_ctx = NULL;
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

int einpy_add_class(PyObject *module, const char *name, size_t size,
                    const char *doc, initproc init, destructor dealloc,
                    PyMethodDef *methods) {
  PyType_Slot slots[] = {{Py_tp_doc, (void *)doc},
                         {Py_tp_new, PyType_GenericNew},
                         {Py_tp_init, init},
                         {Py_tp_dealloc, dealloc},
                         {Py_tp_methods, methods},
                         {0, NULL}};
  /* The type keeps pointers into `name` (before 3.11), not into spec. */
  PyType_Spec spec = {name, (int)size, 0, Py_TPFLAGS_DEFAULT, slots};
  PyObject *type = PyType_FromSpec(&spec);
  if (!type) return -1;
  if (PyModule_AddObject(module, strrchr(name, '.') + 1, type) < 0) {
    Py_DECREF(type);
    return -1;
  }
  return 0;
}

void einpy_object_free(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(self);
  Py_DECREF(type); /* instances of heap types hold their type */
}

static int add_constants(PyObject *m) {
  return PyModule_AddIntConstant(m, "MAX_OPERANDS", EINPY_MAX_OPERANDS) < 0 ||
                 PyModule_AddIntConstant(m, "MAX_DIMS", EIN_MAX_DIMS) < 0 ||
                 PyModule_AddStringConstant(m, "C_VERSION", C_VERSION) < 0
             ? -1
             : 0;
}

PyMODINIT_FUNC PyInit__einc(void) {
  if (!the_ctx && ein_ctx_create(&the_ctx) != EIN_OK) return PyErr_NoMemory();
  if (!stream_lock && !(stream_lock = PyThread_allocate_lock()))
    return PyErr_NoMemory();
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (einpy_errors_init(m) < 0 || einpy_plan_type_init(m) < 0 ||
      einpy_memo_type_init(m) < 0 || einpy_fast_init(m) < 0 ||
      einpy_fast_graph_init(m) < 0 ||
      einpy_views_init(m) < 0 || einpy_dropin_init(m) < 0 ||
      add_constants(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
