/*
 * emu_module.c - kernel sources to a loaded shared object for the
 * emulated device (emu_device.h, emu_module.h).
 *
 * All kernels of a plan go into one C++ translation unit, so a plan costs
 * one compiler run: the host prelude, then kernel i inside namespace k<i>
 * (its static helpers such as ein_comb cannot clash) with its entry points
 * renamed ein_main_<i> / ein_vec_<i> (extern "C" names must be unique),
 * and an exported ein_entry_<i> that calls it through void pointers. A
 * #line directive makes compiler messages and __LINE__ count lines of
 * each kernel's own source ("kernel_2:14").
 *
 * The object is cached as <cache dir>/emu/<hash>.so, the hash taken over
 * the compiler command, its flags and the whole translation unit (which
 * holds the prelude): the object's only link to libein is the prelude's
 * interface, so nothing else can make an old object wrong. The compiler
 * writes a temporary file that is renamed into place and then loaded, so
 * other processes see a whole object or none; a cached object that does
 * not load, or lacks an entry point, is compiled again. Without a cache
 * directory a private temporary one serves this process.
 */
#include "emu_module.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "codegen.h"
#include "disk_cache.h"
#include "hash.h"
#include "strbuf.h"
#include "trace.h"

extern char **environ;

/* -O1: a plan of a few kernels compiles in ~0.06 s and its kernels run
 * several times faster than at -O0. -nostdlib: the object needs nothing
 * from any library but memcpy and __tls_get_addr, which the process has;
 * skipping the library search saves a third of the link. Sanitizers need
 * their runtime libraries linked, so they keep the default libraries. */
static const char FLAGS[] =
    "-std=c++17 -O1 -fPIC -shared -w -fvisibility=hidden -fno-exceptions "
    "-fno-rtti -pipe"
#ifdef EIN_EMU_SANITIZE
    " " EIN_EMU_SANITIZE " -g -fno-omit-frame-pointer -DEIN_EMU_SHARED_GLOBAL"
#else
    " -nostdlib"
#endif
    ;

/* The counting flavour (emu_count.h): -fsanitize=thread makes GCC call
 * __tsan_read<N>/__tsan_write<N> before every memory access, and the
 * prelude defines them (EIN_EMU_COUNT), so no sanitizer runtime is
 * linked (-nostdlib always). Under the build's own sanitizers the
 * __shared__ variables stay globals in a section, as the emulator looks
 * for them there; the kernels' own accesses are then not checked by
 * ASan, only counted. -fno-tree-sra: GCC's scalar replacement of
 * aggregates would split a kernel's 16-byte uint4 load or store (one
 * instruction on the GPU) into four 4-byte accesses, counted as four
 * requests of 16 sectors where the GPU makes one (found on the repeat
 * kernel of `b h s d -> b (h r) s d`: 6.4x its compulsory bytes with
 * SRA, 1.6x without, as its 4 repeats read the source 4 times). */
static const char COUNT_FLAGS[] =
    "-std=c++17 -O1 -fPIC -shared -w -fvisibility=hidden -fno-exceptions "
    "-fno-rtti -pipe -nostdlib -DEIN_EMU_COUNT -fsanitize=thread "
    "--param=tsan-instrument-func-entry-exit=0 -fno-tree-sra "
    "-fsanitize-coverage=trace-pc"
#ifdef EIN_EMU_SANITIZE
    " -DEIN_EMU_SHARED_GLOBAL"
#endif
    ;

static const char *flags(bool counting) {
  return counting ? COUNT_FLAGS : FLAGS;
}

enum { MAX_BOUND = 1024, OUTPUT_KEEP = 2400, MAX_ARGS = 64 };

typedef struct emu_kernel {
  ein_emu_entry main, vec;
  unsigned bound_main, bound_vec;
  bool has_vec;
} emu_kernel;

struct ein_emu_module {
  void *handle;
  int n;
  emu_kernel *k;
  void *(*tls_touch)(void);
  char *(*shared_range)(char **end);
  size_t tls_size;
  bool from_disk; /* loaded from the disk cache, not compiled */
  bool counting;  /* the counting flavour */
};

static atomic_ulong compiles;

unsigned long ein_emu_compile_count(void) { return atomic_load(&compiles); }

static const char *compiler(void) {
  const char *c = getenv("EINC_EMU_CXX");
  return c && *c ? c : "c++";
}

/* ------------------------------------------------ the translation unit */

