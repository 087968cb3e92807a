/*
 * plan_table.c - the extension's plans for the common call: a small
 * table, keyed by the expression string, the dialect, reduction, rules
 * and axis lengths asked for and every input's dtype, shape and strides,
 * that keeps what the first call found: the plan (ein_plan_create on
 * those layouts, for a C-contiguous output), the output's shape as a
 * tuple, the numpy dtype of the result and, where the plan only re-reads
 * one input (ein_plan_output_view: a transpose, a split or merge of
 * adjacent axes, a diagonal), the view it reads.
 *
 * Why a table beside the context's own plan cache (ein_eval's): a hit
 * here compares a Python str by identity and a few integers, and keeps
 * the Python objects a result is made from (shape tuple, dtype); the
 * context's cache builds a byte key from the expression and options and
 * hashes it on every call. call.c is its only user (docs/design.md,
 * "The extension").
 *
 * The plan does not depend on the framework, so numpy and torch calls
 * share entries. The table is guarded by the GIL. An entry is counted
 * while a call runs its plan without the GIL, so evicting it from another
 * thread meanwhile only marks it; the last user frees it.
 */
#include <stdlib.h>
#include <string.h>

#include "einpy.h"

#define FAST_SLOTS 64

static einpy_entry *slots[FAST_SLOTS];
static int next_victim;

static void entry_free(einpy_entry *e) {
  ein_plan_destroy(e->plan);
  Py_XDECREF(e->expr);
  Py_XDECREF(e->lengths);
  Py_XDECREF(e->out_shape);
  Py_XDECREF(e->np_dtype);
  Py_XDECREF(e->view_stride_tuple);
  PyMem_Free(e);
}

/* Whether a tensor's layout is what the entry saw as input i. */
static int same_layout(const einpy_entry *e, int i, const DLTensor *t) {
  if (t->ndim != e->ndims[i] || t->dtype.code != e->dtype.code ||
      t->dtype.bits != e->dtype.bits || t->dtype.lanes != e->dtype.lanes)
    return 0;
  int64_t compact = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t stride = t->strides ? t->strides[d] : compact;
    if (t->shape[d] != e->dims[i][d] ||
        stride != e->dims[i][EIN_MAX_DIMS + d])
      return 0;
    compact *= t->shape[d];
  }
  return 1;
}

/* Whether the entry was made for these axis lengths (NULL: none). */
static int same_lengths(const einpy_entry *e, PyObject *lengths) {
  if (!e->lengths || !lengths) return e->lengths == lengths;
  int r = PyObject_RichCompareBool(e->lengths, lengths, Py_EQ);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

static einpy_entry *lookup(PyObject *expr, Py_hash_t hash, int dialect,
                          int reduction, unsigned rules, PyObject *lengths,
                          einpy_tensor *in, int n) {
  for (int s = 0; s < FAST_SLOTS; s++) {
    einpy_entry *e = slots[s];
    if (!e || e->hash != hash || e->ninputs != n || e->dialect != dialect ||
        e->reduction != reduction || e->rules != rules)
      continue;
    int same = 1;
    for (int i = 0; same && i < n; i++) same = same_layout(e, i, in[i].t);
    if (!same) continue;
    if (e->expr != expr &&
        PyUnicode_Compare(e->expr, expr) != 0) /* equal hashes, other str */
      continue;
    if (!same_lengths(e, lengths)) continue;
    return e;
  }
  return NULL;
}

/* numpy_dialect(expr, ranks) for dialect -1; the asked one otherwise. */
static int resolve_dialect(PyObject *expr, int dialect, einpy_tensor *in,
                           int n) {
  if (dialect >= 0) return dialect;
  PyObject *ranks = PyList_New(n);
  for (int i = 0; ranks && i < n; i++)
    PyList_SetItem(ranks, i, PyLong_FromLong(in[i].t->ndim));
  PyObject *r = ranks ? PyObject_CallFunctionObjArgs(einpy_fw.dialect_fn, expr,
                                                     ranks, NULL)
                      : NULL;
  Py_XDECREF(ranks);
  int is_numpy = r ? PyObject_IsTrue(r) : -1;
  Py_XDECREF(r);
  return is_numpy;
}

/* Puts e in a free slot or in place of the oldest entry. */
static void insert(einpy_entry *e) {
  int s = 0;
  while (s < FAST_SLOTS && slots[s]) s++;
  if (s == FAST_SLOTS) {
    s = next_victim;
    next_victim = (next_victim + 1) % FAST_SLOTS;
    if (slots[s]->users)
      slots[s]->evicted = 1;
    else
      entry_free(slots[s]);
  }
  slots[s] = e;
}

/* Copies the inputs' layouts into e (strides in elements, never NULL). */
static void record_layouts(einpy_entry *e, einpy_tensor *in, int n) {
  e->ninputs = n;
  e->dtype = in[0].t->dtype;
  /* torch's autocast recasts float inputs of einsum's matrix products
   * (not doubles): such entries ask torch_autocast first. */
  e->autocast = n >= 2 && ((e->dtype.code == kDLFloat && e->dtype.bits < 64) ||
                           e->dtype.code == kDLBfloat);
  for (int i = 0; i < n; i++) {
    const DLTensor *t = in[i].t;
    e->ndims[i] = t->ndim;
    int64_t compact = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
      e->dims[i][d] = t->shape[d];
      e->dims[i][EIN_MAX_DIMS + d] = t->strides ? t->strides[d] : compact;
      compact *= t->shape[d];
    }
  }
}

/* The plan for e's inputs and the output numpy.empty makes for them: its
 * layout (strides of empty or size-1 dims included) is part of the plan,
 * and numpy.empty gives the same one for the same shape and dtype. */
