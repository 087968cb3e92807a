/*
 * prelude_host.h - the host flavour of the kernel prelude: what the CUDA C
 * of codegen.c needs to compile as C++17 for the emulated CUDA device
 * (runtime/emu/emu_device.h), which runs each GPU thread as a fiber on the
 * host CPU.
 *
 * Two parts. The first, plain C, is the interface between a compiled
 * kernel and the emulator: emu_device.c includes this file with
 * EIN_EMU_ABI_ONLY defined to get it, so both sides share one definition.
 * The second, C++, defines the CUDA built-ins the kernels use, written so
 * that mistakes a GPU punishes are punished here too: __syncthreads really
 * waits for the whole block, shuffles exchange only among the lanes their
 * mask names, and both report what went wrong instead of hanging.
 *
 * A thread finds itself from its stack pointer: every fiber stack is an
 * EIN_EMU_STACK_BYTES-aligned region whose lowest bytes hold that thread's
 * ein_emu_thread, so threadIdx costs a mask and a load and needs no
 * thread-local lookup. `__shared__` variables are `static thread_local`:
 * a worker thread runs one block at a time, so each block sees its own.
 *
 * No system header is included (every helper is a compiler built-in):
 * the emulator compiles one translation unit per plan, and a header like
 * <cmath> would cost more than the kernels themselves.
 */
#ifndef EIN_PRELUDE_HOST_ABI
#define EIN_PRELUDE_HOST_ABI

/* --------------------------------------------- the emulator's interface */

/* Size and alignment of a fiber's stack region (a power of two). */
#define EIN_EMU_STACK_BYTES (256u * 1024u)

typedef struct ein_emu_uint3 {
  unsigned x, y, z;
} ein_emu_uint3;

typedef struct ein_emu_thread ein_emu_thread;

enum { EIN_EMU_SYNC_BLOCK, EIN_EMU_SYNC_WARP };
enum { EIN_EMU_SHFL_IDX, EIN_EMU_SHFL_UP, EIN_EMU_SHFL_DOWN, EIN_EMU_SHFL_XOR };

/* What a block's threads share; filled by the emulator per block. The
 * calls may switch to another fiber and come back; on an error they never
 * return (the block is abandoned). */
typedef struct ein_emu_block_abi {
  ein_emu_uint3 block_idx, block_dim, grid_dim;
  /* __syncthreads (EIN_EMU_SYNC_BLOCK) or __syncwarp(mask) */
  void (*sync)(ein_emu_thread *self, int kind, unsigned mask, int line);
  /* a shuffle of a `size`-byte value held in the low bytes of `bits` */
  unsigned long long (*shfl)(ein_emu_thread *self, int kind, unsigned mask,
                             unsigned long long bits, int size, int arg,
                             int width, int line);
  /* a memory access of a kernel compiled in the counting flavour
   * (EIN_EMU_COUNT, below): address, bytes, whether a store, and the
   * instruction that made it */
  void (*access)(ein_emu_thread *self, const void *addr, unsigned size,
                 int store, const void *site);
} ein_emu_block_abi;

/* At the lowest address of the thread's stack region. */
struct ein_emu_thread {
  ein_emu_uint3 thread_idx;
  const ein_emu_block_abi *block;
  /* basic blocks the thread ran, in the counting flavour (its
   * -fsanitize-coverage=trace-pc hook, below): the emulator takes a warp's
   * as its lanes' most, the instructions a GPU issues for the warp */
  unsigned long long basic_blocks;
};

#endif /* EIN_PRELUDE_HOST_ABI */

#if !defined(EIN_EMU_ABI_ONLY) && !defined(EIN_PRELUDE_HOST_CXX)
#define EIN_PRELUDE_HOST_CXX

/* ------------------------------------------------ qualifiers and types */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#ifdef EIN_EMU_SHARED_GLOBAL /* see ein_emu_shared_range */
#define __shared__ static __attribute__((section("ein_emu_shared"), used))
#else
#define __shared__ static thread_local
#endif
#define __constant__ static
#define warpSize 32

