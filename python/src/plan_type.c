/*
 * plan_type.c - einc._einc.Plan: one ein_plan, compiled once for a dtype
 * and C-contiguous inputs of given shapes (what opt_einsum's
 * contract_expression is for a hot loop).
 *
 * Python's einc.plan() reads its report (ein_plan_describe, the same text
 * and JSON as `einc plan`) and numbers; einc.compile() calls execute().
 * A plan runs only tensors of the layout it was compiled for, so execute()
 * uses it when the tensors have that layout and otherwise hands the same
 * expression to ein_eval, whose cache keeps a plan per layout: a compiled
 * expression accepts any array of the right shape, as opt_einsum's does.
 */
#include <string.h>

#include "einpy.h"

typedef struct plan_object {
  PyObject_HEAD
  ein_plan *plan;
  char *expr; /* owned copy, for the ein_eval fallback */
  einpy_options options;
  DLDataType dtype;
  DLDevice device; /* where the compiled shapes live */
  int ninputs;
  int *ndims;                    /* ninputs entries, PyMem */
  int64_t (*shapes)[EIN_MAX_DIMS]; /* the same */
  PyObject *out_shape; /* tuple, made by the first run_numpy */
} plan_object;

/* DLTensors without data for the compiled shapes. */
static void shape_tensors(plan_object *p, DLTensor *ts, const DLTensor **ins) {
  p->device = ein_backend_dl_device(p->options.opt.backend, 0);
  for (int i = 0; i < p->ninputs; i++) {
    ts[i] = (DLTensor){NULL, p->device, p->ndims[i], p->dtype, p->shapes[i],
                       NULL, 0};
    ins[i] = &ts[i];
  }
}

static int copy_expr(plan_object *p, const char *expr) {
  size_t len = strlen(expr);
  p->expr = PyMem_Malloc(len + 1);
  if (!p->expr) {
    PyErr_NoMemory();
    return -1;
  }
  memcpy(p->expr, expr, len + 1);
  return 0;
}

/* Plan(expr, shapes, dtype_code, dtype_bits, numpy, reduction, backend,
 *      lengths[, path[, plan_time, seed, objective]]): path in opt_einsum's
 *      linear form, or None to search; the search's options as ein.h's */
static int plan_init(PyObject *self, PyObject *args, PyObject *kwargs) {
  plan_object *p = (plan_object *)self;
  const char *expr, *reduction, *backend, *path = NULL;
  const char *objective = "flops";
  double plan_time = 0;
  unsigned long long seed = 0;
  PyObject *shapes, *numpy, *lengths;
  int code, bits;
  if (p->plan) {
    PyErr_SetString(PyExc_RuntimeError, "a Plan is initialised once");
    return -1;
  }
  if ((kwargs && PyObject_IsTrue(kwargs)) ||
      !PyArg_ParseTuple(args, "sOiiOssO|zdKs:Plan", &expr, &shapes, &code,
                        &bits, &numpy, &reduction, &backend, &lengths, &path,
                        &plan_time, &seed, &objective)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "Plan takes no keyword arguments");
    return -1;
  }
  p->dtype = (DLDataType){(uint8_t)code, (uint8_t)bits, 1};
  Py_ssize_t room = PyTuple_Check(shapes) ? PyTuple_Size(shapes) : 0;
  if (room > EINPY_MAX_OPERANDS) room = EINPY_MAX_OPERANDS;
  p->ndims = PyMem_Malloc(sizeof *p->ndims * (size_t)(room + 1));
  p->shapes = PyMem_Malloc(sizeof *p->shapes * (size_t)(room + 1));
  if (!p->ndims || !p->shapes) {
    PyErr_NoMemory();
    return -1;
  }
  if (einpy_shapes_parse(shapes, p->shapes, p->ndims, &p->ninputs) < 0 ||
      copy_expr(p, expr) < 0 ||
      einpy_options_parse(numpy, reduction, backend, lengths, &p->options) < 0 ||
      einpy_options_set_path(&p->options, path) < 0 ||
      einpy_options_set_search(&p->options, plan_time, seed, objective) < 0)
    return -1;
  DLTensor *ts = PyMem_Malloc(sizeof *ts * (size_t)(p->ninputs + 1));
  const DLTensor **ins = PyMem_Malloc(sizeof *ins * (size_t)(p->ninputs + 1));
  int rc = 0;
  if (!ts || !ins) {
    PyErr_NoMemory();
    rc = -1;
  } else {
    shape_tensors(p, ts, ins);
    if (ein_plan_create(einpy_ctx(), p->expr, ins, p->ninputs, NULL,
                        &p->options.opt, &p->plan) != EIN_OK) {
      einpy_raise(ein_last_error(einpy_ctx()));
      rc = -1;
    }
  }
  PyMem_Free(ts);
  PyMem_Free(ins);
  return rc;
}

