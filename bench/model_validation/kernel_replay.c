/*
 * kernel_replay.c - today's kernel model (kernel_model.h) over a CUDA
 * program written out by another build of einc (dump_bfe0368.c's
 * program.tsv and its kernel sources), for the check of issue 34 item 4:
 * the model against the times an H100 measured for that build.
 *
 * Takes: a directory holding program.tsv and stepN.cu (sources already
 * stripped of the helpers today's preludes define: model_validation.py
 * does it), a device model name and a block sample (ein_emu_sample_set).
 * Each kernel runs once on the emulated device with its accesses counted,
 * on buffers of 0xff bytes (the kernels' addresses depend on sizes and
 * strides only); NVRTC compiles it for the model's architecture for its
 * registers and shared memory. cuBLAS steps are priced as the roofline
 * prices them (kernel_model.h: ein_kernel_model_gemm_seconds); the
 * roofline's kernel steps at today's sector bytes (cost.c), from each
 * kernel step's iteration space (program.tsv's "loop" lines).
 * Gives: one JSON object on stdout (per kernel its counts, resources and
 * model time; the plan's total). Exit 1 with a message on any error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "dtype.h"
#include "emu_device.h"
#include "kernel_model.h"
#include "kernel_resources.h"
#include "occupancy.h"

enum { MAX_STEPS = 64, MAX_BUFS = 16 };

typedef struct replay_step {
  int index;
  char what[16], kind[32], dtype[16];
  double flops, bytes;
  double sector_bytes; /* the roofline's on a CUDA model (cost.c) */
  int has_vec;
  unsigned grid[3], block[3], grid_vec[3];
  int buf[3];
  long long off[3];
  char *source;
} replay_step;

typedef struct replay {
  int nbufs, nsteps;
  long long buf_bytes[MAX_BUFS];
  void *bufs[MAX_BUFS];
  replay_step steps[MAX_STEPS];
} replay;

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s)
    s[n] = 0;
  fclose(f);
  return s;
}

static bool parse_kernel(const char *line, replay_step *s) {
  return sscanf(line,
                "kernel %d %31s %lf %lf %15s %d %u %u %u %u %u %u %u %u %u "
                "%d %lld %d %lld %d %lld",
                &s->index, s->kind, &s->flops, &s->bytes, s->dtype,
                &s->has_vec, &s->grid[0], &s->grid[1], &s->grid[2],
                &s->block[0], &s->block[1], &s->block[2], &s->grid_vec[0],
                &s->grid_vec[1], &s->grid_vec[2], &s->buf[0], &s->off[0],
                &s->buf[1], &s->off[1], &s->buf[2], &s->off[2]) == 21;
}

static bool parse_dtype(char **save, ein_dtype *dt) {
  const char *t = strtok_r(NULL, "\t\n", save);
  return t && ein_dtype_parse(t, dt);
}

/* A "loop" line: the kernel step's iteration space, priced in sectors by
 * today's rule (ein_cost_sector_bytes) with its plan bytes as given. */
static bool parse_loop(char *line, replay_step *s) {
  char *save = NULL;
  strtok_r(line, "\t", &save);
  ein_step st = {.kind = EIN_STEP_LOOP, .bytes_read = s->bytes};
  int index = atoi(strtok_r(NULL, "\t", &save));
  if (atoi(strtok_r(NULL, "\t", &save))) st.kind = EIN_STEP_FILL;
  st.nsrc = atoi(strtok_r(NULL, "\t", &save));
  if (index != s->index || !parse_dtype(&save, &st.dst_dtype) ||
      !parse_dtype(&save, &st.src_dtype[0]) ||
      !parse_dtype(&save, &st.src_dtype[1]))
    return false;
  const char *n = strtok_r(NULL, "\t\n", &save);
  st.naxes = n ? atoi(n) : -1;
  if (st.naxes < 0 || st.naxes > 64) return false;
  ein_loop_axis axes[64];
  for (int a = 0; a < st.naxes; a++) {
    long long v[4];
    for (int j = 0; j < 4; j++) {
      const char *t = strtok_r(NULL, "\t\n", &save);
      if (!t) return false;
      v[j] = atoll(t);
    }
    axes[a] = (ein_loop_axis){-1, v[0], {v[1], v[2], v[3]}};
  }
  st.axes = axes;
  s->sector_bytes = ein_cost_sector_bytes(&st);
  return true;
}

