/*
 * cmd_eval.c - `einc eval EXPR IN.npy... -o OUT.npy`: evaluates an
 * expression on .npy files. The output is written only after the whole
 * evaluation succeeded, and atomically (npy.h): on any error no new file
 * appears and an existing one is left untouched. "-o -" writes the .npy to
 * stdout instead, and --print the result as numpy's repr (print_array.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "error.h"
#include "commands.h"
#include "inspect.h"
#include "dtype.h"
#include "promote.h"
#include "npy.h"
#include "print_array.h"
#include "shape_text.h"
#include "trace.h"

void cmd_eval_help(void) {
  puts(
      "usage: einc eval EXPR IN.npy... -o OUT.npy [--backend B] [--dtype T]\n"
      "                 [--print] [--path P] [-D NAME=SIZE]... [--reduce R]\n"
      "                 [--numpy] [--slice A,B] [--memory-limit B] [--devices N]\n"
      "                 [--counters]\n"
      "\n"
      "Evaluates EXPR on NumPy .npy files (format 1-3, C or Fortran order,\n"
      "little-endian f2/f4/f8, c8/c16 (complex), integers, bool) and writes\n"
      "the result as a C-order .npy file of the inputs' dtype (inputs of\n"
      "different dtypes are promoted as numpy promotes them: f4 and f8 give\n"
      "f8, c8 and c16 c16, i4 and f4 f8). The output file is replaced\n"
      "atomically, and only when the evaluation succeeded.\n"
      "numpy has no bfloat16: a 2-byte void array ('<V2', as numpy saves\n"
      "ml_dtypes' bfloat16) is read as bf16, and a bf16 result is written\n"
      "as '<V2' (np.load(f).view(ml_dtypes.bfloat16) reads it).\n"
      "\n"
      "  -o, --output F  the file to write; '-' writes the .npy to stdout\n"
      "                  (-o or --print is required)\n"
      "  --print         print the result as text, as numpy's repr does\n"
      "                  (past 1000 elements: the first and last 3 of each\n"
      "                  axis, with the shape)\n"
      "  --dtype T       read every input's bytes as dtype T, whatever its\n"
      "                  header says (the sizes must agree): e.g. bf16 for\n"
      "                  bfloat16 bits saved as '<u2', f16 for a '<V2' file;\n"
      "                  T1,T2,... gives one dtype per input\n"
      "fp8: ml_dtypes' float8_e5m2 saves as '<f1', read as such; its\n"
      "float8_e4m3fn saves as '<V1', which other types share: give --dtype\n"
      "(float8_e4m3fn, or T1,T2,..) for those, and for '|u1' bytes. Each input's real value is its value x its scale; the result\n"
      "is f32 (accumulated in f32) or --out-dtype (docs/design.md, \"fp8\").\n"
      "  --scale S1,S2,.. one scale per fp8 input (default all 1)\n"
      "  --out-dtype T   the output's dtype for fp8 inputs: f32 (default),\n"
      "                  bf16 or f16\n"
      "  --backend B     auto (default: cuda when GPU 0 and the CUDA\n"
      "                  libraries load, else cpu), cpu, cuda, or emu (the\n"
      "                  emulated CUDA device: the GPU path run on the CPU,\n"
      "                  for testing); cuda and emu copy the inputs to\n"
      "                  device 0 and the result back\n"
      "  --counters      with --backend emu: count each kernel launch's memory\n"
      "                  accesses (EINC_EMU_COUNTERS=1: kernels compiled to\n"
      "                  count, several times slower) and print per launch\n"
      "                  its blocks and warps, global load and store\n"
      "                  requests (one warp's instruction) with the 32-byte\n"
      "                  sectors they touch, shared-memory requests with\n"
      "                  their wavefronts (bank conflicts), and the bytes\n"
      "                  moved against the step's compulsory bytes\n"
      "  --devices N     cuda/emu, a sliced plan (--slice): spread its\n"
      "                  slices over devices 0..N-1 (one thread each; the\n"
      "                  inputs copied to each, the partials summed on\n"
      "                  device 0)\n"
      "  -v, --verbose   print the output file's shape and dtype, the\n"
      "                  kernel cache's counters, and where the call's\n"
      "                  time went, phase by phase (loading CUDA, opening\n"
      "                  the device, cuBLAS, planning, kernel compiles or\n"
      "                  cache hits, the run); EINC_TRACE=1 prints the\n"
      "                  phases without -v\n"
      CLI_HELP_PATH
      CLI_HELP_TAIL
      "  einc eval 'i j, j k -> i k' a.npy b.npy -o c.npy");
}

typedef struct eval_opts {
  const char *out_path;
  bool print; /* --print */
  cli_common *common;
  int ndtypes;     /* --dtype: 0 (not given), 1 (every input) or one each */
  ein_dtype dtypes[CLI_MAX_OPERANDS];
  int nscales;     /* --scale */
  double scales[CLI_MAX_OPERANDS];
  bool counters;   /* --counters */
  bool out_retype; /* --out-dtype given */
  ein_dtype out_dtype;
} eval_opts;