/* Whether the source defines `name` as a function: "name(" as a token. */
static bool defines(const char *src, const char *name) {
  size_t len = strlen(name);
  for (const char *p = strstr(src, name); p; p = strstr(p + 1, name)) {
    bool start = p == src || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                               (p[-1] >= 'A' && p[-1] <= 'Z') ||
                               (p[-1] >= '0' && p[-1] <= '9'));
    if (start && p[len] == '(')
      return true;
  }
  return false;
}

/* The N of "__launch_bounds__(N) name(", or MAX_BOUND. */
static unsigned launch_bound(const char *src, const char *name) {
  static const char LB[] = "__launch_bounds__(";
  for (const char *p = strstr(src, LB); p; p = strstr(p + 1, LB)) {
    char *end;
    unsigned long v = strtoul(p + sizeof LB - 1, &end, 10);
    if (*end != ')')
      continue;
    end++;
    while (*end == ' ' || *end == '\n' || *end == '\t')
      end++;
    size_t len = strlen(name);
    if (strncmp(end, name, len) == 0 && end[len] == '(')
      return v >= 1 && v <= MAX_BOUND ? (unsigned)v : MAX_BOUND;
  }
  return MAX_BOUND;
}

static void append_kernel(ein_strbuf *tu, const char *src, int i, bool vec) {
  ein_strbuf_printf(tu,
                    "#define ein_main ein_main_%d\n"
                    "#define ein_vec ein_vec_%d\n"
                    "namespace k%d {\n#line 1 \"kernel_%d\"\n",
                    i, i, i, i);
  ein_strbuf_printf(tu, "%s\n}\n#undef ein_main\n#undef ein_vec\n", src);
  ein_strbuf_printf(tu, "#line 1 \"ein_emu_entries_%d\"\n", i);
  const char *exp = "extern \"C\" __attribute__((visibility(\"default\"))) void";
  const char *params = "(void *d, const void *s0, const void *s1)";
  ein_strbuf_printf(tu, "%s ein_entry_%d%s {\n  ein_emu_call(k%d::ein_main_%d, "
                    "d, s0, s1);\n}\n", exp, i, params, i, i);
  if (vec)
    ein_strbuf_printf(tu, "%s ein_entry_vec_%d%s {\n  ein_emu_call(k%d::"
                      "ein_vec_%d, d, s0, s1);\n}\n", exp, i, params, i, i);
}

/* -------------------------------------------------------- the compiler */

/* <cache dir>/emu, else a private directory made once per process. */
static bool module_dir(char *buf, size_t cap) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static char private_dir[512];
  char base[4096];
  if (ein_disk_cache_dir(base, sizeof base) &&
      (size_t)snprintf(buf, cap, "%s/emu", base) < cap && ein_make_dirs(buf))
    return true;
  pthread_mutex_lock(&mu);
  if (!private_dir[0]) {
    const char *t = getenv("TMPDIR");
    snprintf(private_dir, sizeof private_dir, "%s/einc-emu-XXXXXX",
             t && *t ? t : "/tmp");
    if (!mkdtemp(private_dir))
      private_dir[0] = 0;
  }
  bool ok = private_dir[0] && (size_t)snprintf(buf, cap, "%s", private_dir) < cap;
  pthread_mutex_unlock(&mu);
  return ok;
}

/* Splits `s` on spaces into argv (pointing into `s`, which is modified). */
static int split_words(char *s, char **argv, int max) {
  int n = 0;
  char *save = NULL;
  for (char *p = strtok_r(s, " \t", &save); p && n < max;
       p = strtok_r(NULL, " \t", &save))
    argv[n++] = p;
  return n;
}

/* Runs argv with stdout and stderr into `out` (the first cap - 1 bytes
 * kept, NUL-terminated). The exit status, or -1 with errno when it could
 * not start. */