static bool read_program(const char *dir, replay *r) {
  char path[4096], line[8192];
  snprintf(path, sizeof path, "%s/program.tsv", dir);
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  bool ok = true;
  while (ok && fgets(line, sizeof line, f)) {
    int id;
    long long bytes;
    replay_step *s = &r->steps[r->nsteps];
    if (sscanf(line, "buffer %d %lld", &id, &bytes) == 2 && id < MAX_BUFS) {
      r->buf_bytes[id] = bytes;
      r->nbufs = id + 1 > r->nbufs ? id + 1 : r->nbufs;
    } else if (strncmp(line, "loop", 4) == 0 && r->nsteps > 0) {
      ok = parse_loop(line, &r->steps[r->nsteps - 1]);
    } else if (strncmp(line, "kernel", 6) == 0 && r->nsteps < MAX_STEPS) {
      ok = parse_kernel(line, s);
      s->sector_bytes = s->bytes;
      strcpy(s->what, "kernel");
      snprintf(path, sizeof path, "%s/step%d.cu", dir, s->index);
      ok = ok && (s->source = read_all(path)) != NULL;
      r->nsteps++;
    } else if (strncmp(line, "cublas", 6) == 0 && r->nsteps < MAX_STEPS) {
      ok = sscanf(line, "cublas %d %lf %lf %15s", &s->index, &s->flops,
                  &s->bytes, s->dtype) == 4;
      s->sector_bytes = s->bytes;
      strcpy(s->what, "cublas");
      r->nsteps++;
    }
  }
  fclose(f);
  return ok;
}

static ein_peak_kind gemm_kind(const char *dtype) {
  if (strcmp(dtype, "bf16") == 0)
    return EIN_PEAK_BF16;
  if (strcmp(dtype, "f16") == 0)
    return EIN_PEAK_F16;
  return strcmp(dtype, "f64") == 0 ? EIN_PEAK_F64 : EIN_PEAK_F32;
}

static char *arg_ptr(const replay *r, const replay_step *s, int i) {
  return s->buf[i] < 0 ? NULL : (char *)r->bufs[s->buf[i]] + s->off[i];
}

static void die(const char *what, const ein_error_rec *err) {
  fprintf(stderr, "kernel_replay: %s: %s\n", what, err ? err->message : "");
  exit(1);
}

/* One kernel counted, compiled for its resources and priced; its JSON
 * object to stdout; its model seconds returned. */
static double replay_kernel(replay *r, replay_step *s, ein_emu_module *mod,
                            int index, const ein_device_model *m,
                            const ein_sm_limits *lim, bool first) {
  ein_error_rec err = {0};
  char *d = arg_ptr(r, s, 0), *s0 = arg_ptr(r, s, 1), *s1 = arg_ptr(r, s, 2);
  bool vec = s->has_vec && !((uintptr_t)d % 16) && !((uintptr_t)s0 % 16) &&
             !((uintptr_t)s1 % 16);
  ein_emu_counters c;
  ein_emu_device_begin();
  ein_status st = ein_emu_launch_counted(mod, index, vec,
                                         vec ? s->grid_vec : s->grid,
                                         s->block, d, s0, s1, &c, &err);
  ein_emu_device_end();
  if (st)
    die("launch", &err);
  ein_kernel_src k = {.kind = EIN_KERNEL_MAP, .source = s->source,
                      .len = strlen(s->source), .has_vec = s->has_vec};
  ein_kernel_resources rm, rv;
  if (ein_kernel_resources_get(&k, lim->sm, &rm, &rv, &err))
    die("resources", &err);
  ein_kernel_resources *res = vec ? &rv : &rm;
  int threads = (int)(s->block[0] * s->block[1] * s->block[2]);
  ein_occupancy occ = ein_occupancy_compute(lim, threads, res->registers,
                                            res->static_smem, 0);
  ein_kernel_model_in in = {
      .traffic_bytes = 32.0 * (double)(c.ld_sectors + c.st_sectors),
      .distinct_bytes =
          32.0 * (double)(c.ld_unique_sectors + c.st_unique_sectors),
      .block_load_bytes = 32.0 * (double)c.ld_block_sectors,
      .store_bytes = 32.0 * (double)c.st_sectors,
      .shared_per_block = res->static_smem,
      .requests = (double)(c.ld_requests + c.st_requests),
      .warp_basic_blocks = (double)c.warp_basic_blocks,
      .shared_wavefronts = (double)(c.sh_ld_wavefronts + c.sh_st_wavefronts),
      .flops = s->flops, .blocks = (long long)c.blocks, .threads = threads,
      .blocks_per_sm = occ.blocks_per_sm, .lim = lim,
      .bytes_per_s = ein_cost_bandwidth(m),
      .flops_per_s = ein_kernel_model_rate(m, strcmp(s->dtype, "f64") == 0),
      .launch_seconds = m->step_seconds};
  ein_kernel_model km = ein_kernel_model_time(&in);
  printf("%s{\"step\":%d,\"kind\":\"%s\",\"entry\":\"%s\",\"blocks\":%llu,"
         "\"threads\":%d,\"registers\":%d,\"spill_bytes\":%d,"
         "\"smem\":%d,\"occupancy\":%.4f,\"requests\":%llu,"
         "\"sectors\":%llu,\"ideal_sectors\":%llu,\"distinct_bytes\":%.0f,"
         "\"shared_requests\":%llu,\"shared_wavefronts\":%llu,"
         "\"flops\":%.6g,\"compulsory_bytes\":%.6g,\"memory_seconds\":%.4g,"
         "\"l2_seconds\":%.4g,\"l1_seconds\":%.4g,\"shared_seconds\":%.4g,"
         "\"compute_seconds\":%.4g,\"seconds\":%.4g,\"bound\":\"%s\","
         "\"memory_efficiency\":%.4f,\"warp_basic_blocks\":%llu,"
         "\"issue_seconds\":%.4g}",
         first ? "" : ",", s->index, s->kind, vec ? "ein_vec" : "ein_main",
         (unsigned long long)c.blocks, threads, res->registers,
         res->spill_stores + res->spill_loads, res->static_smem,
         occ.fraction, (unsigned long long)(c.ld_requests + c.st_requests),
         (unsigned long long)(c.ld_sectors + c.st_sectors),
         (unsigned long long)(ein_emu_ideal_sectors(&c, 0) +
                             ein_emu_ideal_sectors(&c, 1)),
         in.distinct_bytes,
         (unsigned long long)(c.sh_ld_requests + c.sh_st_requests),
         (unsigned long long)(c.sh_ld_wavefronts + c.sh_st_wavefronts),
         s->flops, s->bytes, km.memory_seconds, km.l2_seconds,
         km.l1_seconds, km.shared_seconds, km.compute_seconds, km.seconds, km.bound,
         km.memory_efficiency, (unsigned long long)c.warp_basic_blocks,
         km.issue_seconds);
  return km.seconds;
}