/* "a,b,c" into at most CLI_MAX_OPERANDS items, each parsed by item();
 * the count, or -1 with the message printed. */
static int parse_list(const char *v, const char *what, void *dst,
                      bool (*item)(const char *, void *, int)) {
  char buf[1024];
  if (strlen(v) >= sizeof buf) {
    cli_errorf("%s: the list is too long", what);
    return -1;
  }
  strcpy(buf, v);
  int n = 0;
  for (char *save, *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    if (n == CLI_MAX_OPERANDS) {
      cli_errorf("%s: more than %d items", what, CLI_MAX_OPERANDS);
      return -1;
    }
    if (!item(tok, dst, n++)) return -1;
  }
  if (n == 0) cli_errorf("%s: empty list", what);
  return n ? n : -1;
}

static bool dtype_item(const char *tok, void *dst, int i) {
  return cli_parse_dtype(tok, &((ein_dtype *)dst)[i]);
}

static bool scale_item(const char *tok, void *dst, int i) {
  char *end;
  double v = strtod(tok, &end);
  if (end == tok || *end) {
    cli_errorf("--scale: '%.40s' is not a number", tok);
    return false;
  }
  ((double *)dst)[i] = v;
  return true;
}

/* eval's own options: -o/--output, --print, --backend, --dtype, --scale,
 * --out-dtype and --devices. */
static int eval_option(int argc, char **argv, int *i, void *state) {
  eval_opts *eo = state;
  const char *arg = argv[*i];
  if (strcmp(arg, "--print") == 0) return eo->print = true, 1;
  if (strcmp(arg, "--counters") == 0) return eo->counters = true, 1;
  bool out = cli_is_option(arg, "-o") || cli_is_option(arg, "--output");
  bool dtype = cli_is_option(arg, "--dtype");
  bool scale = cli_is_option(arg, "--scale");
  bool out_dtype = cli_is_option(arg, "--out-dtype");
  bool devices = cli_is_option(arg, "--devices");
  if (!out && !dtype && !scale && !out_dtype && !devices &&
      !cli_is_option(arg, "--backend"))
    return 0;
  const char *v = cli_option_value(argc, argv, i);
  if (!v) return -1;
  if (devices) {
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || end == v || n < 1 || n > 16) {
      cli_errorf("--devices takes a count from 1 to 16, not '%.40s'", v);
      return -1;
    }
    eo->common->options.devices = (int)n;
    return 1;
  }
  if (out) {
    eo->out_path = v;
    return 1;
  }
  if (dtype)
    return (eo->ndtypes = parse_list(v, "--dtype", eo->dtypes,
                                     dtype_item)) > 0 ? 1 : -1;
  if (scale)
    return (eo->nscales = parse_list(v, "--scale", eo->scales,
                                     scale_item)) > 0 ? 1 : -1;
  if (out_dtype) {
    eo->out_retype = true;
    return cli_parse_dtype(v, &eo->out_dtype) ? 1 : -1;
  }
  return cli_parse_backend(v, &eo->common->options.backend) ? 1 : -1;
}

/* --dtype: every input's bytes read as its dtype (one for all, or one
 * each); an element size that differs from the file's is a usage error
 * naming the file. */
