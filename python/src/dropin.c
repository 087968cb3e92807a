/*
 * dropin.c - the common calls of einc's drop-ins in C: einc.numpy.einsum,
 * einc.torch.einsum, einc.opt_einsum.contract, einc.einops.reduce and
 * einc.einops.einsum.
 *
 * Each drop-in is a builtin made from its Python function, which keeps
 * the peer's whole contract (keywords, other call forms, errors). A call
 * in the peer's plain form (the expression where the peer wants it,
 * keywords at their defaults) goes straight to call.c's einpy_call with
 * no general part (the plan table, plan_table.c), so
 * that a drop-in costs what einc.einsum costs (issue 27: within 10%; a
 * Python function in front of the table cost 20-30% on 8x8 inputs). What
 * the peer's contract would compute otherwise goes back to the Python
 * function: inputs refused by EINPY_REFUSE_* (numpy's bool einsum,
 * torch's integer promotion, numpy's order='K' for inputs of another
 * layout), and every call the table answers None (its plan could not be
 * made or the inputs are not plain) or fails with EincError (the Python
 * function raises the peer's error type instead).
 *
 * A numpy result that is 0-d comes back as its peer's type (peer_type):
 * a numpy scalar or a 0-d ndarray, by the peer's own rule.
 */
#include "einpy.h"

/* The Python functions the builtins were made from. */
static PyObject *numpy_general, *torch_general, *contract_general,
    *reduce_general, *einsum_general;
/* einc.EincError; opt_einsum's translation cache (subscripts -> (expr,
 * inputs, output, numpy dialect)); the patterns einc.einops.einsum has
 * checked (a set). */
static PyObject *einc_error, *contract_cache, *einsum_checked;

/* Whether the table answered: 1 with *r the result (or NULL with an
 * error that is not EincError's), 0 with nothing held for the general
 * path. */
static int answered(PyObject **r) {
  if (*r == Py_None) {
    Py_CLEAR(*r);
    return 0;
  }
  if (!*r && PyErr_ExceptionMatches(einc_error)) {
    PyErr_Clear();
    return 0;
  }
  return 1;
}

/* Whether v is exactly a str equal to one of the NULL-ended names. */
static int str_in(PyObject *v, const char *const *names) {
  if (!PyUnicode_CheckExact(v)) return 0;
  for (int i = 0; names[i]; i++)
    if (PyUnicode_CompareWithASCIIString(v, names[i]) == 0) return 1;
  return 0;
}

/* A keyword's value that leaves the plain call plain. */
typedef struct plain_key {
  const char *name;
  int none_ok, bool_ok, any_str;
  const char *const *strs; /* NULL-ended, or NULL */
} plain_key;

/* Whether every keyword in kwargs is one of keys[0..n) with a value its
 * entry allows. */
static int plain_keywords(PyObject *kwargs, const plain_key *keys, int n) {
  if (!kwargs) return 1;
  Py_ssize_t pos = 0;
  PyObject *name, *v;
  while (PyDict_Next(kwargs, &pos, &name, &v)) {
    const plain_key *k = NULL;
    for (int i = 0; !k && i < n; i++)
      if (PyUnicode_CompareWithASCIIString(name, keys[i].name) == 0)
        k = &keys[i];
    int ok = k && ((k->none_ok && v == Py_None) ||
                   (k->bool_ok && (v == Py_True || v == Py_False)) ||
                   (k->any_str && PyUnicode_CheckExact(v)) ||
                   (k->strs && str_in(v, k->strs)));
    if (!ok) return 0;
  }
  return 1;
}

/* 1 when r is a 0-d numpy array, 0 when it is anything else (or NULL),
 * -1 with an error set. */
static int ndarray_0d(PyObject *r) {
  static PyObject *ndim_name;
  if (!r || !einpy_is_ndarray(r)) return 0;
  PyObject *ndim = einpy_attr(r, &ndim_name, "ndim");
  long d = ndim ? PyLong_AsLong(ndim) : -1;
  Py_XDECREF(ndim);
  return d < 0 ? -1 : d == 0;
}

/* A 0-d numpy result as the numpy scalar einops gives. */
static PyObject *scalar_of(PyObject *r) {
  int zero_d = ndarray_0d(r);
  if (zero_d <= 0) return zero_d < 0 ? (Py_DECREF(r), NULL) : r;
  PyObject *empty = PyTuple_New(0);
  PyObject *s = empty ? PyObject_GetItem(r, empty) : NULL;
  Py_XDECREF(empty);
  Py_DECREF(r);
  return s;
}

