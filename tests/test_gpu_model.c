/*
 * test_gpu_model.c - the GPU model's inputs (docs/design.md, "GPU model
 * inputs"): memory behaviour counted on the emulated device
 * (runtime/emu/emu_count.h) and kernel resources read from the compiler
 * (runtime/cuda/kernel_resources.h, src/codegen/occupancy.h).
 *
 * Counters against cases worked by hand: a coalesced f32 copy (4 sectors
 * a request), a transposed read with a 4 KiB stride (32 a request, yet
 * only the compulsory sectors distinct), a 32x32 shared-memory tile read
 * by columns without padding (32 wavefronts a request) and with a pitch
 * of 33 (1), a grid of one block; the request rules on their own. Then
 * the occupancy function on made-up inputs, ptxas' report parsed from a
 * fixed text, and (where NVRTC loads) a generated copy kernel and a
 * kernel that must spill compiled for real. Needs a host C++ compiler;
 * NVRTC's part is skipped without NVRTC.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen.h"
#include "cost.h"
#include "emu_count.h"
#include "emu_device.h"
#include "alloc.h"
#include "ctx_internal.h"
#include "cuda_program.h"
#include "emu_profile.h"
#include "harness.h"
#include "kernel_model.h"
#include "occupancy.h"
#include "plan.h"
#ifdef EIN_TEST_NVRTC
#include "kernel_resources.h"
#include "nvrtc_compile.h"
#endif

static ein_error_rec err;

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  ein_status st = ein_emu_malloc(&p, bytes, &err);
  CHECK(st == EIN_OK, "ein_emu_malloc(%zu): %s", bytes, err.message);
  return p;
}

/* Compiles src in the counting flavour and runs it once on grid x block
 * threads; *c gets the counters. */
static ein_status count1(const char *src, unsigned gx, unsigned bx,
                         unsigned by, void *d, const void *s0,
                         ein_emu_counters *c) {
  ein_emu_module *m;
  ein_error_clear(&err);
  ein_status st = ein_emu_module_load_ex(&src, 1, true, &m, &err);
  CHECK(st == EIN_OK, "load: %s\n%s", err.message, src);
  if (st)
    return st;
  unsigned grid[3] = {gx, 1, 1}, block[3] = {bx, by, 1};
  memset(c, 0, sizeof *c);
  ein_emu_device_begin();
  st = ein_emu_launch_counted(m, 0, false, grid, block, d, s0, NULL, c, &err);
  ein_emu_device_end();
  CHECK(st == EIN_OK, "launch: %s", err.message);
  ein_emu_module_free(m);
  return st;
}

#define KERNEL                                                               \
  "extern \"C\" __global__ void ein_main(float *__restrict__ d,\n"            \
  "    const float *__restrict__ s0, const void *__restrict__ s1) {\n"

/* 4 blocks of 256 threads copy 1024 floats, thread i element i: each of
 * the 32 warps loads 128 consecutive bytes (4 sectors) and stores 128. */
static void coalesced_copy(float *d, const float *s) {
  static const char src[] = KERNEL
      "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  d[i] = s0[i];\n"
      "}\n";
  ein_emu_counters c;
  if (count1(src, 4, 256, 1, d, s, &c))
    return;
  CHECK(c.blocks == 4 && c.warps == 32 && c.threads == 1024,
        "blocks %llu warps %llu threads %llu", (unsigned long long)c.blocks,
        (unsigned long long)c.warps, (unsigned long long)c.threads);
  CHECK(c.ld_requests == 32 && c.ld_sectors == 128 && c.ld_ideal_sectors == 128,
        "copy loads: %llu requests, %llu sectors (%llu ideal): want 32, 128",
        (unsigned long long)c.ld_requests, (unsigned long long)c.ld_sectors,
        (unsigned long long)c.ld_ideal_sectors);
  CHECK(c.st_requests == 32 && c.st_sectors == 128 && c.st_bytes == 4096,
        "copy stores: %llu requests, %llu sectors, %llu bytes",
        (unsigned long long)c.st_requests, (unsigned long long)c.st_sectors,
        (unsigned long long)c.st_bytes);
  CHECK(c.ld_unique_sectors == 128 && c.st_unique_sectors == 128,
        "distinct sectors %llu, %llu", (unsigned long long)c.ld_unique_sectors,
        (unsigned long long)c.st_unique_sectors);
  CHECK(c.sh_ld_requests == 0 && c.sh_st_requests == 0, "no shared memory");
}

/* One block of 1024 threads reads a 32x1024 f32 matrix by columns: thread
 * i reads row i % 32, column i / 32, so the lanes of a warp are 4096
 * bytes apart: 32 sectors a request for 128 useful bytes (ideal 4); the
 * 32 requests touch columns 0-31 of 32 rows, 4 sectors per row: 128
 * distinct sectors. Stores are coalesced. */
static void strided_read(float *d, const float *s) {
  static const char src[] = KERNEL
      "  unsigned i = threadIdx.x;\n"
      "  d[i] = s0[(i % 32) * 1024 + i / 32];\n"
      "}\n";
  ein_emu_counters c;
  if (count1(src, 1, 1024, 1, d, s, &c))
    return;
  CHECK(c.ld_requests == 32 && c.ld_sectors == 32 * 32 &&
            c.ld_ideal_sectors == 32 * 4,
        "transposed read: %llu requests, %llu sectors, %llu ideal: want 32, "
        "1024, 128",
        (unsigned long long)c.ld_requests, (unsigned long long)c.ld_sectors,
        (unsigned long long)c.ld_ideal_sectors);
  CHECK(c.ld_unique_sectors == 128, "distinct sectors %llu, want 128",
        (unsigned long long)c.ld_unique_sectors);
  /* the 128 distinct sectors are what the bytes fill: still ideal 4 */
  CHECK(ein_emu_ideal_sectors(&c, 0) == 128,
        "transposed read's ideal: %llu sectors, want 128",
        (unsigned long long)ein_emu_ideal_sectors(&c, 0));
  CHECK(c.st_requests == 32 && c.st_sectors == 128, "stores %llu, %llu",
        (unsigned long long)c.st_requests, (unsigned long long)c.st_sectors);
}