static int retype_inputs(const char **paths, npy_array *inputs, int n,
                         const ein_dtype *dts, int ndts) {
  if (ndts > 1 && ndts != n) {
    cli_errorf("--dtype gives %d dtypes for %d inputs (give one, or one "
               "per input)",
               ndts, n);
    return EXIT_INVALID;
  }
  for (int i = 0; i < n; i++) {
    ein_dtype was, dt = dts[ndts > 1 ? i : 0];
    if (!ein_dtype_from_dl(inputs[i].t.dtype, &was))
      was = dt; /* unreachable: npy_read gives known dtypes only */
    if (ein_dtype_size(was) != ein_dtype_size(dt)) {
      cli_errorf("--dtype %s: %s holds %s, whose elements are %zu bytes, "
                 "not %zu",
                 ein_dtype_name(dt), paths[i], ein_dtype_name(was),
                 ein_dtype_size(was), ein_dtype_size(dt));
      return EXIT_INVALID;
    }
    inputs[i].t.dtype = ein_dtype_to_dl(dt);
  }
  return EXIT_OK;
}

/* Without --dtype a '<V1' file (read as f8e4m3: numpy saves ml_dtypes'
 * float8_e4m3fn so, and three other 8-bit floats too) could be any of
 * them: a usage error naming the file. '<f1' is float8_e5m2's own. */
static int check_fp8_files(const char **paths, const npy_array *inputs,
                           int n) {
  for (int i = 0; i < n; i++) {
    ein_dtype dt;
    if (ein_dtype_from_dl(inputs[i].t.dtype, &dt) && dt == EIN_DT_F8E4M3) {
      cli_errorf("%s holds 1-byte void elements ('<V1', as numpy saves "
                 "ml_dtypes' float8 arrays): say which fp8 type with "
                 "--dtype float8_e4m3fn or --dtype float8_e5m2",
                 paths[i]);
      return EXIT_INVALID;
    }
  }
  return EXIT_OK;
}

/* Bytes a tensor's buffer spans from its data pointer (npy buffers are
 * compact, C or Fortran order). */
static size_t buffer_bytes(const DLTensor *t) {
  ein_dtype dt;
  size_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
  return ein_dtype_from_dl(t->dtype, &dt) ? n * ein_dtype_size(dt) : 0;
}

/* A device backend (cuda, emu): inputs copied to its device 0, the
 * result copied back into out->data. An einc error comes back in *st
 * (the exit status follows from it). */
static void eval_on_device(ein_ctx *ctx, const char *expr,
                           const DLTensor *const *ins, int n, DLTensor *out,
                           const ein_options *o, size_t out_bytes,
                           ein_status *st) {
  ein_backend_kind kind = o->backend;
  DLTensor dev_in[CLI_MAX_OPERANDS], dev_out = *out;
  const DLTensor *dev_ptrs[CLI_MAX_OPERANDS];
  void *bufs[CLI_MAX_OPERANDS + 1] = {0};
  DLDevice where = ein_backend_dl_device(kind, 0);
  *st = EIN_OK;
  double t0 = ein_trace_now();
  for (int i = 0; i < n && !*st; i++) {
    size_t bytes = buffer_bytes(ins[i]);
    *st = ein_device_alloc(ctx, kind, 0, bytes, &bufs[i]);
    if (!*st)
      *st = ein_device_copy(ctx, kind, 0, bufs[i],
                            (const char *)ins[i]->data + ins[i]->byte_offset,
                            bytes, EIN_COPY_HOST_TO_DEVICE);
    dev_in[i] = *ins[i];
    dev_in[i].data = bufs[i];
    dev_in[i].byte_offset = 0;
    dev_in[i].device = where;
    dev_ptrs[i] = &dev_in[i];
  }
  if (!*st) *st = ein_device_alloc(ctx, kind, 0, out_bytes, &bufs[n]);
  ein_trace_end("einc: inputs to the device", t0);
  if (!*st) {
    dev_out.data = bufs[n];
    dev_out.device = where;
    *st = ein_eval(ctx, expr, dev_ptrs, n, &dev_out, o);
  }
  t0 = ein_trace_now();
  if (!*st)
    *st = ein_device_copy(ctx, kind, 0, out->data, bufs[n], out_bytes,
                          EIN_COPY_DEVICE_TO_HOST);
  ein_trace_end("einc: result to the host (waits for the run)", t0);
  for (int i = 0; i <= n; i++) ein_device_free(ctx, kind, 0, bufs[i]);
}

/* When einc eval began (the trace clock; 0 when not tracing). */
static double eval_start;

