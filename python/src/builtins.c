/*
 * builtins.c - einc.rearrange, einc.reduce and einc.einops.rearrange as
 * C functions over their Python ones, so that a call the plan table
 * serves runs no Python frame, and the making of such builtins (dropin.c
 * makes the drop-ins with it too).
 *
 * A builtin reads its call into call.c's request (tensor, pattern, the
 * reduction, axis lengths from the keywords) with no general part: where
 * the table does not serve the call, the Python function it was made
 * from takes it, checks the arguments and raises einc's errors.
 */
#include <stdlib.h>
#include <string.h>

#include "einpy.h"

/* einops' axis lengths, ((name, size), ...) in keyword order as
 * einc._core._lengths gives them, or NULL (no exception) where Python
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
PyObject *einpy_served(PyObject *args, PyObject *kwargs, int reduction,
                        unsigned rules, unsigned refuse,
                        const char *const *own) {
  PyObject *lengths = NULL, *result = NULL;
  int plain = PyUnicode_CheckExact(PyTuple_GetItem(args, 1)) &&
              (!kwargs || PyDict_Size(kwargs) == 0 ||
               (lengths = lengths_of(kwargs, own)) != NULL);
  if (plain) {
    einpy_request r = {args, 0, 1, PyTuple_GetItem(args, 1), 0, reduction,
                       rules, lengths, refuse, 1, NULL};
    result = einpy_call(&r);
  }
  Py_XDECREF(lengths);
  if (result == Py_None) Py_CLEAR(result);
  return result; /* a view, an array, or NULL with an error set */
}

/* einc.rearrange(tensor, pattern, **axes_lengths) in C, so that a call
 * the table serves runs no Python frame: einpy_call as fast((tensor,
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
        einpy_served(args, kwargs, (int)EIN_REDUCE_SUM, rules, 0, own);
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
  int reduction = name && PyUnicode_CheckExact(name) ? einpy_reduction_of(name)
                                                      : -1;
  if (reduction >= 0) {
    PyObject *result = einpy_served(args, kwargs, reduction, 0, 0, own);
    if (result || PyErr_Occurred()) return result;
  }
  return PyObject_Call(reduce_general, args, kwargs);
}

/* A builtin named `def->ml_name` in module einc, made from args
 * (general, doc): general, the Python function it hands calls to, goes
 * in *general_slot; doc is its docstring, a signature line first
 * ("rearrange(tensor, ...)\n--\n\n"), kept for the life of the process
 * as builtins' docstrings are (the first one given). */
PyObject *einpy_builtin(PyMethodDef *def, PyObject **general_slot,
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
  return einpy_builtin(&def, &rearrange_general, args);
}

/* fast_rearrange_einops(general, doc) -> einc.einops.rearrange. */
static PyObject *py_fast_rearrange_einops(PyObject *self, PyObject *args) {
  (void)self;
  static PyMethodDef def = {"rearrange",
                            (PyCFunction)(void (*)(void))fast_rearrange_einops,
                            METH_VARARGS | METH_KEYWORDS, NULL};
  return einpy_builtin(&def, &einops_general, args);
}

/* fast_reduce(general, doc) -> the builtin einc.reduce. */
static PyObject *py_fast_reduce(PyObject *self, PyObject *args) {
  (void)self;
  static PyMethodDef def = {"reduce", (PyCFunction)(void (*)(void))fast_reduce,
                            METH_VARARGS | METH_KEYWORDS, NULL};
  return einpy_builtin(&def, &reduce_general, args);
}

static PyMethodDef builtin_methods[] = {
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
    {NULL, NULL, 0, NULL}};

int einpy_builtins_init(PyObject *module) {
  return PyModule_AddFunctions(module, builtin_methods);
}

void einpy_builtins_free(void) {
  Py_CLEAR(rearrange_general);
  Py_CLEAR(einops_general);
  Py_CLEAR(reduce_general);
}