/* A 0-d numpy result of a builtin as its peer's type (a numpy scalar or
 * a 0-d ndarray: the peer's rule needs its path, issue 37): what the
 * general function's `_zero_d(args, kwargs, result)` makes of it. Other
 * results as they are. */
static PyObject *peer_type(PyObject *general, PyObject *args,
                           PyObject *kwargs, PyObject *r) {
  int zero_d = ndarray_0d(r);
  if (zero_d <= 0) return zero_d < 0 ? (Py_DECREF(r), NULL) : r;
  /* the rule reads keywords as a dict (none given: an empty one) */
  PyObject *rule = PyObject_GetAttrString(general, "_zero_d");
  PyObject *kw = kwargs ? (Py_INCREF(kwargs), kwargs) : PyDict_New();
  PyObject *typed = rule && kw ? PyObject_CallFunctionObjArgs(rule, args, kw,
                                                              r, NULL)
                               : NULL;
  Py_XDECREF(rule);
  Py_XDECREF(kw);
  Py_DECREF(r);
  return typed;
}

/* ------------------------------------------------------- numpy.einsum */

static const char *const K[] = {"K", NULL}, *const SAFE[] = {"safe", NULL},
                         *const STRATEGIES[] = {"greedy", "optimal", NULL};

/* numpy.einsum(subscripts, *operands, out=None, dtype=None, order='K',
 * casting='safe', optimize=False): plain with those defaults and
 * optimize True or a strategy (einc's planner searches either way). */
static PyObject *numpy_einsum(PyObject *self, PyObject *args,
                              PyObject *kwargs) {
  (void)self;
  static const plain_key keys[] = {{"out", 1, 0, 0, NULL},
                                   {"dtype", 1, 0, 0, NULL},
                                   {"order", 0, 0, 0, K},
                                   {"casting", 0, 0, 0, SAFE},
                                   {"optimize", 0, 1, 0, STRATEGIES}};
  Py_ssize_t n = PyTuple_Size(args);
  PyObject *expr = n >= 2 ? PyTuple_GetItem(args, 0) : NULL;
  if (expr && PyUnicode_CheckExact(expr) && plain_keywords(kwargs, keys, 5)) {
    einpy_request q = {args, 1, n - 1, expr, 1, (int)EIN_REDUCE_SUM, 0, NULL,
                       EINPY_REFUSE_BOOL | EINPY_REFUSE_STRIDED, 1, NULL};
    PyObject *r = einpy_call(&q);
    if (answered(&r)) return peer_type(numpy_general, args, kwargs, r);
  }
  return PyObject_Call(numpy_general, args, kwargs);
}

/* ------------------------------------------------------- torch.einsum */

/* torch.einsum(equation, *operands) or (equation, [operands]): plain
 * with no keywords; integer and bool inputs go to Python (torch's
 * promotions). */
static PyObject *torch_einsum(PyObject *self, PyObject *args,
                              PyObject *kwargs) {
  (void)self;
  Py_ssize_t n = PyTuple_Size(args);
  PyObject *expr = n >= 2 ? PyTuple_GetItem(args, 0) : NULL;
  if (expr && PyUnicode_CheckExact(expr) &&
      (!kwargs || PyDict_Size(kwargs) == 0)) {
    PyObject *list = PyTuple_GetItem(args, 1), *call = args;
    if (n == 2 && (PyList_CheckExact(list) || PyTuple_CheckExact(list))) {
      /* the operand-list form: (equation, *operands) */
      PyObject *items = PySequence_Tuple(list);
      PyObject *head = items ? PyTuple_Pack(1, expr) : NULL;
      call = head ? PySequence_Concat(head, items) : NULL;
      Py_XDECREF(head);
      Py_XDECREF(items);
      if (!call) return NULL;
    } else {
      Py_INCREF(call);
    }
    Py_ssize_t m = PyTuple_Size(call);
    einpy_request q = {call, 1, m - 1, expr, 1, (int)EIN_REDUCE_SUM, 0,
                       NULL, EINPY_REFUSE_INTEGER, 1, NULL};
    PyObject *r = m >= 2 ? einpy_call(&q) : (Py_INCREF(Py_None), Py_None);
    Py_DECREF(call);
    if (answered(&r)) return r;
  }
  return PyObject_Call(torch_general, args, kwargs);
}

