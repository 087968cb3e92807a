/*
 * inputs.c - the array libraries the extension knows by type (numpy and
 * torch, as einc's Python layer hands them over at import: fast_setup,
 * fast_setup_torch) and the taking of one call's inputs through DLPack
 * for the plan table (plan_table.c) and the one entry (call.c).
 *
 * A call is taken here only when its inputs are all exactly
 * numpy.ndarray, or all exactly torch.Tensor (or nn.Parameter) on the
 * CPU, of one dtype; anything else answers 0 with nothing held and no
 * exception, and the caller takes the general path, which gives the same
 * result or the same error. torch CPU tensors are exported through
 * DLPack's C exchange table (torch 2.10 on: C calls, no Python call, no
 * capsule) or else torch._C._to_dlpack (the C function behind
 * Tensor.__dlpack__, whose Python wrapper costs several times more).
 * torch calls also go back to Python while torch traces (torch.jit.trace,
 * a dispatch mode such as make_fx's) or a forward-mode dual level is
 * open: einc/_torch.py routes them (torch_guards). Subclasses
 * (FakeTensor, FunctionalTensor) fail the exact-type test.
 */
#include <string.h>

#include "einpy.h"

einpy_frameworks einpy_fw;

/* Whether obj is exactly a torch.Tensor or an nn.Parameter. */
static int is_torch_tensor(PyObject *obj) {
  PyObject *t = (PyObject *)Py_TYPE(obj);
  return einpy_fw.tensor_type &&
         (t == einpy_fw.tensor_type || t == einpy_fw.parameter_type);
}

int einpy_is_torch_tensor(PyObject *obj) { return is_torch_tensor(obj); }

int einpy_is_ndarray(PyObject *obj) {
  return einpy_fw.ndarray_type &&
         (PyObject *)Py_TYPE(obj) == einpy_fw.ndarray_type;
}

void einpy_inputs_release(einpy_inputs *in) {
  einpy_tensors_release(in->t, in->n);
  for (int i = 0; i < in->n; i++) Py_CLEAR(in->capsules[i]);
  in->n = 0;
}

/* Whether every item of tuple[first, first + count) has exactly `type`
 * (or, with `also`, that type). */
static int all_of_type(PyObject *tuple, Py_ssize_t first, Py_ssize_t count,
                       PyObject *type, PyObject *also) {
  for (Py_ssize_t i = 0; i < count; i++) {
    PyObject *t = (PyObject *)Py_TYPE(PyTuple_GetItem(tuple, first + i));
    if (t != type && (!also || t != also)) return 0;
  }
  return type != NULL;
}

/* Whether tensor.<method>() is not False (an error counts as set). */
static int torch_bit(PyObject *tensor, const char *method) {
  PyObject *r = PyObject_CallMethod(tensor, method, NULL);
  Py_XDECREF(r);
  return r != Py_False;
}

/* Whether the fast path takes a torch tensor exported as t: on the CPU,
 * without the negative bit (any dtype: z.conj().imag has it) and, for
 * complex dtypes, without the conjugate bit. DLPack cannot say either, and
 * torch's exports drop them silently; the general path resolves them
 * (_arrays.as_tensor). bfloat16 results are made as numpy uint16 arrays
 * (run_fresh). */
static int torch_layout_ok(PyObject *tensor, const DLTensor *t) {
  return t->device.device_type == kDLCPU && !torch_bit(tensor, "is_neg") &&
         (t->dtype.code != kDLComplex || !torch_bit(tensor, "is_conj"));
}


/* A torch CPU tensor that needs no grad (or needs it while none is
 * recorded), through torch's exchange table
 * (into *t, owned) or else torch._C._to_dlpack (its capsule, left unused,
 * *t pointing into it). 1 with *capsule set (NULL for the table), or 0
 * with nothing held and no exception for the general path. */
static int import_torch(PyObject *tensor, einpy_tensor *t,
                        PyObject **capsule, int *graph) {
  static PyObject *requires_grad;
  memset(t, 0, sizeof *t);
  *capsule = NULL;
  PyObject *grad = einpy_attr(tensor, &requires_grad, "requires_grad");
  Py_XDECREF(grad);
  einpy_managed_versioned *m = NULL;
  if (grad != Py_False && (grad != Py_True || !einpy_fw.grad_enabled ||
                           einpy_asks_python(einpy_fw.grad_enabled))) {
    /* needs grad while grad is recorded, or the attribute failed: the
     * general path (einc/_torch.py's autograd), or fastgrad.c's table */
    *graph = grad == Py_True;
  } else if (einpy_fw.torch_api) {
    const einpy_exchange_api *api = einpy_fw.torch_api;
    if (api->managed_tensor_from_py_object_no_sync(tensor, &m) == 0) {
      t->t = &m->dl_tensor, t->managed = m, t->versioned = 1;
      if (!(m->flags & EINPY_FLAG_IS_COPIED) && torch_layout_ok(tensor, t->t))
        return 1;
      einpy_tensor_release(t);
    }
  } else if ((*capsule = PyObject_CallFunctionObjArgs(einpy_fw.to_dlpack,
                                                      tensor, NULL)) != NULL) {
    DLManagedTensor *lm = PyCapsule_GetPointer(*capsule, "dltensor");
    if (lm && torch_layout_ok(tensor, &lm->dl_tensor)) {
      t->t = &lm->dl_tensor;
      return 1;
    }
    Py_CLEAR(*capsule);
  }
  PyErr_Clear();
  return 0;
}

