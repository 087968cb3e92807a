/*
 * tensors.c - taking arrays from their producers through DLPack.
 *
 * An array's __dlpack__() hands over a capsule holding a managed tensor:
 * the DLTensor (data, shape, strides, byte offset, dtype, device) and a
 * deleter. einc asks for the versioned form (DLPack 1.0, which also says
 * whether the array is read-only) and falls back to the legacy form for
 * producers that do not know max_version. For CUDA arrays the caller
 * names the stream einc will run on (DLPack's stream= argument), so the
 * producer orders its pending work on the array before that stream's. Taking the tensor renames the
 * capsule to "used_..." so its destructor leaves the tensor alone; from
 * then on einc owns it and calls its deleter when the call is over, with
 * the GIL held (deleters may touch Python objects). Nothing is copied.
 *
 * Debian's dlpack.h predates DLPack 1.0, so the versioned struct is
 * spelled out in einpy.h as the standard lays it out.
 */
#include <string.h>

#include "einpy.h"


static const char VERSIONED[] = "dltensor_versioned";
static const char LEGACY[] = "dltensor";

/* The keywords of one __dlpack__ call: max_version=(1, 0) (versioned),
 * or none (legacy), and stream= when `stream` is not NULL. */
static PyObject *dlpack_kwargs(int versioned, PyObject *stream) {
  /* Made once: building them per call was a good part of a small call. */
  static PyObject *with_version;
  if (!with_version &&
      !(with_version = Py_BuildValue("{s:(ii)}", "max_version", 1, 0)))
    return NULL;
  if (!stream) {
    if (!versioned) return PyDict_New();
    Py_INCREF(with_version);
    return with_version;
  }
  PyObject *kw = versioned ? PyDict_Copy(with_version) : PyDict_New();
  if (kw && PyDict_SetItemString(kw, "stream", stream) < 0) Py_CLEAR(kw);
  return kw;
}

/* obj.__dlpack__(max_version=(1, 0)[, stream=stream]), or without
 * max_version when the producer predates the keyword (TypeError). A
 * capsule passes through. */
static PyObject *ask_capsule(PyObject *obj, PyObject *stream) {
  if (PyCapsule_CheckExact(obj)) {
    Py_INCREF(obj);
    return obj;
  }
  static PyObject *name, *empty;
  if (!empty && !(empty = PyTuple_New(0))) return NULL;
  PyObject *method = einpy_attr(obj, &name, "__dlpack__");
  if (!method) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "einc takes arrays that have __dlpack__ (numpy, torch, "
                 "CuPy, JAX, ...), not %R",
                 (PyObject *)Py_TYPE(obj));
    return NULL;
  }
  PyObject *capsule = NULL;
  for (int versioned = 1; versioned >= 0 && !capsule; versioned--) {
    PyObject *kw = dlpack_kwargs(versioned, stream);
    capsule = kw ? PyObject_Call(method, empty, kw) : NULL;
    Py_XDECREF(kw);
    if (capsule || !versioned || !PyErr_ExceptionMatches(PyExc_TypeError))
      break;
    PyErr_Clear();
  }
  Py_DECREF(method);
  return capsule;
}

int einpy_tensor_from_capsule(PyObject *capsule, einpy_tensor *out) {
  int versioned = PyCapsule_IsValid(capsule, VERSIONED);
  if (!versioned && !PyCapsule_IsValid(capsule, LEGACY)) {
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__ gave a capsule that is neither "
                    "'dltensor_versioned' nor 'dltensor' (used twice?)");
    return -1;
  }
  void *managed = PyCapsule_GetPointer(capsule, versioned ? VERSIONED : LEGACY);
  if (!managed) return -1;
  if (versioned && ((einpy_managed_versioned *)managed)->version.major != 1) {
    /* Left in the capsule: its destructor frees it. */
    PyErr_Format(PyExc_BufferError, "the array speaks DLPack %u, einc speaks 1",
                 (unsigned)((einpy_managed_versioned *)managed)->version.major);
    return -1;
  }
  if (PyCapsule_SetName(
          capsule, versioned ? "used_dltensor_versioned" : "used_dltensor") < 0)
    return -1;
  out->managed = managed;
  out->versioned = versioned;
  if (versioned) {
    einpy_managed_versioned *m = managed;
    out->t = &m->dl_tensor;
    out->read_only = (m->flags & EINPY_FLAG_READ_ONLY) != 0;
  } else {
    out->t = &((DLManagedTensor *)managed)->dl_tensor;
    out->read_only = 0;
  }
  return 0;
}

