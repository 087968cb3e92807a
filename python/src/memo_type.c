/*
 * memo_type.c - einc._einc.ShapeMemo: ein.h's jaxtyping-style shape memo.
 *
 * check(spec, shape, what) binds the names a spec uses on first sight and
 * checks them afterwards ("batch seq (heads d)", "_", "*rest", "#n", ...;
 * ein.h lists the grammar). einc.parse_shape uses a fresh memo per call;
 * tests keep one across arguments. A memo has no lock: the GIL is held
 * throughout every method, which is the one-thread-at-a-time ein.h asks.
 */
#include "einpy.h"

typedef struct memo_object {
  PyObject_HEAD
  ein_shape_memo *memo;
} memo_object;

static int memo_init(PyObject *self, PyObject *args, PyObject *kwargs) {
  memo_object *m = (memo_object *)self;
  if ((kwargs && PyObject_IsTrue(kwargs)) || PyTuple_Size(args) != 0) {
    PyErr_SetString(PyExc_TypeError, "ShapeMemo() takes no arguments");
    return -1;
  }
  if (m->memo) {
    ein_shape_memo_clear(m->memo);
    return 0;
  }
  if (ein_shape_memo_create(&m->memo) != EIN_OK) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

static void memo_dealloc(PyObject *self) {
  memo_object *m = (memo_object *)self;
  ein_shape_memo_destroy(m->memo);
  einpy_object_free(self);
}

static int check_ready(memo_object *m) {
  if (m->memo) return 0;
  PyErr_SetString(PyExc_RuntimeError, "the ShapeMemo was not initialised");
  return -1;
}

/* check(spec, shape, what=None) -> None, or raises EincError. */
static PyObject *memo_check(PyObject *self, PyObject *args) {
  memo_object *m = (memo_object *)self;
  const char *spec, *what = NULL;
  PyObject *shape_tuple;
  if (!PyArg_ParseTuple(args, "sO|z:check", &spec, &shape_tuple, &what) ||
      check_ready(m) < 0)
    return NULL;
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  if (einpy_shape_parse(shape_tuple, shape, &ndim) < 0) return NULL;
  if (ein_shape_check_dims(m->memo, spec, ndim, shape, what, NULL, 0) != EIN_OK)
    return einpy_raise(ein_shape_memo_error(m->memo));
  Py_RETURN_NONE;
}

/* size(name) -> the bound size, or None when unbound or a run. */
static PyObject *memo_size(PyObject *self, PyObject *args) {
  memo_object *m = (memo_object *)self;
  const char *name;
  if (!PyArg_ParseTuple(args, "s:size", &name) || check_ready(m) < 0)
    return NULL;
  int64_t size = ein_shape_memo_size(m->memo, name);
  if (size < 0) Py_RETURN_NONE;
  return PyLong_FromLongLong(size);
}

static PyObject *memo_clear(PyObject *self, PyObject *unused) {
  (void)unused;
  memo_object *m = (memo_object *)self;
  if (check_ready(m) < 0) return NULL;
  ein_shape_memo_clear(m->memo);
  Py_RETURN_NONE;
}

static PyMethodDef memo_methods[] = {
    {"check", memo_check, METH_VARARGS,
     "check(spec, shape, what=None): binds new names, checks known ones"},
    {"size", memo_size, METH_VARARGS,
     "size(name) -> the size bound to name, or None"},
    {"clear", memo_clear, METH_NOARGS, "clear(): forgets every binding"},
    {NULL, NULL, 0, NULL}};

int einpy_memo_type_init(PyObject *module) {
  return einpy_add_class(module, "einc._einc.ShapeMemo", sizeof(memo_object),
                         "ein.h's shape memo (see einc.ShapeMemo).",
                         memo_init, memo_dealloc, memo_methods);
}
