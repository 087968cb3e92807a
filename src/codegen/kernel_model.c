/*
 * kernel_model.c - a kernel's time from its counted traffic and its
 * occupancy (kernel_model.h).
 *
 * The grid runs in waves: full waves of blocks_per_sm x SMs blocks, then
 * a tail of the rest. During a wave each SM holds some warps; a wave
 * whose warps per SM reach EIN_MODEL_MEMORY_WARPS moves bytes at the full
 * bandwidth, fewer warps at that share of it (Little's law: bandwidth is
 * bytes in flight over latency, and each warp keeps about as many bytes
 * in flight as the next), and only on the SMs it occupies. Traffic and
 * FLOPs are spread evenly over the blocks.
 */
#include "kernel_model.h"

#include <string.h>

static double min_d(double a, double b) { return a < b ? a : b; }

/* The share of the machine's rate a wave of `blocks` blocks reaches when
 * `warps_full` warps per SM saturate an SM. */
static double wave_share(const ein_kernel_model_in *in, long long blocks,
                         double warps_full) {
  int sms = in->lim->sms;
  long long per_sm = (blocks + sms - 1) / sms; /* blocks on a busy SM */
  double busy = blocks < sms ? (double)blocks / sms : 1.0;
  double warps = (double)per_sm * ((in->threads + 31) / 32);
  return busy * min_d(1.0, warps / warps_full);
}

/* Seconds to do `amount` of work (bytes or FLOPs) at `rate` over the
 * grid's waves, with the share each wave reaches. */
static double over_waves(const ein_kernel_model_in *in, double amount,
                         double rate, double warps_full, double *share) {
  long long slots = (long long)in->blocks_per_sm * in->lim->sms;
  long long full = in->blocks / slots, tail = in->blocks % slots;
  double per_block = amount / (double)in->blocks;
  double t = 0, s_full = wave_share(in, slots, warps_full);
  if (full)
    t += (double)full * slots * per_block / (rate * s_full);
  if (tail)
    t += (double)tail * per_block / (rate * wave_share(in, tail, warps_full));
  *share = t > 0 ? amount / rate / t : 1;
  return t;
}

/* Warps per SM that keep DRAM busy: bandwidth x latency bytes in flight
 * over the SMs, each warp holding EIN_MODEL_REQUESTS_IN_FLIGHT requests
 * of the kernel's mean size (sectors x 32 / requests); the fixed
 * EIN_MODEL_MEMORY_WARPS when the requests are unknown. */
static double memory_warps(const ein_kernel_model_in *in) {
  if (in->requests <= 0 || in->traffic_bytes <= 0)
    return EIN_MODEL_MEMORY_WARPS;
  double per_request = in->traffic_bytes / in->requests;
  double want = in->bytes_per_s * EIN_MODEL_LATENCY_S / in->lim->sms;
  double w = want / (EIN_MODEL_REQUESTS_IN_FLIGHT * per_request);
  return w < 1 ? 1 : w;
}

/* The bytes the L2 serves: the stores, and the loads the L1 misses. A
 * block's re-reads of sectors it loaded before hit when the resident
 * blocks' footprints (their distinct load sectors) fit the L1 that
 * shared memory leaves; a footprint over it keeps that share of the
 * re-reads (random replacement's proportion, not LRU's cliff). */
static double l2_bytes(const ein_kernel_model_in *in) {
  if (in->block_load_bytes <= 0 || in->blocks <= 0)
    return in->traffic_bytes;
  double reread = in->traffic_bytes - in->store_bytes - in->block_load_bytes;
  if (reread <= 0)
    return in->traffic_bytes;
  int shared = in->shared_per_block
                   ? in->shared_per_block + in->lim->smem_reserved
                   : 0;
  double l1 = in->lim->l1_shared_per_sm - (double)in->blocks_per_sm * shared;
  double footprint =
      in->block_load_bytes / (double)in->blocks * in->blocks_per_sm;
  double hit = l1 <= 0 ? 0 : footprint <= l1 ? 1 : l1 / footprint;
  return in->traffic_bytes - hit * reread;
}