/* A 32x32 block writes a 32xPITCH f32 tile by rows (lane x, word
 * 32y + x or 33y + x: 32 banks, 1 wavefront) and reads it by columns
 * (lane x reads word PITCH * x + y): with PITCH 32 every lane hits bank y,
 * 32 wavefronts a request; with 33, banks (x + y) % 32, one. */
static void shared_tile(int pitch, float *d, const float *s) {
  char src[1024];
  snprintf(src, sizeof src,
           KERNEL
           "  __shared__ float t[32][%d];\n"
           "  unsigned x = threadIdx.x, y = threadIdx.y;\n"
           "  t[y][x] = s0[y * 32 + x];\n"
           "  __syncthreads();\n"
           "  d[y * 32 + x] = t[x][y];\n"
           "}\n",
           pitch);
  ein_emu_counters c;
  if (count1(src, 1, 32, 32, d, s, &c))
    return;
  uint64_t want = pitch == 32 ? 32 * 32 : 32;
  CHECK(c.sh_st_requests == 32 && c.sh_st_wavefronts == 32,
        "pitch %d: row stores %llu requests, %llu wavefronts: want 32, 32",
        pitch, (unsigned long long)c.sh_st_requests,
        (unsigned long long)c.sh_st_wavefronts);
  CHECK(c.sh_ld_requests == 32 && c.sh_ld_wavefronts == want &&
            c.sh_ld_ideal == 32,
        "pitch %d: column loads %llu requests, %llu wavefronts (ideal %llu): "
        "want 32, %llu",
        pitch, (unsigned long long)c.sh_ld_requests,
        (unsigned long long)c.sh_ld_wavefronts,
        (unsigned long long)c.sh_ld_ideal, (unsigned long long)want);
  CHECK(c.ld_sectors == 128 && c.st_sectors == 128,
        "pitch %d: global %llu, %llu sectors", pitch,
        (unsigned long long)c.ld_sectors, (unsigned long long)c.st_sectors);
}

/* One warp reads the diagonal of a 32x32 f32 matrix (lane i, element
 * 33 i: 132 bytes apart) and stores it coalesced: the load's 128 bytes
 * would pack into 4 sectors, but each lies in its own sector, so no
 * kernel reads them in fewer than 32 (docs/design.md, "The ideal of a
 * gather"): the ideal is the 32 distinct sectors; the store's stays 4. */
static void diagonal_gather(float *d, const float *s) {
  static const char src[] = KERNEL
      "  d[threadIdx.x] = s0[33 * threadIdx.x];\n"
      "}\n";
  ein_emu_counters c;
  if (count1(src, 1, 32, 1, d, s, &c))
    return;
  CHECK(c.ld_requests == 1 && c.ld_sectors == 32 && c.ld_ideal_sectors == 4 &&
            c.ld_unique_sectors == 32,
        "diagonal: %llu requests, %llu sectors, %llu packed, %llu distinct: "
        "want 1, 32, 4, 32",
        (unsigned long long)c.ld_requests, (unsigned long long)c.ld_sectors,
        (unsigned long long)c.ld_ideal_sectors,
        (unsigned long long)c.ld_unique_sectors);
  CHECK(ein_emu_ideal_sectors(&c, 0) == 32 && ein_emu_ideal_sectors(&c, 1) == 4,
        "diagonal's ideal: %llu load, %llu store sectors: want 32, 4",
        (unsigned long long)ein_emu_ideal_sectors(&c, 0),
        (unsigned long long)ein_emu_ideal_sectors(&c, 1));
}

/* A grid of one block of 96 threads (3 warps, the last one whole): one
 * block, 3 warps; on an H100 (132 SMs) that block is 1/132 of one wave
 * of one block per SM whatever the occupancy allows. */
static void one_block(float *d, const float *s) {
  static const char src[] = KERNEL
      "  if (threadIdx.x < 80) d[threadIdx.x] = s0[threadIdx.x];\n"
      "}\n";
  ein_emu_counters c;
  if (count1(src, 1, 96, 1, d, s, &c))
    return;
  /* lanes 80-95 of warp 2 skip the access: 3 requests, the last of 16
   * lanes (64 bytes, 2 sectors) */
  CHECK(c.blocks == 1 && c.warps == 3 && c.threads == 96,
        "one block: %llu blocks, %llu warps", (unsigned long long)c.blocks,
        (unsigned long long)c.warps);
  CHECK(c.ld_requests == 3 && c.ld_sectors == 10 && c.ld_bytes == 320,
        "one block: %llu requests, %llu sectors, %llu bytes: want 3, 10, 320",
        (unsigned long long)c.ld_requests, (unsigned long long)c.ld_sectors,
        (unsigned long long)c.ld_bytes);
  const ein_sm_limits *h100 = ein_sm_limits_of(90);
  ein_occupancy o = ein_occupancy_compute(h100, 96, 16, 0, 0);
  double waves = ein_occupancy_waves((long long)c.blocks, o.blocks_per_sm,
                                     h100->sms);
  /* 16 registers: 512 a warp, 32 warps a sub-partition; 3 warps a block:
   * 21 blocks by warp slots (64 / 3), under the 32-block limit */
  CHECK(o.blocks_per_sm == 21 && o.limiter == EIN_OCC_WARPS,
        "96 threads: %d blocks per SM (%s), want 21 (warps)", o.blocks_per_sm,
        ein_occ_limiter_name(o.limiter));
  CHECK(waves > 0 && waves * 21 * 132 > 0.999 && waves * 21 * 132 < 1.001,
        "one block is 1/(21 x 132) of a wave: %g", waves);
}

