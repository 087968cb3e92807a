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
                         int warps_full) {
  int sms = in->lim->sms;
  long long per_sm = (blocks + sms - 1) / sms; /* blocks on a busy SM */
  double busy = blocks < sms ? (double)blocks / sms : 1.0;
  double warps = (double)per_sm * ((in->threads + 31) / 32);
  return busy * min_d(1.0, warps / warps_full);
}

/* Seconds to do `amount` of work (bytes or FLOPs) at `rate` over the
 * grid's waves, with the share each wave reaches. */
static double over_waves(const ein_kernel_model_in *in, double amount,
                         double rate, int warps_full, double *share) {
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

ein_kernel_model ein_kernel_model_time(const ein_kernel_model_in *in) {
  ein_kernel_model m = {.seconds = in->launch_seconds, .bound = "launch",
                        .memory_efficiency = 1};
  if (in->blocks <= 0 || in->blocks_per_sm <= 0 || !in->lim)
    return m;
  m.waves = (double)in->blocks / ((double)in->blocks_per_sm * in->lim->sms);
  double share = 1;
  if (in->traffic_bytes > 0 && in->bytes_per_s > 0)
    m.memory_seconds = over_waves(in, in->traffic_bytes, in->bytes_per_s,
                                  EIN_MODEL_MEMORY_WARPS,
                                  &m.memory_efficiency);
  if (in->flops > 0 && in->flops_per_s > 0)
    m.compute_seconds = over_waves(in, in->flops, in->flops_per_s,
                                   EIN_MODEL_COMPUTE_WARPS, &share);
  double work = m.memory_seconds > m.compute_seconds ? m.memory_seconds
                                                     : m.compute_seconds;
  m.seconds += work;
  if (work > in->launch_seconds)
    m.bound = m.memory_seconds >= m.compute_seconds ? "memory" : "compute";
  return m;
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
