/*
 * test_disk_cache.c - the on-disk kernel cache (runtime/disk_cache.h):
 * round trips, the directory chosen from the environment, and damaged
 * entries (truncated, a flipped byte, a tail, another key under the same
 * name) read as misses; an unwritable directory makes stores fail without
 * leaving files. Plain files, no GPU.
 */
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

  snprintf(buf, sizeof buf, "rm -rf %s", root);
  if (system(buf) != 0)
    fprintf(stderr, "could not remove %s\n", root);
  return test_summary("disk_cache");
}
