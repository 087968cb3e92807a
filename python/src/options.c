/*
 * options.c - Python values into an ein_options, and shapes both ways.
 *
 * Options come from the Python layer already sorted out (keywords checked,
 * einops' names mapped): the dialect flag, the reduction and backend by
 * name, and the axis lengths as (name, size) pairs. The names are copied,
 * so an einpy_options outlives the call that made it (a Plan keeps one).
 */
#include <math.h>
#include <string.h>

#include "einpy.h"

/* A PyMem copy of a str's UTF-8 bytes, NUL-terminated; NULL on failure. */
static char *copy_utf8(PyObject *str) {
  PyObject *bytes = PyUnicode_AsUTF8String(str);
  if (!bytes) return NULL;
  char *data;
  Py_ssize_t len;
  char *copy = NULL;
  if (PyBytes_AsStringAndSize(bytes, &data, &len) == 0) {
    copy = PyMem_Malloc((size_t)len + 1);
    if (copy)
      memcpy(copy, data, (size_t)len + 1);
    else
      PyErr_NoMemory();
  }
  Py_DECREF(bytes);
  return copy;
}

/* One (name, size) pair into lengths[i] / names[i]. */
static int parse_length(PyObject *pair, einpy_options *o, int i) {
  PyObject *name, *size;
  if (!PyTuple_Check(pair) ||
      !PyArg_ParseTuple(pair, "UO:axis length", &name, &size)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "axis lengths are (name, size) pairs");
    return -1;
  }
  long long n = PyLong_AsLongLong(size);
  if (n == -1 && PyErr_Occurred()) return -1;
  o->names[i] = copy_utf8(name);
  if (!o->names[i]) return -1;
  o->lengths[i].name = o->names[i];
  o->lengths[i].size = n;
  o->nlengths = i + 1;
  return 0;
}

Py_ssize_t einpy_tuple_len(PyObject *tuple, int most, const char *not_tuple,
                           const char *too_long) {
  if (!PyTuple_Check(tuple)) {
    PyErr_SetString(PyExc_TypeError, not_tuple);
    return -1;
  }
  Py_ssize_t n = PyTuple_Size(tuple);
  if (n > most) {
    einpy_raise_status(EIN_ERR_LIMIT, too_long, n, most);
    return -1;
  }
  return n;
}

static int parse_lengths(PyObject *lengths, einpy_options *o) {
  Py_ssize_t n =
      einpy_tuple_len(lengths, EIN_MAX_AXES, "axis lengths must come as a tuple",
                      "%zd axis lengths: at most %d");
  if (n <= 0) return (int)n;
  o->lengths = einpy_calloc((size_t)n, sizeof *o->lengths);
  o->names = einpy_calloc((size_t)n, sizeof *o->names);
  if (!o->lengths || !o->names) {
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++)
    if (parse_length(PyTuple_GetItem(lengths, i), o, (int)i) < 0) return -1;
  o->opt.lengths = o->lengths;
  o->opt.nlengths = (int)n;
  return 0;
}

int einpy_options_parse(PyObject *numpy, const char *reduction,
                        const char *backend, PyObject *lengths,
                        einpy_options *o) {
  memset(o, 0, sizeof *o);
  int is_numpy = PyObject_IsTrue(numpy);
  if (is_numpy < 0) return -1;
  o->opt.dialect = is_numpy ? EIN_DIALECT_NUMPY : EIN_DIALECT_EINOPS;
  if (ein_reduction_parse(reduction, &o->opt.reduction) != EIN_OK) {
    einpy_raise_status(EIN_ERR_BAD_REDUCTION,
                       "unknown reduction '%.40s' (sum, mean, max, "
                       "min, prod, any, all)",
                       reduction);
    return -1;
  }
  if (ein_backend_parse(backend, &o->opt.backend) != EIN_OK) {
    einpy_raise_status(EIN_ERR_INVALID_ARGUMENT,
                       "unknown backend '%.40s' (auto, cpu, cuda, emu)",
                       backend);
    return -1;
  }
  if (parse_lengths(lengths, o) < 0) {
    einpy_options_free(o);
    return -1;
  }
  return 0;
}