static int spawn_capture(char *const argv[], char *out, size_t cap) {
  int fds[2];
  out[0] = 0;
  if (pipe2(fds, O_CLOEXEC) != 0)
    return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  pid_t pid;
  int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (e != 0) {
    close(fds[0]);
    errno = e;
    return -1;
  }
  size_t len = 0;
  char sink[4096];
  for (;;) {
    bool room = len + 1 < cap;
    ssize_t r = read(fds[0], room ? out + len : sink,
                     room ? cap - 1 - len : sizeof sink);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    len += room ? (size_t)r : 0;
  }
  out[len] = 0;
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool write_file(const char *path, const char *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return false;
  bool ok = true;
  while (ok && len) {
    ssize_t r = write(fd, data, len);
    if (r < 0 && errno == EINTR)
      continue;
    ok = r > 0;
    if (ok) {
      data += r;
      len -= (size_t)r;
    }
  }
  return close(fd) == 0 && ok;
}

/* Compiles the translation unit at cc into so. */
static ein_status compile(const char *cc, const char *so, int nkernels,
                          bool counting, ein_error_rec *err) {
  char words[2048], *argv[MAX_ARGS + 4];
  snprintf(words, sizeof words, "%s %s", compiler(), flags(counting));
  int n = split_words(words, argv, MAX_ARGS);
  argv[n++] = "-o";
  argv[n++] = (char *)so;
  argv[n++] = (char *)cc;
  argv[n] = NULL;
  char out[OUTPUT_KEEP];
  int rc = spawn_capture(argv, out, sizeof out);
  atomic_fetch_add(&compiles, 1);
  if (rc == 0)
    return EIN_OK;
  if (rc < 0)
    return ein_fail_backend(err,
                            "emulated device: cannot run the host C++ compiler "
                            "'%s' (set EINC_EMU_CXX): %s",
                            argv[0], strerror(errno));
  return ein_fail_backend(err,
                          "emulated device: the host C++ compiler failed on %d "
                          "kernel%s (exit status %d): %s %s -o %s %s\n%s",
                          nkernels, nkernels == 1 ? "" : "s", rc, compiler(),
                          flags(counting), so, cc, out);
}

/* ------------------------------------------------------------- loading */

typedef struct tls_query {
  ElfW(Addr) base;
  size_t size;
} tls_query;

static int find_tls(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  tls_query *q = arg;
  if (info->dlpi_addr != q->base)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_TLS)
      q->size = info->dlpi_phdr[i].p_memsz;
  return 1;
}

/* Opens path and finds every entry point; false (nothing kept open) when
 * the object does not load or lacks one. */
static bool open_module(ein_emu_module *m, const char *path) {
  m->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!m->handle)
    return false;
  bool ok = true;
  char name[64];
  /* a counting module's hooks count only once armed (prelude_host.h) */
  void (*arm)(void);
  *(void **)&arm = dlsym(m->handle, "ein_emu_count_arm");
  if (arm) arm();
  *(void **)&m->tls_touch = dlsym(m->handle, "ein_emu_tls_touch");
  *(void **)&m->shared_range = dlsym(m->handle, "ein_emu_shared_range");
  ok = m->tls_touch && m->shared_range;
  for (int i = 0; ok && i < m->n; i++) {
    snprintf(name, sizeof name, "ein_entry_%d", i);
    *(void **)&m->k[i].main = dlsym(m->handle, name);
    snprintf(name, sizeof name, "ein_entry_vec_%d", i);
    *(void **)&m->k[i].vec = m->k[i].has_vec ? dlsym(m->handle, name) : NULL;
    ok = m->k[i].main && (m->k[i].vec || !m->k[i].has_vec);
  }
  struct link_map *lm = NULL;
  if (ok && dlinfo(m->handle, RTLD_DI_LINKMAP, &lm) == 0 && lm) {
    tls_query q = {lm->l_addr, 0};
    dl_iterate_phdr(find_tls, &q);
    m->tls_size = q.size;
  }
  if (!ok) {
    dlclose(m->handle);
    m->handle = NULL;
  }
  return ok;
}