/* One warp copies a 32-byte struct a lane: whatever the host compiler
 * emits (one 32-byte range or two 16-byte accesses), it counts as the
 * GPU's two 16-byte instructions: 2 load requests, each 32 lanes x 16
 * bytes at a 32-byte stride: 32 sectors (ideal 16); 1024 bytes. */
static void wide_copy(float *d, const float *s) {
  static const char src[] = KERNEL
      "  struct W { float v[8]; };\n"
      "  ((W *)d)[threadIdx.x] = ((const W *)s0)[threadIdx.x];\n"
      "}\n";
  ein_emu_counters c;
  if (count1(src, 1, 32, 1, d, s, &c))
    return;
  CHECK(c.ld_requests == 2 && c.ld_sectors == 64 && c.ld_bytes == 1024 &&
            c.st_requests == 2 && c.st_sectors == 64,
        "32-byte lanes: %llu load requests, %llu sectors, %llu bytes; %llu "
        "store requests",
        (unsigned long long)c.ld_requests, (unsigned long long)c.ld_sectors,
        (unsigned long long)c.ld_bytes, (unsigned long long)c.st_requests);
}

/* The request rules on lanes given directly. */
static void request_rules(void) {
  uint64_t addr[32], s, ideal, bytes;
  unsigned size[32], lane[32];
  for (int i = 0; i < 32; i++) { /* 16-byte vectors, consecutive */
    addr[i] = 4096 + 16 * (uint64_t)i;
    size[i] = 16;
    lane[i] = (unsigned)i;
  }
  ein_emu_global_request(addr, size, 32, &s, &ideal, &bytes);
  CHECK(s == 16 && ideal == 16 && bytes == 512, "16-byte lanes: %llu sectors",
        (unsigned long long)s);
  for (int i = 0; i < 32; i++) /* 2-byte elements: 64 bytes, 2 sectors */
    addr[i] = 4096 + 2 * (uint64_t)i, size[i] = 2;
  ein_emu_global_request(addr, size, 32, &s, &ideal, &bytes);
  CHECK(s == 2 && bytes == 64, "2-byte lanes: %llu sectors",
        (unsigned long long)s);
  for (int i = 0; i < 32; i++) /* all lanes one word: a broadcast */
    addr[i] = 4096, size[i] = 4;
  ein_emu_shared_request(addr, size, lane, 32, &s, &ideal);
  CHECK(s == 1 && ideal == 1, "broadcast: %llu wavefronts",
        (unsigned long long)s);
  for (int i = 0; i < 32; i++) /* 8-byte lanes, consecutive: 2 phases */
    addr[i] = 8 * (uint64_t)i, size[i] = 8;
  ein_emu_shared_request(addr, size, lane, 32, &s, &ideal);
  CHECK(s == 2 && ideal == 2, "8-byte lanes: %llu wavefronts, ideal %llu",
        (unsigned long long)s, (unsigned long long)ideal);
  for (int i = 0; i < 32; i++) /* stride 2 words: banks 0, 2, ..: 2-way */
    addr[i] = 8 * (uint64_t)i, size[i] = 4;
  ein_emu_shared_request(addr, size, lane, 32, &s, &ideal);
  CHECK(s == 2 && ideal == 1, "stride-2 words: %llu wavefronts",
        (unsigned long long)s);
}

/* 2 blocks of 256 threads: every warp loads the same 32 floats (4
 * sectors), before and after a barrier: 32 requests of 4 sectors, yet
 * each block touches only those 4 (8 over the blocks: what an L1 holding
 * a block's footprint leaves to the L2), the launch 4 distinct. */
static void block_reuse(float *d, const float *s) {
  static const char src[] = KERNEL
      "  float a = s0[threadIdx.x % 32];\n"
      "  __syncthreads();\n"
      "  d[blockIdx.x * blockDim.x + threadIdx.x] = a + s0[threadIdx.x % 32];\n"
      "}\n";
  ein_emu_counters c;
  if (count1(src, 2, 256, 1, d, s, &c))
    return;
  CHECK(c.ld_requests == 32 && c.ld_sectors == 128 &&
            c.ld_block_sectors == 8 && c.ld_unique_sectors == 4,
        "re-reads: %llu requests, %llu sectors, %llu per block summed, %llu "
        "distinct: want 32, 128, 8, 4",
        (unsigned long long)c.ld_requests, (unsigned long long)c.ld_sectors,
        (unsigned long long)c.ld_block_sectors,
        (unsigned long long)c.ld_unique_sectors);
  /* re-reads: 4 distinct sectors, the requests' ideal (128) stands */
  CHECK(ein_emu_ideal_sectors(&c, 0) == 128, "re-reads' ideal: %llu",
        (unsigned long long)ein_emu_ideal_sectors(&c, 0));
}

