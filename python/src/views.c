/*
 * views.c - numpy results that are views of an input, handed over through
 * DLPack.
 *
 * When a plan only re-reads one input's memory (ein_plan_output_view: a
 * transpose, a split or merge of adjacent axes, a diagonal), the fast
 * path returns a view of that input instead of a copy, as numpy.einsum
 * and einops do. A numpy view is made by numpy from a DLPack tensor built
 * here: the input's data pointer moved to the view's first element, with
 * the view's shape and strides. Its manager holds the input's own managed
 * tensor (whose deleter keeps the input's memory alive), so the view
 * outlives the call and its deleter lets the input go. numpy.from_dlpack
 * wants a producer, not a capsule, so a one-shot exporter object carries
 * the capsule (numpy's as_strided is a Python function several times
 * dearer). NumPy makes arrays of legacy capsules read-only, so the views
 * travel versioned (NumPy 2.1 on), with the input's read-only flag.
 * (torch views need none of this: call.c has torch make them with
 * Tensor.as_strided, so that they are views to torch's autograd too.)
 *
 * Where numpy takes the input's memory as a buffer, a view is made by
 * numpy.ndarray(shape, dtype, buffer, offset, strides) instead
 * (einpy_numpy_view), so that its .base is what numpy's own view of the
 * input (a.T, a.reshape) has: numpy collapses chains of views to the
 * array that owns the memory, or to the first whose base is no ndarray.
 * The DLPack view (whose .base is einc's exporter) is left for inputs
 * numpy takes no buffer of: not contiguous, over a base that is not an
 * ndarray either (numpy.from_dlpack of a strided tensor).
 *
 * The deleter may run on a thread without the GIL, so the view's memory
 * is C's malloc, not PyMem; the input's own deleter takes the GIL where
 * it needs it (numpy's does).
 */
#include <stdlib.h>

#include "einpy.h"

typedef struct view_tensor {
  einpy_managed_versioned m;
  einpy_tensor source; /* the input; released with the view */
  int64_t shape[EIN_MAX_DIMS], strides[EIN_MAX_DIMS];
} view_tensor;

static void view_free(view_tensor *v) {
  einpy_tensor_release_raw(&v->source); /* perhaps without the GIL */
  free(v);
}

static void versioned_deleter(einpy_managed_versioned *self) {
  view_free(self->manager_ctx);
}

static const char VERSIONED[] = "dltensor_versioned";

/* The capsule's destructor: a tensor nobody consumed (its name unchanged)
 * is freed here; a consumed one belongs to its consumer. */
static void capsule_free(PyObject *capsule) {
  if (PyCapsule_IsValid(capsule, VERSIONED))
    view_free(((einpy_managed_versioned *)PyCapsule_GetPointer(capsule,
                                                              VERSIONED))
                  ->manager_ctx);
}

/* The view's DLTensor: the source's device and dtype, its data pointer
 * moved to the view's first element (byte_offset folded in). */
static void fill_tensor(view_tensor *v, DLTensor *t, int ndim,
                        const int64_t *shape, const int64_t *strides,
                        int64_t offset) {
  const DLTensor *src = v->source.t;
  memcpy(v->shape, shape, sizeof(int64_t) * (size_t)ndim);
  memcpy(v->strides, strides, sizeof(int64_t) * (size_t)ndim);
  int64_t itemsize = (src->dtype.bits * src->dtype.lanes + 7) / 8;
  t->data = (char *)src->data + src->byte_offset + offset * itemsize;
  t->byte_offset = 0;
  t->device = src->device;
  t->dtype = src->dtype;
  t->ndim = ndim;
  t->shape = v->shape;
  t->strides = v->strides;
}