int einpy_tensor_import_numpy(PyObject *obj, einpy_tensor *out) {
  static PyObject *name;
  if (!name && !(name = PyUnicode_InternFromString("__dlpack__"))) return -1;
  memset(out, 0, sizeof *out);
  PyObject *capsule = PyObject_CallMethodObjArgs(obj, name, NULL);
  if (!capsule) {
    if (!PyErr_ExceptionMatches(PyExc_BufferError)) return -1;
    PyErr_Clear(); /* read-only: only the versioned form can say so */
    return einpy_tensor_import(obj, NULL, out);
  }
  int r = einpy_tensor_from_capsule(capsule, out);
  Py_DECREF(capsule);
  return r;
}

int einpy_tensor_import(PyObject *obj, PyObject *stream, einpy_tensor *out) {
  memset(out, 0, sizeof *out);
  PyObject *capsule = ask_capsule(obj, stream);
  if (!capsule) return -1;
  int r = einpy_tensor_from_capsule(capsule, out);
  Py_DECREF(capsule);
  return r;
}

void einpy_tensor_release_raw(einpy_tensor *t) {
  if (!t->managed) return;
  if (t->versioned) {
    einpy_managed_versioned *m = t->managed;
    if (m->deleter) m->deleter(m);
  } else {
    DLManagedTensor *m = t->managed;
    if (m->deleter) m->deleter(m);
  }
  memset(t, 0, sizeof *t);
}

/* A deleter may run Python code (a producer written with ctypes, say);
 * Python code run while einc's own error is pending turns that error into
 * a SystemError, and an exception a deleter leaves behind would be raised
 * from a call that succeeded. So the pending error is set aside around the
 * deleter and put back after it; the deleter's own exception, which has
 * nobody to go to, is reported as unraisable (as Python reports an
 * exception in __del__). */
void einpy_tensor_release(einpy_tensor *t) {
  if (!t->managed) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  einpy_tensor_release_raw(t);
  if (PyErr_Occurred()) PyErr_WriteUnraisable(NULL);
  PyErr_Restore(type, value, tb);
}

int einpy_tensors_import(PyObject *tuple, PyObject *stream, einpy_tensor *ts,
                         int *n) {
  *n = 0;
  Py_ssize_t count =
      einpy_tuple_len(tuple, EINPY_MAX_OPERANDS, "tensors must come as a tuple",
                      "%zd tensors: einc's Python calls take at most %d (the C "
                      "library, ein_eval, takes 65536; `einc plan --input "
                      "FILE` plans such a network from the shell)");
  if (count < 0) return -1;
  for (Py_ssize_t i = 0; i < count; i++) {
    if (einpy_tensor_import(PyTuple_GetItem(tuple, i), stream, &ts[i]) < 0) {
      einpy_tensors_release(ts, (int)i);
      return -1;
    }
  }
  *n = (int)count;
  return 0;
}

void einpy_tensors_release(einpy_tensor *ts, int n) {
  for (int i = 0; i < n; i++) einpy_tensor_release(&ts[i]);
}

void einpy_tensors_retype(einpy_tensor *ts, int n, int code, int bits) {
  if (code < 0) return;
  for (int i = 0; i < n; i++) {
    ts[i].t->dtype.code = (uint8_t)code;
    ts[i].t->dtype.bits = (uint8_t)bits;
  }
}