typedef unsigned long long ein_u64;
typedef ein_emu_uint3 uint3;

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1)
      : x(x_), y(y_), z(z_) {}
  dim3(ein_emu_uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(8) int2 { int x, y; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) double2 { double x, y; };
struct alignas(16) longlong2 { long long x, y; };
struct alignas(16) ulonglong2 { unsigned long long x, y; };
struct int3 { int x, y, z; };
struct float3 { float x, y, z; };

static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z,
                               unsigned w) { return uint4{x, y, z, w}; }
static inline float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) {
  return uint3{x, y, z};
}

/* c64 and c128, as in prelude_nvrtc.cuh: real then imaginary part, the
 * sum, and the product (ac - bd) + (ad + bc)i. */
struct alignas(8) ein_c64 {
  float x, y;
  ein_c64() = default;
  constexpr ein_c64(float r, float i = 0.0f) : x(r), y(i) {}
};
struct alignas(16) ein_c128 {
  double x, y;
  ein_c128() = default;
  constexpr ein_c128(double r, double i = 0.0) : x(r), y(i) {}
  constexpr ein_c128(ein_c64 v) : x(v.x), y(v.y) {}
  explicit operator ein_c64() const { return ein_c64((float)x, (float)y); }
};
static inline ein_c64 operator+(ein_c64 a, ein_c64 b) {
  return ein_c64(a.x + b.x, a.y + b.y);
}
static inline ein_c64 operator*(ein_c64 a, ein_c64 b) {
  return ein_c64(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
static inline ein_c128 operator+(ein_c128 a, ein_c128 b) {
  return ein_c128(a.x + b.x, a.y + b.y);
}
static inline ein_c128 operator*(ein_c128 a, ein_c128 b) {
  return ein_c128(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

/* --------------------------------------------------- the current thread */

static inline __attribute__((always_inline)) ein_emu_thread *ein_self() {
#if defined(__x86_64__)
  unsigned long sp;
  __asm__("movq %%rsp, %0" : "=r"(sp));
#else
  unsigned long sp = (unsigned long)__builtin_frame_address(0);
#endif
  return (ein_emu_thread *)(sp & ~(unsigned long)(EIN_EMU_STACK_BYTES - 1));
}

#define threadIdx (*(const uint3 *)&ein_self()->thread_idx)
#define blockIdx (*(const uint3 *)&ein_self()->block->block_idx)
#define blockDim (*(const uint3 *)&ein_self()->block->block_dim)
#define gridDim (*(const uint3 *)&ein_self()->block->grid_dim)

/* ---------------------------------------------- barriers and shuffles */

static inline void ein_sync_at(int line, int kind, unsigned mask) {
  ein_emu_thread *t = ein_self();
  t->block->sync(t, kind, mask, line);
}
#define __syncthreads() ein_sync_at(__LINE__, EIN_EMU_SYNC_BLOCK, 0xffffffffu)
#define __syncwarp(...) ein_syncwarp_at(__LINE__, ##__VA_ARGS__)
static inline void ein_syncwarp_at(int line, unsigned mask = 0xffffffffu) {
  ein_sync_at(line, EIN_EMU_SYNC_WARP, mask);
}

/* Values travel as their bits, so float, double and the integer types
 * share one exchange. */
template <class T>
static inline T ein_shfl_at(int line, int kind, unsigned mask, T v, int arg,
                            int width = 32) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8,
                "the emulated shuffles take 4- and 8-byte values");
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &v, sizeof v);
  ein_emu_thread *t = ein_self();
  bits = t->block->shfl(t, kind, mask, bits, (int)sizeof(T), arg, width,
                        line);
  T r;
  __builtin_memcpy(&r, &bits, sizeof r);
  return r;
}
/* A c128 (16 bytes) travels as its two parts, as on the GPU; a c64 fits
 * the template's 8 bytes. */
static inline ein_c128 ein_shfl_at(int line, int kind, unsigned mask,
                                   ein_c128 v, int arg, int width = 32) {
  return ein_c128(ein_shfl_at(line, kind, mask, v.x, arg, width),
                  ein_shfl_at(line, kind, mask, v.y, arg, width));
}
#define __shfl_sync(...) ein_shfl_at(__LINE__, EIN_EMU_SHFL_IDX, __VA_ARGS__)
#define __shfl_up_sync(...) ein_shfl_at(__LINE__, EIN_EMU_SHFL_UP, __VA_ARGS__)
#define __shfl_down_sync(...)                                                \
  ein_shfl_at(__LINE__, EIN_EMU_SHFL_DOWN, __VA_ARGS__)
#define __shfl_xor_sync(...)                                                 \
  ein_shfl_at(__LINE__, EIN_EMU_SHFL_XOR, __VA_ARGS__)

/* -------------------------------------------------- bit reinterpretation */

template <class To, class From> static inline To ein_bits_as(From v) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To r;
  __builtin_memcpy(&r, &v, sizeof r);
  return r;
}
static inline float __int_as_float(int x) { return ein_bits_as<float>(x); }
static inline int __float_as_int(float x) { return ein_bits_as<int>(x); }
static inline float __uint_as_float(unsigned x) {
  return ein_bits_as<float>(x);
}
static inline unsigned __float_as_uint(float x) {
  return ein_bits_as<unsigned>(x);
}
static inline double __longlong_as_double(long long x) {
  return ein_bits_as<double>(x);
}
static inline long long __double_as_longlong(double x) {
  return ein_bits_as<long long>(x);
}