static void plan_dealloc(PyObject *self) {
  plan_object *p = (plan_object *)self;
  ein_plan_destroy(p->plan);
  Py_XDECREF(p->out_shape);
  PyMem_Free(p->expr);
  PyMem_Free(p->ndims);
  PyMem_Free(p->shapes);
  einpy_options_free(&p->options);
  einpy_object_free(self);
}

static int check_ready(plan_object *p) {
  if (p->plan) return 0;
  PyErr_SetString(PyExc_RuntimeError, "the Plan was not initialised");
  return -1;
}

/* describe(json, device_model) -> str: `einc plan`'s text or JSON. */
static PyObject *plan_describe(PyObject *self, PyObject *args) {
  plan_object *p = (plan_object *)self;
  int json = 0;
  const char *model = NULL;
  if (!PyArg_ParseTuple(args, "|pz:describe", &json, &model) ||
      check_ready(p) < 0)
    return NULL;
  ein_describe_format fmt = json ? EIN_DESCRIBE_JSON : EIN_DESCRIBE_TEXT;
  size_t len = ein_plan_describe(p->plan, fmt, model, NULL, 0);
  char *buf = PyMem_Malloc(len + 1);
  if (!buf) return PyErr_NoMemory();
  ein_plan_describe(p->plan, fmt, model, buf, len + 1);
  PyObject *s = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
  PyMem_Free(buf);
  return s;
}

/* stats() -> dict of the plan's numbers. */
static PyObject *plan_stats(PyObject *self, PyObject *unused) {
  (void)unused;
  plan_object *p = (plan_object *)self;
  if (check_ready(p) < 0) return NULL;
  PyObject *shape = einpy_shape_tuple(ein_plan_output_shape(p->plan),
                                      ein_plan_output_ndim(p->plan));
  if (!shape) return NULL;
  PyObject *d = Py_BuildValue(
      "{s:d,s:d,s:d,s:L,s:L,s:i,s:O}", "flops", ein_plan_flops(p->plan),
      "naive_flops", ein_plan_naive_flops(p->plan), "min_bytes",
      ein_plan_min_bytes(p->plan), "largest_intermediate",
      (long long)ein_plan_largest_intermediate(p->plan), "workspace_bytes",
      (long long)ein_plan_workspace_bytes(p->plan), "nsteps",
      ein_plan_nsteps(p->plan), "output_shape", shape);
  Py_DECREF(shape);
  return d;
}

/* Whether t has the layout the plan was compiled for: its dtype, shape,
 * and C-contiguous strides (a size-1 dim's stride never matters). */
static int has_layout(const DLTensor *t, DLDevice device, DLDataType dtype,
                      int ndim, const int64_t *shape) {
  if (t->device.device_type != device.device_type ||
      t->device.device_id != device.device_id || t->dtype.code != dtype.code ||
      t->dtype.bits != dtype.bits || t->dtype.lanes != 1 || t->ndim != ndim)
    return 0;
  int64_t compact = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (t->shape[d] != shape[d]) return 0;
    if (t->strides && shape[d] != 1 && t->strides[d] != compact) return 0;
    compact *= shape[d];
  }
  return 1;
}

static int fits_plan(plan_object *p, einpy_tensor *in, int nin,
                     einpy_tensor *out) {
  if (nin != p->ninputs) return 0;
  for (int i = 0; i < nin; i++)
    if (!has_layout(in[i].t, p->device, p->dtype, p->ndims[i], p->shapes[i]))
      return 0;
  return has_layout(out->t, p->device, p->dtype, ein_plan_output_ndim(p->plan),
                    ein_plan_output_shape(p->plan));
}

/* The plan, or ein_eval for other layouts; without the GIL. */
static int run(plan_object *p, einpy_tensor *in, int nin, einpy_tensor *out,
               PyObject *stream, int sync) {
  return einpy_run(p->expr, fits_plan(p, in, nin, out) ? p->plan : NULL, in,
                   nin, out, &p->options.opt, stream, sync);
}

