/*
 * grad_interp.c - grad_run(): the C library's gradient interpreter
 * (ein_grad_execute, include/ein.h) for the framework layers. torch's
 * eager backward and forward-mode tangents (einc/_torch_grad.py) and
 * JAX's VJP on concrete arrays (einc/_jax_grad.py) run a program here:
 * every step through the backend's plans, on the tensors' own device
 * and memory, with no step re-implemented in Python. Traced calls
 * (torch.compile, export, vmap, a recorded double backward, jax.jit)
 * keep the frameworks' own operations (docs/design.md, "One gradient
 * interpreter").
 *
 * A program is made once per call structure: a dict keyed by the tuple
 * the caller gives (expression, options, wrt, forward or JVP, dtype,
 * shapes, device) holds the ein_grad in a capsule. The dict is guarded
 * by the GIL; running releases it.
 */
#include "einpy.h"

enum { GRAD_TABLE_MAX = 4096 };

static PyObject *grads; /* key -> capsule of an ein_grad */

static void grad_capsule_free(PyObject *capsule) {
  ein_grad_destroy(PyCapsule_GetPointer(capsule, "einc.grad"));
}

/* The program for these inputs: from the table, or made and kept. */
static ein_grad *grad_for(PyObject *key, const char *expr, einpy_tensor *in,
                          int n, PyObject *numpy, const char *reduction,
                          PyObject *lengths, int wrt, int jvp) {
  if (!grads && !(grads = PyDict_New())) return NULL;
  PyObject *cap = PyDict_GetItemWithError(grads, key);
  if (cap) return PyCapsule_GetPointer(cap, "einc.grad");
  if (PyErr_Occurred()) return NULL;
  einpy_options o;
  if (einpy_options_parse(numpy, reduction, "auto", lengths, &o) < 0)
    return NULL;
  const DLTensor *ins[EINPY_MAX_OPERANDS];
  for (int i = 0; i < n; i++) ins[i] = in[i].t;
  ein_grad *g = NULL;
  ein_status st = (jvp ? ein_jvp_create : ein_grad_create)(
      einpy_ctx(), expr, ins, n, &o.opt, wrt, &g);
  einpy_options_free(&o);
  if (st != EIN_OK) {
    einpy_raise(ein_last_error(einpy_ctx()));
    return NULL;
  }
  cap = PyCapsule_New(g, "einc.grad", grad_capsule_free);
  if (!cap) {
    ein_grad_destroy(g);
    return NULL;
  }
  if (PyDict_Size(grads) >= GRAD_TABLE_MAX) PyDict_Clear(grads);
  int bad = PyDict_SetItem(grads, key, cap);
  Py_DECREF(cap); /* the table holds it */
  return bad ? NULL : g;
}

/* The tensors one run holds: the inputs, then output (may be empty),
 * dout and dinput. */
typedef struct grad_call {
  einpy_tensor in[EINPY_MAX_OPERANDS];
  einpy_tensor out, dout, dinput;
  int nin;
} grad_call;

static void call_release(grad_call *c) {
  einpy_tensors_release(c->in, c->nin);
  einpy_tensor_release(&c->out);
  einpy_tensor_release(&c->dout);
  einpy_tensor_release(&c->dinput);
}

/* The DLPack C exchange table of obj's type (torch 2.10 on:
 * torch.Tensor.__dlpack_c_exchange_api__, DLPack 1.2 or a later 1.x),
 * or NULL; asked once per type (the type is kept). */
static const einpy_exchange_api *exchange_of(PyObject *obj) {
  static PyObject *type;
  static const einpy_exchange_api *api;
  if ((PyObject *)Py_TYPE(obj) == type) return api;
  PyObject *cap = PyObject_GetAttrString((PyObject *)Py_TYPE(obj),
                                         "__dlpack_c_exchange_api__");
  const einpy_exchange_api *a =
      cap && PyCapsule_IsValid(cap, "dlpack_exchange_api")
          ? PyCapsule_GetPointer(cap, "dlpack_exchange_api")
          : NULL;
  Py_XDECREF(cap); /* the type keeps it */
  PyErr_Clear();
  if (a && (a->version.major != 1 || a->version.minor < 2 ||
            !a->managed_tensor_from_py_object_no_sync))
    a = NULL;
  Py_XDECREF(type);
  type = (PyObject *)Py_TYPE(obj);
  Py_INCREF(type);
  api = a;
  return api;
}