/* The largest of the launch's times, and what it is. */
static void pick_bound(ein_kernel_model *m, double launch) {
  struct { double t; const char *name; } parts[] = {
      {m->memory_seconds, "memory"}, {m->l2_seconds, "L2"},
      {m->l1_seconds, "L1"},
      {m->shared_seconds, "shared"}, {m->issue_seconds, "issue"},
      {m->compute_seconds, "compute"}};
  double work = 0;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    if (parts[i].t > work) {
      work = parts[i].t;
      if (work > launch)
        m->bound = parts[i].name;
    }
  m->seconds += work;
}

/* The launch's work at the full bandwidth (its DRAM bytes) or the full
 * rate, whichever is longer: no grid shape or occupancy does better. */
static double floor_work(const ein_kernel_model_in *in, double dram) {
  double t = dram > 0 && in->bytes_per_s > 0 ? dram / in->bytes_per_s : 0;
  if (in->flops > 0 && in->flops_per_s > 0 && in->flops / in->flops_per_s > t)
    t = in->flops / in->flops_per_s;
  return t;
}

ein_kernel_model ein_kernel_model_time(const ein_kernel_model_in *in) {
  ein_kernel_model m = {.seconds = in->launch_seconds, .bound = "launch",
                        .memory_efficiency = 1,
                        .floor_seconds = in->launch_seconds};
  if (in->blocks <= 0 || in->blocks_per_sm <= 0 || !in->lim)
    return m;
  m.waves = (double)in->blocks / ((double)in->blocks_per_sm * in->lim->sms);
  double share = 1;
  double dram = in->distinct_bytes > 0 ? in->distinct_bytes
                                       : in->traffic_bytes;
  m.floor_seconds = in->launch_seconds + floor_work(in, dram);
  if (dram > 0 && in->bytes_per_s > 0)
    m.memory_seconds = over_waves(in, dram, in->bytes_per_s,
                                  memory_warps(in), &m.memory_efficiency);
  m.l2_bytes = l2_bytes(in);
  if (m.l2_bytes > 0 && in->bytes_per_s > 0)
    m.l2_seconds = over_waves(in, m.l2_bytes,
                              EIN_MODEL_L2_RATIO * in->bytes_per_s,
                              memory_warps(in), &share);
  if (in->traffic_bytes > 0)
    m.l1_seconds = over_waves(in, in->traffic_bytes,
                              EIN_MODEL_L1_BYTES_PER_CLK * EIN_MODEL_SM_HZ *
                                  in->lim->sms,
                              EIN_MODEL_COMPUTE_WARPS, &share);
  if (in->shared_wavefronts > 0)
    m.shared_seconds = over_waves(in, in->shared_wavefronts,
                                  EIN_MODEL_SM_HZ * in->lim->sms,
                                  EIN_MODEL_COMPUTE_WARPS, &share);
  if (in->warp_basic_blocks > 0)
    m.issue_seconds = over_waves(in, in->warp_basic_blocks *
                                         EIN_MODEL_INSTR_PER_BB,
                                 4 * EIN_MODEL_SM_HZ * in->lim->sms,
                                 EIN_MODEL_COMPUTE_WARPS, &share);
  if (in->flops > 0 && in->flops_per_s > 0)
    m.compute_seconds = over_waves(in, in->flops, in->flops_per_s,
                                   EIN_MODEL_COMPUTE_WARPS, &share);
  pick_bound(&m, in->launch_seconds);
  /* The DRAM bandwidth's share over the launch's work: a kernel bound by
   * its L2 traffic or its bank conflicts uses DRAM no better than that. */
  double work = m.seconds - in->launch_seconds;
  if (dram > 0 && in->bytes_per_s > 0 && work > 0 &&
      m.compute_seconds < work && m.issue_seconds < work)
    m.memory_efficiency = dram / in->bytes_per_s / work;
  return m;
}

double ein_kernel_model_rate(const ein_device_model *m, bool f64) {
  double peak = m->peak[f64 ? EIN_PEAK_F64 : EIN_PEAK_F32];
  return peak > 0 ? peak : m->peak[EIN_PEAK_F32];
}

int ein_kernel_model_sm(const char *name) {
  if (strcmp(name, "a100") == 0)
    return 80;
  if (strcmp(name, "l4") == 0)
    return 89;
  if (strcmp(name, "b200") == 0)
    return 100;
  return 90;
}
