/*
 * emu_fiber.c - context switches for the emulated device (emu_fiber.h).
 *
 * On x86-64 a switch pushes the six callee-saved registers on the current
 * stack, stores the stack pointer, loads the other context's and pops its
 * registers: about ten nanoseconds, which matters because a 256-thread
 * block switches a few hundred times per barrier. The caller-saved
 * registers are the compiler's business (the switch is a function call),
 * and no kernel changes the floating-point control words, so they are not
 * saved. A new context's stack is laid out as if it had been switched out
 * just before a call to fn(arg).
 */
#include "emu_fiber.h"

#include <pthread.h>
#include <stdint.h>

#ifdef EIN_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* ASan must be told before a switch which stack comes next and after it
 * that the switch happened; a context leaving for good passes no place to
 * save its fake stack, which lets ASan free it. */
static inline void asan_leave(void **fake, const ein_emu_ctx *to) {
#ifdef EIN_EMU_ASAN
  __sanitizer_start_switch_fiber(fake, to->stack_lo, to->stack_size);
#else
  (void)fake;
  (void)to;
#endif
}

static inline void asan_arrive(void *fake) {
#ifdef EIN_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
  (void)fake;
#endif
}

void ein_emu_ctx_started(void) { asan_arrive(NULL); }

void ein_emu_stack_reset(void *lo, size_t size) {
#ifdef EIN_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(lo, size);
#else
  (void)lo;
  (void)size;
#endif
}

void ein_emu_ctx_init_thread(ein_emu_ctx *c) {
  c->stack_lo = NULL;
  c->stack_size = 0;
  c->asan_fake = NULL;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &c->stack_lo, &c->stack_size);
    pthread_attr_destroy(&attr);
  }
}

#ifndef EIN_EMU_UCONTEXT

/* ein_emu_switch_x64(void **save_sp, void *next_sp). A new context starts
 * in ein_emu_start_x64 with fn in r13 and arg in r12. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl ein_emu_switch_x64\n"
        ".hidden ein_emu_switch_x64\n"
        ".type ein_emu_switch_x64,@function\n"
        "ein_emu_switch_x64:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size ein_emu_switch_x64, .-ein_emu_switch_x64\n"
        ".p2align 4\n"
        ".globl ein_emu_start_x64\n"
        ".hidden ein_emu_start_x64\n"
        ".type ein_emu_start_x64,@function\n"
        "ein_emu_start_x64:\n"
        "  movq %r12, %rdi\n"
        "  callq *%r13\n"
        "  ud2\n"
        ".size ein_emu_start_x64, .-ein_emu_start_x64\n");

void ein_emu_switch_x64(void **save_sp, void *next_sp);
void ein_emu_start_x64(void);

void ein_emu_ctx_make(ein_emu_ctx *c, void *lo, size_t size,
                      void (*fn)(void *), void *arg) {
  c->stack_lo = lo;
  c->stack_size = size;
  c->asan_fake = NULL;
  uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
  /* After the six pops and the ret into ein_emu_start_x64 the stack must
   * be 16-byte aligned, so that its call enters fn as the ABI wants. */
  uint64_t *sp = (uint64_t *)(top - 24);
  sp[0] = (uint64_t)(uintptr_t)ein_emu_start_x64;
  sp[1] = sp[2] = 0;
  sp -= 6;
  sp[0] = sp[1] = 0;                  /* r15, r14 */
  sp[2] = (uint64_t)(uintptr_t)fn;    /* r13 */
  sp[3] = (uint64_t)(uintptr_t)arg;   /* r12 */
  sp[4] = sp[5] = 0;                  /* rbx, rbp */
  c->sp = sp;
}

void ein_emu_ctx_switch(ein_emu_ctx *from, ein_emu_ctx *to) {
  asan_leave(&from->asan_fake, to);
  ein_emu_switch_x64(&from->sp, to->sp);
  asan_arrive(from->asan_fake);
}

_Noreturn void ein_emu_ctx_exit(ein_emu_ctx *from, ein_emu_ctx *to) {
  asan_leave(NULL, to);
  ein_emu_switch_x64(&from->sp, to->sp);
  __builtin_unreachable();
}

#else /* ucontext */

/* makecontext passes int arguments only: pointers go in two halves. */
static void start_uc(unsigned fn_hi, unsigned fn_lo, unsigned arg_hi,
                     unsigned arg_lo) {
  uintptr_t f = ((uintptr_t)fn_hi << 16 << 16) | fn_lo;
  uintptr_t a = ((uintptr_t)arg_hi << 16 << 16) | arg_lo;
  ((void (*)(void *))f)((void *)a);
}

void ein_emu_ctx_make(ein_emu_ctx *c, void *lo, size_t size,
                      void (*fn)(void *), void *arg) {
  c->stack_lo = lo;
  c->stack_size = size;
  c->asan_fake = NULL;
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = lo;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = NULL;
  uintptr_t f = (uintptr_t)fn, a = (uintptr_t)arg;
  makecontext(&c->uc, (void (*)(void))start_uc, 4,
              (unsigned)(f >> 16 >> 16), (unsigned)f,
              (unsigned)(a >> 16 >> 16), (unsigned)a);
}

void ein_emu_ctx_switch(ein_emu_ctx *from, ein_emu_ctx *to) {
  asan_leave(&from->asan_fake, to);
  swapcontext(&from->uc, &to->uc);
  asan_arrive(from->asan_fake);
}

_Noreturn void ein_emu_ctx_exit(ein_emu_ctx *from, ein_emu_ctx *to) {
  asan_leave(NULL, to);
  swapcontext(&from->uc, &to->uc);
  __builtin_unreachable();
}

#endif