/* ------------------------------------------------ f16 and bf16 storage */

/* Exact: every f16 is an f32. Subnormals are normalised by shifting. */
static inline float ein_h2f(unsigned short h) {
  unsigned sign = (unsigned)(h & 0x8000u) << 16;
  unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f)
    return __uint_as_float(sign | 0x7f800000u | (m << 13));
  if (e != 0)
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0)
    return __uint_as_float(sign);
  unsigned shift = 0;
  while (!(m & 0x400u)) {
    m <<= 1;
    shift++;
  }
  return __uint_as_float(sign | ((113u - shift) << 23) | ((m & 0x3ffu) << 13));
}

/* Round to nearest even; NaN stays NaN (quiet), overflow gives Inf, and
 * results below f16's normal range are rounded as subnormals. */
static inline unsigned short ein_f2h(float f) {
  unsigned u = __float_as_uint(f);
  unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
  unsigned a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return sign | 0x7e00u;
  if (a >= 0x477ff000u) /* 65520 and up round to Inf */
    return sign | 0x7c00u;
  if (a >= 0x38800000u) { /* normal: drop 13 mantissa bits, rebias */
    unsigned r = a + 0xfffu + ((a >> 13) & 1u);
    return sign | (unsigned short)((r - 0x38000000u) >> 13);
  }
  if (a < 0x33000000u) /* below half the smallest subnormal */
    return sign;
  /* subnormal: the 24-bit significand shifted to units of 2^-24 */
  unsigned m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
  unsigned q = m >> shift, rest = m & ((1u << shift) - 1u);
  unsigned half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u)))
    q++;
  return sign | (unsigned short)q;
}

static inline float ein_b2f(unsigned short h) {
  return __uint_as_float((unsigned)h << 16);
}

/* fp8 to f32, exact (docs/design.md, "fp8 dtypes"): e5m2 is the top byte
 * of an f16; e4m3fn (bias 7, no inf, NaN only at S.1111.111) by its bits. */
