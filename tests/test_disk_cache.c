/*
 * test_disk_cache.c - the on-disk kernel cache (runtime/disk_cache.h):
 * round trips, the directory chosen from the environment, and damaged
 * entries (truncated, a flipped byte, a tail, another key under the same
 * name) read as misses; an unwritable directory, or one where a write
 * fails midway (a full disk, simulated with RLIMIT_FSIZE), makes stores
 * fail without leaving files; processes storing and loading one entry at
 * the same time never read half a file. Plain files, no GPU.
 */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_cache.h"
#include "harness.h"

static void write_file(const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return;
  fwrite(data, 1, n, f);
  fclose(f);
}

static size_t read_file(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, cap, f);
  fclose(f);
  return n;
}

/* No "*.tmp*" file is left in dir. */
static bool no_temporaries(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -a %s | grep -q tmp", dir);
  return system(cmd) != 0;
}

/* A payload big enough that a write takes many system calls. */
enum { BIG = 1 << 20 };

static char *big_payload(void) {
  char *p = malloc(BIG);
  for (int i = 0; i < BIG; i++) p[i] = (char)(i * 7 + (i >> 9));
  return p;
}

/* In a child: a write limit of 4 KiB makes the store fail midway (EFBIG,
 * as ENOSPC would on a full disk). Exit 0 when the store reports failure
 * and leaves nothing. */
static int store_on_full_disk(const char *dir) {
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = {4096, 4096};
  if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 2;
  char *p = big_payload();
  bool stored = ein_disk_cache_store(dir, "full", 4, p, BIG);
  free(p);
  return stored ? 1 : 0;
}

/* In a child: store and load one entry 100 times while other children do
 * the same. Exit 0 when every load missed or returned the whole payload. */
static int store_and_load_racing(const char *dir) {
  char *p = big_payload();
  int bad = 0;
  for (int i = 0; i < 100; i++) {
    ein_disk_cache_store(dir, "shared", 6, p, BIG);
    char *got;
    size_t n;
    if (ein_disk_cache_load(dir, "shared", 6, &got, &n)) {
      bad += n != BIG || memcmp(got, p, BIG) != 0;
      free(got);
    }
  }
  free(p);
  return bad ? 1 : 0;
}