/* ------------------------------------------------ opt_einsum.contract */

/* opt_einsum.contract(subscripts, *operands, out=None, dtype=None,
 * order='K', casting='safe', use_blas=True, optimize=True,
 * memory_limit=None, backend='auto'): plain with subscripts already
 * translated (contract_cache) and keywords that leave the result as it
 * is (optimize a strategy's name or a bool: einc's planner's path). */
static PyObject *contract(PyObject *self, PyObject *args, PyObject *kwargs) {
  (void)self;
  static const plain_key keys[] = {{"out", 1, 0, 0, NULL},
                                   {"dtype", 1, 0, 0, NULL},
                                   {"order", 0, 0, 0, K},
                                   {"casting", 0, 0, 0, SAFE},
                                   {"use_blas", 0, 1, 0, NULL},
                                   {"optimize", 0, 1, 1, NULL},
                                   {"memory_limit", 1, 0, 0, NULL},
                                   {"backend", 0, 0, 1, NULL}};
  Py_ssize_t n = PyTuple_Size(args);
  PyObject *subscripts = n >= 2 ? PyTuple_GetItem(args, 0) : NULL;
  PyObject *hit = subscripts && PyUnicode_CheckExact(subscripts)
                      ? PyDict_GetItemWithError(contract_cache, subscripts)
                      : NULL;
  if (hit && PyTuple_Check(hit) && PyTuple_Size(hit) == 4 &&
      plain_keywords(kwargs, keys, 8)) {
    Py_INCREF(hit); /* the planning of a miss may run Python code */
    int numpy = PyObject_IsTrue(PyTuple_GetItem(hit, 3));
    einpy_request q = {args, 1, n - 1, PyTuple_GetItem(hit, 0), numpy,
                       (int)EIN_REDUCE_SUM, 0, NULL, EINPY_REFUSE_BOOL, 1,
                       NULL};
    PyObject *r = numpy < 0 ? NULL : einpy_call(&q);
    Py_DECREF(hit);
    if (answered(&r)) return peer_type(contract_general, args, kwargs, r);
  }
  PyErr_Clear(); /* the Python function raises what there is to raise */
  return PyObject_Call(contract_general, args, kwargs);
}

/* ------------------------------------------------------------ einops */

/* einops.reduce(tensor, pattern, reduction, **axes_lengths): plain with
 * a reduction einc compiles, named by a str; einops' rule (no axis
 * added) is the binder's. The result's dtype is the backend's reduction's
 * (einc/einops: a sum or product of integers or bools promoted, any and
 * all giving bool), so those go to Python. */
static PyObject *einops_reduce(PyObject *self, PyObject *args,
                               PyObject *kwargs) {
  (void)self;
  static const char *const own[] = {"tensor", "pattern", "reduction", NULL};
  PyObject *name = PyTuple_Size(args) == 3 ? PyTuple_GetItem(args, 2) : NULL;
  int reduction =
      name && PyUnicode_CheckExact(name) ? einpy_reduction_of(name) : -1;
  if (reduction == (int)EIN_REDUCE_ANY || reduction == (int)EIN_REDUCE_ALL)
    reduction = -1;
  /* (mean of integers and bools: einops' NotImplementedError, raised
   * in Python) */
  unsigned refuse = reduction == (int)EIN_REDUCE_SUM ||
                            reduction == (int)EIN_REDUCE_PROD ||
                            reduction == (int)EIN_REDUCE_MEAN
                        ? EINPY_REFUSE_INTEGER | EINPY_KEEP_GRAPH
                        : 0;
  if (reduction >= 0) {
    PyObject *r = einpy_served(args, kwargs, reduction, EIN_RULE_NO_REPEAT,
                               refuse, own);
    if (r) return peer_type(reduce_general, args, kwargs, r);
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(einc_error)) return NULL;
    PyErr_Clear();
  }
  return PyObject_Call(reduce_general, args, kwargs);
}

/* einops.einsum(*tensors, pattern): plain once the Python function has
 * checked the pattern against einops' rules (einsum_checked: pattern ->
 * its numpy form, which broadcasts size-1 dims as einops' backends do). */