static inline float ein_e5m2f(unsigned char b) {
  return ein_h2f((unsigned short)((unsigned)b << 8));
}
static inline float ein_e4m3f(unsigned char b) {
  unsigned s = (unsigned)(b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return __uint_as_float(s | 0x7fc00000u);
  if (e == 0u) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
  return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
}

/* round to nearest even; NaN stays NaN */
static inline unsigned short ein_f2b(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* ------------------------------------------------------------- memory */

template <class T> static inline T __ldg(const T *p) { return *p; }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* CUDA's atomics are relaxed; blocks on other worker threads make them
 * real atomics here. Read-modify-writes without a built-in loop on a
 * compare-and-swap of the object's bytes. */
template <class T, class F> static inline T ein_atomic_update(T *p, F f) {
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  for (;;) {
    T next = f(old);
    if (__atomic_compare_exchange(p, &old, &next, true, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED))
      return old;
  }
}

/* The atomics with a built-in: one read-modify-write of p. */
#define EIN_ATOMIC_FETCH(T, name, builtin)                                   \
  static inline T name(T *p, T v) {                                          \
    return builtin(p, v, __ATOMIC_RELAXED);                                  \
  }
#define EIN_ATOMIC_INT_OPS(T)                                                \
  EIN_ATOMIC_FETCH(T, atomicAdd, __atomic_fetch_add)                         \
  EIN_ATOMIC_FETCH(T, atomicSub, __atomic_fetch_sub)                         \
  EIN_ATOMIC_FETCH(T, atomicAnd, __atomic_fetch_and)                         \
  EIN_ATOMIC_FETCH(T, atomicOr, __atomic_fetch_or)                           \
  EIN_ATOMIC_FETCH(T, atomicXor, __atomic_fetch_xor)                         \
  static inline T atomicMax(T *p, T v) {                                     \
    return ein_atomic_update(p, [v](T o) { return v > o ? v : o; });         \
  }                                                                          \
  static inline T atomicMin(T *p, T v) {                                     \
    return ein_atomic_update(p, [v](T o) { return v < o ? v : o; });         \
  }
EIN_ATOMIC_INT_OPS(int)
EIN_ATOMIC_INT_OPS(unsigned)
EIN_ATOMIC_INT_OPS(long long)
EIN_ATOMIC_INT_OPS(unsigned long long)
#undef EIN_ATOMIC_INT_OPS
#undef EIN_ATOMIC_FETCH

static inline float atomicAdd(float *p, float v) {
  return ein_atomic_update(p, [v](float o) { return o + v; });
}
static inline double atomicAdd(double *p, double v) {
  return ein_atomic_update(p, [v](double o) { return o + v; });
}
/* NaN wins, as in the kernels' own max and min */
static inline float atomicMax(float *p, float v) {
  return ein_atomic_update(p, [v](float o) { return v > o || v != v ? v : o; });
}
static inline double atomicMax(double *p, double v) {
  return ein_atomic_update(p,
                           [v](double o) { return v > o || v != v ? v : o; });
}
static inline float atomicMin(float *p, float v) {
  return ein_atomic_update(p, [v](float o) { return v < o || v != v ? v : o; });
}
static inline double atomicMin(double *p, double v) {
  return ein_atomic_update(p,
                           [v](double o) { return v < o || v != v ? v : o; });
}

template <class T> static inline T ein_atomic_cas(T *p, T expect, T value) {
  __atomic_compare_exchange(p, &expect, &value, false, __ATOMIC_RELAXED,
                            __ATOMIC_RELAXED);
  return expect; /* the old value either way */
}
static inline int atomicCAS(int *p, int c, int v) {
  return ein_atomic_cas(p, c, v);
}
static inline unsigned atomicCAS(unsigned *p, unsigned c, unsigned v) {
  return ein_atomic_cas(p, c, v);
}
static inline long long atomicCAS(long long *p, long long c, long long v) {
  return ein_atomic_cas(p, c, v);
}
static inline unsigned long long atomicCAS(unsigned long long *p,
                                           unsigned long long c,
                                           unsigned long long v) {
  return ein_atomic_cas(p, c, v);
}
static inline unsigned short atomicCAS(unsigned short *p, unsigned short c,
                                       unsigned short v) {
  return ein_atomic_cas(p, c, v);
}

template <class T> static inline T atomicExch(T *p, T v) {
  T old;
  __atomic_exchange(p, &v, &old, __ATOMIC_RELAXED);
  return old;
}

/* --------------------------------------------------------------- math */

template <class A, class B>
static inline auto min(A a, B b) -> decltype(a + b) {
  typedef decltype(a + b) T;
  return (T)b < (T)a ? (T)b : (T)a;
}
template <class A, class B>
static inline auto max(A a, B b) -> decltype(a + b) {
  typedef decltype(a + b) T;
  return (T)b > (T)a ? (T)b : (T)a;
}
/* as fminf/fmaxf: a NaN loses to a number */
static inline float min(float a, float b) { return __builtin_fminf(a, b); }
static inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
static inline double min(double a, double b) { return __builtin_fmin(a, b); }
static inline double max(double a, double b) { return __builtin_fmax(a, b); }

#define sqrtf(x) __builtin_sqrtf(x)
#define expf(x) __builtin_expf(x)
#define logf(x) __builtin_logf(x)
#define fabsf(x) __builtin_fabsf(x)
#define fminf(x, y) __builtin_fminf(x, y)
#define fmaxf(x, y) __builtin_fmaxf(x, y)
#define floorf(x) __builtin_floorf(x)
#define ceilf(x) __builtin_ceilf(x)
#define tanhf(x) __builtin_tanhf(x)
#define powf(x, y) __builtin_powf(x, y)
#define fmaf(x, y, z) __builtin_fmaf(x, y, z)
#define sqrt(x) __builtin_sqrt(x)
#define exp(x) __builtin_exp(x)
#define log(x) __builtin_log(x)
#define fabs(x) __builtin_fabs(x)
#define fma(x, y, z) __builtin_fma(x, y, z)
static inline float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }

/* ----------------------------------------------- counting accesses */

#ifdef EIN_EMU_COUNT
/* The counting flavour is compiled with -fsanitize=thread: GCC puts a
 * call to __tsan_read<N> or __tsan_write<N> (N the access's bytes) before
 * every load and store left after optimisation, so locals in registers
 * cost nothing and every access to memory is seen. No ThreadSanitizer
 * runtime is linked: the module defines those entry points here, each
 * handing the address and its call site (the instruction: the k-th
 * execution of one site by a warp's lanes is one warp-level request) to
 * the emulator. They must not be instrumented themselves, and cannot use
 * ein_self (an instrumented inline function). */
#define EIN_TSAN_HOOK                                                         \
  extern "C" __attribute__((no_sanitize_thread, noinline, used,              \
                            visibility("hidden")))
static inline __attribute__((no_sanitize_thread, always_inline)) void
ein_note_access(void *p, unsigned size, int store, void *site) {
#if defined(__x86_64__)
  unsigned long sp;
  __asm__("movq %%rsp, %0" : "=r"(sp));
#else
  unsigned long sp = (unsigned long)__builtin_frame_address(0);
#endif
  ein_emu_thread *t =
      (ein_emu_thread *)(sp & ~(unsigned long)(EIN_EMU_STACK_BYTES - 1));
  t->block->access(t, p, size, store, site);
}
#define EIN_TSAN_SIZE(n)                                                      \
  EIN_TSAN_HOOK void __tsan_read##n(void *p) {                                \
    ein_note_access(p, n, 0, __builtin_return_address(0));                   \
  }                                                                           \
  EIN_TSAN_HOOK void __tsan_write##n(void *p) {                               \
    ein_note_access(p, n, 1, __builtin_return_address(0));                   \
  }                                                                           \
  EIN_TSAN_HOOK void __tsan_unaligned_read##n(void *p) {                      \
    ein_note_access(p, n, 0, __builtin_return_address(0));                   \
  }                                                                           \
  EIN_TSAN_HOOK void __tsan_unaligned_write##n(void *p) {                     \
    ein_note_access(p, n, 1, __builtin_return_address(0));                   \
  }                                                                           \
  EIN_TSAN_HOOK void __tsan_volatile_read##n(void *p) {                       \
    ein_note_access(p, n, 0, __builtin_return_address(0));                   \
  }                                                                           \
  EIN_TSAN_HOOK void __tsan_volatile_write##n(void *p) {                      \
    ein_note_access(p, n, 1, __builtin_return_address(0));                   \
  }
