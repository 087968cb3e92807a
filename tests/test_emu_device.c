/*
 * test_emu_device.c - the emulated CUDA device (runtime/emu/emu_device.h).
 *
 * Hand-written kernels check that the emulation punishes what a GPU
 * punishes: a block reduction with __syncthreads and __shfl_down_sync is
 * right, and wrong (or an error) without the barrier or with a wrong mask;
 * a barrier not every thread reaches, threads at different barriers and a
 * deadlock between a barrier and a shuffle are errors, never hangs; host
 * pointers as kernel arguments and copies of the wrong kind are
 * EIN_ERR_DEVICE; launches CUDA refuses are refused. Then shuffles of each
 * kind, shared memory poisoning, atomics across worker threads, compile
 * errors, the disk cache, the host prelude's f16/bf16 conversions against
 * src/util/half.h, and real kernels of the code generator run plan by
 * plan on emulated memory and compared with the CPU backend. Under ASan,
 * a kernel writing out of bounds and the host reading device memory are
 * reported (checked in child processes). Needs a host C++ compiler, no
 * CUDA.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cases.h"
#include "codegen.h"
#include "ctx_internal.h"
#include "cuda_program.h"
#include "dtype.h"
#include "emu_device.h"
#include "half.h"
#include "harness.h"
#include "plan.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif

static ein_error_rec err;
static char cache_dir[256];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  ein_status st = ein_emu_malloc(&p, bytes, &err);
  CHECK(st == EIN_OK, "ein_emu_malloc(%zu): %s", bytes, err.message);
  return p;
}

static void to_dev(void *d, const void *h, size_t bytes) {
  ein_status st = ein_emu_copy(d, h, bytes, EIN_EMU_H2D, &err);
  CHECK(st == EIN_OK, "H2D: %s", err.message);
}

static void to_host(void *h, const void *d, size_t bytes) {
  ein_status st = ein_emu_copy(h, d, bytes, EIN_EMU_D2H, &err);
  CHECK(st == EIN_OK, "D2H: %s", err.message);
}

/* Launches kernel `index` of m inside a device bracket. */
static ein_status launch(ein_emu_module *m, int index, unsigned gx,
                         unsigned bx, unsigned by, void *d, const void *s0,
                         const void *s1) {
  unsigned grid[3] = {gx, 1, 1}, block[3] = {bx, by, 1};
  ein_error_clear(&err);
  ein_emu_device_begin();
  ein_status st = ein_emu_launch(m, index, false, grid, block, d, s0, s1, &err);
  ein_emu_device_end();
  return st;
}

/* Compiles one source and launches it once. */
static ein_status run1(const char *src, unsigned gx, unsigned bx, unsigned by,
                       void *d, const void *s0, const void *s1) {
  ein_emu_module *m;
  ein_error_clear(&err);
  ein_status st = ein_emu_module_load(&src, 1, &m, &err);
  CHECK(st == EIN_OK, "load: %s\n%s", err.message, src);
  if (st)
    return st;
  st = launch(m, 0, gx, bx, by, d, s0, s1);
  ein_emu_module_free(m);
  return st;
}

#define KERNEL(dt, s0t)                                                      \
  "extern \"C\" __global__ void __launch_bounds__(256) ein_main(\n"          \
  "    " dt " *__restrict__ d, const " s0t " *__restrict__ s0,\n"            \
  "    const void *__restrict__ s1) {\n"

/* ---------------------------------------------------- block reductions */

/* Sums 256 values per block: shuffles within warps, partial sums through
 * shared memory, the last warp's shuffles. MASK and BARRIER vary. */
static const char REDUCE_BODY[] =
    KERNEL("float", "float")
    "  __shared__ float part[8];\n"
    "  float v = s0[blockIdx.x * 256 + threadIdx.x];\n"
    "  for (int off = 16; off > 0; off >>= 1)\n"
    "    v += __shfl_down_sync(MASK, v, off);\n"
    "  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;\n"
    "  BARRIER\n"
    "  if (threadIdx.x < 32) {\n"
    "    v = threadIdx.x < 8 ? part[threadIdx.x] : 0.0f;\n"
    "    for (int off = 4; off > 0; off >>= 1)\n"
    "      v += __shfl_down_sync(0xffffffffu, v, off);\n"
    "    if (threadIdx.x == 0) d[blockIdx.x] = v;\n"
    "  }\n"
    "}\n";

enum { RBLOCKS = 40 };

static ein_status block_reduce(const char *mask, const char *barrier,
                               float *out, bool *right) {
  static char src[4096];
  snprintf(src, sizeof src, "#define MASK %s\n#define BARRIER %s\n%s", mask,
           barrier, REDUCE_BODY);
  float in[RBLOCKS * 256], want[RBLOCKS] = {0};
  for (int i = 0; i < RBLOCKS * 256; i++) {
    in[i] = (float)(i % 7) - 2.0f;
    want[i / 256] += in[i];
  }
  float *din = dev_alloc(sizeof in), *dout = dev_alloc(sizeof want);
  to_dev(din, in, sizeof in);
  ein_status st = run1(src, RBLOCKS, 256, 1, dout, din, NULL);
  to_host(out, dout, sizeof want);
  *right = memcmp(out, want, sizeof want) == 0;
  ein_emu_free(din);
  ein_emu_free(dout);
  return st;
}

static void test_block_reduction(void) {
  float out[RBLOCKS];
  bool right;
  ein_status st = block_reduce("0xffffffffu", "__syncthreads();", out, &right);
  CHECK(st == EIN_OK && right, "block reduction: %s; got %g", err.message,
        out[0]);
  /* without the barrier the last warp reads partial sums not yet written */
  st = block_reduce("0xffffffffu", "", out, &right);
  CHECK(st != EIN_OK || !right, "no barrier: still right (%g)", out[0]);
  printf("without __syncthreads: %s (block 0 sum %g)\n",
         st ? err.message : "a wrong value", out[0]);
  st = block_reduce("0x0000ffffu", "__syncthreads();", out, &right);
  CHECK(st == EIN_ERR_BACKEND && strstr(err.message, "own lane"),
        "mask 0x0000ffff: %d %s", st, err.message);
  printf("mask 0x0000ffff: %s\n", err.message);
}

/* ------------------------------------------------------ broken blocks */