/* The phases the library recorded (trace.h) in the order they began, a
 * phase inside another (a compile inside the run) indented under it,
 * then the wall time of the whole command. */
static void print_phases(FILE *f) {
  typedef struct { const char *phase; double start, secs; } rec;
  rec r[EIN_TRACE_MAX];
  int n = 0;
  for (int i = 0; i < ein_trace_count(); i++)
    if (ein_trace_get(i, &r[n].phase, &r[n].start, &r[n].secs)) n++;
  for (int i = 1; i < n; i++) /* insertion sort by start: few records */
    for (int j = i; j > 0 && r[j].start < r[j - 1].start; j--) {
      rec t = r[j];
      r[j] = r[j - 1];
      r[j - 1] = t;
    }
  for (int i = 0; i < n; i++) {
    int depth = 0;
    for (int j = 0; j < n; j++)
      depth += j != i && r[j].start <= r[i].start &&
               r[i].start + r[i].secs <= r[j].start + r[j].secs &&
               (r[j].secs > r[i].secs || j < i);
    fprintf(f, "phase %10.3f ms  %*s%s\n", r[i].secs * 1e3, 2 * depth, "",
            r[i].phase);
  }
  if (eval_start > 0)
    fprintf(f, "phase %10.3f ms  einc eval from start to here (reading the "
               "inputs included)\n",
            (ein_trace_now() - eval_start) * 1e3);
}

/* -v: how many slices ran and over which axes, from the plan of the call
 * (made again here, on tensors without data on the call's device: the
 * cache held the call's own). Says nothing for a plan that runs once. */
static void print_slices(ein_ctx *ctx, const char *expr,
                         const DLTensor *const *ins, int n,
                         const DLTensor *out, const ein_options *o, FILE *f) {
  DLDevice dev = ein_backend_dl_device(o->backend, 0);
  DLTensor t[CLI_MAX_OPERANDS + 1];
  const DLTensor *tp[CLI_MAX_OPERANDS];
  for (int i = 0; i <= n; i++) {
    t[i] = i < n ? *ins[i] : *out;
    t[i].data = NULL, t[i].device = dev;
    if (i < n) tp[i] = &t[i];
  }
  ein_plan *plan;
  if (ein_plan_create(ctx, expr, tp, n, &t[n], o, &plan) != EIN_OK) return;
  int na = ein_plan_nsliced(plan);
  if (na > 0) {
    fprintf(f, "slices: %lld ran, over", (long long)ein_plan_units(plan));
    for (int a = 0; a < na; a++)
      fprintf(f, "%s %s", a ? "," : "", ein_plan_sliced_axis(plan, a));
    if (o->memory_limit)
      fprintf(f, " (memory limit %lld bytes)",
              (long long)ein_plan_memory_limit(plan));
    fprintf(f, "\n");
  }
  ein_plan_destroy(plan);
}

/* -v: the output, and what the kernel cache did; on stderr when stdout
 * holds the .npy or the printed result. */
static void print_verbose(ein_ctx *ctx, const ein_options *o,
                          const char *out_path, const DLTensor *out,
                          ein_dtype dt, FILE *f) {
  char text[EIN_SHAPE_TEXT_CAP];
  fprintf(f, "%s%s: %s %s\n", out_path ? "wrote " : "result",
          out_path ? out_path : "",
          ein_format_shape(text, sizeof text, out->shape, out->ndim),
          ein_dtype_name(dt));
  ein_backend_stats bs;
  ein_ctx_backend_stats(ctx, o->backend, 0, &bs);
  if (bs.compiles + bs.disk_hits + bs.memory_hits > 0)
    fprintf(f, "kernel cache: %llu compiled, %llu from disk, %llu from "
               "memory\n",
            bs.compiles, bs.disk_hits, bs.memory_hits);
  if (bs.fp8_gemms > 0)
    fprintf(f, "FP8 GEMMs: %llu (cublasLtMatmul)\n", bs.fp8_gemms);
  print_phases(f);
}

static double per(uint64_t a, uint64_t b) { return b ? (double)a / b : 0; }