static void counters(void) {
  enum { N = 32 * 1024 };
  float *h = malloc(N * sizeof *h);
  float *s = dev_alloc(N * sizeof *s), *d = dev_alloc(N * sizeof *d);
  for (int i = 0; i < N; i++)
    h[i] = (float)i;
  ein_status st = ein_emu_copy(s, h, N * sizeof *h, EIN_EMU_H2D, &err);
  CHECK(st == EIN_OK, "H2D: %s", err.message);
  coalesced_copy(d, s);
  strided_read(d, s);
  diagonal_gather(d, s);
  shared_tile(32, d, s);
  shared_tile(33, d, s);
  one_block(d, s);
  block_reuse(d, s);
  wide_copy(d, s);
  float back[1024];
  st = ein_emu_copy(back, d, sizeof back, EIN_EMU_D2H, &err);
  /* the last kernel copied the first 80 values: counting kept them */
  CHECK(st == EIN_OK && back[79] == 79.0f, "counted kernels compute");
  ein_emu_free(s);
  ein_emu_free(d);
  free(h);
  request_rules();
}

/* ---------------------------------------------------------- occupancy */

static void occupancy(void) {
  /* sm_90, 256 threads (8 warps), 64 registers, 16 KiB static shared:
   *   warp slots 64 / 8 = 8 blocks; block slots 32;
   *   registers: 64 x 32 = 2048 a warp; 16384 / 2048 = 8 warps per
   *   sub-partition, 32 per SM: 32 / 8 = 4 blocks;
   *   shared: 16384 + 1024 reserved = 17408 (a multiple of 128);
   *   233472 / 17408 = 13 blocks.
   * So 4 blocks, 32 warps, 50%, limited by registers. */
  ein_occupancy o = ein_occupancy_compute(ein_sm_limits_of(90), 256, 64,
                                          16384, 0);
  CHECK(o.blocks_per_sm == 4 && o.warps_per_sm == 32 && o.fraction == 0.5 &&
            o.limiter == EIN_OCC_REGISTERS && o.by_shared == 13 &&
            o.by_warps == 8 && o.regs_per_warp == 2048 &&
            o.smem_per_block == 17408,
        "sm_90 256x64 regs 16 KiB: %d blocks %d warps (%s), by shared %d",
        o.blocks_per_sm, o.warps_per_sm, ein_occ_limiter_name(o.limiter),
        o.by_shared);
  /* sm_89, 128 threads (4 warps), 40 registers, 40000 B static shared:
   *   warp slots 48 / 4 = 12; block slots 24;
   *   registers: 40 x 32 = 1280 (5 x 256); 16384 / 1280 = 12 warps per
   *   sub-partition, 48 per SM: 12 blocks;
   *   shared: 40000 + 1024 = 41024, rounded to 128: 41088;
   *   102400 / 41088 = 2 blocks.
   * So 2 blocks, 8 warps, 8/48 of the SM, limited by shared memory. */
  o = ein_occupancy_compute(ein_sm_limits_of(89), 128, 40, 40000, 0);
  CHECK(o.blocks_per_sm == 2 && o.warps_per_sm == 8 &&
            o.fraction > 8.0 / 48 - 1e-12 && o.fraction < 8.0 / 48 + 1e-12 &&
            o.limiter == EIN_OCC_SHARED && o.by_registers == 12 &&
            o.smem_per_block == 41088,
        "sm_89 128x40 regs 40000 B: %d blocks (%s), by registers %d, "
        "smem %d",
        o.blocks_per_sm, ein_occ_limiter_name(o.limiter), o.by_registers,
        o.smem_per_block);
  /* sm_80, 96 threads (3 warps), 33 registers: 33 x 32 = 1056, rounded
   * to 1280; 12 warps per sub-partition, 48 per SM: 16 blocks; warp
   * slots 64 / 3 = 21: registers bind, 48 warps, 75%. */
  o = ein_occupancy_compute(ein_sm_limits_of(80), 96, 33, 0, 0);
  CHECK(o.blocks_per_sm == 16 && o.warps_per_sm == 48 &&
            o.fraction == 0.75 && o.limiter == EIN_OCC_REGISTERS,
        "sm_80 96x33 regs: %d blocks (%s)", o.blocks_per_sm,
        ein_occ_limiter_name(o.limiter));
  /* 1024 threads of 255 registers: 8192 a warp x 32 warps > 65536 a
   * block: it does not launch */
  o = ein_occupancy_compute(ein_sm_limits_of(80), 1024, 255, 0, 0);
  CHECK(o.blocks_per_sm == 0 && o.limiter == EIN_OCC_UNLAUNCHABLE,
        "1024x255 regs: %d blocks", o.blocks_per_sm);
  /* shared memory past a block's most (227 KiB on sm_90) */
  o = ein_occupancy_compute(ein_sm_limits_of(90), 128, 32, 232449, 0);
  CHECK(o.blocks_per_sm == 0, "232449 B of shared memory fits: %d",
        o.blocks_per_sm);
  CHECK(ein_sm_limits_of(75) == NULL && ein_sm_limits_of(100) != NULL,
        "the table: sm_80, 89, 90, 100");
}

/* -------------------------------------------------------- kernel model */

static bool near(double a, double b) {
  return a > b * (1 - 1e-9) && a < b * (1 + 1e-9);
}