static void expect_backend_error(const char *what, const char *src,
                                 unsigned bx, const char *needle) {
  float *d = dev_alloc(1024 * sizeof(float));
  ein_status st = run1(src, 1, bx, 1, d, d, NULL);
  CHECK(st == EIN_ERR_BACKEND && strstr(err.message, needle) &&
            strstr(err.message, "kernel 0 (ein_main), block (0,0,0)"),
        "%s: %d %s", what, st, err.message);
  printf("%s: %s\n", what, err.message);
  ein_emu_free(d);
}

static void test_broken_blocks(void) {
  expect_backend_error("barrier under if",
                       KERNEL("float", "float")
                       "  if (threadIdx.x < 16) __syncthreads();\n"
                       "  d[threadIdx.x] = 1.0f;\n}\n",
                       64, "threads 0-15 wait at __syncthreads() on line 4");
  expect_backend_error("two barriers",
                       KERNEL("float", "float")
                       "  if (threadIdx.x < 16) __syncthreads();\n"
                       "  else __syncthreads();\n"
                       "  d[threadIdx.x] = 1.0f;\n}\n",
                       64, "different barriers");
  expect_backend_error("barrier against shuffle",
                       KERNEL("float", "float")
                       "  float v = threadIdx.x;\n"
                       "  if (threadIdx.x >= 16) __syncthreads();\n"
                       "  v += __shfl_down_sync(0xffffffffu, v, 1);\n"
                       "  d[threadIdx.x] = v;\n}\n",
                       32, "deadlock");
  expect_backend_error("shuffle partner exits",
                       KERNEL("float", "float")
                       "  if (threadIdx.x == 5) return;\n"
                       "  d[threadIdx.x] = __shfl_xor_sync(0xffffffffu, "
                       "1.0f, 1);\n}\n",
                       32, "exited");
  expect_backend_error("mask names a missing lane",
                       KERNEL("float", "float")
                       "  d[threadIdx.x] = __shfl_sync(0xffffffffu, 1.0f, "
                       "0);\n}\n",
                       48, "lanes 16-31 of warp 1");
}

/* ------------------------------------------------------------ shuffles */

static void test_shuffle_kinds(void) {
  static const char src[] =
      KERNEL("int", "int")
      "  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
      "  int v = lane + 1;\n"
      "  int b = __shfl_sync(0xffffffffu, v * 10, 3);\n"
      "  int x = v;\n"
      "  for (int m = 1; m < 32; m <<= 1) x += __shfl_xor_sync(0xffffffffu, "
      "x, m);\n"
      "  int s = v;\n"
      "  for (int o = 1; o < 32; o <<= 1) {\n"
      "    int t = __shfl_up_sync(0xffffffffu, s, o);\n"
      "    if (lane >= o) s += t;\n"
      "  }\n"
      "  double dv = __shfl_down_sync(0xffffffffu, (double)v * 0.5, 2, 8);\n"
      "  unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;\n"
      "  int h = v;\n"
      "  for (int m = 1; m < 16; m <<= 1) h += __shfl_xor_sync(half, h, m);\n"
      "  int *o = d + (w * 32 + lane) * 5;\n"
      "  o[0] = b; o[1] = x; o[2] = s; o[3] = (int)(dv * 2); o[4] = h;\n"
      "}\n";
  enum { N = 64 };
  int *d = dev_alloc(N * 5 * sizeof(int)), out[N * 5];
  ein_status st = run1(src, 1, N, 1, d, NULL, NULL);
  CHECK(st == EIN_OK, "shuffles: %s", err.message);
  to_host(out, d, sizeof out);
  int bad = 0;
  for (int t = 0; t < N; t++) {
    int lane = t % 32, v = lane + 1, *o = out + t * 5;
    int dsrc = lane % 8 + 2 < 8 ? lane + 2 : lane; /* width 8 */
    int hsum = lane < 16 ? 136 : 392;              /* 1..16, 17..32 */
    bad += o[0] != 40 || o[1] != 528 || o[2] != v * (v + 1) / 2 ||
           o[3] != dsrc + 1 || o[4] != hsum;
  }
  CHECK(bad == 0, "shuffle results wrong for %d threads", bad);

  /* lanes 8-15 read lanes 16-23, outside the mask: poison */
  static const char outside[] =
      KERNEL("int", "int")
      "  if (threadIdx.x >= 16) return;\n"
      "  d[threadIdx.x] = __shfl_down_sync(0x0000ffffu, (int)threadIdx.x, 8);\n"
      "}\n";
  st = run1(outside, 1, 32, 1, d, NULL, NULL);
  to_host(out, d, 16 * sizeof(int));
  bad = 0;
  for (int l = 0; l < 16; l++)
    bad += l < 8 ? out[l] != l + 8 : out[l] == l + 8 || out[l] == l;
  CHECK(st == EIN_OK && bad == 0, "outside the mask: %s, %d wrong (lane 8: %d)",
        err.message, bad, out[8]);
  ein_emu_free(d);
}

/* ---------------------------------------- shared memory and atomics */

static void test_shared_and_atomics(void) {
  /* every block starts with poisoned shared memory, whatever the last
   * block on its worker left there */
  static const char src[] =
      KERNEL("unsigned", "unsigned")
      "  __shared__ unsigned s[2];\n"
      "  unsigned old = s[threadIdx.x & 1];\n"
      "  __syncthreads();\n"
      "  s[threadIdx.x & 1] = blockIdx.x;\n"
      "  if (threadIdx.x == 0) d[blockIdx.x] = old;\n"
      "}\n";
  enum { B = 100 };
  unsigned *d = dev_alloc(B * sizeof(unsigned)), out[B];
  ein_status st = run1(src, B, 64, 1, d, NULL, NULL);
  to_host(out, d, sizeof out);
  int bad = 0;
  for (int i = 0; i < B; i++)
    bad += out[i] != 0xffffffffu;
  CHECK(st == EIN_OK && bad == 0, "shared poison: %s; %d blocks saw 0x%x",
        err.message, bad, out[bad ? 1 : 0]);

  static const char atom[] =
      KERNEL("int", "int")
      "  atomicAdd(d, 1);\n"
      "  atomicMax(d + 1, (int)(blockIdx.x * 1000 + threadIdx.x));\n"
      "  atomicAdd((float *)(d + 2), 0.5f);\n"
      "  if (atomicCAS(d + 3, 0, 7) == 0) atomicAdd(d + 4, 1);\n"
      "}\n";
  int zero[5] = {0}, got[5];
  to_dev(d, zero, sizeof zero);
  st = run1(atom, 64, 256, 1, d, NULL, NULL);
  to_host(got, d, sizeof got);
  float half_sum;
  memcpy(&half_sum, &got[2], sizeof half_sum);
  CHECK(st == EIN_OK && got[0] == 64 * 256 && got[1] == 63 * 1000 + 255 &&
            half_sum == 8192.0f && got[3] == 7 && got[4] == 1,
        "atomics: %s; %d %d %g %d %d", err.message, got[0], got[1],
        half_sum, got[3], got[4]);
  ein_emu_free(d);
}