/* *copy: a PyMem copy of text (NULL or "": none). */
static int copy_text(const char *text, char **copy) {
  if (!text || !*text) return 0;
  size_t len = strlen(text);
  *copy = PyMem_Malloc(len + 1);
  if (!*copy) {
    PyErr_NoMemory();
    return -1;
  }
  memcpy(*copy, text, len + 1);
  return 0;
}

int einpy_options_set_path(einpy_options *o, const char *path) {
  if (copy_text(path, &o->path) < 0) return -1;
  o->opt.path = o->path;
  return 0;
}

int einpy_options_set_slicing(einpy_options *o, const char *slice,
                              long long memory_limit) {
  if (memory_limit < 0 && memory_limit != EIN_MEMORY_FREE) {
    einpy_raise_status(EIN_ERR_INVALID_ARGUMENT,
                       "memory_limit=%lld: a byte count, 0 for none, or "
                       "'free' (the device's free memory)",
                       memory_limit);
    return -1;
  }
  if (copy_text(slice, &o->slice) < 0) return -1;
  o->opt.slice_axes = o->slice;
  o->opt.memory_limit = (int64_t)memory_limit;
  return 0;
}

int einpy_options_set_search(einpy_options *o, double plan_time,
                             unsigned long long seed, const char *objective) {
  if (!(plan_time >= 0) || isinf(plan_time)) {
    einpy_raise_status(EIN_ERR_INVALID_ARGUMENT,
                       "plan_time is %g: give seconds, 0 or more (0: the "
                       "default)",
                       plan_time);
    return -1;
  }
  if (ein_objective_parse(objective, &o->opt.objective) != EIN_OK) {
    einpy_raise_status(EIN_ERR_INVALID_ARGUMENT,
                       "unknown objective '%.40s' (flops, size, combo)",
                       objective);
    return -1;
  }
  o->opt.plan_time = plan_time;
  o->opt.seed = (uint64_t)seed;
  return 0;
}

void einpy_options_free(einpy_options *o) {
  PyMem_Free(o->path);
  PyMem_Free(o->slice);
  for (int i = 0; o->names && i < o->nlengths; i++) PyMem_Free(o->names[i]);
  PyMem_Free(o->names);
  PyMem_Free(o->lengths);
  memset(o, 0, sizeof *o);
}

int einpy_shape_parse(PyObject *tuple, int64_t *shape, int *ndim) {
  Py_ssize_t n =
      einpy_tuple_len(tuple, EIN_MAX_DIMS, "a shape must be a tuple of ints",
                      "a shape of %zd dims: at most %d");
  if (n < 0) return -1;
  for (Py_ssize_t d = 0; d < n; d++) {
    long long v = PyLong_AsLongLong(PyTuple_GetItem(tuple, d));
    if (v == -1 && PyErr_Occurred()) return -1;
    shape[d] = v;
  }
  *ndim = (int)n;
  return 0;
}

int einpy_shapes_parse(PyObject *shapes, int64_t (*dims)[EIN_MAX_DIMS],
                       int *ndims, int *n) {
  Py_ssize_t count =
      einpy_tuple_len(shapes, EINPY_MAX_OPERANDS, "shapes must come as a tuple",
                      "%zd shapes: einc takes at most %d");
  if (count < 0) return -1;
  for (Py_ssize_t i = 0; i < count; i++)
    if (einpy_shape_parse(PyTuple_GetItem(shapes, i), dims[i], &ndims[i]) < 0)
      return -1;
  *n = (int)count;
  return 0;
}

PyObject *einpy_attr(PyObject *obj, PyObject **slot, const char *name) {
  if (!*slot && !(*slot = PyUnicode_InternFromString(name))) return NULL;
  return PyObject_GetAttr(obj, *slot);
}

PyObject *einpy_shape_tuple(const int64_t *shape, int n) {
  PyObject *t = PyTuple_New(n);
  for (int d = 0; t && d < n; d++) {
    PyObject *v = PyLong_FromLongLong(shape[d]);
    if (!v) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SetItem(t, d, v);
  }
  return t;
}

/* The ein_reduction a name gives, or -1 (no exception). The last name
 * seen is remembered by identity: callers pass the same str constant. */
static PyObject *last_reduction; /* owned */
static int last_reduction_value;

int einpy_reduction_of(PyObject *name) {
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

void einpy_reduction_forget(void) { Py_CLEAR(last_reduction); }
