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

/* p->plan for the compiled shapes (no data); -1 with an exception. */
static int create_plan(plan_object *p) {
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
 *      lengths[, path[, slice[, memory_limit[, plan_time, seed,
 *      objective[, devices]]]]]): path in opt_einsum's linear form, or
 *      None to search; slice as ein_options.slice_axes; memory_limit,
 *      ein_options.memory_limit (bytes one intermediate may take, 0: no
 *      limit); the search's options as ein.h's; devices,
 *      ein_options.devices (a sliced plan's units spread over that many
 *      devices of its backend: each call goes through ein_eval) */
static int plan_init(PyObject *self, PyObject *args, PyObject *kwargs) {
  plan_object *p = (plan_object *)self;
  const char *expr, *reduction, *backend, *path = NULL, *slice = NULL;
  long long memory_limit = 0;
  const char *objective = "flops";
  double plan_time = 0;
  unsigned long long seed = 0;
  int devices = 0;
  PyObject *shapes, *numpy, *lengths;
  int code, bits;
  if (p->plan) {
    PyErr_SetString(PyExc_RuntimeError, "a Plan is initialised once");
    return -1;
  }
  if ((kwargs && PyObject_IsTrue(kwargs)) ||
      !PyArg_ParseTuple(args, "sOiiOssO|zzLdKsi:Plan", &expr, &shapes, &code,
                        &bits, &numpy, &reduction, &backend, &lengths, &path,
                        &slice, &memory_limit, &plan_time, &seed, &objective,
                        &devices)) {
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
      einpy_options_set_slicing(&p->options, slice, memory_limit) < 0 ||
      einpy_options_set_search(&p->options, plan_time, seed, objective) < 0)
    return -1;
  if (devices < 0) {
    einpy_raise_status(EIN_ERR_INVALID_ARGUMENT,
                       "devices=%d: a device count, 0 or 1 for one", devices);
    return -1;
  }
  p->options.opt.devices = devices;
  return create_plan(p);
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

/* The model named (None: the device the plan targets), with the caller's
 * peak for the plan's arithmetic and bandwidth (0: the model's); -1 with
 * an EincError for an unknown name, a model of another backend's plans
 * or a figure that is not a positive number. */
static int plan_model(plan_object *p, const char *name, double peak,
                      double bandwidth, ein_device_model *m) {
  if (!name)
    name = ein_plan_backend(p->plan) == EIN_BACKEND_CPU ? "cpu" : "cuda";
  ein_status st = ein_device_model_get(name, m);
  if (st == EIN_ERR_INVALID_ARGUMENT) {
    einpy_raise_status(st, "unknown device model '%.40s' (%s)", name,
                       ein_device_model_names());
    return -1;
  }
  if (st) {
    einpy_raise_status(st, "the device model '%.40s' could not be made", name);
    return -1;
  }
  if ((peak && ein_device_model_set_peak(m, ein_plan_peak_kind(p->plan),
                                         peak)) ||
      (bandwidth && ein_device_model_set_bandwidth(m, bandwidth))) {
    einpy_raise_status(EIN_ERR_INVALID_ARGUMENT,
                       "peak and bandwidth must be positive, not %g and %g",
                       peak, bandwidth);
    return -1;
  }
  if (ein_plan_predicted_seconds(p->plan, m) < 0) {
    einpy_raise_status(EIN_ERR_INVALID_ARGUMENT,
                       "the device model '%.40s' prices %s plans, not this "
                       "%s plan: plan with device='%.40s'",
                       name, ein_backend_name(m->backend),
                       ein_backend_name(ein_plan_backend(p->plan)), name);
    return -1;
  }
  return 0;
}

/* describe(json, device, peak, bandwidth) -> str: `einc plan`'s text or
 * JSON. */
static PyObject *plan_describe(PyObject *self, PyObject *args) {
  plan_object *p = (plan_object *)self;
  int json = 0;
  const char *name = NULL;
  double peak = 0, bandwidth = 0;
  ein_device_model m;
  if (!PyArg_ParseTuple(args, "|pzdd:describe", &json, &name, &peak,
                        &bandwidth) ||
      check_ready(p) < 0 || plan_model(p, name, peak, bandwidth, &m) < 0)
    return NULL;
  ein_describe_format fmt = json ? EIN_DESCRIBE_JSON : EIN_DESCRIBE_TEXT;
  size_t len = ein_plan_describe_model(p->plan, fmt, &m, NULL, 0);
  char *buf = PyMem_Malloc(len + 1);
  if (!buf) return PyErr_NoMemory();
  /* the text written is decoded, never more than the buffer holds */
  size_t wrote = ein_plan_describe_model(p->plan, fmt, &m, buf, len + 1);
  if (wrote < len) len = wrote;
  PyObject *s = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
  PyMem_Free(buf);
  return s;
}

/* account(device, peak, bandwidth, seconds) -> dict: the predicted time,
 * the peak of the plan's arithmetic and, for a run of `seconds` (0: none),
 * MFU and HFU (ein.h). */
static PyObject *plan_account(PyObject *self, PyObject *args) {
  plan_object *p = (plan_object *)self;
  const char *name = NULL;
  double peak = 0, bandwidth = 0, seconds = 0;
  ein_device_model m;
  if (!PyArg_ParseTuple(args, "zddd:account", &name, &peak, &bandwidth,
                        &seconds) ||
      check_ready(p) < 0 || plan_model(p, name, peak, bandwidth, &m) < 0)
    return NULL;
  return Py_BuildValue(
      "{s:s,s:d,s:s,s:d,s:d,s:d}", "device", m.name, "predicted_seconds",
      ein_plan_predicted_seconds(p->plan, &m), "peak_kind",
      ein_peak_kind_name(ein_plan_peak_kind(p->plan)), "peak_flops",
      ein_plan_peak_flops(p->plan, &m), "mfu",
      ein_plan_mfu(p->plan, seconds, &m), "hfu",
      ein_plan_hfu(p->plan, seconds, &m));
}

/* The plan's memory (ein_plan_memory_get) as a dict, each temporary's
 * bytes in a list. */
static PyObject *memory_dict(const ein_plan *plan) {
  ein_plan_memory mem;
  if (ein_plan_memory_get(plan, &mem))
    return einpy_raise_status(EIN_ERR_INVALID_ARGUMENT, "no plan");
  int n = ein_plan_ntemps(plan);
  PyObject *temps = PyList_New(n);
  if (!temps) return NULL;
  for (int t = 0; t < n; t++) {
    PyObject *b = PyLong_FromLongLong((long long)ein_plan_temp_bytes(plan, t));
    if (!b) {
      Py_DECREF(temps);
      return NULL;
    }
    if (PyList_SetItem(temps, t, b) < 0) {
      Py_DECREF(temps);
      return NULL;
    }
  }
  return Py_BuildValue("{s:L,s:L,s:N,s:L,s:L,s:L}", "input_bytes",
                       (long long)mem.input_bytes, "output_bytes",
                       (long long)mem.output_bytes, "temporaries", temps,
                       "workspace_bytes", (long long)mem.workspace_bytes,
                       "peak_live_bytes", (long long)mem.peak_live_bytes,
                       "peak_bytes", (long long)mem.peak_bytes);
}

/* stats() -> dict of the plan's numbers. */
static PyObject *plan_stats(PyObject *self, PyObject *unused) {
  (void)unused;
  plan_object *p = (plan_object *)self;
  if (check_ready(p) < 0) return NULL;
  PyObject *shape = einpy_shape_tuple(ein_plan_output_shape(p->plan),
                                      ein_plan_output_ndim(p->plan));
  if (!shape) return NULL;
  PyObject *memory = memory_dict(p->plan);
  if (!memory) {
    Py_DECREF(shape);
    return NULL;
  }
  PyObject *d = Py_BuildValue(
      "{s:d,s:d,s:d,s:d,s:L,s:L,s:i,s:O,s:N,s:O,s:L,s:L}", "flops",
      ein_plan_flops(p->plan), "model_flops",
      ein_plan_unsliced_flops(p->plan),
      "naive_flops", ein_plan_naive_flops(p->plan), "min_bytes",
      ein_plan_min_bytes(p->plan), "largest_intermediate",
      (long long)ein_plan_largest_intermediate(p->plan), "workspace_bytes",
      (long long)ein_plan_workspace_bytes(p->plan), "nsteps",
      ein_plan_nsteps(p->plan), "output_shape", shape, "memory", memory,
      "is_view", ein_plan_is_view(p->plan) ? Py_True : Py_False, "units",
      (long long)ein_plan_units(p->plan), "memory_limit",
      (long long)ein_plan_memory_limit(p->plan));
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

static int inputs_fit(plan_object *p, einpy_tensor *in, int nin) {
  if (nin != p->ninputs) return 0;
  for (int i = 0; i < nin; i++)
    if (!has_layout(in[i].t, p->device, p->dtype, p->ndims[i], p->shapes[i]))
      return 0;
  return 1;
}

static int fits_plan(plan_object *p, einpy_tensor *in, int nin,
                     einpy_tensor *out) {
  return inputs_fit(p, in, nin) &&
         has_layout(out->t, p->device, p->dtype,
                    ein_plan_output_ndim(p->plan),
                    ein_plan_output_shape(p->plan));
}

/* The plan, or ein_eval for other layouts; without the GIL. */
/* Whether the compiled plan runs the call itself: the layouts it was made
 * for, on one device (ein_eval spreads a sliced plan over several). */
static int plan_serves(plan_object *p, einpy_tensor *in, int nin,
                        einpy_tensor *out) {
  return p->options.opt.devices <= 1 && fits_plan(p, in, nin, out);
}

static int run(plan_object *p, einpy_tensor *in, int nin, einpy_tensor *out,
               PyObject *stream, int sync) {
  return einpy_run(p->expr, plan_serves(p, in, nin, out) ? p->plan : NULL,
                   in, nin, out, &p->options.opt, stream, sync);
}

/* run() for run_numpy: a plan of the compiled layouts too small to be
 * worth a thread switch (einpy_keep_gil, as plan_table.c's table decides)
 * runs holding the GIL. */
static int run_small(plan_object *p, einpy_tensor *in, int nin,
                     einpy_tensor *out) {
  if (nin > EINPY_FAST_MAX_OPERANDS || !einpy_keep_gil(p->plan) ||
      !plan_serves(p, in, nin, out))
    return run(p, in, nin, out, NULL, 0);
  const DLTensor *ins[EINPY_FAST_MAX_OPERANDS];
  for (int i = 0; i < nin; i++) ins[i] = in[i].t;
  if (ein_plan_execute(einpy_ctx(), p->plan, ins, nin, out->t) == EIN_OK)
    return 0;
  einpy_raise(ein_last_error(einpy_ctx()));
  return -1;
}

/* The caller's out=, or a new output: of the compiled output shape for
 * inputs of the compiled shapes, else of the shape the expression gives on
 * these inputs (ein_eval then plans for them: a compiled expression takes
 * other sizes, as einops' functions and opt_einsum's contract_expression
 * do). */
static PyObject *output_object(plan_object *p, PyObject *out, PyObject *alloc,
                               einpy_tensor *in, int nin) {
  if (out != Py_None) {
    Py_INCREF(out);
    return out;
  }
  if (!inputs_fit(p, in, nin))
    return einpy_output_for(p->expr, in, nin, &p->options.opt, alloc);
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
  PyObject *out_obj = output_object(p, out, alloc, in, nin);
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
  static PyObject *dtype_name;
  PyObject *dtype = fits && p->out_shape
                        ? einpy_attr(PyTuple_GetItem(tensors, 0), &dtype_name,
                                     "dtype")
                        : NULL;
  PyObject *out = dtype ? einpy_fast_empty(p->out_shape, dtype) : NULL;
  Py_XDECREF(dtype);
  int ok =
      out && einpy_tensor_import_numpy(out, &o) == 0 &&
      run_small(p, in, nin, &o) == 0;
  einpy_tensors_release(in, nin);
  einpy_tensor_release(&o);
  if (!ok) Py_CLEAR(out);
  if (!fits) Py_RETURN_NONE;
  return out;
}

/* run_units(tensors, partial, first, count) -> None: units [first,
 * first + count) into the caller's partial (ein_plan_run_units), without
 * the GIL; the tensors must have the compiled layout. */
static PyObject *plan_run_units(PyObject *self, PyObject *args) {
  plan_object *p = (plan_object *)self;
  PyObject *tensors, *partial;
  long long first, count;
  if (!PyArg_ParseTuple(args, "OOLL:run_units", &tensors, &partial, &first,
                        &count) ||
      check_ready(p) < 0)
    return NULL;
  einpy_tensor in[EINPY_MAX_OPERANDS], o = {0};
  int nin = 0;
  if (einpy_tensors_import(tensors, NULL, in, &nin) < 0) return NULL;
  int ok = einpy_tensor_import(partial, NULL, &o) == 0;
  if (ok && o.read_only) {
    PyErr_SetString(PyExc_ValueError, "the partial is read-only");
    ok = 0;
  }
  if (ok) {
    const DLTensor *ts[EINPY_MAX_OPERANDS];
    for (int i = 0; i < nin; i++) ts[i] = in[i].t;
    ein_status st;
    PyThreadState *save = PyEval_SaveThread();
    st = ein_plan_run_units(einpy_ctx(), p->plan, ts, nin, o.t, first, count);
    PyEval_RestoreThread(save);
    if (st) {
      einpy_raise(ein_last_error(einpy_ctx()));
      ok = 0;
    }
  }
  einpy_tensors_release(in, nin);
  einpy_tensor_release(&o);
  if (!ok) return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef plan_methods[] = {
    {"run_units", plan_run_units, METH_VARARGS,
     "run_units(tensors, partial, first, count): units into a partial"},
    {"run_numpy", plan_run_numpy, METH_O,
     "run_numpy(tensors) -> result, or None for execute()"},
    {"describe", plan_describe, METH_VARARGS,
     "describe(json=False, device=None, peak=0, bandwidth=0) -> `einc "
     "plan`'s report"},
    {"account", plan_account, METH_VARARGS,
     "account(device, peak, bandwidth, seconds) -> predicted time, peak, "
     "MFU, HFU"},
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
