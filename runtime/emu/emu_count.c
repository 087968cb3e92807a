/*
 * emu_count.c - warp-level requests rebuilt from the accesses of
 * emulated threads, and their sectors and wavefronts (emu_count.h).
 *
 * Resolution sorts the buffered accesses by (warp, instruction, space,
 * thread, arrival): each thread's executions of one instruction are then
 * a run in program order, and the k-th access of every run of a (warp,
 * instruction) group is one request. Sorting by keys that are all
 * distinct makes the result independent of anything but the program.
 */
#include "emu_count.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"

enum { SECTOR = 32, WARP = 32 };

typedef struct access_ev {
  uint64_t addr, site;
  uint32_t seq;
  uint16_t tid;
  uint8_t size, kind; /* kind: K_STORE | K_SHARED */
} access_ev;

enum { K_STORE = 1, K_SHARED = 2 };

struct ein_emu_count_buf {
  access_ev *ev;
  size_t n, cap;
  /* the sectors of the block's global loads so far, each request's once
   * (deduplicated over the block at its end) */
  uint64_t *sec;
  size_t nsec, capsec;
  uint64_t unkept; /* sectors not kept for want of memory: counted as
                      distinct (no reuse assumed) */
};

/* ------------------------------------------------------------ launch */

bool ein_emu_count_launch_init(ein_emu_count_launch *l, int n,
                               const uintptr_t *lo, const uintptr_t *hi) {
  memset(l, 0, sizeof *l);
  l->n = n;
  for (int i = 0; i < n; i++) {
    l->lo[i] = lo[i];
    l->hi[i] = hi[i];
    size_t sectors = (hi[i] - lo[i]) / SECTOR + 2, words = sectors / 64 + 1;
    l->ld_bits[i] = ein_calloc(words, sizeof(uint64_t));
    l->st_bits[i] = ein_calloc(words, sizeof(uint64_t));
    if (!l->ld_bits[i] || !l->st_bits[i]) {
      ein_emu_count_launch_finish(l, NULL);
      return false;
    }
  }
  return true;
}

static uint64_t popcount_all(const uint64_t *bits, size_t words) {
  uint64_t n = 0;
  for (size_t i = 0; i < words; i++)
    n += (uint64_t)__builtin_popcountll(bits[i]);
  return n;
}

/* A sampled launch's distinct sectors of allocation i, scaled to the whole
 * grid but never past the allocation: blocks that read the same data
 * (a repeat, a GEMM's shared operand) cannot add sectors it lacks. */
static uint64_t scaled(uint64_t n, const ein_emu_count_launch *l, int i) {
  if (l->scale <= 1)
    return n;
  uint64_t cap = (l->hi[i] - l->lo[i] + SECTOR - 1) / SECTOR;
  double v = (double)n * l->scale + 0.5;
  return v < (double)cap ? (uint64_t)v : cap;
}

void ein_emu_count_launch_finish(ein_emu_count_launch *l, ein_emu_counters *c) {
  for (int i = 0; i < l->n; i++) {
    size_t words = ((l->hi[i] - l->lo[i]) / SECTOR + 2) / 64 + 1;
    if (c && l->ld_bits[i] && l->st_bits[i]) {
      c->ld_unique_sectors += scaled(popcount_all(l->ld_bits[i], words), l, i);
      c->st_unique_sectors += scaled(popcount_all(l->st_bits[i], words), l, i);
    }
    ein_free(l->ld_bits[i]);
    ein_free(l->st_bits[i]);
    l->ld_bits[i] = l->st_bits[i] = NULL;
  }
  l->n = 0;
}

/* Marks the sectors of [addr, addr + size) in the bitmap of the
 * allocation holding addr. Workers of one launch mark concurrently. */
