/*
 * plan_table.c - the extension's plans for the common call, kept in the
 * context's plan cache (ein.h, "the plan cache"): one table for
 * ein_eval's plans and these, one least-recently-used eviction, one lock,
 * one set of counts. The extension keys an entry by what a call hands it:
 * the expression str's hash, the axis lengths' hash, the dialect,
 * reduction and rules asked for, and each input's layout in the library's
 * own form (ein_cache_key_tensor). The cache entry's data is the
 * extension's entry: what the first call found (the plan, with a
 * reference of the entry's own, the output's shape as a tuple, the numpy
 * dtype of the result and, where the plan only re-reads one input,
 * ein_plan_output_view: a transpose, a split or merge of adjacent axes, a
 * diagonal, the view it reads). The key holds only hashes of the str and
 * the lengths, so a hit compares them by value with the entry's.
 *
 * The plan does not depend on the framework, so numpy and torch calls
 * share entries. Threads: finds and puts take the cache's own lock. An
 * entry leaves the cache on whichever thread evicts it (an ein_eval of
 * the general path runs without the GIL); the release callback then only
 * queues it, and the next call here, which holds the GIL, frees it unless
 * a call is using it (users, counted under the GIL from the find to
 * einpy_table_done, across a run without the GIL too): then the last
 * user frees it. So a hit takes no reference and no atomic beyond the
 * cache's lock. call.c is the only user (docs/design.md, "The extension's
 * files and its one entry").
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "einpy.h"

/* Keys up to this size are built on the stack. */
#define KEY_STACK 1024

/* Entries out of the cache, waiting for the GIL (pushed by any thread). */
static _Atomic(einpy_entry *) retired;

/* Frees an entry: its plan reference, its objects; with the GIL. */
static void entry_free(einpy_entry *e) {
  ein_plan_destroy(e->plan);
  Py_XDECREF(e->expr);
  Py_XDECREF(e->lengths);
  Py_XDECREF(e->out_shape);
  Py_XDECREF(e->np_dtype);
  Py_XDECREF(e->view_stride_tuple);
  PyMem_Free(e);
}

/* The cache's release callback (any thread, GIL or not): queues e. */
static void entry_retire(void *data) {
  einpy_entry *e = data;
  e->next = atomic_load_explicit(&retired, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      &retired, &e->next, e, memory_order_release, memory_order_relaxed)) {
  }
}

/* Frees every queued entry no call uses (the last user frees the
 * others); with the GIL. */
static void free_retired(void) {
  einpy_entry *e =
      atomic_exchange_explicit(&retired, NULL, memory_order_acquire);
  while (e) {
    einpy_entry *next = e->next;
    if (e->users)
      e->evicted = 1;
    else
      entry_free(e);
    e = next;
  }
}

/* The call's key: three int64s (the expression's hash, the lengths' hash
 * or 0 for none; the rules, dialect, reduction and input count in one,
 * so that one 2-D input's key or two's fit in the cache's entry), then each
 * input's layout as ein_cache_key_tensor writes it. Its size is
 * key_size's; call_key writes it into key and gives its length, 0 where
 * it cannot be made (an unhashable value: no exception is kept), and its
 * hash (ein_cache_find's): the head and the inputs' shapes, mixed, not
 * every byte: ein_hash_bytes takes about 12 ns over an 82-byte key (one
 * 2-D input), 2% of an 8x8 transpose's call, and equal hashes only cost
 * a compare of the bytes. */
enum { KEY_HEAD = 3 };

static uint64_t mix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}

static size_t key_size(const einpy_tensor *in, int n) {
  size_t len = KEY_HEAD * sizeof(int64_t);
  for (int i = 0; i < n; i++) len += 2 + 16 * (size_t)in[i].t->ndim;
  return len;
}

static size_t call_key(unsigned char *key, size_t cap, uint64_t *hash,
                       PyObject *expr, int dialect, int reduction,
                       unsigned rules, PyObject *lengths,
                       const einpy_tensor *in, int n) {
  Py_hash_t eh = PyObject_Hash(expr), lh = lengths ? PyObject_Hash(lengths) : 0;
  if (eh == -1 || lh == -1) {
    PyErr_Clear();
    return 0;
  }
  /* n <= EINPY_FAST_MAX_OPERANDS, dialect -1..1, reduction an enum */
  uint64_t kind = (uint64_t)rules << 32 | (uint64_t)(dialect + 1) << 24 |
                  (uint64_t)(uint8_t)reduction << 16 | (uint64_t)n;
  uint64_t head[KEY_HEAD] = {(uint64_t)eh, (uint64_t)lh, kind};
  memcpy(key, head, sizeof head);
  uint64_t h = mix(mix(head[0], head[1]), kind);
  size_t len = sizeof head;
  for (int i = 0; i < n; i++) {
    size_t part = ein_cache_key_tensor(in[i].t, key + len, cap - len);
    if (!part) return 0;
    len += part;
    for (int d = 0; d < in[i].t->ndim; d++)
      h = mix(h, (uint64_t)in[i].t->shape[d]);
  }
  *hash = h;
  return len;
}