/* One launch's global or shared lines of --counters. */
static void print_memory(FILE *f, const ein_emu_counters *c) {
  fprintf(f, "    global loads   %10llu requests %11llu sectors  %5.2f a "
             "request (ideal %5.2f)\n",
          (unsigned long long)c->ld_requests,
          (unsigned long long)c->ld_sectors, per(c->ld_sectors, c->ld_requests),
          per(ein_emu_ideal_sectors(c, 0), c->ld_requests));
  fprintf(f, "    global stores  %10llu requests %11llu sectors  %5.2f a "
             "request (ideal %5.2f)\n",
          (unsigned long long)c->st_requests,
          (unsigned long long)c->st_sectors, per(c->st_sectors, c->st_requests),
          per(ein_emu_ideal_sectors(c, 1), c->st_requests));
  if (c->sh_ld_requests + c->sh_st_requests)
    fprintf(f, "    shared loads   %10llu requests %11llu wavefronts %5.2f a "
               "request (ideal %5.2f); stores %llu requests %llu wavefronts\n",
            (unsigned long long)c->sh_ld_requests,
            (unsigned long long)c->sh_ld_wavefronts,
            per(c->sh_ld_wavefronts, c->sh_ld_requests),
            per(c->sh_ld_ideal, c->sh_ld_requests),
            (unsigned long long)c->sh_st_requests,
            (unsigned long long)c->sh_st_wavefronts);
}

/* One launch of --counters: geometry, memory, bytes moved. */
static void print_launch(FILE *f, const ein_launch_counters *l) {
  const ein_emu_counters *c = &l->c;
  fprintf(f, "step %d pass %d %s (%s) grid (%u,%u,%u) block (%u,%u,%u): "
             "%llu blocks, %llu warps\n",
          l->step + 1, l->pass, l->kind, l->vec ? "ein_vec" : "ein_main",
          l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
          l->block[2], (unsigned long long)c->blocks,
          (unsigned long long)c->warps);
  print_memory(f, c);
  fprintf(f, "    moved %llu B (sectors x 32), %llu B in distinct sectors\n",
          (unsigned long long)(32 * (c->ld_sectors + c->st_sectors)),
          (unsigned long long)(32 * (c->ld_unique_sectors +
                                     c->st_unique_sectors)));
}

/* --counters: each kernel launch of the run with what it did to memory
 * (ein_launch_counters), and per step the bytes its launches moved
 * against the step's compulsory bytes. */
static void print_counters(ein_ctx *ctx, ein_backend_kind kind, FILE *f) {
  size_t n = ein_ctx_backend_launches(ctx, kind, 0, NULL, 0);
  ein_launch_counters *l = malloc((n ? n : 1) * sizeof *l);
  if (!l) return;
  n = ein_ctx_backend_launches(ctx, kind, 0, l, n);
  fprintf(f, "memory counters (emulated device; a request is one warp's "
             "instruction, a sector 32 bytes):\n");
  double moved = 0;
  for (size_t i = 0; i < n; i++) {
    print_launch(f, &l[i]);
    moved += 32.0 * (double)(l[i].c.ld_sectors + l[i].c.st_sectors);
    if (i + 1 < n && l[i + 1].step == l[i].step)
      continue;
    fprintf(f, "  step %d: moved %.0f B, compulsory %.0f B: %.2f x\n",
            l[i].step + 1, moved, l[i].compulsory_bytes,
            l[i].compulsory_bytes > 0 ? moved / l[i].compulsory_bytes : 0);
    moved = 0;
  }
  if (!n)
    fprintf(f, "  (no kernel launches: every step is a cuBLAS call, a view "
               "or empty)\n");
  free(l);
}

/* The result to OUT.npy ("-": stdout) and/or printed; EXIT_OK or the exit
 * status with the message printed. */
static int write_result(const char *out_path, bool print, const DLTensor *out) {
  char msg[1024];
  bool ok = true;
  if (out_path && strcmp(out_path, "-") == 0)
    ok = npy_write_stream(stdout, out, "<stdout>", msg, sizeof msg);
  else if (out_path)
    ok = npy_write(out_path, out, msg, sizeof msg);
  if (!ok) {
    cli_errorf("%s", msg);
    return EXIT_INTERNAL;
  }
  if (print) {
    cli_print_array(stdout, out);
    if (fflush(stdout) != 0) {
      cli_errorf("cannot write the result to stdout");
      return EXIT_INTERNAL;
    }
  }
  return EXIT_OK;
}