static void mark_sectors(ein_emu_count_launch *l, uint64_t addr, unsigned size,
                         bool store) {
  for (int i = 0; i < l->n; i++) {
    if (addr < l->lo[i] || addr >= l->hi[i])
      continue;
    uint64_t *bits = store ? l->st_bits[i] : l->ld_bits[i];
    /* sectors counted from the allocation's 256-aligned start */
    uint64_t first = (addr - l->lo[i]) / SECTOR;
    uint64_t last = (addr + size - 1 - l->lo[i]) / SECTOR;
    for (uint64_t s = first; s <= last; s++)
      __atomic_fetch_or(&bits[s / 64], 1ull << (s % 64), __ATOMIC_RELAXED);
    return;
  }
}

/* ------------------------------------------------------------ buffer */

ein_emu_count_buf *ein_emu_count_buf_create(void) {
  return ein_calloc(1, sizeof(ein_emu_count_buf));
}

void ein_emu_count_buf_destroy(ein_emu_count_buf *b) {
  if (!b)
    return;
  ein_free(b->ev);
  ein_free(b->sec);
  ein_free(b);
}

void ein_emu_count_buf_reset(ein_emu_count_buf *b) {
  b->n = b->nsec = 0;
  b->unkept = 0;
}

static bool in_global(const ein_emu_count_launch *l, uintptr_t a) {
  for (int i = 0; i < l->n; i++)
    if (a >= l->lo[i] && a < l->hi[i])
      return true;
  return false;
}

bool ein_emu_count_note(ein_emu_count_buf *b, const ein_emu_count_launch *l,
                        const char *shared, size_t shared_size, unsigned tid,
                        uintptr_t addr, unsigned size, bool store,
                        uintptr_t site) {
  bool sh = shared_size && addr - (uintptr_t)shared < shared_size;
  if (!sh && !in_global(l, addr))
    return true;
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 4096;
    access_ev *ev = ein_realloc(b->ev, cap * sizeof *ev);
    if (!ev)
      return false;
    b->ev = ev;
    b->cap = cap;
  }
  b->ev[b->n] = (access_ev){.addr = addr, .site = site,
                            .seq = (uint32_t)b->n, .tid = (uint16_t)tid,
                            .size = (uint8_t)size, /* at most 16 */
                            .kind = (uint8_t)((store ? K_STORE : 0) |
                                              (sh ? K_SHARED : 0))};
  b->n++;
  return true;
}

/* ------------------------------------------------------- one request */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Distinct bytes of the lanes' ranges: the ranges sorted by start and
 * merged. `scratch` holds 2 * lanes values. */
static uint64_t distinct_bytes(const uint64_t *addr, const unsigned *size,
                               int lanes, uint64_t *scratch) {
  for (int i = 0; i < lanes; i++)
    scratch[i] = addr[i] << 8 | size[i]; /* sizes are below 256 */
  qsort(scratch, (size_t)lanes, sizeof *scratch, cmp_u64);
  uint64_t total = 0, end = 0;
  for (int i = 0; i < lanes; i++) {
    uint64_t lo = scratch[i] >> 8, hi = lo + (scratch[i] & 255);
    if (lo < end)
      lo = end;
    if (hi > lo)
      total += hi - lo;
    if (hi > end)
      end = hi;
  }
  return total;
}

/* The distinct sectors of a request's lanes, sorted, into sec (room for
 * 2 * WARP: a lane's access is at most 16 bytes, 2 sectors when it
 * straddles); returns their number. */
static int request_sectors(const uint64_t *addr, const unsigned *size,
                           int lanes, uint64_t *sec) {
  int n = 0;
  for (int i = 0; i < lanes && i < WARP; i++)
    for (uint64_t s = addr[i] / SECTOR;
         s <= (addr[i] + size[i] - 1) / SECTOR && n < WARP * 2; s++)
      sec[n++] = s;
  qsort(sec, (size_t)n, sizeof *sec, cmp_u64);
  int distinct = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || sec[i] != sec[i - 1])
      sec[distinct++] = sec[i];
  return distinct;
}