static void kernel_model(void) {
  const ein_sm_limits *h100 = ein_sm_limits_of(90);
  /* Two full waves of 8 blocks of 8 warps per SM (64 warps, past the 32
   * that saturate): 1 GB at 3e12 B/s is 333.3 us, plus a 2 us launch. */
  ein_kernel_model_in in = {.traffic_bytes = 1e9, .blocks = 2 * 8 * 132,
                            .threads = 256, .blocks_per_sm = 8, .lim = h100,
                            .bytes_per_s = 3e12, .flops_per_s = 1e15,
                            .launch_seconds = 2e-6};
  ein_kernel_model k = ein_kernel_model_time(&in);
  CHECK(near(k.seconds, 2e-6 + 1e9 / 3e12) && near(k.waves, 2) &&
            near(k.memory_efficiency, 1) && strcmp(k.bound, "memory") == 0,
        "two full waves: %g s, %g waves, %s", k.seconds, k.waves, k.bound);
  CHECK(near(k.floor_seconds, k.seconds), "saturated: floor %g s, want %g",
        k.floor_seconds, k.seconds);
  /* One block of 8 warps: 1/132 of the SMs, each at 8/32 of its share:
   * 1/528 of the bandwidth: 1 MB takes 1e6 x 528 / 3e12 = 176 us. */
  in.traffic_bytes = 1e6;
  in.blocks = 1;
  k = ein_kernel_model_time(&in);
  CHECK(near(k.memory_seconds, 1e6 * 528 / 3e12) &&
            near(k.memory_efficiency, 1.0 / 528),
        "one block: %g s (efficiency %g)", k.memory_seconds,
        k.memory_efficiency);
  /* its floor: the launch and 1 MB at the full bandwidth */
  CHECK(near(k.floor_seconds, 2e-6 + 1e6 / 3e12), "one block's floor: %g s",
        k.floor_seconds);
  /* A full wave (1056 blocks) then a tail of 66: 1000 bytes a block; the
   * full wave moves 1056 000 B at 1e12 B/s (1.056 us), the tail's 66
   * blocks use half the SMs at 8/32 of their share (1/8 of the
   * bandwidth): 66 000 B in 0.528 us. */
  in.blocks = 1056 + 66;
  in.traffic_bytes = 1000.0 * (1056 + 66);
  in.bytes_per_s = 1e12;
  k = ein_kernel_model_time(&in);
  CHECK(near(k.memory_seconds, 1.584e-6), "wave and tail: %g s",
        k.memory_seconds);
  /* Compute-bound: 1e12 FLOPs at 1e15 FLOP/s over two full waves: 1 ms;
   * with the wave and tail above, the tail's 66 blocks reach a quarter of
   * the rate (half the SMs, 8 of the 16 warps that saturate one):
   * 1056/1122 ms + 4 x 66/1122 ms = 1320/1122 ms. */
  in.flops = 1e12;
  k = ein_kernel_model_time(&in);
  CHECK(near(k.compute_seconds, 1320e-3 / 1122), "compute with a tail: %g s",
        k.compute_seconds);
  in.blocks = 2 * 8 * 132;
  k = ein_kernel_model_time(&in);
  CHECK(near(k.compute_seconds, 1e-3) && strcmp(k.bound, "compute") == 0,
        "compute: %g s, %s", k.compute_seconds, k.bound);
  CHECK(ein_kernel_model_sm("a100") == 80 && ein_kernel_model_sm("l4") == 89 &&
            ein_kernel_model_sm("h200") == 90 &&
            ein_kernel_model_sm("b200") == 100,
        "device models to architectures");
}

/* The terms beside DRAM: the L2 (every sector requested, at
 * EIN_MODEL_L2_RATIO x the bandwidth), shared memory (a wavefront per SM
 * and clock: bank conflicts priced) and the warps that saturate DRAM when
 * the requests' size is known. */
/* The L1 term: 8 GB of sectors requested, 1 GB of them stores, each of
 * the 2112 blocks (two waves of 8 per SM) loading 50 KB of distinct
 * sectors (105.6 MB summed) and re-reading them. */
static void kernel_model_l1(const ein_sm_limits *h100) {
  ein_kernel_model_in in = {.traffic_bytes = 8e9, .distinct_bytes = 1e8,
                            .store_bytes = 1e9, .blocks = 2 * 8 * 132,
                            .threads = 256, .blocks_per_sm = 4, .lim = h100,
                            .bytes_per_s = 3e12, .launch_seconds = 2e-6};
  in.block_load_bytes = 50e3 * (double)in.blocks;
  /* 4 resident blocks x 50 KB fit the 256 KB: the L2 serves the stores
   * and each block's first reads only; the L1 every sector, at 128 bytes
   * per SM and clock */
  ein_kernel_model k = ein_kernel_model_time(&in);
  CHECK(near(k.l2_bytes, 1e9 + in.block_load_bytes) &&
            near(k.l1_seconds,
                 8e9 / (EIN_MODEL_L1_BYTES_PER_CLK * EIN_MODEL_SM_HZ * 132)) &&
            strcmp(k.bound, "L1") == 0,
        "L1 holds the footprints: %g bytes to the L2, L1 %g s, %s",
        k.l2_bytes, k.l1_seconds, k.bound);
  /* 24 KB of shared memory a block (+1 KB reserved) leaves 156 KB of L1
   * for 200 KB of footprints: 0.78 of the re-reads hit */
  in.shared_per_block = 24 * 1024;
  k = ein_kernel_model_time(&in);
  double l1 = 262144 - 4.0 * 25 * 1024, reread = 7e9 - in.block_load_bytes;
  CHECK(near(k.l2_bytes, 8e9 - l1 / 200e3 * reread),
        "L1 short of the footprints: %g bytes to the L2, want %g", k.l2_bytes,
        8e9 - l1 / 200e3 * reread);
  /* unknown footprints: every sector to the L2, as before the L1 term */
  in.block_load_bytes = 0;
  k = ein_kernel_model_time(&in);
  CHECK(near(k.l2_bytes, 8e9), "no footprint: %g bytes to the L2",
        k.l2_bytes);
}