EIN_TSAN_SIZE(1)
EIN_TSAN_SIZE(2)
EIN_TSAN_SIZE(4)
EIN_TSAN_SIZE(8)
EIN_TSAN_SIZE(16)
#undef EIN_TSAN_SIZE
EIN_TSAN_HOOK void __tsan_read_range(void *p, unsigned long n) {
  ein_note_access(p, (unsigned)n, 0, __builtin_return_address(0));
}
EIN_TSAN_HOOK void __tsan_write_range(void *p, unsigned long n) {
  ein_note_access(p, (unsigned)n, 1, __builtin_return_address(0));
}
/* Whether the emulator has armed the module (ein_emu_count_arm, after
 * dlopen): the compiler-made module constructor is instrumented too and
 * runs inside dlopen on the host's own stack, where the stack pointer
 * rounded down is no emulated thread (it once incremented a word of the
 * host stack, and now and then crashed the process). */
static int ein_count_armed;
extern "C" __attribute__((no_sanitize_coverage, no_sanitize_thread,
                          visibility("default"))) void
ein_emu_count_arm(void) {
  ein_count_armed = 1;
}
/* -fsanitize-coverage=trace-pc calls this at the start of every basic
 * block the optimiser left (the thread's own count; emu_block.c makes a
 * warp's of its lanes'). Not instrumented itself. */
