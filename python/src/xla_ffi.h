/*
 * xla_ffi.h - einc as an XLA FFI target, so that einc calls stay inside
 * programs that jax.jit compiles (issue 25).
 *
 * Takes: XLA's call frames (XLA_FFI_CallFrame, the C header jaxlib ships
 * under jax.ffi.include_dir(); the build finds it, python/meson.build).
 * A call's operands are the inputs, its one result the output, and its
 * attributes say what to evaluate:
 *   expr          string  the expression, as einc.einsum takes it
 *   reduction     string  "sum", "mean", "max", "min", "prod", "any", "all"
 *   numpy         integer nonzero: numpy's dialect
 *   length_names  string  output-only or checked axes, space-separated
 *   length_sizes  i64[]   their sizes, in the same order
 * Gives: the output, evaluated by ein_eval on the CPU backend (host
 * buffers) or on the CUDA backend on the stream XLA hands the call.
 * Owns: two contexts of its own, kept for the process (an XLA executable
 * may run until its very end): one for host calls, shared by XLA's
 * threads, and one for CUDA calls, which take turns on it because the
 * stream is set on a context.
 *
 * Plain C: nothing here touches Python, so handlers run on XLA's threads
 * without the GIL. module.c wraps the handler pointers in capsules.
 */
#ifndef EINPY_XLA_FFI_H
#define EINPY_XLA_FFI_H

/* The handler for XLA's platform "cpu" or "CUDA" (an XLA_FFI_Handler
 * pointer, as the capsule jax.ffi.register_ffi_target wants). */
void *einxla_handler_cpu(void);
void *einxla_handler_cuda(void);

#endif /* EINPY_XLA_FFI_H */