static void kernel_model_terms(void) {
  const ein_sm_limits *h100 = ein_sm_limits_of(90);
  /* 1 GB distinct but 8 GB of sectors requested (an uncoalesced read whose
   * sectors the caches serve again): the L2 bounds it at 8e9 / (2 x 3e12)
   * = 1.333 ms, DRAM's 0.333 ms is a quarter of that. */
  ein_kernel_model_in in = {.traffic_bytes = 8e9, .distinct_bytes = 1e9,
                            .blocks = 2 * 8 * 132, .threads = 256,
                            .blocks_per_sm = 8, .lim = h100,
                            .bytes_per_s = 3e12, .launch_seconds = 2e-6};
  ein_kernel_model k = ein_kernel_model_time(&in);
  CHECK(near(k.l2_seconds, 8e9 / (EIN_MODEL_L2_RATIO * 3e12)) &&
            near(k.memory_seconds, 1e9 / 3e12) &&
            strcmp(k.bound, "L2") == 0 &&
            near(k.memory_efficiency, k.memory_seconds / k.l2_seconds),
        "L2-bound: %g s L2, %g s DRAM, %s, efficiency %g", k.l2_seconds,
        k.memory_seconds, k.bound, k.memory_efficiency);
  /* A 32x32 tile read by columns without padding: 32 wavefronts a
   * request, 1 with it. 2^20 requests over two full waves: 32 x 2^20
   * wavefronts at 132 SMs x EIN_MODEL_SM_HZ, 32 times the padded one's. */
  in.traffic_bytes = in.distinct_bytes = 1e6;
  in.shared_wavefronts = 32.0 * 1048576;
  k = ein_kernel_model_time(&in);
  double conflicted = k.shared_seconds;
  in.shared_wavefronts = 1048576;
  k = ein_kernel_model_time(&in);
  CHECK(near(conflicted, 32.0 * 1048576 / (132 * EIN_MODEL_SM_HZ)) &&
            near(conflicted, 32 * k.shared_seconds),
        "bank conflicts: %g s with, %g s without", conflicted,
        k.shared_seconds);
  /* One block of 8 warps whose requests move 128 bytes each: DRAM wants
   * 3e12 x 600 ns / 132 = 13.6 KB in flight per SM, a warp holds 10 x 128
   * bytes: 10.65 warps saturate an SM, so 8 reach 8 / 10.65 of its share
   * (with the old fixed 32 warps: 8/32). */
  in = (ein_kernel_model_in){.traffic_bytes = 1.28e6, .requests = 1e4,
                             .blocks = 1, .threads = 256, .blocks_per_sm = 8,
                             .lim = h100, .bytes_per_s = 3e12};
  k = ein_kernel_model_time(&in);
  double w = 3e12 * EIN_MODEL_LATENCY_S / 132 /
             (EIN_MODEL_REQUESTS_IN_FLIGHT * 128);
  CHECK(near(k.memory_seconds, 1.28e6 / (3e12 / 132 * 8 / w)),
        "requests in flight: %g s (%g warps saturate)", k.memory_seconds, w);
  CHECK(ein_kernel_model_rate(ein_device_model_find("h100"), false) == 67e12,
        "generated kernels at the CUDA cores' FP32 rate");
  kernel_model_l1(h100);
}

/* The plan of expr on one input of `shape` (emulated device, f32), and
 * its profile; false (checked) when either fails. */
static bool profile_of(ein_ctx *ctx, const char *expr, int64_t *shape,
                       int ndim, const char *define /* its size 4 */,
                       ein_plan **plan,
                       ein_launch_counters **l, size_t *n) {
  DLTensor t = {.device = {kDLExtDev, 0}, .ndim = ndim,
                .dtype = ein_dtype_to_dl(EIN_DT_F32), .shape = shape};
  const DLTensor *in[1] = {&t};
  ein_options o = {.backend = EIN_BACKEND_EMU};
  ein_length len = {.name = define, .size = 4};
  if (define) {
    o.lengths = &len;
    o.nlengths = 1;
  }
  ein_status st = ein_plan_create(ctx, expr, in, 1, NULL, &o, plan);
  CHECK(st == EIN_OK, "plan %s: %s", expr, ein_last_error(ctx)->message);
  if (st)
    return false;
  ein_error_clear(&err);
  st = ein_emu_profile(ein_plan_ir_of(*plan), l, n, &err);
  CHECK(st == EIN_OK, "profile %s: %s", expr, err.message);
  if (st)
    ein_plan_destroy(*plan);
  return st == EIN_OK;
}

/* A repeat (`b h s d -> b (h r) s d`, r = 4) runs the 16-byte map: each
 * request of its 32 lanes moves 512 consecutive bytes, 16 sectors, as
 * one uint4 access a lane (the host compiler must not split it into
 * four 4-byte accesses, which would count 4 requests of 16 sectors). */
static void profile_vector(ein_ctx *ctx) {
  int64_t shape[4] = {2, 8, 64, 64};
  ein_plan *plan;
  ein_launch_counters *l = NULL;
  size_t n = 0;
  if (!profile_of(ctx, "b h s d -> b (h r) s d", shape, 4, "r", &plan, &l,
                  &n))
    return;
  uint64_t elems = 2 * 8 * 4 * 64 * 64; /* output elements */
  CHECK(n == 1 && l[0].vec && l[0].c.ld_requests == elems / 4 / 32 &&
            l[0].c.ld_sectors == 16 * l[0].c.ld_requests &&
            l[0].c.ld_ideal_sectors == l[0].c.ld_sectors &&
            l[0].c.st_sectors == elems * 4 / 32,
        "repeat: %zu launches, vec %d, %llu load requests, %llu sectors",
        n, n ? l[0].vec : 0, n ? (unsigned long long)l[0].c.ld_requests : 0,
        n ? (unsigned long long)l[0].c.ld_sectors : 0);
  ein_free(l);
  ein_plan_destroy(plan);
}

