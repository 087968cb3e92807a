/*
 * fastgrad.c - the short way for eager torch calls that record autograd:
 * einc's plan lowered onto torch's own operations, found from C.
 *
 * einc.einsum, rearrange and reduce on torch tensors of which one needs
 * grad while grad is recorded cannot take plan_table.c's table: DLPack
 * refuses such tensors, and the result must be a node of torch's graph.
 * For small tensors einc/_torch.py runs them as one Python function of
 * torch operations in einc's order, made once per call structure
 * (einc/_torch_lower.py); torch's autograd then records its own C++
 * nodes. Reaching that function through einc's Python layers cost more
 * than the torch operations themselves (issue 25 allows the autograd path
 * 2 us over the no-grad call). Here a dict keyed by (expression, dialect,
 * reduction, rules, lengths, the first input's dtype, each input's
 * torch.Size and layout: a sparse tensor of a dense one's shape must not
 * find the dense one's function) holds the function, or None where the
 * call is not lowered
 * (large tensors, expressions only einc's path serves); a hit calls it
 * with the tensors, no frame of einc's Python in between. A miss asks
 * the maker that einc/_torch.py gives fast_setup_graph once; an error
 * while making (einc's binding errors) is cleared and the call goes the
 * general way, which raises it with its caller's error type (the einops
 * drop-in's EinopsError).
 *
 * call.c calls einpy_fast_graph after asking torch's guards (a
 * tracer or dispatch mode, autocast): those calls keep einc/_torch.py's
 * routes. The dict is guarded by the GIL.
 */
#include "einpy.h"

enum { GRAPH_TABLE_MAX = 4096 };

static PyObject *table; /* key -> function or None */
static PyObject *maker; /* (expr, tensors, numpy, reduction, lengths,
                           rules) -> function or None */

/* The key of a call: NULL with no exception where an input has no shape
 * or dtype to read, or the inputs' dtypes differ (the general path says
 * which). */
static PyObject *key_of(PyObject *tensors, PyObject *expr, int dialect,
                        int reduction, unsigned rules, PyObject *lengths) {
  static PyObject *shape_name, *dtype_name, *layout_name;
  Py_ssize_t n = PyTuple_Size(tensors);
  PyObject *key = PyTuple_New(6 + 2 * n), *dtype = NULL;
  for (Py_ssize_t i = 0; key && i < n; i++) {
    PyObject *t = PyTuple_GetItem(tensors, i);
    PyObject *dt = einpy_attr(t, &dtype_name, "dtype");
    PyObject *shape = dt ? einpy_attr(t, &shape_name, "shape") : NULL;
    PyObject *layout = shape ? einpy_attr(t, &layout_name, "layout") : NULL;
    if (!layout || (dtype && dt != dtype)) {
      Py_XDECREF(dt);
      Py_XDECREF(shape);
      Py_XDECREF(layout);
      Py_CLEAR(key);
      break;
    }
    if (!dtype) dtype = dt;
    else Py_DECREF(dt);
    PyTuple_SetItem(key, 6 + 2 * i, shape);
    PyTuple_SetItem(key, 7 + 2 * i, layout);
  }
  if (!key) {
    Py_XDECREF(dtype);
    PyErr_Clear();
    return NULL;
  }
  Py_INCREF(expr);
  PyTuple_SetItem(key, 0, expr);
  PyTuple_SetItem(key, 1, PyLong_FromLong(dialect));
  PyTuple_SetItem(key, 2, PyLong_FromLong(reduction));
  PyTuple_SetItem(key, 3, PyLong_FromUnsignedLong(rules));
  PyObject *l = lengths ? lengths : Py_None;
  Py_INCREF(l);
  PyTuple_SetItem(key, 4, l);
  PyTuple_SetItem(key, 5, dtype);
  return key;
}

/* The maker's function for a call not in the table (a new reference:
 * the function or None), kept under key; NULL with no exception when the
 * maker failed. */
static PyObject *make(PyObject *key, PyObject *tensors, PyObject *expr,
                      int dialect, int reduction, unsigned rules,
                      PyObject *lengths) {
  PyObject *numpy = dialect < 0 ? Py_None : dialect ? Py_True : Py_False;
  PyObject *none = lengths ? NULL : PyTuple_New(0);
  PyObject *fn =
      lengths || none
          ? PyObject_CallFunction(maker, "OOOsOI", expr, tensors, numpy,
                                  ein_reduction_name((ein_reduction)reduction),
                                  lengths ? lengths : none, rules)
          : NULL;
  Py_XDECREF(none);
  if (!fn) {
    PyErr_Clear();
    return NULL;
  }
  if (PyDict_Size(table) >= GRAPH_TABLE_MAX) PyDict_Clear(table);
  if (PyDict_SetItem(table, key, fn) < 0) PyErr_Clear();
  return fn;
}

PyObject *einpy_fast_graph(PyObject *args, Py_ssize_t first,
                           Py_ssize_t count, PyObject *expr, int dialect,
                           int reduction, unsigned rules, PyObject *lengths) {
  if (!maker) Py_RETURN_NONE;
  PyObject *tensors = PyTuple_GetSlice(args, first, first + count);
  if (!tensors) return NULL;
  PyObject *key = key_of(tensors, expr, dialect, reduction, rules, lengths);
  PyObject *fn = key ? PyDict_GetItemWithError(table, key) : NULL;
  if (fn) Py_INCREF(fn);
  else if (key && !PyErr_Occurred())
    fn = make(key, tensors, expr, dialect, reduction, rules, lengths);
  PyErr_Clear();
  PyObject *result = NULL;
  if (fn && fn != Py_None) {
    result = PyObject_Call(fn, tensors, NULL);
  } else {
    Py_INCREF(Py_None);
    result = Py_None;
  }
  Py_XDECREF(fn);
  Py_XDECREF(key);
  Py_DECREF(tensors);
  return result;
}

/* fast_setup_graph(maker): calls that record autograd go to maker's
 * functions. */
static PyObject *py_fast_setup_graph(PyObject *self, PyObject *fn) {
  (void)self;
  if (!table && !(table = PyDict_New())) return NULL;
  Py_INCREF(fn);
  Py_XDECREF(maker);
  maker = fn;
  PyDict_Clear(table);
  Py_RETURN_NONE;
}

/* fast_graph_clear(): forgets every function (the maker's answers
 * changed). */
static PyObject *py_fast_graph_clear(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  if (table) PyDict_Clear(table);
  Py_RETURN_NONE;
}

static PyMethodDef graph_methods[] = {
    {"fast_setup_graph", py_fast_setup_graph, METH_O,
     "fast_setup_graph(maker): eager torch calls that record autograd run "
     "maker(expr, tensors, numpy, reduction, lengths, rules)'s function "
     "(None: the general path), made once per call structure"},
    {"fast_graph_clear", py_fast_graph_clear, METH_NOARGS,
     "fast_graph_clear(): forgets the functions made so far"},
    {NULL, NULL, 0, NULL}};

int einpy_fast_graph_init(PyObject *module) {
  return PyModule_AddFunctions(module, graph_methods);
}

void einpy_fast_graph_free(void) {
  Py_CLEAR(table);
  Py_CLEAR(maker);
}
