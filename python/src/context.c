/*
 * context.c - what every part of the extension shares: the process's one
 * ein_ctx, the run of a plan or an expression without the GIL, the
 * output's allocation by the caller's allocator, and the shape of the
 * extension's classes.
 *
 * One ein_ctx serves the whole process. ein.h lets threads share a context
 * (its plan cache is locked, errors are kept per thread), so every Python
 * thread uses the same one, and the plans one thread compiled are found by
 * the others. module.c opens it at import and closes it with the module.
 * Nothing here calls another file of the extension but errors.c and
 * options.c, so every file above may call it.
 */
#include <string.h>

#include "einpy.h"

#define KEEP_GIL_FLOPS 4096.0
#define KEEP_GIL_BYTES 4096.0

static ein_ctx *the_ctx;

/* Serialises the calls that queue on a caller's CUDA stream: setting it
 * is context-wide. Made at import, never freed (the module may be the
 * last thing a thread touches at exit). */
static PyThread_type_lock stream_lock;

ein_ctx *einpy_ctx(void) { return the_ctx; }

int einpy_ctx_open(void) {
  if (!the_ctx && ein_ctx_create(&the_ctx) != EIN_OK) return -1;
  if (!stream_lock && !(stream_lock = PyThread_allocate_lock())) return -1;
  return 0;
}

void einpy_ctx_close(void) {
  ein_ctx_destroy(the_ctx);
  the_ctx = NULL;
}

int einpy_keep_gil(const ein_plan *plan) {
  return ein_plan_flops(plan) < KEEP_GIL_FLOPS &&
         ein_plan_min_bytes(plan) < KEEP_GIL_BYTES;
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

/* Without the GIL: the tensors' memory is held by the capsules' owners,
 * not by Python objects this thread could lose meanwhile. */
int einpy_on_stream(PyObject *stream, int sync, ein_status (*fn)(void *),
                    void *arg) {
  void *s = NULL;
  if (stream && stream != Py_None) {
    s = PyLong_AsVoidPtr(stream);
    if (!s && PyErr_Occurred()) return -1;
  }
  ein_status st;
  if (!s) {
    Py_BEGIN_ALLOW_THREADS st = fn(arg);
    Py_END_ALLOW_THREADS
  } else {
    Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(stream_lock, WAIT_LOCK);
    ein_ctx_set_cuda_stream(the_ctx, s);
    st = fn(arg);
    if (st == EIN_OK && sync) st = ein_ctx_synchronize(the_ctx);
    ein_ctx_set_cuda_stream(the_ctx, NULL);
    PyThread_release_lock(stream_lock);
    Py_END_ALLOW_THREADS
  }
  if (st == EIN_OK) return 0;
  einpy_raise(ein_last_error(the_ctx));
  return -1;
}

/* One ein_plan_execute (plan not NULL) or ein_eval, for einpy_on_stream. */
typedef struct eval_call {
  const char *expr;
  const ein_plan *plan;
  const DLTensor **ins;
  int nin;
  DLTensor *out;
  const ein_options *o;
} eval_call;

static ein_status eval_unlocked(void *arg) {
  const eval_call *c = arg;
  return c->plan ? ein_plan_execute(the_ctx, c->plan, c->ins, c->nin, c->out)
                 : ein_eval(the_ctx, c->expr, c->ins, c->nin, c->out, c->o);
}

int einpy_run(const char *expr, const ein_plan *plan, einpy_tensor *in,
              int nin, einpy_tensor *out, const ein_options *o,
              PyObject *stream, int sync) {
  const DLTensor *ins[EINPY_MAX_OPERANDS];
  for (int i = 0; i < nin; i++) ins[i] = in[i].t;
  eval_call c = {expr, plan, ins, nin, out->t, o};
  return einpy_on_stream(stream, sync, eval_unlocked, &c);
}

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