PyObject *einpy_view_capsule(einpy_tensor *source, int ndim,
                             const int64_t *shape, const int64_t *strides,
                             int64_t offset) {
  view_tensor *v = calloc(1, sizeof *v);
  if (!v) {
    einpy_tensor_release(source);
    return PyErr_NoMemory();
  }
  v->source = *source;
  memset(source, 0, sizeof *source);
  fill_tensor(v, &v->m.dl_tensor, ndim, shape, strides, offset);
  v->m.version = (einpy_dlpack_version){1, 0};
  v->m.manager_ctx = v;
  v->m.deleter = versioned_deleter;
  v->m.flags = v->source.read_only ? EINPY_FLAG_READ_ONLY : 0;
  PyObject *capsule = PyCapsule_New(&v->m, VERSIONED, capsule_free);
  if (!capsule) view_free(v);
  return capsule;
}

/* ---------------------------------------------------------- exporter */

typedef struct exporter {
  PyObject_HEAD
  PyObject *capsule; /* given away by the first __dlpack__ */
} exporter;

static PyObject *exporter_type;

static PyObject *exporter_dlpack(PyObject *self, PyObject *args,
                                 PyObject *kwargs) {
  (void)args, (void)kwargs; /* one CPU tensor, whatever is asked */
  exporter *e = (exporter *)self;
  if (!e->capsule) {
    PyErr_SetString(PyExc_BufferError, "this view was exported already");
    return NULL;
  }
  PyObject *capsule = e->capsule;
  e->capsule = NULL;
  return capsule;
}

static PyObject *exporter_device(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  return Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

static void exporter_dealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  Py_CLEAR(((exporter *)self)->capsule);
  freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_fn(self);
  Py_DECREF(type);
}

static PyMethodDef exporter_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))exporter_dlpack,
     METH_VARARGS | METH_KEYWORDS, "the view's capsule (once)"},
    {"__dlpack_device__", exporter_device, METH_NOARGS, "(kDLCPU, 0)"},
    {NULL, NULL, 0, NULL}};

static PyType_Slot exporter_slots[] = {
    {Py_tp_dealloc, (void *)exporter_dealloc},
    {Py_tp_methods, exporter_methods},
    {0, NULL}};

static PyType_Spec exporter_spec = {"einc._einc._ViewExporter",
                                    sizeof(exporter), 0, Py_TPFLAGS_DEFAULT,
                                    exporter_slots};

PyObject *einpy_view_exporter(PyObject *capsule) {
  allocfunc alloc =
      (allocfunc)PyType_GetSlot((PyTypeObject *)exporter_type, Py_tp_alloc);
  PyObject *self = alloc((PyTypeObject *)exporter_type, 0);
  if (!self) return NULL;
  Py_INCREF(capsule);
  ((exporter *)self)->capsule = capsule;
  return self;
}

/* ---------------------------------------------------- numpy's own view */

/* numpy.ndarray(shape, dtype, buffer, offset, strides) on the memory of
 * `buffer` (a contiguous array), its strides in bytes; NULL with an
 * exception where numpy refuses (a buffer that is not contiguous). */
static PyObject *over_buffer(PyObject *ndarray_type, PyObject *buffer,
                             PyObject *shape, PyObject *dtype, int ndim,
                             const int64_t *strides, int64_t itemsize,
                             int64_t byte_offset) {
  int64_t bytes[EIN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) bytes[d] = strides[d] * itemsize;
  PyObject *steps = einpy_shape_tuple(bytes, ndim);
  PyObject *offset = steps ? PyLong_FromLongLong(byte_offset) : NULL;
  PyObject *view =
      offset ? PyObject_CallFunctionObjArgs(ndarray_type, shape, dtype, buffer,
                                            offset, steps, NULL)
             : NULL;
  Py_XDECREF(offset);
  Py_XDECREF(steps);
  return view;
}