extern "C" __attribute__((no_sanitize_coverage, no_sanitize_thread, used,
                          visibility("hidden"))) void
__sanitizer_cov_trace_pc(void) {
  if (!ein_count_armed) return;
#if defined(__x86_64__)
  unsigned long sp;
  __asm__("movq %%rsp, %0" : "=r"(sp));
#else
  unsigned long sp = (unsigned long)__builtin_frame_address(0);
#endif
  ((ein_emu_thread *)(sp & ~(unsigned long)(EIN_EMU_STACK_BYTES - 1)))
      ->basic_blocks++;
}
/* the module's constructor calls it; function entry and exit hooks are
 * turned off (--param=tsan-instrument-func-entry-exit=0) but defined */
EIN_TSAN_HOOK void __tsan_init(void) {}
EIN_TSAN_HOOK void __tsan_func_entry(void *pc) { (void)pc; }
EIN_TSAN_HOOK void __tsan_func_exit(void) {}
#undef EIN_TSAN_HOOK
#endif

/* -------------------------------------------------------- entry points */

/* The emulator calls every kernel through void pointers; this restores
 * the kernel's own parameter types. */
template <class D, class S0, class S1>
static inline void ein_emu_call(void (*f)(D *, const S0 *, const S1 *),
                                void *d, const void *s0, const void *s1) {
  f((D *)d, (const S0 *)s0, (const S1 *)s1);
}

/* Where the emulator finds the __shared__ variables to fill with a poison
 * pattern before each block. Thread-locals by default: touching one makes
 * the loader give the calling worker its block of this module's
 * thread-locals, which the emulator finds with dlinfo. Under sanitizers
 * they are globals in one section instead and a single worker runs every
 * block (GCC 12's ASan misreads the bounds of dynamically loaded
 * thread-locals, and LeakSanitizer then faults scanning them). Both
 * functions run on the emulator's own threads, not in a GPU thread: in
 * the counting flavour their stores must not reach the counters
 * (no_sanitize_thread leaves them uninstrumented). */
/* Both run on host threads, off the emulated threads' stacks: neither may
 * reach the counting hooks (no_sanitize_coverage, no_sanitize_thread). */
extern "C" __attribute__((visibility("default"), no_sanitize_thread,
                          no_sanitize_coverage)) void *
ein_emu_tls_touch() {
#ifdef EIN_EMU_SHARED_GLOBAL
  return 0;
#else
  static thread_local char anchor;
  return &anchor;
#endif
}
extern "C" char __start_ein_emu_shared[] __attribute__((weak));
extern "C" char __stop_ein_emu_shared[] __attribute__((weak));
extern "C" __attribute__((visibility("default"), no_sanitize_thread,
                          no_sanitize_coverage)) char *
ein_emu_shared_range(char **end) {
  *end = __stop_ein_emu_shared;
  return __start_ein_emu_shared;
}

#endif /* EIN_PRELUDE_HOST_CXX */