/* Runs fn(dir) in `n` children at once; true when all exit 0. */
static bool in_children(int n, int (*fn)(const char *), const char *dir) {
  pid_t pids[8];
  for (int i = 0; i < n; i++) {
    pids[i] = fork();
    if (pids[i] == 0) _exit(fn(dir));
  }
  bool ok = true;
  for (int i = 0; i < n; i++) {
    int st;
    ok &= pids[i] > 0 && waitpid(pids[i], &st, 0) == pids[i] &&
          WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  return ok;
}

static bool loads(const char *dir, const char *key, const char *want) {
  char *p;
  size_t n;
  if (!ein_disk_cache_load(dir, key, strlen(key), &p, &n))
    return false;
  bool same = n == strlen(want) && memcmp(p, want, n) == 0;
  free(p);
  return same;
}

int main(void) {
  char root[] = "/tmp/einc-disk-cache-XXXXXX";
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  char dir[512], buf[512];

  /* the directory from the environment, in order of precedence */
  setenv("EINC_CACHE_DIR", "/x/cache", 1);
  CHECK(ein_disk_cache_dir(buf, sizeof buf) && !strcmp(buf, "/x/cache"),
        "EINC_CACHE_DIR: %s", buf);
  unsetenv("EINC_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  CHECK(ein_disk_cache_dir(buf, sizeof buf) && !strcmp(buf, "/x/xdg/einc"),
        "XDG_CACHE_HOME: %s", buf);
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/x/home", 1);
  CHECK(ein_disk_cache_dir(buf, sizeof buf) &&
            !strcmp(buf, "/x/home/.cache/einc"),
        "HOME: %s", buf);

  /* a round trip, creating nested directories */
  snprintf(dir, sizeof dir, "%s/a/b/einc", root);
  const char *key = "einc kernel v1\nsm_90\n__global__ void k() {}";
  const char *payload = "\x7f"
                        "ELF pretend cubin bytes";
  CHECK(!loads(dir, key, payload), "miss before the store");
  CHECK(ein_disk_cache_store(dir, key, strlen(key), payload, strlen(payload)),
        "store");
  CHECK(loads(dir, key, payload), "hit after the store");
  CHECK(!loads(dir, "another key", payload), "another key misses");

  char path[1024], file[4096];
  ein_disk_cache_path(dir, key, strlen(key), path, sizeof path);
  size_t n = read_file(path, file, sizeof file);
  CHECK(n > strlen(key) + strlen(payload), "entry has %zu bytes", n);

  /* truncated at every length: always a miss, never a crash */
  int truncated_hits = 0;
  for (size_t cut = 0; cut < n; cut++) {
    write_file(path, file, cut);
    truncated_hits += loads(dir, key, payload);
  }
  CHECK(truncated_hits == 0, "%d truncated entries were read", truncated_hits);
  /* one flipped byte anywhere: a miss */
  int flipped_hits = 0;
  for (size_t at = 0; at < n; at++) {
    file[at] ^= 0x20;
    write_file(path, file, n);
    flipped_hits += loads(dir, key, payload);
    file[at] ^= 0x20;
  }
  CHECK(flipped_hits == 0, "%d corrupted entries were read", flipped_hits);
  /* a tail after the entry: a miss; then a rewrite repairs it */
  char longer[4200];
  memcpy(longer, file, n);
  memcpy(longer + n, "junk", 4);
  write_file(path, longer, n + 4);
  CHECK(!loads(dir, key, payload), "entry with a tail was read");
  CHECK(ein_disk_cache_store(dir, key, strlen(key), payload, strlen(payload)) &&
            loads(dir, key, payload),
        "a store over a damaged entry repairs it");

  /* no temporary files are left behind */
  snprintf(buf, sizeof buf, "ls %s | grep -c tmp > /dev/null", dir);
  CHECK(system(buf) != 0, "a temporary file was left in %s", dir);

  /* an unwritable directory: store fails, nothing appears */
  if (geteuid() != 0) {
    snprintf(dir, sizeof dir, "%s/ro", root);
    mkdir(dir, 0500);
    CHECK(
        !ein_disk_cache_store(dir, key, strlen(key), payload, strlen(payload)),
        "store into a read-only directory succeeded");
    CHECK(!loads(dir, key, payload), "read-only directory has an entry");
    chmod(dir, 0700);
  }
  /* a path through a regular file cannot be a directory */
  snprintf(path, sizeof path, "%s/file", root);
  write_file(path, "x", 1);
  snprintf(dir, sizeof dir, "%s/file/sub", root);
  CHECK(!ein_disk_cache_store(dir, key, strlen(key), payload, strlen(payload)),
        "store under a regular file succeeded");

  /* a missing directory: a miss, then the store creates it */
  snprintf(dir, sizeof dir, "%s/missing/deeper", root);
  CHECK(!loads(dir, key, payload), "a missing directory has an entry");
  CHECK(ein_disk_cache_store(dir, key, strlen(key), payload, strlen(payload)) &&
            loads(dir, key, payload),
        "store into a missing directory");

  /* a write that fails midway: no entry, no temporary file */
  snprintf(dir, sizeof dir, "%s/full", root);
  mkdir(dir, 0700);
  CHECK(in_children(1, store_on_full_disk, dir),
        "a store that could not be written reported success");
  char *got;
  size_t got_n;
  CHECK(!ein_disk_cache_load(dir, "full", 4, &got, &got_n),
        "a half-written entry was read");
  CHECK(no_temporaries(dir), "a failed store left a temporary file");

  /* four processes store and load one 1 MiB entry at the same time */
  snprintf(dir, sizeof dir, "%s/shared", root);
  CHECK(in_children(4, store_and_load_racing, dir),
        "a process read a damaged entry while others stored it");
  CHECK(no_temporaries(dir), "racing stores left a temporary file");

  snprintf(buf, sizeof buf, "rm -rf %s", root);
  if (system(buf) != 0)
    fprintf(stderr, "could not remove %s\n", root);
  return test_summary("disk_cache");
}