static PyObject *einops_einsum(PyObject *self, PyObject *args,
                               PyObject *kwargs) {
  (void)self;
  Py_ssize_t n = PyTuple_Size(args);
  PyObject *pattern = n >= 2 ? PyTuple_GetItem(args, n - 1) : NULL;
  PyObject *expr = pattern && PyUnicode_CheckExact(pattern) &&
                           (!kwargs || PyDict_Size(kwargs) == 0)
                       ? PyDict_GetItemWithError(einsum_checked, pattern)
                       : NULL; /* borrowed */
  if (expr && PyUnicode_CheckExact(expr)) {
    Py_INCREF(expr); /* (the call may clear the dict) */
    /* integers and bools go to Python: einops calls the backend's own
     * einsum (torch promotes integer sums, numpy ors bools) */
    einpy_request q = {args, 0, n - 1, expr, 1, (int)EIN_REDUCE_SUM, 0, NULL,
                       EINPY_REFUSE_INTEGER | EINPY_KEEP_GRAPH, 1, NULL};
    PyObject *r = einpy_call(&q);
    Py_DECREF(expr);
    if (answered(&r)) return scalar_of(r);
  }
  PyErr_Clear();
  return PyObject_Call(einsum_general, args, kwargs);
}

/* ------------------------------------------------------------ makers */

/* A builtin from (general, doc[, extra]): extra is kept in *extra_slot
 * (a dict or set the builtin reads; required where extra_slot). */
static PyObject *make(PyMethodDef *def, PyObject **general_slot,
                      PyObject **extra_slot, PyObject *args) {
  PyObject *general, *doc, *extra = NULL;
  if (!PyArg_ParseTuple(args, extra_slot ? "OUO" : "OU", &general, &doc,
                        &extra))
    return NULL;
  if (extra_slot) {
    Py_INCREF(extra);
    Py_XDECREF(*extra_slot);
    *extra_slot = extra;
  }
  PyObject *pair = PyTuple_Pack(2, general, doc);
  PyObject *fn = pair ? einpy_builtin(def, general_slot, pair) : NULL;
  Py_XDECREF(pair);
  return fn;
}

#define BUILTIN(pyname, cname, fn, general, extra)                          \
  static PyObject *cname(PyObject *self, PyObject *args) {                 \
    (void)self;                                                             \
    static PyMethodDef def = {pyname, (PyCFunction)(void (*)(void))fn,     \
                              METH_VARARGS | METH_KEYWORDS, NULL};          \
    return make(&def, &general, extra, args);                               \
  }

BUILTIN("einsum", py_numpy_einsum, numpy_einsum, numpy_general, NULL)
BUILTIN("einsum", py_torch_einsum, torch_einsum, torch_general, NULL)
BUILTIN("contract", py_contract, contract, contract_general, &contract_cache)
BUILTIN("reduce", py_einops_reduce, einops_reduce, reduce_general, NULL)
BUILTIN("einsum", py_einops_einsum, einops_einsum, einsum_general,
        &einsum_checked)

static PyMethodDef dropin_methods[] = {
    {"fast_numpy_einsum", py_numpy_einsum, METH_VARARGS,
     "fast_numpy_einsum(general, doc) -> einc.numpy.einsum"},
    {"fast_torch_einsum", py_torch_einsum, METH_VARARGS,
     "fast_torch_einsum(general, doc) -> einc.torch.einsum"},
    {"fast_contract", py_contract, METH_VARARGS,
     "fast_contract(general, doc, cache) -> einc.opt_einsum.contract; "
     "cache: subscripts -> (expr, inputs, output, numpy dialect)"},
    {"fast_einops_reduce", py_einops_reduce, METH_VARARGS,
     "fast_einops_reduce(general, doc) -> einc.einops.reduce"},
    {"fast_einops_einsum", py_einops_einsum, METH_VARARGS,
     "fast_einops_einsum(general, doc, checked) -> einc.einops.einsum; "
     "checked: the patterns general has checked, each to its numpy form"},
    {NULL, NULL, 0, NULL}};

int einpy_dropin_init(PyObject *module) {
  Py_XDECREF(einc_error);
  einc_error = PyObject_GetAttrString(module, "EincError");
  return einc_error ? PyModule_AddFunctions(module, dropin_methods) : -1;
}

void einpy_dropin_free(void) {
  Py_CLEAR(numpy_general);
  Py_CLEAR(torch_general);
  Py_CLEAR(contract_general);
  Py_CLEAR(reduce_general);
  Py_CLEAR(einsum_general);
  Py_CLEAR(einc_error);
  Py_CLEAR(contract_cache);
  Py_CLEAR(einsum_checked);
}
