/*
 * emu_fiber.h - execution contexts for the emulated device's GPU threads:
 * a stack of their own and a switch between contexts that costs a few
 * nanoseconds (on x86-64, a hand-written switch saving the callee-saved
 * registers; elsewhere ucontext, whose swapcontext makes a system call per
 * switch and so is only a fallback).
 *
 * Takes: stack memory from the caller (emu_block.c keeps a pool of
 * stacks). Gives: contexts to switch between, annotated for
 * AddressSanitizer so that switching stacks raises no false reports.
 * A context is used by one OS thread only.
 */
#ifndef EIN_EMU_FIBER_H
#define EIN_EMU_FIBER_H

#include <stdbool.h>
#include <stddef.h>

/* EIN_EMU_ASAN: built with AddressSanitizer (GCC's macro or Clang's
 * feature test), for the annotations here and the device's poisoning. */
#if defined(__SANITIZE_ADDRESS__)
#define EIN_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EIN_EMU_ASAN 1
#endif
#endif

#if !defined(__x86_64__) || !defined(__ELF__)
#define EIN_EMU_UCONTEXT 1
#endif
#ifdef EIN_EMU_UCONTEXT
#include <ucontext.h>
#endif

typedef struct ein_emu_ctx {
#ifdef EIN_EMU_UCONTEXT
  ucontext_t uc;
#else
  void *sp; /* saved stack pointer while switched out */
#endif
  void *stack_lo; /* the stack's bounds, for ASan */
  size_t stack_size;
  void *asan_fake; /* ASan's fake stack while switched out */
} ein_emu_ctx;

/* The calling OS thread's own context (the one that runs the scheduler). */
void ein_emu_ctx_init_thread(ein_emu_ctx *c);

/* A context that will start by calling fn(arg) on [lo, lo + size); fn
 * must never return (it leaves with ein_emu_ctx_exit). */
void ein_emu_ctx_make(ein_emu_ctx *c, void *lo, size_t size,
                      void (*fn)(void *), void *arg);

/* Saves the current context into `from` and runs `to`; returns when some
 * context switches back to `from`. */
void ein_emu_ctx_switch(ein_emu_ctx *from, ein_emu_ctx *to);

/* Runs `to` and never comes back: `from` is finished or abandoned. */
_Noreturn void ein_emu_ctx_exit(ein_emu_ctx *from, ein_emu_ctx *to);

/* First call of a new context's fn (completes ASan's switch). */
void ein_emu_ctx_started(void);

/* Makes a stack that was left mid-call (an abandoned fiber) clean for
 * ASan again. */
void ein_emu_stack_reset(void *lo, size_t size);

#endif