/* The cached object, else a fresh compile put in its place. */
static ein_status load_or_compile(ein_emu_module *m, const ein_strbuf *tu,
                                  ein_error_rec *err) {
  char dir[4096], path[4400], cc[4500], so[4500];
  if (!module_dir(dir, sizeof dir))
    return ein_fail_backend(err,
                            "emulated device: no directory to compile kernels "
                            "in (set EINC_CACHE_DIR)");
  ein_strbuf key = {0};
  ein_strbuf_printf(&key, "einc emu v1\n%s\n%s\n", compiler(),
                    flags(m->counting));
  ein_strbuf_append(&key, tu->data, tu->len);
  if (key.failed) {
    ein_strbuf_free(&key);
    return ein_fail_memory(err, "out of memory hashing emulated kernels");
  }
  uint64_t h1 = ein_fnv1a(key.data, key.len, EIN_FNV_SEED);
  uint64_t h2 = ein_fnv1a(key.data, key.len, 0x84222325cbf29ce4ull ^ key.len);
  ein_strbuf_free(&key);
  snprintf(path, sizeof path, "%s/%016llx%016llx.so", dir,
           (unsigned long long)h1, (unsigned long long)h2);
  double t0 = ein_trace_now();
  if (access(path, F_OK) == 0 && open_module(m, path)) {
    ein_trace_end("emu: kernels from the disk cache (dlopen)", t0);
    m->from_disk = true;
    return EIN_OK;
  }
  t0 = ein_trace_now();
  static atomic_uint counter;
  unsigned c = atomic_fetch_add(&counter, 1);
  snprintf(cc, sizeof cc, "%s.%ld.%u.tmp.cc", path, (long)getpid(), c);
  snprintf(so, sizeof so, "%s.%ld.%u.tmp.so", path, (long)getpid(), c);
  if (!write_file(cc, tu->data, tu->len))
    return ein_fail_backend(err, "emulated device: cannot write %s: %s", cc,
                            strerror(errno));
  ein_status st = compile(cc, so, m->n, m->counting, err);
  unlink(cc);
  ein_trace_end("emu: compile kernels (c++)", t0);
  t0 = ein_trace_now();
  /* loaded under its final name, which sanitizer reports then show */
  if (!st && rename(so, path) != 0)
    st = ein_fail_backend(err, "emulated device: cannot rename %s: %s", so,
                          strerror(errno));
  if (!st && !open_module(m, path))
    st = ein_fail_backend(err,
                          "emulated device: the compiled kernels do not load: "
                          "%s",
                          dlerror());
  unlink(so); /* after a failure; a no-op once renamed */
  ein_trace_end("emu: load the compiled kernels (dlopen)", t0);
  return st;
}

ein_status ein_emu_module_load(const char *const *sources, int n,
                               ein_emu_module **out, ein_error_rec *err) {
  return ein_emu_module_load_ex(sources, n, false, out, err);
}

bool ein_emu_module_counting(const ein_emu_module *m) { return m->counting; }

ein_status ein_emu_module_load_ex(const char *const *sources, int n,
                                  bool counting, ein_emu_module **out,
                                  ein_error_rec *err) {
  *out = NULL;
  ein_emu_module *m = ein_calloc(1, sizeof *m);
  emu_kernel *k = n > 0 ? ein_calloc((size_t)n, sizeof *k) : NULL;
  ein_strbuf tu = {0};
  if (!m || (n > 0 && !k)) {
    ein_free(m);
    ein_free(k);
    return ein_fail_memory(err, "out of memory loading emulated kernels");
  }
  m->n = n;
  m->k = k;
  m->counting = counting;
  ein_strbuf_printf(&tu, "%s", ein_codegen_prelude(true));
  for (int i = 0; i < n; i++) {
    k[i].has_vec = defines(sources[i], "ein_vec");
    k[i].bound_main = launch_bound(sources[i], "ein_main");
    k[i].bound_vec = launch_bound(sources[i], "ein_vec");
    append_kernel(&tu, sources[i], i, k[i].has_vec);
  }
  ein_status st = tu.failed
                      ? ein_fail_memory(err, "out of memory writing emulated "
                                             "kernels")
                      : load_or_compile(m, &tu, err);
  ein_strbuf_free(&tu);
  if (st) {
    ein_free(k);
    ein_free(m);
    return st;
  }
  *out = m;
  return EIN_OK;
}

bool ein_emu_module_from_disk(const ein_emu_module *m) {
  return m->from_disk;
}

void ein_emu_module_free(ein_emu_module *m) {
  if (!m)
    return;
  dlclose(m->handle);
  ein_free(m->k);
  ein_free(m);
}

bool ein_emu_module_kernel(const ein_emu_module *m, int index, bool vec,
                           ein_emu_entry *entry, unsigned *bound) {
  if (index < 0 || index >= m->n)
    return false;
  const emu_kernel *k = &m->k[index];
  *entry = vec ? k->vec : k->main;
  *bound = vec ? k->bound_vec : k->bound_main;
  return *entry != NULL;
}

void ein_emu_module_shared(const ein_emu_module *m, void **p, size_t *size) {
  *p = NULL;
  *size = 0;
#ifdef EIN_EMU_SANITIZE /* globals in a section: emu_device.h, prelude */
  char *end, *start = m->shared_range(&end);
  *p = start;
  *size = start ? (size_t)(end - start) : 0;
#else
  if (!m->tls_size)
    return;
  m->tls_touch(); /* the loader allocates this thread's block on first use */
  if (dlinfo(m->handle, RTLD_DI_TLS_DATA, p) == 0 && *p)
    *size = m->tls_size;
#endif
}