/* Reads the .npy file at path into *a. The exit status tells what failed:
 * a file that cannot be opened or read, or whose data does not fit in
 * memory, is a runtime failure; a malformed file (its header, or a size
 * that disagrees with it) is invalid input. npy.c reports both alike, so
 * the stream's error flag and errno (ENOMEM from malloc) tell them apart;
 * the file is read once, so a pipe works too. */
static int load_input(const char *path, npy_array *a) {
  char msg[1024];
  FILE *f = fopen(path, "rb");
  if (!f) {
    cli_errorf("cannot open '%.200s': %s", path, strerror(errno));
    return EXIT_INTERNAL;
  }
  errno = 0;
  int rc = EXIT_OK;
  if (!npy_read_stream(f, path, a, msg, sizeof msg)) {
    rc = ferror(f) || errno == ENOMEM ? EXIT_INTERNAL : EXIT_INVALID;
    cli_errorf("%s", msg);
  }
  fclose(f);
  return rc;
}

/* Reads the n input files; *loaded counts those read (to free). */
static int load_inputs(const char **paths, int n, npy_array *inputs,
                       int *loaded) {
  for (*loaded = 0; *loaded < n; (*loaded)++) {
    int rc = load_input(paths[*loaded], &inputs[*loaded]);
    if (rc != EXIT_OK) return rc;
  }
  return EXIT_OK;
}

/* The output tensor on the host (shape in shape[], dtype the first
 * input's); its data is not yet allocated. */
static ein_status describe_output(ein_ctx *ctx, const char *expr,
                                  const DLTensor *const *ins, int n,
                                  const ein_options *o, int64_t *shape,
                                  DLTensor *out, ein_dtype *dt,
                                  const ein_dtype *want) {
  int ndim;
  ein_status st = ein_output_shape(ctx, expr, ins, n, o, shape, &ndim);
  if (st) return st;
  memset(out, 0, sizeof *out);
  out->device = (DLDevice){kDLCPU, 0};
  out->ndim = ndim;
  out->shape = shape;
  out->dtype = n ? ins[0]->dtype : ein_dtype_to_dl(EIN_DT_F32);
  if (!ein_dtype_from_dl(out->dtype, dt)) *dt = EIN_DT_F32;
  if (want || ein_dtype_is_fp8(*dt)) { /* fp8 in: f32 out by default */
    *dt = want ? *want : EIN_DT_F32;
    out->dtype = ein_dtype_to_dl(*dt);
  }
  return EIN_OK;
}

/* Evaluates on the backend chosen (a device one through device buffers)
 * into out, whose data holds `bytes`. */
static ein_status run_eval(ein_ctx *ctx, const char *expr,
                           const DLTensor *const *ins, int n, DLTensor *out,
                           ein_options *o, size_t bytes) {
  if (o->backend == EIN_BACKEND_AUTO) o->backend = ein_backend_default();
  /* Files are in host memory: a backend with memory of its own gets
   * copies. */
  if (ein_backend_dl_device(o->backend, 0).device_type == kDLCPU)
    return ein_eval(ctx, expr, ins, n, out, o);
  ein_status st = EIN_OK;
  eval_on_device(ctx, expr, ins, n, out, o, bytes, &st);
  return st;
}

/* Evaluates expr over the inputs loaded and writes or prints the result. */
static int eval_to_file(ein_ctx *ctx, const char *expr,
                        const npy_array *inputs, int n, cli_common *common,
                        const char *out_path, bool print, bool counters,
                        const ein_dtype *out_dtype) {
  const DLTensor *ins[CLI_MAX_OPERANDS] = {NULL};
  for (int i = 0; i < n; i++) ins[i] = &inputs[i].t;
  int64_t shape[EIN_MAX_DIMS];
  DLTensor out;
  ein_dtype dt;
  ein_status st = describe_output(ctx, expr, ins, n, &common->options, shape,
                                  &out, &dt, out_dtype);
  if (st) goto failed;
  int64_t numel = 1;
  for (int d = 0; d < out.ndim; d++) numel *= shape[d];
  out.data = malloc((size_t)(numel ? numel : 1) * ein_dtype_size(dt));
  if (!out.data) {
    cli_errorf("out of memory for the %lld-element output", (long long)numel);
    return EXIT_INTERNAL;
  }
  st = run_eval(ctx, expr, ins, n, &out, &common->options,
                (size_t)numel * ein_dtype_size(dt));
  if (st) {
    free(out.data);
    goto failed;
  }
  int rc = write_result(out_path, print, &out);
  bool to_stdout = print || (out_path && strcmp(out_path, "-") == 0);
  if (rc == EXIT_OK && counters)
    print_counters(ctx, common->options.backend, to_stdout ? stderr : stdout);
  if (rc == EXIT_OK && common->verbose) {
    FILE *f = to_stdout ? stderr : stdout;
    print_verbose(ctx, &common->options, out_path, &out, dt, f);
    print_slices(ctx, expr, ins, n, &out, &common->options, f);
  }
  else if (rc == EXIT_OK && ein_trace_on())
    print_phases(stderr);
  free(out.data);
  return rc;
failed:
  if (common->verbose || ein_trace_on())
    print_phases(stderr);
  cli_print_error(ein_last_error(ctx));
  cli_numpy_hint(st, expr, ins, n, &common->options);
  return cli_exit_status(st);
}