/* Whether numpy array `obj` owns its memory (flags.owndata); -1 on error. */
static int owns_data(PyObject *obj) {
  static PyObject *flags_name, *owndata_name;
  PyObject *flags = einpy_attr(obj, &flags_name, "flags");
  PyObject *own = flags ? einpy_attr(flags, &owndata_name, "owndata") : NULL;
  int r = own ? PyObject_IsTrue(own) : -1;
  Py_XDECREF(own);
  Py_XDECREF(flags);
  return r;
}

/* The array numpy makes the .base of its views of `a` (a new reference):
 * it follows .base from a while the base is exactly a numpy.ndarray and
 * the array reached does not own its memory. */
static PyObject *numpy_base(PyObject *ndarray_type, PyObject *a) {
  static PyObject *base_name;
  Py_INCREF(a);
  for (;;) {
    int own = owns_data(a);
    PyObject *base = own == 0 ? einpy_attr(a, &base_name, "base") : NULL;
    if (own < 0 || (own == 0 && !base)) {
      Py_DECREF(a);
      return NULL;
    }
    if (own || (PyObject *)Py_TYPE(base) != ndarray_type) {
      Py_XDECREF(base);
      return a;
    }
    Py_DECREF(a);
    a = base;
  }
}

/* The view over numpy's base of a, `at` bytes past a's first element
 * (a not contiguous, so numpy takes it as no buffer), read-only where
 * a is. NULL with an exception where there is no such view. */
static PyObject *over_base(PyObject *ndarray_type, PyObject *a,
                           const einpy_tensor *source, PyObject *shape,
                           PyObject *dtype, int ndim, const int64_t *strides,
                           int64_t itemsize, int64_t at) {
  PyObject *base = numpy_base(ndarray_type, a), *view = NULL;
  einpy_tensor b = {0};
  if (base && base != a && einpy_tensor_import_numpy(base, &b) == 0) {
    const DLTensor *t = source->t;
    int64_t from_base = ((char *)t->data + t->byte_offset) -
                        ((char *)b.t->data + b.t->byte_offset);
    einpy_tensor_release(&b);
    view = over_buffer(ndarray_type, base, shape, dtype, ndim, strides,
                       itemsize, from_base + at);
  } else if (base == a) {
    PyErr_SetString(PyExc_BufferError, "no contiguous base");
  }
  Py_XDECREF(base);
  if (view && source->read_only) {
    static PyObject *flags_name;
    PyObject *flags = einpy_attr(view, &flags_name, "flags");
    if (!flags || PyObject_SetAttrString(flags, "writeable", Py_False) < 0)
      Py_CLEAR(view);
    Py_XDECREF(flags);
  }
  return view;
}

PyObject *einpy_numpy_view(PyObject *ndarray_type, PyObject *a,
                           const einpy_tensor *source, PyObject *shape,
                           int ndim, const int64_t *strides,
                           int64_t offset) {
  static PyObject *dtype_name;
  const DLTensor *t = source->t;
  int64_t itemsize = (t->dtype.bits * t->dtype.lanes + 7) / 8;
  PyObject *dtype = einpy_attr(a, &dtype_name, "dtype"), *view = NULL;
  if (dtype) {
    /* a contiguous a is its own buffer: numpy then sets the base as for
     * its own views of a (and keeps a's read-only flag) */
    view = over_buffer(ndarray_type, a, shape, dtype, ndim, strides,
                       itemsize, offset * itemsize);
    if (!view && PyErr_ExceptionMatches(PyExc_ValueError)) {
      PyErr_Clear();
      view = over_base(ndarray_type, a, source, shape, dtype, ndim, strides,
                       itemsize, offset * itemsize);
    }
  }
  Py_XDECREF(dtype);
  if (!view) PyErr_Clear();
  return view;
}

/* ------------------------------------------------------ view_layout */

/* The answer of view_layout for a plan: (output shape, None) or (output
 * shape, (input, strides, offset)) when the plan only re-reads `input`. */