void ein_emu_global_request(const uint64_t *addr, const unsigned *size,
                            int lanes, uint64_t *sectors, uint64_t *ideal,
                            uint64_t *bytes) {
  uint64_t sec[WARP * 2], scratch[WARP];
  *sectors = (uint64_t)request_sectors(addr, size, lanes, sec);
  *bytes = distinct_bytes(addr, size, lanes < WARP ? lanes : WARP, scratch);
  *ideal = (*bytes + SECTOR - 1) / SECTOR;
}

/* The wavefronts one phase's distinct words need: a bank (word % 32)
 * serves one distinct word per wavefront; lanes reading the same word
 * share it (a broadcast). */
static uint64_t phase_wavefronts(uint64_t *words, int n) {
  qsort(words, (size_t)n, sizeof *words, cmp_u64);
  int per_bank[WARP] = {0}, most = 0;
  for (int i = 0; i < n; i++) {
    if (i > 0 && words[i] == words[i - 1])
      continue;
    int b = (int)(words[i] % WARP);
    if (++per_bank[b] > most)
      most = per_bank[b];
  }
  return (uint64_t)most;
}

void ein_emu_shared_request(const uint64_t *addr, const unsigned *size,
                            const unsigned *lane, int lanes,
                            uint64_t *wavefronts, uint64_t *ideal) {
  unsigned widest = 0;
  for (int i = 0; i < lanes; i++)
    widest = size[i] > widest ? size[i] : widest;
  /* 8-byte accesses are served a half-warp, 16-byte ones a quarter-warp
   * at a time: 128 bytes a wavefront at best */
  unsigned per_phase = widest > 8 ? 8 : widest > 4 ? 16 : 32;
  /* at most 16 bytes a lane: 5 words when misaligned */
  uint64_t words[WARP * 5], scratch[WARP], total = 0;
  for (unsigned p = 0; p < WARP / per_phase; p++) {
    int n = 0;
    for (int i = 0; i < lanes; i++) {
      if (lane[i] / per_phase != p)
        continue;
      for (uint64_t w = addr[i] / 4; w <= (addr[i] + size[i] - 1) / 4 &&
                                     n < WARP * 5; w++)
        words[n++] = w;
    }
    total += phase_wavefronts(words, n);
  }
  *wavefronts = total;
  uint64_t bytes = distinct_bytes(addr, size, lanes < WARP ? lanes : WARP,
                                  scratch);
  *ideal = bytes ? (bytes + 127) / 128 : 0;
}

/* ---------------------------------------------------------- resolving */