static PyObject *output_object(plan_object *p, PyObject *out, PyObject *alloc) {
  if (out != Py_None) {
    Py_INCREF(out);
    return out;
  }
  PyObject *shape = einpy_shape_tuple(ein_plan_output_shape(p->plan),
                                      ein_plan_output_ndim(p->plan));
  if (!shape) return NULL;
  PyObject *o = PyObject_CallFunctionObjArgs(alloc, shape, NULL);
  Py_DECREF(shape);
  return o;
}

/* execute(tensors, out, alloc, dtype_code, dtype_bits, stream, sync)
 *   -> out (stream and sync as einpy_run takes them) */
static PyObject *plan_execute(PyObject *self, PyObject *args) {
  plan_object *p = (plan_object *)self;
  PyObject *tensors, *out, *alloc, *stream;
  int code, bits, sync;
  if (!PyArg_ParseTuple(args, "OOOiiOp:execute", &tensors, &out, &alloc, &code,
                        &bits, &stream, &sync) ||
      check_ready(p) < 0)
    return NULL;
  if (stream == Py_None) stream = NULL;
  einpy_tensor in[EINPY_MAX_OPERANDS], o = {0};
  int nin = 0;
  if (einpy_tensors_import(tensors, stream, in, &nin) < 0) return NULL;
  PyObject *out_obj = output_object(p, out, alloc);
  int ok = out_obj && einpy_tensor_import(out_obj, stream, &o) == 0;
  if (ok && o.read_only) {
    PyErr_SetString(PyExc_ValueError, "out= is read-only");
    ok = 0;
  }
  if (ok) {
    einpy_tensors_retype(in, nin, code, bits);
    einpy_tensors_retype(&o, 1, code, bits);
    ok = run(p, in, nin, &o, stream, sync) == 0;
  }
  einpy_tensors_release(in, nin);
  einpy_tensor_release(&o);
  if (!ok) Py_CLEAR(out_obj);
  return out_obj;
}

/* run_numpy(tensors) -> a new numpy array, or None when the tensors are
 * not plain numpy arrays of the compiled layout (execute() takes those). */
static PyObject *plan_run_numpy(PyObject *self, PyObject *tensors) {
  plan_object *p = (plan_object *)self;
  einpy_tensor in[EINPY_MAX_OPERANDS], o = {0};
  int nin = 0;
  if (check_ready(p) < 0) return NULL;
  if (!einpy_fast_import(tensors, in, &nin)) Py_RETURN_NONE;
  int fits = nin == p->ninputs;
  for (int i = 0; fits && i < nin; i++)
    fits = has_layout(in[i].t, p->device, p->dtype, p->ndims[i], p->shapes[i]);
  if (fits && !p->out_shape)
    p->out_shape = einpy_shape_tuple(ein_plan_output_shape(p->plan),
                                     ein_plan_output_ndim(p->plan));
  PyObject *dtype = fits && p->out_shape
                        ? PyObject_GetAttrString(PyTuple_GetItem(tensors, 0),
                                                 "dtype")
                        : NULL;
  PyObject *out = dtype ? einpy_fast_empty(p->out_shape, dtype) : NULL;
  Py_XDECREF(dtype);
  int ok =
      out && einpy_tensor_import_numpy(out, &o) == 0 &&
      run(p, in, nin, &o, NULL, 0) == 0;
  einpy_tensors_release(in, nin);
  einpy_tensor_release(&o);
  if (!ok) Py_CLEAR(out);
  if (!fits) Py_RETURN_NONE;
  return out;
}

static PyMethodDef plan_methods[] = {
    {"run_numpy", plan_run_numpy, METH_O,
     "run_numpy(tensors) -> result, or None for execute()"},
    {"describe", plan_describe, METH_VARARGS,
     "describe(json=False, device=None) -> `einc plan`'s report"},
    {"stats", plan_stats, METH_NOARGS, "stats() -> dict of the plan's numbers"},
    {"execute", plan_execute, METH_VARARGS,
     "execute(tensors, out, alloc, dtype_code, dtype_bits) -> out"},
    {NULL, NULL, 0, NULL}};

int einpy_plan_type_init(PyObject *module) {
  return einpy_add_class(
      module, "einc._einc.Plan", sizeof(plan_object),
      "A compiled einc plan (see einc.plan and einc.compile).", plan_init,
      plan_dealloc, plan_methods);
}