static PyObject *layout_answer(const ein_plan *plan) {
  int input = 0;
  int64_t strides[EIN_MAX_DIMS], offset = 0;
  int ndim = ein_plan_output_ndim(plan);
  PyObject *shape = einpy_shape_tuple(ein_plan_output_shape(plan), ndim);
  PyObject *view = NULL;
  if (shape && ein_plan_output_view(plan, &input, strides, &offset)) {
    PyObject *st = einpy_shape_tuple(strides, ndim);
    view = st ? Py_BuildValue("(iOL)", input, st, (long long)offset) : NULL;
    Py_XDECREF(st);
  } else if (shape) {
    Py_INCREF(Py_None);
    view = Py_None;
  }
  PyObject *r = view ? PyTuple_Pack(2, shape, view) : NULL;
  Py_XDECREF(shape);
  Py_XDECREF(view);
  return r;
}

/* view_layout(expr, shapes, strides, dtype_code, dtype_bits, numpy,
 *             reduction, lengths) -> (output shape, view or None)
 * What a plan for inputs of these shapes and element strides gives,
 * without data: the output's shape, and where the plan only re-reads one
 * input (ein_plan_output_view), (input, strides, offset) of the view.
 * For frameworks that make the view themselves (torch's as_strided, so
 * that it is an autograd view) and need the shape while tracing. */
static PyObject *py_view_layout(PyObject *self, PyObject *args) {
  (void)self;
  const char *expr, *reduction;
  PyObject *shapes, *strides, *numpy, *lengths;
  int code, bits;
  if (!PyArg_ParseTuple(args, "sOOiiOsO:view_layout", &expr, &shapes,
                        &strides, &code, &bits, &numpy, &reduction, &lengths))
    return NULL;
  /* GIL-protected, as module.c's shape tables */
  static int64_t dims[EINPY_MAX_OPERANDS][EIN_MAX_DIMS];
  static int64_t steps[EINPY_MAX_OPERANDS][EIN_MAX_DIMS];
  static int ndims[EINPY_MAX_OPERANDS], nsteps[EINPY_MAX_OPERANDS];
  static DLTensor ts[EINPY_MAX_OPERANDS];
  static const DLTensor *ins[EINPY_MAX_OPERANDS];
  int n, m;
  if (einpy_shapes_parse(shapes, dims, ndims, &n) < 0 ||
      einpy_shapes_parse(strides, steps, nsteps, &m) < 0)
    return NULL;
  for (int i = 0; i < n; i++)
    if (i >= m || nsteps[i] != ndims[i]) {
      PyErr_SetString(PyExc_ValueError, "view_layout: a stride per dim");
      return NULL;
    }
  for (int i = 0; i < n; i++) {
    ts[i] = (DLTensor){NULL, {kDLCPU, 0}, ndims[i],
                       {(uint8_t)code, (uint8_t)bits, 1}, dims[i], steps[i], 0};
    ins[i] = &ts[i];
  }
  einpy_options o;
  if (einpy_options_parse(numpy, reduction, "cpu", lengths, &o) < 0)
    return NULL;
  ein_plan *plan = NULL;
  ein_status st =
      ein_plan_create(einpy_ctx(), expr, ins, n, NULL, &o.opt, &plan);
  einpy_options_free(&o);
  if (st != EIN_OK) return einpy_raise(ein_last_error(einpy_ctx()));
  PyObject *r = layout_answer(plan);
  ein_plan_destroy(plan);
  return r;
}

static PyMethodDef view_methods[] = {
    {"view_layout", py_view_layout, METH_VARARGS,
     "view_layout(expr, shapes, strides, dtype_code, dtype_bits, numpy, "
     "reduction, lengths) -> (output shape, None or (input, strides, "
     "offset))"},
    {NULL, NULL, 0, NULL}};

int einpy_views_init(PyObject *module) {
  if (!exporter_type && !(exporter_type = PyType_FromSpec(&exporter_spec)))
    return -1;
  return PyModule_AddFunctions(module, view_methods);
}