/* --------------------------------------------------- arguments, copies */

static void test_pointers_and_copies(void) {
  static const char src[] = KERNEL("float", "float")
                            "  d[threadIdx.x] = s0[threadIdx.x];\n}\n";
  float host[64] = {0};
  float *d = dev_alloc(sizeof host);
  ein_status st = run1(src, 1, 64, 1, d, host, NULL);
  CHECK(st == EIN_ERR_DEVICE && strstr(err.message, "a host pointer"),
        "host s0: %d %s", st, err.message);
  st = run1(src, 1, 64, 1, host, d, NULL);
  CHECK(st == EIN_ERR_DEVICE, "host d: %d %s", st, err.message);

  CHECK(ein_emu_is_device(d, sizeof host) && ein_emu_is_device(d + 64, 0) &&
            !ein_emu_is_device(d + 1, sizeof host) &&
            !ein_emu_is_device(host, 0),
        "ein_emu_is_device");
  float back[64];
  st = ein_emu_copy(host, back, sizeof host, EIN_EMU_H2D, &err);
  CHECK(st == EIN_ERR_DEVICE && strstr(err.message, "destination"),
        "H2D to host: %d %s", st, err.message);
  st = ein_emu_copy(d, d, sizeof host, EIN_EMU_H2D, &err);
  CHECK(st == EIN_ERR_DEVICE && strstr(err.message, "source"),
        "H2D from device: %d %s", st, err.message);
  st = ein_emu_copy(d, d, sizeof host, EIN_EMU_D2H, &err);
  CHECK(st == EIN_ERR_DEVICE, "D2H to device: %d %s", st, err.message);
  st = ein_emu_copy(d, host, sizeof host, EIN_EMU_D2D, &err);
  CHECK(st == EIN_ERR_DEVICE, "D2D from host: %d %s", st, err.message);
  st = ein_emu_copy(d + 8, host, sizeof host, EIN_EMU_H2D, &err);
  CHECK(st == EIN_ERR_DEVICE && strstr(err.message, "run past"),
        "H2D past the end: %d %s", st, err.message);

  void *zero = dev_alloc(0);
  CHECK(zero && ein_emu_is_device(zero, 0) && !ein_emu_is_device(zero, 1),
        "zero-byte allocation");
  ein_emu_free(zero);
  CHECK(!ein_emu_is_device(zero, 0), "freed allocation still device");
  ein_emu_free(d);
  CHECK(!ein_emu_is_device(d, 4), "freed allocation still device");
}

/* Several emulated devices share host memory: each allocation keeps the
 * device it was made on, and a kernel of one device handed another's
 * memory fails as on a GPU (peer copies are allowed). */
static void test_device_owners(void) {
  static const char src[] = KERNEL("float", "float")
                            "  d[threadIdx.x] = s0[threadIdx.x];\n}\n";
  float host[32];
  for (int i = 0; i < 32; i++) host[i] = (float)i;
  ein_emu_set_device(0);
  float *on0 = dev_alloc(sizeof host);
  ein_emu_set_device(1);
  float *on1 = dev_alloc(sizeof host), *out1 = dev_alloc(sizeof host);
  int owner = 7;
  CHECK(ein_emu_locate(on1, sizeof host, &owner) == EIN_EMU_OWN && owner == 1 &&
            ein_emu_locate(on0, 4, &owner) == EIN_EMU_OTHER && owner == 0 &&
            ein_emu_locate(host, 0, &owner) == EIN_EMU_HOST && owner == -1,
        "ein_emu_locate on device 1: owner %d", owner);
  to_dev(on0, host, sizeof host); /* copies may cross devices */
  ein_status st = run1(src, 1, 32, 1, out1, on0, NULL);
  CHECK(st == EIN_ERR_DEVICE && strstr(err.message, "memory of device 0"),
        "device 1's kernel reading device 0's memory: %d %s", st, err.message);
  st = run1(src, 1, 32, 1, on0, on1, NULL);
  CHECK(st == EIN_ERR_DEVICE && strstr(err.message, "argument d"),
        "device 1's kernel writing device 0's memory: %d %s", st, err.message);
  st = ein_emu_copy(on1, on0, sizeof host, EIN_EMU_D2D, &err);
  CHECK(st == EIN_OK, "peer copy: %s", err.message);
  st = run1(src, 1, 32, 1, out1, on1, NULL);
  float back[32] = {0};
  to_host(back, out1, sizeof back);
  CHECK(st == EIN_OK && memcmp(back, host, sizeof host) == 0,
        "device 1's kernel on its own memory: %d %s", st, err.message);
  ein_emu_set_device(0);
  ein_emu_free(on0);
  ein_emu_free(on1);
  ein_emu_free(out1);
}

static void test_launch_limits(void) {
  static const char src[] = KERNEL("float", "float") "}\n";
  ein_emu_module *m;
  const char *s = src;
  ein_status st = ein_emu_module_load(&s, 1, &m, &err);
  CHECK(st == EIN_OK, "load: %s", err.message);
  if (st)
    return;
  static const unsigned bad[][6] = {{1, 1, 1, 2048, 1, 1}, {1, 1, 1, 0, 1, 1},
                                    {1, 1, 1, 16, 16, 8},  {1, 1, 1, 1, 1, 65},
                                    {1, 70000, 1, 32, 1, 1}, {1, 1, 1, 512, 1, 1}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ein_emu_device_begin();
    st = ein_emu_launch(m, 0, false, bad[i], bad[i] + 3, NULL, NULL, NULL,
                        &err);
    ein_emu_device_end();
    CHECK(st == EIN_ERR_BACKEND, "geometry %zu accepted", i);
  }
  CHECK(strstr(err.message, "__launch_bounds__(256)"), "bounds: %s",
        err.message);
  unsigned one[3] = {1, 1, 1};
  st = ein_emu_launch(m, 0, false, one, one, NULL, NULL, NULL, &err);
  CHECK(st == EIN_ERR_INTERNAL, "launch outside the bracket: %d", st);
  ein_emu_device_begin();
  st = ein_emu_launch(m, 1, false, one, one, NULL, NULL, NULL, &err);
  CHECK(st == EIN_ERR_INVALID_ARGUMENT, "kernel 1 of 1: %d", st);
  st = ein_emu_launch(m, 0, true, one, one, NULL, NULL, NULL, &err);
  CHECK(st == EIN_ERR_INVALID_ARGUMENT, "no ein_vec: %d", st);
  ein_emu_device_end();
  ein_emu_module_free(m);
}