/* obj zero-copy through its type's exchange table (no Python call: the
 * caller resolved torch's conjugate and negative bits; no
 * synchronisation, as the program queues on the producer's current
 * stream, which the caller passes), else __dlpack__(stream=stream). */
static int import_one(PyObject *obj, PyObject *stream, einpy_tensor *t) {
  const einpy_exchange_api *api = exchange_of(obj);
  einpy_managed_versioned *m = NULL;
  memset(t, 0, sizeof *t);
  if (api && api->managed_tensor_from_py_object_no_sync(obj, &m) == 0 && m) {
    t->t = &m->dl_tensor;
    t->managed = m;
    t->versioned = 1;
    t->read_only = (m->flags & EINPY_FLAG_READ_ONLY) != 0;
    if (!(m->flags & EINPY_FLAG_IS_COPIED)) return 0;
    einpy_tensor_release(t);
  }
  PyErr_Clear();
  return einpy_tensor_import(obj, stream, t);
}

static int call_import(grad_call *c, PyObject *inputs, PyObject *output,
                       PyObject *dout, PyObject *dinput, PyObject *stream) {
  Py_ssize_t n = PyTuple_Check(inputs) ? PyTuple_Size(inputs) : -1;
  if (n < 1 || n > EINPY_MAX_OPERANDS) {
    PyErr_SetString(PyExc_TypeError, "grad_run: inputs, a tuple of 1 or "
                    "more tensors");
    return -1;
  }
  for (; c->nin < (int)n; c->nin++)
    if (import_one(PyTuple_GetItem(inputs, c->nin), stream,
                   &c->in[c->nin]) < 0)
      return -1;
  if (output != Py_None && import_one(output, stream, &c->out) < 0) return -1;
  if (import_one(dout, stream, &c->dout) < 0 ||
      import_one(dinput, stream, &c->dinput) < 0)
    return -1;
  if (!c->dinput.read_only) return 0;
  PyErr_SetString(PyExc_ValueError, "grad_run: dinput is read-only");
  return -1;
}

/* One ein_grad_execute, for einpy_on_stream. */
typedef struct grad_exec {
  const ein_grad *g;
  const grad_call *c;
} grad_exec;

static ein_status execute(void *arg) {
  const grad_exec *e = arg;
  const grad_call *c = e->c;
  const DLTensor *ins[EINPY_MAX_OPERANDS];
  for (int i = 0; i < c->nin; i++) ins[i] = c->in[i].t;
  return ein_grad_execute(einpy_ctx(), e->g, ins, c->nin, c->out.t, c->dout.t,
                          c->dinput.t);
}

/* grad_run(key, expr, inputs, output, dout, dinput, numpy, reduction,
 *          lengths, wrt, jvp[, stream]) -> dinput
 * Runs input wrt's gradient program (jvp: its JVP's) on the tensors
 * (output None where the program does not read it) into dinput, which
 * the caller allocated (C-contiguous: the last step writes it directly),
 * on the tensors' device: CUDA work queued on `stream` as einpy_run takes
 * it (the producer's current stream), without waiting for it. */
PyObject *einpy_grad_run(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *key, *inputs, *output, *dout, *dinput, *numpy, *lengths;
  PyObject *stream = Py_None;
  const char *expr, *reduction;
  int wrt, jvp;
  if (!PyArg_ParseTuple(args, "OsOOOOOsOip|O:grad_run", &key, &expr, &inputs,
                        &output, &dout, &dinput, &numpy, &reduction,
                        &lengths, &wrt, &jvp, &stream))
    return NULL;
  grad_call *c = einpy_calloc(1, sizeof *c);
  if (!c) return PyErr_NoMemory();
  stream = stream == Py_None ? NULL : stream;
  ein_grad *g = NULL;
  if (call_import(c, inputs, output, dout, dinput, stream) == 0)
    g = grad_for(key, expr, c->in, c->nin, numpy, reduction, lengths, wrt,
                 jvp);
  grad_exec e = {g, c};
  int bad = !g || einpy_on_stream(stream, 0, execute, &e) < 0;
  call_release(c);
  PyMem_Free(c);
  if (bad) return NULL;
  Py_INCREF(dinput);
  return dinput;
}
