/*
 * errors.c - einc's errors as Python exceptions.
 *
 * A failing ein_* call leaves an ein_error on the context (or memo); this
 * turns it into einc.EincError whose str() is the CLI's caret text, so a
 * Python user sees exactly what `einc check` prints. The class derives
 * from RuntimeError (einops raises EinopsError, a RuntimeError, so
 * `except RuntimeError` around einops calls keeps working) and from
 * ValueError (what bad arguments raise elsewhere in Python).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "einpy.h"

static PyObject *eincerror_type; /* owned through the module too */

int einpy_errors_init(PyObject *module) {
  PyObject *bases = PyTuple_Pack(2, PyExc_RuntimeError, PyExc_ValueError);
  if (!bases) return -1;
  eincerror_type = PyErr_NewExceptionWithDoc(
      "einc.EincError",
      "An einc error: str() is the message with the expression and a caret\n"
      "under the culprit. Attributes: code (a short name such as\n"
      "'size mismatch'), status (ein.h's negative number), message (the\n"
      "first line alone), expr, span ((offset, length) or None) and spans.",
      bases, NULL);
  Py_DECREF(bases);
  if (!eincerror_type) return -1;
  Py_INCREF(eincerror_type);
  if (PyModule_AddObject(module, "EincError", eincerror_type) < 0) {
    Py_DECREF(eincerror_type);
    return -1;
  }
  return 0;
}

/* The caret text of err, as a str. */
static PyObject *format_text(const ein_error *err) {
  size_t len = ein_error_format(err, NULL, 0);
  char *buf = PyMem_Malloc(len + 1);
  if (!buf) return PyErr_NoMemory();
  ein_error_format(err, buf, len + 1);
  /* The text is for a terminal: "error: " first and a newline last. In a
   * traceback the class name says the first and the second is noise. */
  const char *start = buf;
  if (strncmp(start, "error: ", 7) == 0) start += 7;
  while (len > (size_t)(start - buf) && buf[len - 1] == '\n') len--;
  PyObject *s = PyUnicode_DecodeUTF8(
      start, (Py_ssize_t)(len - (size_t)(start - buf)), "replace");
  PyMem_Free(buf);
  return s;
}

/* [(offset, length), ...] for the error's spans. */
static PyObject *span_list(const ein_error *err) {
  PyObject *list = PyList_New(0);
  for (int i = 0; list && i < err->nspans; i++) {
    PyObject *pair = Py_BuildValue("(nn)", (Py_ssize_t)err->spans[i].offset,
                                   (Py_ssize_t)err->spans[i].length);
    if (!pair || PyList_Append(list, pair) < 0) Py_CLEAR(list);
    Py_XDECREF(pair);
  }
  return list;
}

/* Sets one attribute and drops the reference to value; -1 on failure. */
static int set_attr(PyObject *obj, const char *name, PyObject *value) {
  if (!value) return -1;
  int r = PyObject_SetAttrString(obj, name, value);
  Py_DECREF(value);
  return r;
}

static int set_attributes(PyObject *exc, const ein_error *err) {
  PyObject *spans = span_list(err);
  if (!spans) return -1;
  PyObject *first = err->nspans > 0 ? PyList_GetItem(spans, 0) : Py_None;
  Py_XINCREF(first);
  if (set_attr(exc, "span", first) < 0 || set_attr(exc, "spans", spans) < 0)
    return -1;
  PyObject *expr = err->expr
                       ? PyUnicode_DecodeUTF8(
                             err->expr, (Py_ssize_t)err->expr_len, "replace")
                       : (Py_INCREF(Py_None), Py_None);
  if (set_attr(exc, "expr", expr) < 0 ||
      set_attr(exc, "code",
               PyUnicode_FromString(ein_status_name(err->status))) < 0 ||
      set_attr(exc, "status", PyLong_FromLong(err->status)) < 0)
    return -1;
  return set_attr(
      exc, "message",
      PyUnicode_DecodeUTF8(err->message, (Py_ssize_t)strlen(err->message),
                           "replace"));
}

PyObject *einpy_raise(const ein_error *err) {
  PyObject *text = format_text(err);
  if (!text) return NULL;
  PyObject *exc = PyObject_CallFunctionObjArgs(eincerror_type, text, NULL);
  Py_DECREF(text);
  if (!exc) return NULL;
  if (set_attributes(exc, err) == 0) PyErr_SetObject(eincerror_type, exc);
  Py_DECREF(exc);
  return NULL;
}

PyObject *einpy_raise_status(ein_status status, const char *fmt, ...) {
  char message[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  ein_error err = {status, message, NULL, 0, 0, {{0, 0}, {0, 0}}};
  return einpy_raise(&err);
}