/* A sampled profile (EINC_EMU_SAMPLE_BLOCKS) of a transpose whose blocks
 * all do alike (64x64 tiles of 32x32 each: 16 tiles, sampled 5 of them,
 * stride 3) counts what the whole grid does: the same requests, sectors
 * and distinct sectors, each a multiple of the 16 blocks. */
static void profile_sampled(ein_ctx *ctx) {
  int64_t shape[2] = {128, 128};
  ein_plan *plan;
  ein_launch_counters *all = NULL, *some = NULL;
  size_t n = 0, m = 0;
  if (!profile_of(ctx, "a b -> b a", shape, 2, NULL, &plan, &all, &n))
    return;
  ein_plan_destroy(plan);
  setenv("EINC_EMU_SAMPLE_BLOCKS", "5", 1);
  bool ok = profile_of(ctx, "a b -> b a", shape, 2, NULL, &plan, &some, &m);
  unsetenv("EINC_EMU_SAMPLE_BLOCKS");
  if (!ok) {
    ein_free(all);
    return;
  }
  CHECK(n == 1 && m == 1 && all[0].c.blocks == some[0].c.blocks &&
            all[0].c.ld_requests == some[0].c.ld_requests &&
            all[0].c.ld_sectors == some[0].c.ld_sectors &&
            all[0].c.st_sectors == some[0].c.st_sectors &&
            all[0].c.sh_ld_wavefronts == some[0].c.sh_ld_wavefronts &&
            all[0].c.ld_unique_sectors == some[0].c.ld_unique_sectors,
        "sampled transpose: %llu of %llu load sectors, %llu of %llu distinct",
        m ? (unsigned long long)some[0].c.ld_sectors : 0,
        n ? (unsigned long long)all[0].c.ld_sectors : 0,
        m ? (unsigned long long)some[0].c.ld_unique_sectors : 0,
        n ? (unsigned long long)all[0].c.ld_unique_sectors : 0);
  ein_free(all);
  ein_free(some);
  ein_plan_destroy(plan);
}

/* Instruction issue, counted as basic blocks (the counting flavour's
 * -fsanitize-coverage hook, a warp's its lanes' most): a transpose of
 * twice the rows runs twice the blocks of the same work, so exactly twice
 * the basic blocks, and more than one a request. Priced: the warps'
 * basic blocks x EIN_MODEL_INSTR_PER_BB at 4 per SM and clock. */
static void profile_issue(ein_ctx *ctx) {
  int64_t one[2] = {96, 160}, two[2] = {192, 160};
  ein_plan *p1, *p2;
  ein_launch_counters *l1 = NULL, *l2 = NULL;
  size_t n1 = 0, n2 = 0;
  if (!profile_of(ctx, "a b -> b a", one, 2, NULL, &p1, &l1, &n1))
    return;
  if (profile_of(ctx, "a b -> b a", two, 2, NULL, &p2, &l2, &n2)) {
    CHECK(n1 == 1 && n2 == 1 &&
              l1[0].c.warp_basic_blocks >
                  l1[0].c.ld_requests + l1[0].c.st_requests &&
              l2[0].c.warp_basic_blocks == 2 * l1[0].c.warp_basic_blocks,
          "basic blocks: %llu for 96 rows, %llu for 192",
          n1 ? (unsigned long long)l1[0].c.warp_basic_blocks : 0,
          n2 ? (unsigned long long)l2[0].c.warp_basic_blocks : 0);
    ein_free(l2);
    ein_plan_destroy(p2);
  }
  ein_free(l1);
  ein_plan_destroy(p1);
  /* 1e9 warp basic blocks over two full waves of 8 blocks of 8 warps per
   * SM (past the 16 warps that saturate issue). */
  ein_kernel_model_in in = {.traffic_bytes = 1e6, .warp_basic_blocks = 1e9,
                            .blocks = 2 * 8 * 132, .threads = 256,
                            .blocks_per_sm = 8,
                            .lim = ein_sm_limits_of(90), .bytes_per_s = 3e12};
  ein_kernel_model k = ein_kernel_model_time(&in);
  CHECK(near(k.issue_seconds,
             1e9 * EIN_MODEL_INSTR_PER_BB / (4 * EIN_MODEL_SM_HZ * 132)) &&
            strcmp(k.bound, "issue") == 0,
        "issue-bound: %g s, %s", k.issue_seconds, k.bound);
}

/* ein_emu_profile on a real plan: the transpose of a 96x160 f32 array
 * planned for the emulated device is one transpose kernel whose counted
 * traffic covers its compulsory bytes, and whose distinct sectors are
 * exactly them (rows of 160 and 96 floats are whole sectors). */
static void profile(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  int64_t shape[2] = {96, 160};
  ein_plan *plan;
  ein_launch_counters *l = NULL;
  size_t n = 0;
  if (profile_of(ctx, "a b -> b a", shape, 2, NULL, &plan, &l, &n)) {
    double bytes = 2.0 * 96 * 160 * 4;
    CHECK(n == 1 && strcmp(l[0].kind, "transpose") == 0 &&
              32.0 * (double)(l[0].c.ld_sectors + l[0].c.st_sectors) >=
                  bytes &&
              32.0 * (double)(l[0].c.ld_unique_sectors +
                              l[0].c.st_unique_sectors) == bytes &&
              l[0].compulsory_bytes == bytes,
          "transpose profile: %zu launches", n);
    ein_free(l);
    ein_plan_destroy(plan);
  }
  profile_vector(ctx);
  profile_sampled(ctx);
  profile_issue(ctx);
  ein_ctx_destroy(ctx);
}

/* ---------------------------------------------------------- resources */