/* Whether callable f answers something true (an error counts as true). */
int einpy_asks_python(PyObject *f) {
  PyObject *r = PyObject_CallObject(f, NULL);
  int yes = r ? PyObject_IsTrue(r) : 1;
  Py_XDECREF(r);
  if (yes) PyErr_Clear();
  return yes != 0;
}

/* Whether a forward-mode dual level is open (an error counts as yes). */
static int forward_ad_open(void) {
  static PyObject *name;
  if (!einpy_fw.forward_ad) return 0;
  PyObject *level = einpy_attr(einpy_fw.forward_ad, &name, "_current_level");
  long value = level ? PyLong_AsLong(level) : 0;
  Py_XDECREF(level);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return 1;
  }
  return value >= 0;
}

/* Whether torch is tracing or in a mode (torch_guards, an open dual
 * level) where einc's DLPack result would bypass it. */
int einpy_torch_declines(void) {
  if (forward_ad_open()) return 1;
  Py_ssize_t n =
      einpy_fw.torch_guards ? PyTuple_Size(einpy_fw.torch_guards) : 0;
  for (Py_ssize_t i = 0; i < n; i++)
    if (einpy_asks_python(PyTuple_GetItem(einpy_fw.torch_guards, i))) return 1;
  return 0;
}

/* Whether the inputs are all of one dtype. */
static int one_dtype(const einpy_inputs *in) {
  for (int i = 1; i < in->n; i++) {
    DLDataType a = in->t[0].t->dtype, b = in->t[i].t->dtype;
    if (a.code != b.code || a.bits != b.bits || a.lanes != b.lanes) return 0;
  }
  return 1;
}

/* Takes tuple items [first, first + count) through DLPack when all are
 * exactly numpy.ndarray (or, with torch_ok, all exactly torch.Tensor) of
 * one dtype: 1, or 0 with nothing held and no exception. */
int einpy_inputs_take(PyObject *tuple, Py_ssize_t first, Py_ssize_t count,
                        int torch_ok, einpy_inputs *in) {
  in->n = 0;
  in->graph = 0;
  if (count < 1 || count > EINPY_FAST_MAX_OPERANDS) return 0;
  in->torch = 0;
  if (!all_of_type(tuple, first, count, einpy_fw.ndarray_type, NULL) &&
      !(in->torch =
            torch_ok && all_of_type(tuple, first, count, einpy_fw.tensor_type,
                                    einpy_fw.parameter_type)))
    return 0;
  for (; in->n < (int)count; in->n++) {
    PyObject *item = PyTuple_GetItem(tuple, first + in->n);
    einpy_tensor *t = &in->t[in->n];
    in->capsules[in->n] = NULL;
    int ok = in->torch ? import_torch(item, t, &in->capsules[in->n],
                                      &in->graph)
                       : einpy_tensor_import_numpy(item, t) == 0;
    if (!ok) {
      PyErr_Clear(); /* numpy refused (bfloat16, byte order): general path */
      einpy_inputs_release(in);
      return 0;
    }
  }
  /* asked once the inputs are known to be plain (tensors that need grad
   * were declined above, for nothing) */
  if (one_dtype(in) && !(in->torch && einpy_torch_declines())) return 1;
  einpy_inputs_release(in);
  return 0;
}

int einpy_fast_import(PyObject *tensors, einpy_tensor *out, int *n) {
  einpy_inputs in;
  if (!PyTuple_Check(tensors) ||
      !einpy_inputs_take(tensors, 0, PyTuple_Size(tensors), 0, &in))
    return 0;
  memcpy(out, in.t, sizeof(einpy_tensor) * (size_t)in.n); /* numpy's: owned */
  *n = in.n;
  return 1;
}

PyObject *einpy_fast_empty(PyObject *shape, PyObject *dtype) {
  return PyObject_CallFunctionObjArgs(einpy_fw.np_empty, shape, dtype, NULL);
}

/* DLPack's kDLBool, which older dlpack.h (Debian's 0.6) lacks by name. */
enum { FAST_DL_BOOL = 6 };

/* Whether a drop-in's contract refuses these inputs (EINPY_REFUSE_*). */
int einpy_refused(const einpy_inputs *in, unsigned refuse) {
  for (int i = 0; i < in->n; i++) {
    const DLTensor *t = in->t[i].t;
    if ((refuse & EINPY_REFUSE_BOOL) && t->dtype.code == FAST_DL_BOOL) return 1;
    if ((refuse & EINPY_REFUSE_INTEGER) &&
        (t->dtype.code == kDLInt || t->dtype.code == kDLUInt ||
         t->dtype.code == FAST_DL_BOOL))
      return 1;
    if ((refuse & EINPY_REFUSE_STRIDED) && t->ndim > 1 && t->strides &&
        t->strides[t->ndim - 1] != 1)
      return 1;
  }
  return 0;
}