static int make_plan(einpy_entry *e, const char *expr, const ein_options *o,
                     einpy_tensor *in, PyObject *first) {
  const DLTensor *ins[EINPY_FAST_MAX_OPERANDS];
  for (int i = 0; i < e->ninputs; i++) ins[i] = in[i].t;
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  if (ein_output_shape(einpy_ctx(), expr, ins, e->ninputs, o, shape, &ndim) !=
      EIN_OK)
    return -1;
  e->out_shape = einpy_shape_tuple(shape, ndim);
  e->np_dtype = einpy_is_torch_tensor(first)
                    ? PyObject_CallFunctionObjArgs(einpy_fw.torch_np_dtype,
                                                   first, NULL)
                    : PyObject_GetAttrString(first, "dtype");
  PyObject *out = e->out_shape && e->np_dtype
                      ? einpy_fast_empty(e->out_shape, e->np_dtype)
                      : NULL;
  einpy_tensor t = {0};
  int ok = out && einpy_tensor_import_numpy(out, &t) == 0;
  if (ok && e->dtype.code == kDLBfloat) t.t->dtype = e->dtype; /* uint16 */
  ok = ok && ein_plan_create(einpy_ctx(), expr, ins, e->ninputs, t.t, o,
                           &e->plan) == EIN_OK;
  einpy_tensor_release(&t);
  Py_XDECREF(out);
  /* Below about a microsecond of work, releasing and taking back the GIL
   * costs more than another thread could gain meanwhile. */
  e->keep_gil = ok && einpy_keep_gil(e->plan);
  e->is_view = ok && ein_plan_output_view(e->plan, &e->view_input,
                                          e->view_strides, &e->view_offset);
  return ok ? 0 : -1;
}

/* A new entry for these tensors, or NULL with no exception when the
 * general path should take the call (it raises the error, if any). */
static einpy_entry *plan_entry(PyObject *expr, Py_hash_t hash, int dialect,
                              int reduction, unsigned rules,
                              PyObject *lengths, PyObject *first,
                              einpy_tensor *in, int n) {
  static PyObject *no_lengths;
  if (!no_lengths && !(no_lengths = PyTuple_New(0))) return NULL;
  int is_numpy = resolve_dialect(expr, dialect, in, n);
  PyObject *utf8 = is_numpy < 0 ? NULL : PyUnicode_AsUTF8String(expr);
  einpy_entry *e = utf8 ? einpy_calloc(1, sizeof *e) : NULL;
  einpy_options o;
  if (!e || einpy_options_parse(is_numpy ? Py_True : Py_False,
                                ein_reduction_name((ein_reduction)reduction),
                                "auto", lengths ? lengths : no_lengths,
                                &o) < 0) {
    Py_XDECREF(utf8);
    if (e) PyMem_Free(e);
    return NULL;
  }
  Py_INCREF(expr);
  e->expr = expr;
  Py_XINCREF(lengths);
  e->lengths = lengths;
  e->hash = hash;
  e->dialect = dialect;
  e->reduction = reduction;
  e->rules = o.opt.axis_rules = rules;
  record_layouts(e, in, n);
  int ok = make_plan(e, PyBytes_AsString(utf8), &o.opt, in, first) == 0;
  einpy_options_free(&o);
  Py_DECREF(utf8);
  if (ok) return e;
  entry_free(e);
  return NULL;
}

/* Allocates the output and runs e's plan on it; the new array or NULL. */
PyObject *einpy_table_run(einpy_entry *e, einpy_tensor *in, int n) {
  e->users++; /* numpy.empty may run other Python code (a GC pass) too */
  PyObject *out = einpy_fast_empty(e->out_shape, e->np_dtype);
  einpy_tensor o = {0};
  if (out && einpy_tensor_import_numpy(out, &o) == 0) {
    if (e->dtype.code == kDLBfloat) o.t->dtype = e->dtype; /* numpy: uint16 */
    const DLTensor *ins[EINPY_FAST_MAX_OPERANDS];
    for (int i = 0; i < n; i++) ins[i] = in[i].t;
    ein_status st;
    if (e->keep_gil) {
      st = ein_plan_execute(einpy_ctx(), e->plan, ins, n, o.t);
    } else {
      Py_BEGIN_ALLOW_THREADS st =
          ein_plan_execute(einpy_ctx(), e->plan, ins, n, o.t);
      Py_END_ALLOW_THREADS
    }
    if (st != EIN_OK) {
      einpy_raise(ein_last_error(einpy_ctx()));
      Py_CLEAR(out);
    }
    einpy_tensor_release(&o);
  } else {
    Py_CLEAR(out);
  }
  if (--e->users == 0 && e->evicted) entry_free(e);
  return out;
}

/* The table's entry for this call, planned on a miss; NULL (no exception)
 * for the general path. */
einpy_entry *einpy_table_entry(PyObject *expr, int dialect, int reduction,
                             unsigned rules, PyObject *lengths,
                             PyObject *first, einpy_tensor *in, int n) {
  Py_hash_t hash = PyObject_Hash(expr);
  einpy_entry *e =
      lookup(expr, hash, dialect, reduction, rules, lengths, in, n);
  if (e) return e;
  e = plan_entry(expr, hash, dialect, reduction, rules, lengths, first, in,
                 n);
  if (e)
    insert(e);
  else
    PyErr_Clear();
  return e;
}

void einpy_table_free(void) {
  for (int s = 0; s < FAST_SLOTS; s++)
    if (slots[s] && !slots[s]->users) entry_free(slots[s]);
  memset(slots, 0, sizeof slots);
}