/* --------------------------------------------- compiling and caching */

static int cached_objects(char *last, size_t cap) {
  char dir[400];
  snprintf(dir, sizeof dir, "%s/emu", cache_dir);
  DIR *dp = opendir(dir);
  int n = 0;
  for (struct dirent *e; dp && (e = readdir(dp));) {
    size_t len = strlen(e->d_name);
    if (len > 3 && strcmp(e->d_name + len - 3, ".so") == 0 &&
        !strstr(e->d_name, "tmp")) {
      n++;
      snprintf(last, cap, "%s/%s", dir, e->d_name);
    }
  }
  if (dp)
    closedir(dp);
  return n;
}

static void test_compile_and_cache(void) {
  const char *bad = KERNEL("float", "float") "  nonsense;\n}\n";
  ein_emu_module *m = NULL;
  ein_status st = ein_emu_module_load(&bad, 1, &m, &err);
  CHECK(st == EIN_ERR_BACKEND && !m && strstr(err.message, "nonsense") &&
            strstr(err.message, "kernel_0:4") && strstr(err.message, "-O1"),
        "compile error: %d %s", st, err.message);

  /* three kernels with clashing helpers in one module, one with ein_vec */
  const char *srcs[3] = {
      "static __device__ __forceinline__ float ein_comb(float a, float b) "
      "{ return a + b; }\n" KERNEL("float", "float")
      "  d[threadIdx.x] = ein_comb(s0[threadIdx.x], 1.0f);\n}\n",
      "static __device__ __forceinline__ float ein_comb(float a, float b) "
      "{ return a * b; }\n" KERNEL("float", "float")
      "  d[threadIdx.x] = ein_comb(s0[threadIdx.x], 3.0f);\n}\n",
      KERNEL("float", "float") "}\n"
      "extern \"C\" __global__ void __launch_bounds__(256) ein_vec(\n"
      "    uint4 *__restrict__ d, const uint4 *__restrict__ s0,\n"
      "    const void *__restrict__ s1) {\n"
      "  d[threadIdx.x] = s0[threadIdx.x];\n}\n"};
  unsigned long before = ein_emu_compile_count();
  char path[700];
  int objects = cached_objects(path, sizeof path);
  st = ein_emu_module_load(srcs, 3, &m, &err);
  CHECK(st == EIN_OK && ein_emu_compile_count() == before + 1 &&
            cached_objects(path, sizeof path) == objects + 1,
        "three kernels, one compile: %s", err.message);
  if (st)
    return;
  float in[64], out[64];
  for (int i = 0; i < 64; i++)
    in[i] = (float)i;
  float *a = dev_alloc(sizeof in), *b = dev_alloc(sizeof in);
  to_dev(a, in, sizeof in);
  st = launch(m, 0, 1, 64, 1, b, a, NULL);
  to_host(out, b, sizeof out);
  CHECK(st == EIN_OK && out[5] == 6.0f, "kernel 0: %s %g", err.message,
        out[5]);
  st = launch(m, 1, 1, 64, 1, b, a, NULL);
  to_host(out, b, sizeof out);
  CHECK(st == EIN_OK && out[5] == 15.0f, "kernel 1: %s %g", err.message,
        out[5]);
  unsigned one[3] = {1, 1, 1}, blk[3] = {16, 1, 1};
  ein_emu_device_begin();
  memset(b, 0, sizeof in);
  st = ein_emu_launch(m, 2, true, one, blk, b, a, NULL, &err);
  ein_status mis = ein_emu_launch(m, 2, true, one, blk, b + 1, a, NULL, &err);
  CHECK(st == EIN_OK && memcmp(a, b, sizeof in) == 0, "ein_vec: %s",
        err.message);
  CHECK(mis == EIN_ERR_BACKEND && strstr(err.message, "misaligned"),
        "ein_vec unaligned: %s", err.message);
  ein_emu_device_end();
  ein_emu_module_free(m);

  /* a second load finds the object on disk; a damaged one is rebuilt */
  st = ein_emu_module_load(srcs, 3, &m, &err);
  CHECK(st == EIN_OK && ein_emu_compile_count() == before + 1,
        "second load compiled again: %lu", ein_emu_compile_count() - before);
  ein_emu_module_free(m);
  FILE *f = fopen(path, "wb");
  if (f) {
    fputs("not an ELF object", f);
    fclose(f);
  }
  st = ein_emu_module_load(srcs, 3, &m, &err);
  CHECK(st == EIN_OK && ein_emu_compile_count() == before + 2,
        "damaged object: %s (%lu compiles)", err.message,
        ein_emu_compile_count() - before);
  if (!st) {
    st = launch(m, 1, 1, 64, 1, b, a, NULL);
    to_host(out, b, sizeof out);
    CHECK(st == EIN_OK && out[2] == 6.0f, "rebuilt kernel: %s", err.message);
    ein_emu_module_free(m);
  }
  ein_emu_free(a);
  ein_emu_free(b);
}

/* ------------------------------------------------ f16 and bf16 prelude */