static int cmp_ev(const void *pa, const void *pb) {
  const access_ev *a = pa, *b = pb;
  unsigned wa = a->tid / WARP, wb = b->tid / WARP;
  if (wa != wb) return wa < wb ? -1 : 1;
  if (a->site != b->site) return a->site < b->site ? -1 : 1;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static bool same_group(const access_ev *a, const access_ev *b) {
  return a->tid / WARP == b->tid / WARP && a->site == b->site &&
         a->kind == b->kind;
}

/* Keeps a load request's distinct sectors for the block's footprint. */
static void keep_sectors(ein_emu_count_buf *b, const uint64_t *addr,
                         const unsigned *size, int lanes) {
  uint64_t sec[WARP * 2];
  int n = request_sectors(addr, size, lanes, sec);
  if (n == 0)
    return;
  if (b->nsec + (size_t)n > b->capsec) {
    size_t cap = b->capsec ? 2 * b->capsec : 4096;
    while (cap < b->nsec + (size_t)n)
      cap *= 2;
    uint64_t *p = ein_realloc(b->sec, cap * sizeof *p);
    if (!p) {
      b->unkept += (uint64_t)n;
      return;
    }
    b->sec = p;
    b->capsec = cap;
  }
  memcpy(b->sec + b->nsec, sec, (size_t)n * sizeof *sec);
  b->nsec += (size_t)n;
}

void ein_emu_count_block_end(ein_emu_count_buf *b, ein_emu_counters *c) {
  if (b->nsec) /* qsort's base may not be NULL, even for none */
    qsort(b->sec, b->nsec, sizeof *b->sec, cmp_u64);
  uint64_t distinct = 0;
  for (size_t i = 0; i < b->nsec; i++)
    distinct += i == 0 || b->sec[i] != b->sec[i - 1];
  c->ld_block_sectors += distinct + b->unkept;
  b->nsec = 0;
  b->unkept = 0;
}

/* One request: the k-th access of each lane's run, counted. */
static void count_request(ein_emu_count_buf *b, const access_ev *const *ev,
                          int lanes, ein_emu_count_launch *l,
                          ein_emu_counters *c) {
  uint64_t addr[WARP], s1, s2, s3;
  unsigned size[WARP], lane[WARP];
  for (int i = 0; i < lanes; i++) {
    addr[i] = ev[i]->addr;
    size[i] = ev[i]->size;
    lane[i] = ev[i]->tid % WARP;
  }
  bool store = ev[0]->kind & K_STORE;
  if (ev[0]->kind & K_SHARED) {
    ein_emu_shared_request(addr, size, lane, lanes, &s1, &s2);
    *(store ? &c->sh_st_requests : &c->sh_ld_requests) += 1;
    *(store ? &c->sh_st_wavefronts : &c->sh_ld_wavefronts) += s1;
    *(store ? &c->sh_st_ideal : &c->sh_ld_ideal) += s2;
    return;
  }
  ein_emu_global_request(addr, size, lanes, &s1, &s2, &s3);
  *(store ? &c->st_requests : &c->ld_requests) += 1;
  *(store ? &c->st_sectors : &c->ld_sectors) += s1;
  *(store ? &c->st_ideal_sectors : &c->ld_ideal_sectors) += s2;
  *(store ? &c->st_bytes : &c->ld_bytes) += s3;
  if (!store)
    keep_sectors(b, addr, size, lanes);
  for (int i = 0; i < lanes; i++)
    mark_sectors(l, addr[i], size[i], store);
}

/* The requests of one (warp, instruction, space) group ev[0..n): lane
 * runs start[] and len[], then the k-th of every run together. */
static void resolve_group(ein_emu_count_buf *b, const access_ev *ev,
                          size_t n, ein_emu_count_launch *l,
                          ein_emu_counters *c) {
  size_t start[WARP], len[WARP], most = 0;
  int runs = 0;
  for (size_t i = 0; i < n; runs++) {
    size_t j = i;
    while (j < n && ev[j].tid == ev[i].tid)
      j++;
    start[runs] = i;
    len[runs] = j - i;
    most = len[runs] > most ? len[runs] : most;
    i = j;
  }
  const access_ev *req[WARP];
  for (size_t k = 0; k < most; k++) {
    int lanes = 0;
    for (int r = 0; r < runs; r++)
      if (len[r] > k)
        req[lanes++] = &ev[start[r] + k];
    count_request(b, req, lanes, l, c);
  }
}

void ein_emu_count_resolve(ein_emu_count_buf *b, ein_emu_count_launch *l,
                           ein_emu_counters *c) {
  qsort(b->ev, b->n, sizeof *b->ev, cmp_ev);
  for (size_t i = 0; i < b->n;) {
    size_t j = i + 1;
    while (j < b->n && same_group(&b->ev[i], &b->ev[j]))
      j++;
    resolve_group(b, b->ev + i, j - i, l, c);
    i = j;
  }
  b->n = 0;
}

/* every member is a uint64_t */
_Static_assert(sizeof(ein_emu_counters) % sizeof(uint64_t) == 0,
               "ein_emu_counters holds only uint64_t counters");

void ein_emu_counters_add(ein_emu_counters *a, const ein_emu_counters *b) {
  uint64_t *x = (uint64_t *)a;
  const uint64_t *y = (const uint64_t *)b;
  for (size_t i = 0; i < sizeof *a / sizeof(uint64_t); i++)
    x[i] += y[i];
}