/* --counters: only the emulated device counts, and it does when
 * EINC_EMU_COUNTERS is set (docs/design.md, "GPU model inputs"). */
static int counters_on(ein_backend_kind backend) {
  if (backend != EIN_BACKEND_EMU) {
    cli_errorf("--counters counts the memory accesses of the emulated "
               "device's kernels: give --backend emu");
    return EXIT_INVALID;
  }
  if (setenv("EINC_EMU_COUNTERS", "1", 1) != 0) {
    cli_errorf("cannot set EINC_EMU_COUNTERS");
    return EXIT_INTERNAL;
  }
  return EXIT_OK;
}

int cmd_eval(int argc, char **argv) {
  static cli_common common;
  static npy_array inputs[CLI_MAX_OPERANDS];
  memset(&common, 0, sizeof common);
  common.takes_path = true;
  static eval_opts eo;
  memset(&eo, 0, sizeof eo);
  eo.common = &common;
  const char *pos[CLI_MAX_OPERANDS + 1];
  int npos;
  int r = cli_parse_args(argc, argv, "eval", cmd_eval_help, &common,
                         eval_option, &eo, pos, CLI_MAX_OPERANDS + 1, &npos);
  if (r != CLI_ARGS_OK) return r == CLI_ARGS_HELP ? EXIT_OK : EXIT_INVALID;
  const char *expr = npos ? pos[0] : NULL, *out_path = eo.out_path;
  int n = npos ? npos - 1 : 0;
  if (!expr || (!out_path && !eo.print)) {
    cli_errorf("eval needs an expression, input files and -o OUT.npy or "
               "--print (see einc eval --help)");
    return EXIT_INVALID;
  }
  if (eo.print && out_path && strcmp(out_path, "-") == 0) {
    cli_errorf("--print and -o - would both write to stdout");
    return EXIT_INVALID;
  }
  int c = eo.counters ? counters_on(common.options.backend) : EXIT_OK;
  if (c != EXIT_OK)
    return c;
  if (common.verbose)
    ein_trace_enable(true);
  eval_start = ein_trace_now();
  int loaded, rc = load_inputs(pos + 1, n, inputs, &loaded);
  if (rc == EXIT_OK && eo.ndtypes)
    rc = retype_inputs(pos + 1, inputs, n, eo.dtypes, eo.ndtypes);
  else if (rc == EXIT_OK)
    rc = check_fp8_files(pos + 1, inputs, n);
  if (rc == EXIT_OK && !eo.ndtypes && !cli_promote_inputs(inputs, n)) {
    cli_errorf("out of memory converting the inputs to one dtype");
    rc = EXIT_INTERNAL;
  }
  if (eo.nscales) {
    common.options.scales = eo.scales;
    common.options.nscales = eo.nscales;
  }
  ein_ctx *ctx = NULL;
  if (rc == EXIT_OK && ein_ctx_create(&ctx) != EIN_OK) {
    cli_errorf("out of memory");
    rc = EXIT_INTERNAL;
  }
  if (rc == EXIT_OK)
    rc = eval_to_file(ctx, expr, inputs, n, &common, out_path, eo.print,
                      eo.counters,
                      eo.out_retype ? &eo.out_dtype : NULL);
  for (int i = 0; i < loaded; i++) npy_free(&inputs[i]);
  ein_ctx_destroy(ctx);
  return rc;
}