static void test_half_conversions(void) {
  static const char srcs[4][512] = {
      KERNEL("unsigned", "unsigned short")
      "  int i = blockIdx.x * 256 + threadIdx.x;\n"
      "  d[i] = __float_as_uint(ein_h2f(s0[i]));\n}\n",
      KERNEL("unsigned short", "float")
      "  int i = blockIdx.x * 256 + threadIdx.x;\n"
      "  d[i] = ein_f2h(s0[i]);\n}\n",
      KERNEL("unsigned", "unsigned short")
      "  int i = blockIdx.x * 256 + threadIdx.x;\n"
      "  d[i] = __float_as_uint(ein_b2f(s0[i]));\n}\n",
      KERNEL("unsigned short", "float")
      "  int i = blockIdx.x * 256 + threadIdx.x;\n"
      "  d[i] = ein_f2b(s0[i]);\n}\n"};
  const char *p[4] = {srcs[0], srcs[1], srcs[2], srcs[3]};
  ein_emu_module *m;
  ein_status st = ein_emu_module_load(p, 4, &m, &err);
  CHECK(st == EIN_OK, "conversion kernels: %s", err.message);
  if (st)
    return;
  enum { H = 65536, F = 4 * 65536 };
  uint16_t *halves = malloc(H * sizeof *halves), *h_out = malloc(F * 2);
  uint32_t *f_out = malloc(H * 4);
  float *floats = malloc(F * sizeof *floats);
  for (int i = 0; i < H; i++)
    halves[i] = (uint16_t)i;
  /* every f16's neighbourhood: itself, the midpoints to the next (ties),
   * a hair either side of them; then random bit patterns */
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < H; i++) {
    float a = ein_f16_to_f32((uint16_t)i);
    float b = ein_f16_to_f32((uint16_t)(i + 1));
    float mid = a + (b - a) / 2;
    floats[4 * i] = a;
    floats[4 * i + 1] = mid;
    floats[4 * i + 2] = nextafterf(mid, INFINITY);
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    floats[4 * i + 3] = ein_bits_to_f32((uint32_t)(rng >> 32));
  }
  void *dh = dev_alloc(H * 2), *df = dev_alloc(F * 4), *dout = dev_alloc(F * 4);
  to_dev(dh, halves, H * 2);
  to_dev(df, floats, F * 4);
  int bad[4] = {0};
  for (int k = 0; k < 4; k++) {
    bool from_half = k % 2 == 0;
    st = launch(m, k, (from_half ? H : F) / 256, 256, 1, dout,
                from_half ? dh : df, NULL);
    CHECK(st == EIN_OK, "conversion %d: %s", k, err.message);
    if (from_half)
      to_host(f_out, dout, H * 4);
    else
      to_host(h_out, dout, F * 2);
    for (int i = 0; from_half && i < H; i++)
      bad[k] += f_out[i] != (k == 0
                                 ? ein_f32_to_bits(ein_f16_to_f32(halves[i]))
                                 : ein_f32_to_bits(ein_bf16_to_f32(halves[i])));
    for (int i = 0; !from_half && i < F; i++)
      bad[k] += h_out[i] != (k == 1 ? ein_f32_to_f16(floats[i])
                                    : ein_f32_to_bf16(floats[i]));
  }
  CHECK(!bad[0] && !bad[1] && !bad[2] && !bad[3],
        "conversions differ from half.h: h2f %d, f2h %d, b2f %d, f2b %d",
        bad[0], bad[1], bad[2], bad[3]);
  ein_emu_module_free(m);
  ein_emu_free(dh);
  ein_emu_free(df);
  ein_emu_free(dout);
  free(halves);
  free(h_out);
  free(f_out);
  free(floats);
}

/* ------------------------------------------- the code generator's kernels */

typedef struct real_case {
  const char *expr, *shapes, *opts;
  ein_dtype dt;
  ein_kernel_kind kind; /* one step of this kind is expected */
  /* 1: the vector variant must run; -1: must not (misaligned, or strides
   * that allow none); 0: either */
  int vec;
  /* elements by which every input's device copy is moved off the
   * allocation's 256-byte alignment (the scalar fallback must serve) */
  int shift;
  /* the vector variant's access width the plan must choose (0: any) */
  unsigned vec_bytes;
} real_case;

static void fill_input(void *data, ein_dtype dt, int64_t n, int seed) {
  for (int64_t i = 0; i < n; i++) {
    int v = (int)((i * 7 + seed * 13) % 9) - 4; /* exact in every dtype */
    switch (dt) {
    case EIN_DT_F32: ((float *)data)[i] = (float)v; break;
    case EIN_DT_F64: ((double *)data)[i] = v; break;
    case EIN_DT_F16: ((uint16_t *)data)[i] = ein_f32_to_f16((float)v); break;
    case EIN_DT_BF16: ((uint16_t *)data)[i] = ein_f32_to_bf16((float)v); break;
    case EIN_DT_I32: ((int32_t *)data)[i] = v; break;
    default: ((int8_t *)data)[i] = (int8_t)v; break;
    }
  }
}

enum { KIND_VEC = EIN_KERNEL_KINDS }; /* kinds[]: vector variants ran */

/* One kernel of a step, its vector variant when the pointers allow. */
static ein_status launch_one(ein_emu_module *m, int index,
                             const ein_kernel_src *k, char *dst, const char *s0,
                             const char *s1, int *kinds) {
  bool vec = k->has_vec && (uintptr_t)dst % 16 == 0 &&
             (uintptr_t)s0 % 16 == 0 && (uintptr_t)s1 % 16 == 0;
  kinds[KIND_VEC] += vec;
  ein_status st = ein_emu_launch(m, index, vec, vec ? k->grid_vec : k->grid,
                                 k->block, dst, s0, s1, &err);
  CHECK(st == EIN_OK, "%s: %s", ein_kernel_kind_name(k->kind), err.message);
  return st;
}

/* The plan's kernels (a split reduction's two passes as two), all in one
 * module; index[2i], index[2i+1]: step i's. */
static int list_kernels(const ein_cuda_program *prog, const char **srcs,
                        int *index, int *kinds) {
  int n = 0;
  for (int i = 0; i < prog->nsteps; i++) {
    const ein_cuda_step *cs = &prog->steps[i];
    const ein_kernel_src *k[2] = {&cs->kernel, &cs->finish};
    CHECK(!cs->cublas, "a cuBLAS step in a kernel-only case");
    for (int j = 0; j < 2; j++) {
      index[2 * i + j] = k[j]->source ? n : -1;
      if (k[j]->source)
        srcs[n++] = k[j]->source;
      kinds[k[j]->kind]++;
    }
  }
  return n;
}

/* The plan's kernels launched step by step on emulated memory as the
 * CUDA backend would; *secs: the launches' time. */