static ein_emu_module *load_kernels(replay *r) {
  const char *src[MAX_STEPS];
  int n = 0;
  for (int i = 0; i < r->nsteps; i++)
    if (strcmp(r->steps[i].what, "kernel") == 0)
      src[n++] = r->steps[i].source;
  ein_emu_module *mod = NULL;
  ein_error_rec err = {0};
  if (n && ein_emu_module_load_ex(src, n, true, &mod, &err))
    die("compile", &err);
  return mod;
}

static void alloc_buffers(replay *r) {
  ein_error_rec err = {0};
  for (int b = 0; b < r->nbufs; b++)
    if (ein_emu_malloc(&r->bufs[b], (size_t)r->buf_bytes[b], &err))
      die("allocate", &err);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: kernel_replay DIR DEVICE [SAMPLE_BLOCKS]\n");
    return 2;
  }
  static replay r;
  if (!read_program(argv[1], &r))
    die("reading program.tsv or a kernel source", NULL);
  const ein_device_model *m = ein_device_model_find(argv[2]);
  if (!m)
    die("unknown device model", NULL);
  const ein_sm_limits *lim = ein_sm_limits_of(ein_kernel_model_sm(m->name));
  ein_emu_sample_set(argc > 3 ? strtoull(argv[3], NULL, 10) : 0);
  ein_emu_module *mod = load_kernels(&r);
  alloc_buffers(&r);
  double total = m->call_seconds, roof = m->call_seconds;
  int kidx = 0;
  printf("{\"device\":\"%s\",\"launches\":[", m->name);
  for (int i = 0; i < r.nsteps; i++) {
    replay_step *s = &r.steps[i];
    double rate = strcmp(s->what, "cublas") == 0
                      ? ein_cost_rate(m, gemm_kind(s->dtype), false)
                      : ein_kernel_model_rate(m, strcmp(s->dtype, "f64") == 0);
    double rf = s->flops / rate,
           rb = (ein_cost_model_sectors(m) ? s->sector_bytes : s->bytes) /
                ein_cost_bandwidth(m);
    double step_roof = m->step_seconds + (rf > rb ? rf : rb);
    roof += step_roof;
    if (strcmp(s->what, "cublas") == 0)
      total += step_roof;
    else {
      bool first = kidx == 0;
      total += replay_kernel(&r, s, mod, kidx++, m, lim, first);
    }
  }
  printf("],\"predicted_seconds\":%.6g,\"roofline_seconds\":%.6g}\n", total,
         roof);
  for (int b = 0; b < r.nbufs; b++)
    ein_emu_free(r.bufs[b]);
  ein_emu_module_free(mod);
  return 0;
}