#ifdef EIN_TEST_NVRTC
static const char REPORT[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'ein_vec' for 'sm_80'\n"
    "ptxas info    : Function properties for ein_vec\n"
    "ptxas         .     384 bytes stack frame, 260 bytes spill stores, "
    "328 bytes spill loads\n"
    "ptxas info    : Used 32 registers, used 0 barriers, 384 bytes "
    "cumulative stack size, 360 bytes cmem[0]\n"
    "ptxas info    : Compiling entry function 'ein_main' for 'sm_80'\n"
    "ptxas info    : Function properties for ein_main\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes "
    "spill loads\n"
    "ptxas info    : Used 14 registers, used 1 barriers, 4224 bytes smem, "
    "368 bytes cmem[0]\n";

static void report_parse(void) {
  ein_kernel_resources r;
  bool ok = ein_ptxas_report_parse(REPORT, "ein_vec", 80, &r);
  CHECK(ok && r.registers == 32 && r.stack_frame == 384 &&
            r.spill_stores == 260 && r.spill_loads == 328 &&
            r.local_bytes == 384 && r.static_smem == 0,
        "ein_vec: %d regs, %d/%d spilled", r.registers, r.spill_stores,
        r.spill_loads);
  ok = ein_ptxas_report_parse(REPORT, "ein_main", 80, &r);
  CHECK(ok && r.registers == 14 && r.barriers == 1 && r.static_smem == 4224 &&
            r.spill_stores == 0 && r.local_bytes == 0,
        "ein_main: %d regs, %d smem", r.registers, r.static_smem);
  CHECK(!ein_ptxas_report_parse(REPORT, "ein_main", 90, &r),
        "no sm_90 block in the report");
}

/* A kernel of the code generator, compiled for real: the plain f32 copy
 * of a 1024x1024 contiguous step (its map kernel and 16-byte variant). */
static void generated_copy(void) {
  ein_loop_axis axes[1] = {{-1, 1 << 20, {1, 1, 0}}};
  ein_step s = {.kind = EIN_STEP_LOOP, .role = EIN_ROLE_CONVERT, .nsrc = 1,
                .alpha = 1, .naxes = 1, .axes = axes,
                .dst_dtype = EIN_DT_F32, .src_dtype = {EIN_DT_F32},
                .acc_dtype = EIN_DT_F32, .plain_copy = true};
  ein_step_kernels k;
  if (ein_codegen_step(&s, &k) != EIN_OK) {
    CHECK(false, "codegen of a copy");
    return;
  }
  int archs[4], n = ein_kernel_resources_archs(archs);
  CHECK(n >= 3 && archs[0] == 80 && archs[1] == 89 && archs[2] == 90,
        "architectures: %d", n);
  for (int a = 0; a < n; a++) {
    ein_kernel_resources main, vec;
    ein_error_clear(&err);
    ein_status st = ein_kernel_resources_get(&k.main, archs[a], &main, &vec,
                                             &err);
    CHECK(st == EIN_OK, "sm_%d: %s", archs[a], err.message);
    if (st)
      continue;
    CHECK(main.registers > 0 && main.registers <= 64 &&
              main.spill_stores == 0 && main.spill_loads == 0 &&
              main.static_smem == 0,
          "copy on sm_%d: %d registers, %d/%d spilled, %d smem", archs[a],
          main.registers, main.spill_stores, main.spill_loads,
          main.static_smem);
    CHECK(!k.main.has_vec || (vec.registers > 0 && vec.spill_stores == 0),
          "copy's vector variant on sm_%d", archs[a]);
  }
  ein_step_kernels_free(&k);
}

/* A kernel that must spill: __launch_bounds__(1024, 2) caps it at 32
 * registers, and it keeps 64 floats indexed at run time. */
static void spilling_kernel(void) {
  static const char src[] =
      "extern \"C\" __global__ void __launch_bounds__(1024, 2)\n"
      "ein_main(float *d, const float *s0, const float *s1) {\n"
      "  float a[40];\n"
      "  for (int i = 0; i < 40; i++) a[i] = s0[i * threadIdx.x] * s0[i];\n"
      "  float t = 0;\n"
      "  for (int i = 0; i < 40; i++)\n"
      "    for (int j = 0; j < 40; j++) t += a[i] * a[j] * s0[i * j];\n"
      "  d[threadIdx.x] = t;\n"
      "}\n";
  ein_kernel_src k = {.kind = EIN_KERNEL_MAP, .source = (char *)src,
                      .len = sizeof src - 1, .block = {1024, 1, 1},
                      .grid = {1, 1, 1}};
  ein_kernel_resources main, vec;
  ein_error_clear(&err);
  ein_status st = ein_kernel_resources_get(&k, 80, &main, &vec, &err);
  CHECK(st == EIN_OK && main.registers <= 32 && main.spill_stores > 0 &&
            main.spill_loads > 0 && main.local_bytes > 0,
        "spilling kernel: %s %d registers, %d/%d bytes spilled",
        err.message, main.registers, main.spill_stores, main.spill_loads);
}

static void resources(void) {
  report_parse();
  ein_error_clear(&err);
  char *log = NULL;
  ein_status st = ein_nvrtc_compile_report("", 0, 80, &log, &err);
  ein_free(log);
  if (st == EIN_ERR_DEVICE) {
    printf("NVRTC not loaded: the compiled resources are skipped (%s)\n",
           err.message);
    return;
  }
  generated_copy();
  spilling_kernel();
}
#endif

int main(void) {
  char dir[] = "/tmp/einc-test-gpu-model-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("EINC_CACHE_DIR", dir, 1);
  ein_error_init(&err);
  counters();
  occupancy();
  kernel_model();
  kernel_model_terms();
  profile();
#ifdef EIN_TEST_NVRTC
  resources();
#endif
  ein_error_clear(&err);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return test_summary("gpu_model");
}