static bool run_on_emu(const ein_plan *plan, char *const *inputs_h,
                       const int64_t *in_bytes, int nin, int64_t shift,
                       void *out_h, int64_t out_bytes, int *kinds,
                       double *secs) {
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  const char *srcs[128];
  int index[128];
  int n = list_kernels(prog, srcs, index, kinds);
  ein_emu_module *m;
  if (ein_emu_module_load(srcs, n, &m, &err) != EIN_OK) {
    CHECK(0, "load the plan's kernels: %s", err.message);
    return false;
  }
  char *inputs[TEST_MAX_OPERANDS], *allocs[TEST_MAX_OPERANDS];
  char *output = dev_alloc((size_t)out_bytes);
  char *ws = dev_alloc((size_t)ir->workspace_bytes);
  char *scratch = dev_alloc((size_t)prog->scratch_bytes);
  for (int i = 0; i < nin; i++) {
    allocs[i] = dev_alloc((size_t)(in_bytes[i] + shift));
    inputs[i] = allocs[i] + shift;
    to_dev(inputs[i], inputs_h[i], (size_t)in_bytes[i]);
  }
  ein_status st = EIN_OK;
  double t0 = now();
  ein_emu_device_begin();
  for (int i = 0; i < ir->nsteps && !st; i++) {
    const ein_step *s = &ir->steps[i];
    const ein_cuda_step *cs = &prog->steps[i];
    if (index[2 * i] < 0)
      continue;
    char *dst = ein_buffer_base(ir, s->dst.buffer, inputs, output, ws) +
                s->dst.offset * (int64_t)ein_dtype_size(s->dst_dtype);
    const char *src[2] = {NULL, NULL};
    for (int j = 0; j < s->nsrc; j++)
      src[j] = ein_buffer_base(ir, s->src[j].buffer, inputs, output, ws) +
               s->src[j].offset * (int64_t)ein_dtype_size(s->src_dtype[j]);
    bool split = index[2 * i + 1] >= 0;
    st = launch_one(m, index[2 * i], &cs->kernel, split ? scratch : dst, src[0],
                    src[1], kinds);
    if (!st && split)
      st = launch_one(m, index[2 * i + 1], &cs->finish, dst, scratch, NULL,
                      kinds);
  }
  ein_emu_device_end();
  *secs = now() - t0;
  to_host(out_h, output, (size_t)out_bytes);
  for (int i = 0; i < nin; i++)
    ein_emu_free(allocs[i]);
  ein_emu_free(output);
  ein_emu_free(ws);
  ein_emu_free(scratch);
  ein_emu_module_free(m);
  return st == EIN_OK;
}

/* The access width the plan chose for the case's kernel kind. */
static void check_vec_bytes(const ein_plan *plan, const real_case *c) {
  if (!c->vec_bytes)
    return;
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  unsigned got = 0;
  for (int i = 0; i < prog->nsteps; i++)
    if (prog->steps[i].kernel.kind == c->kind)
      got = prog->steps[i].kernel.vec_bytes;
  CHECK(got == c->vec_bytes, "'%s' %s %s: %u-byte vector accesses, want %u",
        c->expr, c->shapes, ein_dtype_name(c->dt), got, c->vec_bytes);
}

static void check_real(ein_ctx *ctx, const real_case *c) {
  case_input in;
  parse_case_shapes(c->shapes, &in);
  parse_case_opts(c->opts, &in);
  DLTensor t[TEST_MAX_OPERANDS], out_t;
  const DLTensor *p[TEST_MAX_OPERANDS];
  char *data[TEST_MAX_OPERANDS];
  int64_t bytes[TEST_MAX_OPERANDS];
  size_t esz = ein_dtype_size(c->dt);
  for (int i = 0; i < in.n; i++) {
    int64_t n = 1;
    for (int d = 0; d < in.ndims[i]; d++)
      n *= in.dims[i][d];
    bytes[i] = n * (int64_t)esz;
    data[i] = malloc((size_t)bytes[i] + 1);
    fill_input(data[i], c->dt, n, i);
    t[i] = (DLTensor){.data = data[i], .device = {kDLCUDA, 0},
                      .ndim = in.ndims[i], .dtype = ein_dtype_to_dl(c->dt),
                      .shape = in.dims[i]};
    p[i] = &t[i];
  }
  in.options.backend = EIN_BACKEND_CUDA;
  ein_plan *plan;
  ein_status st = ein_plan_create(ctx, c->expr, p, in.n, NULL, &in.options,
                                  &plan);
  CHECK(st == EIN_OK, "plan %s: %s", c->expr, ein_last_error(ctx)->message);
  if (st)
    return;
  int64_t on = 1;
  for (int d = 0; d < ein_plan_output_ndim(plan); d++)
    on *= ein_plan_output_shape(plan)[d];
  char *got = calloc(1, (size_t)on * esz + 1), *want = calloc(1, (size_t)on * esz + 1);
  int kinds[EIN_KERNEL_KINDS + 1] = {0};
  double secs = 0;
  bool ran = run_on_emu(plan, data, bytes, in.n, c->shift * (int64_t)esz, got,
                        on * (int64_t)esz, kinds, &secs);
  /* the CPU backend on the same data is the reference */
  for (int i = 0; i < in.n; i++)
    t[i].device = (DLDevice){kDLCPU, 0};
  out_t = (DLTensor){.data = want, .device = {kDLCPU, 0},
                     .ndim = ein_plan_output_ndim(plan),
                     .dtype = ein_dtype_to_dl(c->dt),
                     .shape = (int64_t *)ein_plan_output_shape(plan)};
  in.options.backend = EIN_BACKEND_CPU;
  st = ein_eval(ctx, c->expr, p, in.n, &out_t, &in.options);
  CHECK(st == EIN_OK, "cpu %s: %s", c->expr, ein_last_error(ctx)->message);
  CHECK(ran && memcmp(got, want, (size_t)on * esz) == 0,
        "'%s' %s %s: emulated kernels differ from the CPU backend", c->expr,
        c->shapes, ein_dtype_name(c->dt));
  CHECK(kinds[c->kind] > 0, "'%s' %s: no %s kernel", c->expr, c->shapes,
        ein_kernel_kind_name(c->kind));
  CHECK(c->vec == 0 || (kinds[KIND_VEC] > 0) == (c->vec > 0),
        "'%s' %s %s shift %d: the vector variant %s", c->expr, c->shapes,
        ein_dtype_name(c->dt), c->shift,
        c->vec > 0 ? "did not run" : "ran where it must not");
  check_vec_bytes(plan, c);
  printf("  %-28s %-16s %-4s %-12s %7.2f ms%s\n", c->expr, c->shapes,
         ein_dtype_name(c->dt), ein_kernel_kind_name(c->kind), secs * 1e3,
         kinds[KIND_VEC] ? " (vector variant)" : "");
  ein_plan_destroy(plan);
  for (int i = 0; i < in.n; i++)
    free(data[i]);
  free(got);
  free(want);
}