/* Keeps n new references in the given slots, dropping the old ones. */
static void keep(PyObject **objs, PyObject ***slots_, int n) {
  for (int i = 0; i < n; i++) {
    Py_INCREF(objs[i]);
    Py_CLEAR(*slots_[i]);
    *slots_[i] = objs[i];
  }
}

/* fast_setup(numpy.ndarray, numpy.empty, numpy_dialect, numpy.from_dlpack) */
static PyObject *py_fast_setup(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *objs[4];
  if (!PyArg_ParseTuple(args, "OOOO:fast_setup", &objs[0], &objs[1], &objs[2],
                        &objs[3]))
    return NULL;
  PyObject **slots_[] = {&einpy_fw.ndarray_type, &einpy_fw.np_empty,
                         &einpy_fw.dialect_fn, &einpy_fw.np_from_dlpack};
  keep(objs, slots_, 4);
  Py_RETURN_NONE;
}

/* The exchange table in `capsule` when it is one inputs.c can use
 * (DLPack 1.2 or a later 1.x, with the import it uses), else NULL. */
static const einpy_exchange_api *exchange_api(PyObject *capsule) {
  const einpy_exchange_api *api =
      PyCapsule_IsValid(capsule, "dlpack_exchange_api")
          ? PyCapsule_GetPointer(capsule, "dlpack_exchange_api")
          : NULL;
  if (!api || api->version.major != 1 || api->version.minor < 2 ||
      !api->managed_tensor_from_py_object_no_sync)
    return NULL;
  return api;
}

/* fast_setup_torch(torch.Tensor, torch._C._to_dlpack, torch.from_numpy,
 *                  tensor -> numpy dtype, torch.Tensor.as_strided
 *                  [, torch.Tensor.__dlpack_c_exchange_api__ or None
 *                  [, guards (a tuple of callables), autocast
 *                  [, torch.nn.Parameter, torch.is_grad_enabled
 *                  [, torch.autograd.forward_ad]]]]) */
static PyObject *py_fast_setup_torch(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *objs[11] = {NULL,    NULL, NULL, NULL, NULL, Py_None,
                        NULL,    NULL, NULL, NULL, NULL};
  if (!PyArg_ParseTuple(args, "OOOOO|OO!OOOO:fast_setup_torch", &objs[0],
                        &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                        &PyTuple_Type, &objs[6], &objs[7], &objs[8], &objs[9],
                        &objs[10]))
    return NULL;
  PyObject **slots_[] = {
      &einpy_fw.tensor_type,      &einpy_fw.to_dlpack,
      &einpy_fw.from_numpy,       &einpy_fw.torch_np_dtype,
      &einpy_fw.torch_as_strided, &einpy_fw.torch_api_capsule,
      &einpy_fw.torch_guards,     &einpy_fw.torch_autocast,
      &einpy_fw.parameter_type,   &einpy_fw.grad_enabled,
      &einpy_fw.forward_ad};
  int n = 6;
  while (n < 11 && objs[n])
    n++;
  keep(objs, slots_, n);
  einpy_fw.torch_api = exchange_api(einpy_fw.torch_api_capsule);
  Py_RETURN_NONE;
}

static PyMethodDef setup_methods[] = {
    {"fast_setup", py_fast_setup, METH_VARARGS,
     "fast_setup(ndarray, empty, numpy_dialect, from_dlpack): enables fast()"},
    {"fast_setup_torch", py_fast_setup_torch, METH_VARARGS,
     "fast_setup_torch(Tensor, _to_dlpack, from_numpy, numpy_dtype_of, "
     "Tensor.as_strided[, exchange_api[, guards, autocast[, Parameter, "
     "is_grad_enabled[, forward_ad]]]]): fast() takes "
     "torch CPU tensors too, except while a guard answers true (and, for "
     "float contractions, autocast)"},
    {NULL, NULL, 0, NULL}};

int einpy_inputs_init(PyObject *module) {
  return PyModule_AddFunctions(module, setup_methods);
}

void einpy_inputs_free(void) {
  PyObject **all[] = {
      &einpy_fw.ndarray_type,     &einpy_fw.np_empty,
      &einpy_fw.dialect_fn,       &einpy_fw.np_from_dlpack,
      &einpy_fw.tensor_type,      &einpy_fw.parameter_type,
      &einpy_fw.grad_enabled,     &einpy_fw.to_dlpack,
      &einpy_fw.from_numpy,       &einpy_fw.torch_np_dtype,
      &einpy_fw.torch_as_strided, &einpy_fw.torch_api_capsule,
      &einpy_fw.torch_guards,     &einpy_fw.torch_autocast,
      &einpy_fw.forward_ad};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) Py_CLEAR(*all[i]);
  einpy_fw.torch_api = NULL;
}
