/*
 * disk_cache.c - the on-disk kernel cache (disk_cache.h).
 *
 * File layout, integers little-endian as the host writes them (a cache is
 * never shared across architectures of host):
 *   "EINKC001"  magic and format version
 *   u64 key length, u64 payload length
 *   u64 FNV-1a of the key, u64 FNV-1a of the payload
 *   key bytes, payload bytes
 */
#include "disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "hash.h"

static const char MAGIC[8] = {'E', 'I', 'N', 'K', 'C', '0', '0', '1'};
enum { HEADER = 8 + 4 * 8 };

static uint64_t fnv(const void *data, size_t len, uint64_t seed) {
  return ein_fnv1a(data, len, seed);
}

bool ein_disk_cache_dir(char *buf, size_t cap) {
  const char *d = getenv("EINC_CACHE_DIR");
  if (d && *d)
    return (size_t)snprintf(buf, cap, "%s", d) < cap;
  d = getenv("XDG_CACHE_HOME");
  if (d && *d)
    return (size_t)snprintf(buf, cap, "%s/einc", d) < cap;
  d = getenv("HOME");
  if (d && *d)
    return (size_t)snprintf(buf, cap, "%s/.cache/einc", d) < cap;
  return false;
}

void ein_disk_cache_path(const char *dir, const void *key, size_t keylen,
                         char *buf, size_t cap) {
  uint64_t h1 = fnv(key, keylen, 0xcbf29ce484222325ull);
  uint64_t h2 = fnv(key, keylen, 0x84222325cbf29ce4ull ^ keylen);
  snprintf(buf, cap, "%s/%016llx%016llx.cubin", dir, (unsigned long long)h1,
           (unsigned long long)h2);
}

/* Reads (writing false) or writes all n bytes at p, resuming after
 * signals; false on an error or an early end of file. */
static bool transfer_all(int fd, char *p, size_t n, bool writing) {
  while (n > 0) {
    ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

static bool read_all(int fd, void *buf, size_t n) {
  return transfer_all(fd, buf, n, false);
}

/* write() never writes through its buffer: the cast only shares the loop. */
static bool write_all(int fd, const void *buf, size_t n) {
  return transfer_all(fd, (char *)(uintptr_t)buf, n, true);
}

bool ein_disk_cache_load(const char *dir, const void *key, size_t keylen,
                         char **payload, size_t *size) {
  *payload = NULL;
  *size = 0;
  char path[4096];
  ein_disk_cache_path(dir, key, keylen, path, sizeof path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool ok = false;
  char *k = NULL, *p = NULL;
  unsigned char head[HEADER];
  struct stat sb;
  uint64_t f[4];
  if (fstat(fd, &sb) != 0 || !read_all(fd, head, HEADER) ||
      memcmp(head, MAGIC, 8) != 0)
    goto done;
  memcpy(f, head + 8, sizeof f);
  /* the sizes must add up to the file exactly: no truncation, no tail */
  if (f[0] != keylen || f[1] == 0 || f[1] > (uint64_t)1 << 30 ||
      (uint64_t)sb.st_size != HEADER + f[0] + f[1])
    goto done;
  k = ein_malloc(keylen ? keylen : 1);
  p = ein_malloc((size_t)f[1]);
  if (!k || !p || !read_all(fd, k, keylen) || !read_all(fd, p, (size_t)f[1]))
    goto done;
  if (memcmp(k, key, keylen) != 0 ||
      fnv(k, keylen, 0xcbf29ce484222325ull) != f[2] ||
      fnv(p, (size_t)f[1], 0xcbf29ce484222325ull) != f[3])
    goto done;
  ok = true;
  *payload = p;
  *size = (size_t)f[1];
  p = NULL;
done:
  ein_free(k);
  ein_free(p);
  close(fd);
  return ok;
}

bool ein_make_dirs(const char *dir) {
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s", dir) >= sizeof tmp)
    return false;
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
      return false;
    *p = '/';
  }
  return mkdir(tmp, 0700) == 0 || errno == EEXIST;
}

bool ein_disk_cache_store(const char *dir, const void *key, size_t keylen,
                          const void *payload, size_t size) {
  if (!ein_make_dirs(dir))
    return false;
  char path[4096], tmp[4200];
  ein_disk_cache_path(dir, key, keylen, path, sizeof path);
  static unsigned counter;
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
           __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return false;
  unsigned char head[HEADER];
  uint64_t f[4] = {keylen, size, fnv(key, keylen, 0xcbf29ce484222325ull),
                   fnv(payload, size, 0xcbf29ce484222325ull)};
  memcpy(head, MAGIC, 8);
  memcpy(head + 8, f, sizeof f);
  bool ok = write_all(fd, head, HEADER) && write_all(fd, key, keylen) &&
            write_all(fd, payload, size);
  ok = close(fd) == 0 && ok;
  if (ok)
    ok = rename(tmp, path) == 0;
  if (!ok)
    unlink(tmp);
  return ok;
}