static void test_real_kernels(void) {
  static const real_case cases[] = {
      {"a b, b -> a b", "100x1000 1000", NULL, EIN_DT_F32, EIN_KERNEL_MAP, 0, 0, 0},
      {"a b -> a", "10x10000", NULL, EIN_DT_F32, EIN_KERNEL_REDUCE_SPLIT, 0, 0, 0},
      {"a b -> a", "10x10000", NULL, EIN_DT_F32, EIN_KERNEL_REDUCE_FINISH, 0, 0, 0},
      {"a b -> b", "1000x16", "reduce=max", EIN_DT_BF16,
       EIN_KERNEL_REDUCE_SPLIT, 0, 0, 0},
      {"b c (h h2) (w w2) -> b c h w", "2x3x8x8", "reduce=mean,h2=2,w2=2",
       EIN_DT_F16, EIN_KERNEL_REDUCE_THREAD, 0, 0, 0},
      {"a b -> a", "100x1000", NULL, EIN_DT_F32, EIN_KERNEL_REDUCE_INNER, 0, 0, 0},
      {"a b -> b", "200x100", NULL, EIN_DT_F32, EIN_KERNEL_REDUCE_OUTER, 0, 0, 0},
      {"a b -> b a", "70x45", NULL, EIN_DT_F32, EIN_KERNEL_TRANSPOSE, 0, 0, 0},
      {"a b -> b a", "64x48", NULL, EIN_DT_F16, EIN_KERNEL_TRANSPOSE, 0, 0, 0},
      {"b h s d -> b (h r) s d", "2x3x5x32", "r=4", EIN_DT_F32,
       EIN_KERNEL_MAP, 0, 0, 0},
      {"b s d -> b s", "4x6x40", "reduce=max", EIN_DT_BF16,
       EIN_KERNEL_REDUCE_INNER, 0, 0, 0},
      {"b s d -> d", "4x6x40", "reduce=min", EIN_DT_F16,
       EIN_KERNEL_REDUCE_OUTER, 0, 0, 0},
      {"b s d -> b s", "4x6x40", "reduce=prod", EIN_DT_I32,
       EIN_KERNEL_REDUCE_INNER, 0, 0, 0},
      {"i k, k j -> i j", "7x5 5x3", NULL, EIN_DT_F16,
       EIN_KERNEL_REDUCE_THREAD, 0, 0, 0},
      {"i k, k j -> i j", "7x9 9x3", NULL, EIN_DT_F16, EIN_KERNEL_REDUCE_OUTER, 0, 0, 0},
      {"b i, b j -> b i j", "3x5 3x16", NULL, EIN_DT_BF16, EIN_KERNEL_MAP, 0, 0, 0},
      {"b c h w -> b h w c", "2x32x8x8", NULL, EIN_DT_BF16,
       EIN_KERNEL_TRANSPOSE, 0, 0, 0},
      {"b i, b j -> b i j", "3x5 3x9", NULL, EIN_DT_F64, EIN_KERNEL_MAP, 0, 0, 0},
      {"a b -> a", "4x0", "reduce=mean", EIN_DT_F32, EIN_KERNEL_FILL, 0, 0, 0},
      /* reduce_thread's vector variant (issue 16 item 2): 2x2 pooling and
       * (g r) groups in each dtype; widths from the strides; odd sizes
       * (a narrower vector, or none); inputs off alignment (the scalar
       * kernel serves) */
      {"b c (h h2) (w w2) -> b c h w", "2x3x8x16", "reduce=mean,h2=2,w2=2",
       EIN_DT_BF16, EIN_KERNEL_REDUCE_THREAD, 1, 0, 16},
      {"b c (h h2) (w w2) -> b c h w", "2x3x8x16", "reduce=mean,h2=2,w2=2",
       EIN_DT_F16, EIN_KERNEL_REDUCE_THREAD, 1, 0, 16},
      {"b c (h h2) (w w2) -> b c h w", "2x3x8x16", "reduce=mean,h2=2,w2=2",
       EIN_DT_F32, EIN_KERNEL_REDUCE_THREAD, 1, 0, 16},
      {"b c (h h2) (w w2) -> b c h w", "2x3x6x12", "reduce=max,h2=2,w2=2",
       EIN_DT_BF16, EIN_KERNEL_REDUCE_THREAD, 1, 0, 8},
      {"b c (h h2) (w w2) -> b c h w", "3x1x6x10", "reduce=sum,h2=2,w2=2",
       EIN_DT_BF16, EIN_KERNEL_REDUCE_THREAD, 1, 0, 4},
      {"b c (h h2) (w w2) -> b c h w", "3x1x6x10", "reduce=sum,h2=2,w2=2",
       EIN_DT_F32, EIN_KERNEL_REDUCE_THREAD, 1, 0, 8},
      {"b c (h h2) (w w2) -> b c h w", "2x3x8x16", "reduce=mean,h2=2,w2=2",
       EIN_DT_BF16, EIN_KERNEL_REDUCE_THREAD, -1, 3, 16},
      {"b c (h h2) (w w2) -> b c h w", "2x3x8x16", "reduce=mean,h2=2,w2=2",
       EIN_DT_F32, EIN_KERNEL_REDUCE_THREAD, -1, 1, 16},
      {"b (g r) -> b g", "5x32", "reduce=sum,r=4", EIN_DT_BF16,
       EIN_KERNEL_REDUCE_THREAD, 1, 0, 16},
      {"b (g r) -> b g", "5x36", "reduce=sum,r=4", EIN_DT_BF16,
       EIN_KERNEL_REDUCE_THREAD, 1, 0, 8},
      {"b (g r) -> b g", "5x36", "reduce=max,r=4", EIN_DT_F16,
       EIN_KERNEL_REDUCE_THREAD, 1, 0, 8},
      {"b (g r) -> b g", "5x36", "reduce=mean,r=4", EIN_DT_F32,
       EIN_KERNEL_REDUCE_THREAD, 1, 0, 16},
      {"b (g r) -> b g", "5x38", "reduce=sum,r=2", EIN_DT_F32,
       EIN_KERNEL_REDUCE_THREAD, 1, 0, 8},
      {"b (g 3) -> b g", "5x36", "reduce=sum", EIN_DT_BF16,
       EIN_KERNEL_REDUCE_THREAD, -1, 0, 0},
      {"(r a) b -> a b", "12x40", "reduce=sum,r=4", EIN_DT_BF16,
       EIN_KERNEL_REDUCE_THREAD, 1, 0, 16},
      /* the staged copy (issue 16 item 3): patchify's dst runs
       * (p1 p2 c) gathered from rows of p2 through shared memory */
      {"b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "2x3x16x32", "p1=4,p2=8",
       EIN_DT_BF16, EIN_KERNEL_MAP, 1, 0, 16},
      {"b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "2x3x16x32", "p1=4,p2=8",
       EIN_DT_F16, EIN_KERNEL_MAP, 1, 0, 16},
      {"b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "2x3x16x32", "p1=4,p2=8",
       EIN_DT_F32, EIN_KERNEL_MAP, 1, 0, 16},
      {"b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "3x3x12x20", "p1=4,p2=4",
       EIN_DT_BF16, EIN_KERNEL_MAP, 1, 0, 8},
      {"b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "1x5x6x6", "p1=2,p2=2",
       EIN_DT_BF16, EIN_KERNEL_MAP, 1, 0, 4},
      {"b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "2x3x9x9", "p1=3,p2=3",
       EIN_DT_BF16, EIN_KERNEL_MAP, -1, 0, 0},
      {"b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "2x3x16x32", "p1=4,p2=8",
       EIN_DT_BF16, EIN_KERNEL_MAP, -1, 1, 16},
      {"a b c -> b a c", "300x3x8", NULL, EIN_DT_F32, EIN_KERNEL_MAP, 0, 0,
       0},
      /* a repeat inside the staged run: a stride-0 axis after the
       * source's contiguous one (once divided by zero) */
      {"b c -> b c r", "4x64", "r=3", EIN_DT_BF16, EIN_KERNEL_MAP, 1, 0, 16},
  };
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  printf("generated kernels on the emulated device (launch time):\n");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_real(ctx, &cases[i]);
  ein_ctx_destroy(ctx);
}

