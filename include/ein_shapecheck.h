/*
 * ein_shapecheck.h - shape assertions for tests, in the style of jaxtyping.
 *
 * Part of einc's public C API: ein.h includes this header, and this
 * header includes ein.h, so a program includes either. ein.h's
 * conventions (statuses, errors on the context, NULL options) hold here.
 */
#ifndef EIN_PUBLIC_SHAPECHECK_H
#define EIN_PUBLIC_SHAPECHECK_H

#include <stdio.h>  /* EIN_SHAPE_ASSERT */
#include <stdlib.h> /* EIN_SHAPE_ASSERT */

#include "ein.h"

#ifdef __cplusplus
extern "C" {
#endif

/* [[nodiscard]] in C before C23 is an extension -pedantic reports (ein.h). */
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif

/* ---------------------------------------------- shape checks for tests */

/*
 * Shape assertions in the style of jaxtyping. A memo remembers every name it
 * has seen; each check binds new names and verifies known ones:
 *
 *   ein_shape_memo *m; ein_shape_memo_create(&m);
 *   EIN_SHAPE_CHECK(m, "batch heads seq d", &q);     binds batch, heads, ...
 *   EIN_SHAPE_CHECK(m, "batch seq (heads d)", &x);   checks them
 * (each returns a status: "(heads d)" with neither bound is an ambiguous
 * split, and EIN_SHAPE_ASSERT aborts on any mismatch)
 *
 * A spec is a whitespace-separated list of dims:
 *   name       binds on first sight, checked afterwards
 *   12         a fixed size
 *   _          any single dim, never bound
 *   *name      any run of dims (possibly none), bound and checked as a tuple
 *   ...        like *name, with the memo-wide name "..."
 *   #name      the size of name, or 1 (broadcastable); a 1 does not bind
 *   *#name     a run of dims, each equal to the bound one or 1
 *   n+1, 2*h   an integer expression (+ - *) of bound names, no spaces
 *   (h d)      a product; at most one factor may be unknown and is solved
 * At most one run (*name or ...) per spec.
 *
 * A memo has no lock: it belongs to one thread at a time (like the call
 * stack a jaxtyping memo follows). Different memos are independent.
 */
typedef struct ein_shape_memo ein_shape_memo;

EIN_NODISCARD
EIN_API ein_status ein_shape_memo_create(ein_shape_memo **out);
EIN_API void ein_shape_memo_destroy(ein_shape_memo *memo);

/* Forgets every binding, keeping the memo. */
EIN_API void ein_shape_memo_clear(ein_shape_memo *memo);

/* Checks a shape against a spec. `what` names the tensor in messages (the
 * macro passes the argument's text) and file/line say where the check is;
 * each may be NULL/0. On a mismatch the memo keeps its earlier bindings,
 * records the error (read it with ein_shape_memo_error) and returns it. */
EIN_NODISCARD
EIN_API ein_status ein_shape_check_dims(ein_shape_memo *memo, const char *spec,
                                        int ndim, const int64_t *shape,
                                        const char *what, const char *file,
                                        int line);

/* The same for a DLTensor (only ndim and shape are read). */
EIN_NODISCARD
EIN_API ein_status ein_shape_check_tensor(ein_shape_memo *memo,
                                          const char *spec,
                                          const DLTensor *tensor,
                                          const char *what, const char *file,
                                          int line);

/* The last error of the memo (status EIN_OK when the last check passed). */
EIN_API const ein_error *ein_shape_memo_error(const ein_shape_memo *memo);

/* The size bound to a name, or -1 when it is unbound or a run. */
EIN_API int64_t ein_shape_memo_size(const ein_shape_memo *memo,
                                    const char *name);

/* Checks a DLTensor pointer against a spec, naming the call site. */
#define EIN_SHAPE_CHECK(memo, spec, tensor_ptr)                               \
  ein_shape_check_tensor((memo), (spec), (tensor_ptr), #tensor_ptr, __FILE__, \
                         __LINE__)

/* For tests: like EIN_SHAPE_CHECK, but a mismatch prints the caret message
 * to stderr and aborts. The printing is done here, in the caller's code; the
 * library itself never prints. `memo` is evaluated twice. */
#define EIN_SHAPE_ASSERT(memo, spec, tensor_ptr)                              \
  ein_shape_assert_status_((memo), EIN_SHAPE_CHECK(memo, spec, tensor_ptr))

/* EIN_SHAPE_ASSERT's report: prints the memo's error and aborts unless
 * status is EIN_OK. */
static inline void ein_shape_assert_status_(const ein_shape_memo *memo,
                                            ein_status status) {
  if (status == EIN_OK) return;
  char text[4096];
  ein_error_format(ein_shape_memo_error(memo), text, sizeof text);
  fputs(text, stderr);
  fflush(stderr);
  abort();
}

/* Checks a plain shape array against a spec, naming the call site. */
#define EIN_SHAPE_CHECK_DIMS(memo, spec, ndim, shape)                        \
  ein_shape_check_dims((memo), (spec), (ndim), (shape), #shape, __FILE__,    \
                       __LINE__)

#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* EIN_PUBLIC_SHAPECHECK_H */