/* Whether the entry was made for these axis lengths (NULL: none). */
static int same_lengths(const einpy_entry *e, PyObject *lengths) {
  if (!e->lengths || !lengths) return e->lengths == lengths;
  int r = PyObject_RichCompareBool(e->lengths, lengths, Py_EQ);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

/* Whether an entry found under the call's key is the call's: its str
 * and lengths differ only where hashes collide. */
static int is_call(const einpy_entry *e, PyObject *expr, PyObject *lengths) {
  if ((e->expr == expr || PyUnicode_Compare(e->expr, expr) == 0) &&
      same_lengths(e, lengths))
    return 1;
  PyErr_Clear();
  return 0;
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

/* The plan for the inputs and the output numpy.empty makes for them: its
 * layout (strides of empty or size-1 dims included) is part of the plan,
 * and numpy.empty gives the same one for the same shape and dtype. */
static int make_plan(einpy_entry *e, const char *expr, const ein_options *o,
                     einpy_tensor *in, int n, PyObject *first) {
  const DLTensor *ins[EINPY_FAST_MAX_OPERANDS];
  for (int i = 0; i < n; i++) ins[i] = in[i].t;
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  if (ein_output_shape(einpy_ctx(), expr, ins, n, o, shape, &ndim) != EIN_OK)
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
  ok = ok &&
       ein_plan_create(einpy_ctx(), expr, ins, n, t.t, o, &e->plan) == EIN_OK;
  einpy_tensor_release(&t);
  Py_XDECREF(out);
  /* Below about a microsecond of work, releasing and taking back the GIL
   * costs more than another thread could gain meanwhile. */
  e->keep_gil = ok && einpy_keep_gil(e->plan);
  e->is_view = ok && ein_plan_output_view(e->plan, &e->view_input,
                                          e->view_strides, &e->view_offset);
  return ok ? 0 : -1;
}

/* What the entry records of the call before planning. */
static void entry_fill(einpy_entry *e, PyObject *expr, PyObject *lengths,
                       const einpy_tensor *in, int n) {
  Py_INCREF(expr);
  e->expr = expr;
  Py_XINCREF(lengths);
  e->lengths = lengths;
  e->dtype = in[0].t->dtype;
  /* torch's autocast recasts float inputs of einsum's matrix products
   * (not doubles): such entries ask torch_autocast first. */
  e->autocast = n >= 2 && ((e->dtype.code == kDLFloat && e->dtype.bits < 64) ||
                           e->dtype.code == kDLBfloat);
}

/* A new entry for these tensors, or NULL (exception or not) when the
 * general path should take the call (it raises the error, if any). */
static einpy_entry *plan_entry(PyObject *expr, int dialect, int reduction,
                               unsigned rules, PyObject *lengths,
                               PyObject *first, einpy_tensor *in, int n) {
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
  entry_fill(e, expr, lengths, in, n);
  o.opt.axis_rules = rules;
  int ok = make_plan(e, PyBytes_AsString(utf8), &o.opt, in, n, first) == 0;
  einpy_options_free(&o);
  Py_DECREF(utf8);
  if (ok) return e;
  entry_free(e);
  return NULL;
}

/* Allocates the output and runs e's plan on it; the new array or NULL. */
PyObject *einpy_table_run(einpy_entry *e, einpy_tensor *in, int n) {
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
  return out;
}

void einpy_table_done(einpy_entry *e) {
  if (--e->users == 0 && e->evicted) entry_free(e);
}

/* The cached entry under key, or one planned and cached (one that is not
 * cached, where another thread cached the key first, serves this call
 * and is freed after it). */
static einpy_entry *find_or_plan(uint64_t hash, const unsigned char *key,
                                 size_t len, PyObject *expr, int dialect,
                                 int reduction, unsigned rules,
                                 PyObject *lengths, PyObject *first,
                                 einpy_tensor *in, int n) {
  einpy_entry *e = ein_cache_find(einpy_ctx(), hash, key, len);
  if (e) {
    e->users++; /* before any Python code (a GC pass) can free it */
    if (is_call(e, expr, lengths)) return e;
    einpy_table_done(e);
  }
  e = plan_entry(expr, dialect, reduction, rules, lengths, first, in, n);
  if (!e) return NULL;
  e->users = 1;
  if (!ein_cache_put(einpy_ctx(), hash, key, len, e->plan, e, entry_retire))
    e->evicted = 1;
  return e;
}

einpy_entry *einpy_table_entry(PyObject *expr, int dialect, int reduction,
                               unsigned rules, PyObject *lengths,
                               PyObject *first, einpy_tensor *in, int n) {
  if (atomic_load_explicit(&retired, memory_order_relaxed)) free_retired();
  unsigned char stack[KEY_STACK];
  size_t need = key_size(in, n);
  unsigned char *key = need <= sizeof stack ? stack : PyMem_Malloc(need);
  uint64_t hash = 0;
  size_t len = key ? call_key(key, need, &hash, expr, dialect, reduction,
                              rules, lengths, in, n)
                   : 0;
  einpy_entry *e = len ? find_or_plan(hash, key, len, expr, dialect,
                                      reduction, rules, lengths, first, in, n)
                       : NULL;
  if (key != stack) PyMem_Free(key);
  if (!e) PyErr_Clear();
  return e;
}

void einpy_table_free(void) { free_retired(); }