/* ---------------------------------------------------- ASan, in children */

#ifdef TEST_ASAN
/* Runs fn in a child with stderr captured; true when the child died with
 * an ASan report containing `needle`. */
static bool asan_reports(void (*fn)(void *), void *arg, const char *needle) {
  int fds[2];
  if (pipe(fds) != 0)
    return false;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    fn(arg);
    _exit(0);
  }
  close(fds[1]);
  static char out[1 << 16];
  size_t len = 0;
  ssize_t r;
  while ((r = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
    len += (size_t)r;
  out[len] = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  bool died = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  if (!died || !strstr(out, needle))
    fprintf(stderr, "child output:\n%s\n", out);
  return died && strstr(out, needle);
}

static void host_reads_device(void *p) {
  printf("%g\n", *(volatile float *)p);
}

static void oob_kernel(void *m) {
  float *d = dev_alloc(64 * sizeof(float));
  launch(m, 0, 1, 64, 1, d, NULL, NULL);
}

static void test_asan(void) {
  float *d = dev_alloc(16);
  CHECK(asan_reports(host_reads_device, d, "use-after-poison"),
        "a host read of device memory is not reported");
  ein_emu_free(d);
  const char *src = KERNEL("float", "float")
                    "  d[threadIdx.x + 1] = 1.0f; /* planted: one past */\n}\n";
  ein_emu_module *m;
  if (ein_emu_module_load(&src, 1, &m, &err) == EIN_OK) {
    CHECK(asan_reports(oob_kernel, m, "heap-buffer-overflow"),
          "an out-of-bounds kernel write is not reported");
    ein_emu_module_free(m);
  }
}
#endif

/* -------------------------------------------------------------- speed */

/* A map and a 256-thread shuffle-and-barrier reduction over 1e5
 * elements, timed after a warm-up launch. */
static void test_speed(void) {
  const char *srcs[2] = {
      KERNEL("float", "float")
      "  for (int i = blockIdx.x * 256 + threadIdx.x; i < 100000;\n"
      "       i += gridDim.x * 256)\n"
      "    d[i] = s0[i] * 2.0f + 1.0f;\n}\n",
      "#define MASK 0xffffffffu\n#define BARRIER __syncthreads();\n"};
  static char reduce[4096];
  snprintf(reduce, sizeof reduce, "%s%s", srcs[1], REDUCE_BODY);
  srcs[1] = reduce;
  ein_emu_module *m;
  double t0 = now();
  ein_status st = ein_emu_module_load(srcs, 2, &m, &err);
  double compile = now() - t0;
  CHECK(st == EIN_OK, "speed kernels: %s", err.message);
  if (st)
    return;
  float *in = dev_alloc(100352 * 4), *out = dev_alloc(100352 * 4);
  double best[2] = {1e9, 1e9};
  for (int rep = 0; rep < 4; rep++)
    for (int k = 0; k < 2; k++) {
      t0 = now();
      st = launch(m, k, 392, 256, 1, out, in, NULL);
      double t = now() - t0;
      best[k] = t < best[k] ? t : best[k];
      CHECK(st == EIN_OK, "speed kernel %d: %s", k, err.message);
    }
  printf("compile of 2 kernels: %.0f ms; 1e5 elements: map %.2f ms, "
         "block reduction %.2f ms\n",
         compile * 1e3, best[0] * 1e3, best[1] * 1e3);
  CHECK(best[0] < 0.5 && best[1] < 0.5, "too slow: %g %g", best[0], best[1]);
  ein_emu_free(in);
  ein_emu_free(out);
  ein_emu_module_free(m);
}

int main(void) {
  snprintf(cache_dir, sizeof cache_dir, "/tmp/einc-test-emu-XXXXXX");
  if (!mkdtemp(cache_dir))
    return 1;
  setenv("EINC_CACHE_DIR", cache_dir, 1);
  ein_error_init(&err);
  test_compile_and_cache();
  test_block_reduction();
  test_broken_blocks();
  test_shuffle_kinds();
  test_shared_and_atomics();
  test_pointers_and_copies();
  test_device_owners();
  test_launch_limits();
  test_half_conversions();
  test_real_kernels();
  test_speed();
#ifdef TEST_ASAN
  test_asan();
#endif
  ein_error_clear(&err);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", cache_dir);
  return test_summary("emu_device");
}
