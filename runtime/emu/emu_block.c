/*
 * emu_block.c - one thread block of an emulated launch (emu_block.h).
 *
 * Every GPU thread of the block is a fiber on its own stack region; the
 * region is EIN_EMU_STACK_BYTES-aligned and starts with the thread's
 * ein_emu_thread (prelude_host.h), so a kernel finds threadIdx from its
 * stack pointer. Threads run one after another on the worker's OS thread
 * and switch only when they wait: at __syncthreads, __syncwarp or a
 * shuffle. A thread that ends without waiting leaves its stack to the
 * next thread not yet started, so a kernel without barriers runs its whole
 * block on one stack with no switch at all (the trick HIP-CPU uses); only
 * threads that are waiting hold a stack.
 *
 * When a thread waits, the next context is a thread made ready by a
 * completed barrier or shuffle, else a fresh fiber for the next thread
 * not yet started, else the scheduler, which then knows that nothing can
 * run: either every thread ended, or the waiting ones wait for something
 * that will never come (a deadlock, reported, never a hang).
 *
 * Shuffles are exchanges among the lanes a mask names: each lane leaves
 * its value and waits; the last lane to arrive computes every lane's
 * result and wakes the others. A lane reading from a lane outside the
 * mask gets a poison value (a NaN for floats), so a wrong mask gives a
 * wrong answer, as it may on a GPU.
 */
#include "emu_block.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc.h"
#include "emu_fiber.h"
#define EIN_EMU_ABI_ONLY
#include "prelude_host.h"

enum {
  MAX_THREADS = 1024,         /* CUDA's limit per block */
  WARPS = MAX_THREADS / 32,
  GROUPS = 4,                 /* shuffles pending at once in one warp */
  DETAIL = 3072
};

enum { EXCH_SYNCWARP = -1 }; /* __syncwarp, an exchange without values */

typedef enum { T_IDLE, T_RUN, T_BARRIER, T_SHFL, T_EXITED } thread_state;

typedef struct fiber {
  ein_emu_thread t; /* first: the kernel finds it at the region's base */
  ein_emu_ctx ctx;
  ein_emu_worker *w;
  unsigned id; /* linear thread id in the block, x fastest */
  unsigned long long shfl_out;
  bool dirty; /* abandoned mid-call: its stack's ASan state is stale */
  struct fiber *next;
} fiber;

/* One pending shuffle (or __syncwarp) of a warp: the lanes of `mask`
 * that arrived so far. */
typedef struct group {
  unsigned mask, arrived;
  int kind, size, width, line;
  unsigned long long val[32];
  int arg[32];
  fiber *fib[32];
} group;

typedef struct warp {
  unsigned long long basic_blocks; /* its lanes' most (counting) */
  unsigned gone;    /* lanes that exited or do not exist */
  unsigned pending; /* lanes named by a pending group */
  group g[GROUPS];
} warp;

typedef struct block {
  ein_emu_block_abi abi; /* the kernel's view */
  const ein_emu_run *l;
  unsigned n, started, exited, blocked;
  unsigned bar_count; /* threads waiting at the barrier */
  int bar_line;
  bool failed;
  char detail[DETAIL];
  unsigned char state[MAX_THREADS]; /* thread_state */
  int line[MAX_THREADS];            /* where a waiting thread waits */
  signed char op[MAX_THREADS];      /* and in which shuffle */
  fiber *fib[MAX_THREADS];          /* the fibers waiting at the barrier */
  fiber *ready[MAX_THREADS];        /* a ring: released, not yet resumed */
  unsigned rhead, rcount;
  unsigned char sel[MAX_THREADS];   /* scratch for messages */
  warp warps[WARPS];
} block;

struct ein_emu_worker {
  ein_emu_ctx sched;
  block b;
  fiber *free, *used; /* stacks: idle, and taken by the current block */
  void *shared;
  size_t shared_size, page;
  ein_emu_count_buf *count; /* accesses since the last barrier */
  ein_emu_counters counted; /* resolved, since the last take */
};

static void emu_sync(ein_emu_thread *self, int kind, unsigned mask, int line);
static unsigned long long emu_shfl(ein_emu_thread *self, int kind,
                                   unsigned mask, unsigned long long bits,
                                   int size, int arg, int width, int line);
static void emu_access(ein_emu_thread *self, const void *addr, unsigned size,
                       int store, const void *site);

/* ---------------------------------------------------------- the worker */

ein_emu_worker *ein_emu_worker_create(void) {
  ein_emu_worker *w = ein_calloc(1, sizeof *w);
  if (!w)
    return NULL;
  ein_emu_ctx_init_thread(&w->sched);
  long page = sysconf(_SC_PAGESIZE);
  w->page = page > 0 ? (size_t)page : 4096;
  w->b.abi.sync = emu_sync;
  w->b.abi.shfl = emu_shfl;
  w->b.abi.access = emu_access;
  return w;
}

static void unmap_list(fiber *f) {
  while (f) {
    fiber *next = f->next;
    munmap(f, EIN_EMU_STACK_BYTES);
    f = next;
  }
}

void ein_emu_worker_destroy(ein_emu_worker *w) {
  if (!w)
    return;
  unmap_list(w->free);
  unmap_list(w->used);
  ein_emu_count_buf_destroy(w->count);
  ein_free(w);
}

void ein_emu_worker_rebind(ein_emu_worker *w) {
  ein_emu_ctx_init_thread(&w->sched);
}

void ein_emu_worker_set_shared(ein_emu_worker *w, void *shared, size_t size) {
  w->shared = shared;
  w->shared_size = shared ? size : 0;
}

void ein_emu_worker_take_counters(ein_emu_worker *w, ein_emu_counters *out) {
  ein_emu_counters_add(out, &w->counted);
  memset(&w->counted, 0, sizeof w->counted);
}

/* ------------------------------------------------------------ messages */

/* "0-15, 17, 40-63": the thread ids i < n with sel[i] set. */
static void fmt_ids(char *buf, size_t cap, const unsigned char *sel,
                    unsigned n) {
  size_t len = 0;
  buf[0] = 0;
  for (unsigned i = 0; i < n && len < cap; i++) {
    if (!sel[i])
      continue;
    unsigned j = i;
    while (j + 1 < n && sel[j + 1])
      j++;
    int r = j > i ? snprintf(buf + len, cap - len, "%s%u-%u", len ? ", " : "",
                             i, j)
                  : snprintf(buf + len, cap - len, "%s%u", len ? ", " : "", i);
    len += r > 0 ? (size_t)r : 0;
    i = j;
  }
}

/* The ids of threads in `state` (at `line`, when line >= 0). */
static const char *ids_in(block *b, int state, int line, char *buf,
                          size_t cap) {
  for (unsigned i = 0; i < b->n; i++)
    b->sel[i] = b->state[i] == state && (line < 0 || b->line[i] == line);
  fmt_ids(buf, cap, b->sel, b->n);
  return buf;
}

/* The thread ids of lanes `mask` of warp `wi`. */
static const char *ids_of_lanes(block *b, unsigned wi, unsigned mask,
                                char *buf, size_t cap) {
  memset(b->sel, 0, b->n);
  for (unsigned l = 0; l < 32; l++)
    if ((mask >> l & 1u) && wi * 32 + l < b->n)
      b->sel[wi * 32 + l] = 1;
  fmt_ids(buf, cap, b->sel, b->n);
  return buf;
}

static const char *op_name(int kind) {
  switch (kind) {
  case EIN_EMU_SHFL_IDX: return "__shfl_sync";
  case EIN_EMU_SHFL_UP: return "__shfl_up_sync";
  case EIN_EMU_SHFL_DOWN: return "__shfl_down_sync";
  case EIN_EMU_SHFL_XOR: return "__shfl_xor_sync";
  default: return "__syncwarp";
  }
}

/* Stops the block: records what went wrong and leaves this thread for
 * good (the block's other fibers are abandoned where they wait). */
__attribute__((format(printf, 2, 3))) static _Noreturn void
fail(fiber *f, const char *fmt, ...) {
  block *b = &f->w->b;
  if (!b->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->detail, sizeof b->detail, fmt, ap);
    va_end(ap);
  }
  b->failed = true;
  f->dirty = true;
  ein_emu_ctx_exit(&f->ctx, &f->w->sched);
}

/* Nothing can run but threads wait: say who waits where. */
static void describe_deadlock(block *b) {
  size_t len = (size_t)snprintf(b->detail, sizeof b->detail,
                                "deadlock, no thread can go on:");
  char ids[1024];
  for (int s = T_BARRIER; s <= T_EXITED; s++)
    for (unsigned i = 0; i < b->n && len < sizeof b->detail; i++) {
      if (b->state[i] != s)
        continue;
      int line = s == T_EXITED ? -1 : b->line[i];
      bool seen = false; /* this (state, line) already described */
      for (unsigned k = 0; k < i && !seen; k++)
        seen = b->state[k] == s && (line < 0 || b->line[k] == line);
      if (seen)
        continue;
      ids_in(b, s, line, ids, sizeof ids);
      const char *what = s == T_BARRIER ? "__syncthreads()" : op_name(b->op[i]);
      int r = line < 0 ? snprintf(b->detail + len, sizeof b->detail - len,
                                  " threads %s exited;", ids)
                       : snprintf(b->detail + len, sizeof b->detail - len,
                                  " threads %s wait at %s on line %d;", ids,
                                  what, line);
      len += r > 0 ? (size_t)r : 0;
    }
  b->failed = true;
}

/* -------------------------------------------------------------- fibers */

static size_t stack_offset(const ein_emu_worker *w) {
  return 2 * w->page; /* the fiber's page, then a guard page */
}

/* A new EIN_EMU_STACK_BYTES-aligned region: over-map and trim. */
static fiber *fiber_map(ein_emu_worker *w) {
  const size_t S = EIN_EMU_STACK_BYTES;
  char *raw = mmap(NULL, 2 * S, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED)
    return NULL;
  char *base = (char *)(((uintptr_t)raw + S - 1) & ~(uintptr_t)(S - 1));
  size_t head = (size_t)(base - raw);
  if (head)
    munmap(raw, head);
  munmap(base + S, S - head);
  /* a stack overflow faults instead of overwriting the fiber */
  mprotect(base + w->page, w->page, PROT_NONE);
  return (fiber *)base;
}

static void fiber_main(void *arg);

static fiber *fiber_take(ein_emu_worker *w) {
  fiber *f = w->free;
  if (f)
    w->free = f->next;
  else if (!(f = fiber_map(w)))
    return NULL;
  char *lo = (char *)f + stack_offset(w);
  size_t size = EIN_EMU_STACK_BYTES - stack_offset(w);
  if (f->dirty)
    ein_emu_stack_reset(lo, size);
  f->dirty = false;
  f->w = w;
  f->t.block = &w->b.abi;
  f->next = w->used;
  w->used = f;
  ein_emu_ctx_make(&f->ctx, lo, size, fiber_main, f);
  return f;
}

static void ready_push(block *b, fiber *f) {
  b->ready[(b->rhead + b->rcount++) % MAX_THREADS] = f;
}

/* What runs when the current thread waits or ends. */
static ein_emu_ctx *next_ctx(ein_emu_worker *w) {
  block *b = &w->b;
  if (b->rcount) {
    fiber *f = b->ready[b->rhead];
    b->rhead = (b->rhead + 1) % MAX_THREADS;
    b->rcount--;
    return &f->ctx;
  }
  if (b->started < b->n && !b->failed) {
    fiber *f = fiber_take(w);
    if (f) {
      f->id = b->started++;
      return &f->ctx;
    }
    snprintf(b->detail, sizeof b->detail,
             "no memory for the stack of thread %u", b->started);
    b->failed = true;
  }
  return &w->sched;
}

/* The current thread waits until a barrier or shuffle releases it. */
static void wait_here(fiber *f) {
  f->w->b.blocked++;
  ein_emu_ctx_switch(&f->ctx, next_ctx(f->w));
}

static void release(block *b, fiber *f) {
  b->state[f->id] = T_RUN;
  b->blocked--;
  ready_push(b, f);
}

/* ------------------------------------------------------------- threads */

static void thread_begin(block *b, fiber *f) {
  unsigned bx = b->abi.block_dim.x, by = b->abi.block_dim.y;
  f->t.thread_idx.x = f->id % bx;
  f->t.thread_idx.y = f->id / bx % by;
  f->t.thread_idx.z = f->id / bx / by;
  f->t.basic_blocks = 0;
  b->state[f->id] = T_RUN;
}

/* A thread that ends must not be awaited by anyone. */
static void thread_end(block *b, fiber *f) {
  unsigned id = f->id, bit = 1u << (id & 31);
  warp *wp = &b->warps[id >> 5];
  char ids[1024];
  b->state[id] = T_EXITED;
  b->exited++;
  wp->gone |= bit;
  if (f->t.basic_blocks > wp->basic_blocks)
    wp->basic_blocks = f->t.basic_blocks;
  if (b->bar_count)
    fail(f,
         "thread %u exited while threads %s wait at __syncthreads() on line "
         "%d: a barrier that not every thread of the block reaches (on a "
         "GPU: a hang or undefined behaviour)",
         id, ids_in(b, T_BARRIER, b->bar_line, ids, sizeof ids), b->bar_line);
  if (!(wp->pending & bit))
    return;
  for (int k = 0; k < GROUPS; k++) {
    group *g = &wp->g[k];
    if (g->arrived && (g->mask & bit))
      fail(f,
           "thread %u (lane %u of warp %u) exited while threads %s wait for "
           "it in %s on line %d (mask 0x%08x): a lane named in the mask "
           "never arrives (on a GPU: a hang or undefined behaviour)",
           id, id & 31, id >> 5,
           ids_of_lanes(b, id >> 5, g->arrived, ids, sizeof ids),
           op_name(g->kind), g->line, g->mask);
  }
}

static void fiber_main(void *arg) {
  fiber *f = arg;
  ein_emu_ctx_started();
  ein_emu_worker *w = f->w;
  block *b = &w->b;
  const ein_emu_run *l = b->l;
  for (;;) {
    thread_begin(b, f);
    l->entry(l->d, l->s0, l->s1);
    thread_end(b, f);
    if (b->started >= b->n)
      break;
    f->id = b->started++; /* the next thread reuses this stack */
  }
  ein_emu_ctx_exit(&f->ctx, next_ctx(w));
}

/* ------------------------------------------------------------ barriers */

static void emu_sync(ein_emu_thread *self, int kind, unsigned mask,
                     int line) {
  fiber *f = (fiber *)self;
  if (kind == EIN_EMU_SYNC_WARP) {
    emu_shfl(self, EXCH_SYNCWARP, mask, 0, 4, 0, 32, line);
    return;
  }
  block *b = &f->w->b;
  char ids[1024];
  if (b->exited)
    fail(f,
         "thread %u reached __syncthreads() on line %d after threads %s "
         "exited: a barrier that not every thread of the block reaches (on "
         "a GPU: a hang or undefined behaviour)",
         f->id, line, ids_in(b, T_EXITED, -1, ids, sizeof ids));
  if (b->bar_count && b->bar_line != line)
    fail(f,
         "threads %s wait at __syncthreads() on line %d while thread %u "
         "reached the one on line %d: threads of one block at different "
         "barriers (on a GPU: undefined behaviour)",
         ids_in(b, T_BARRIER, b->bar_line, ids, sizeof ids), b->bar_line,
         f->id, line);
  b->bar_line = line;
  if (++b->bar_count < b->n) {
    b->state[f->id] = T_BARRIER;
    b->line[f->id] = line;
    b->fib[f->id] = f;
    wait_here(f);
    return;
  }
  b->bar_count = 0; /* the last to arrive releases the others */
  if (b->l->count && f->w->count) /* every thread stopped: requests whole */
    ein_emu_count_resolve(f->w->count, b->l->count, &f->w->counted);
  for (unsigned i = 0; i < b->n; i++)
    if (b->state[i] == T_BARRIER)
      release(b, b->fib[i]);
}

/* ------------------------------------------------------------ shuffles */

/* The lane whose value lane `lane` reads, as CUDA defines each shuffle
 * (outside the lane's width-sized segment: its own value). */
static unsigned source_lane(int kind, unsigned lane, int arg, unsigned width) {
  unsigned base = lane & ~(width - 1), off = lane & (width - 1);
  unsigned a = (unsigned)arg, s;
  switch (kind) {
  case EIN_EMU_SHFL_IDX: return base + (a & (width - 1));
  case EIN_EMU_SHFL_UP: return a > off ? lane : lane - a;
  case EIN_EMU_SHFL_DOWN: return off + a >= width ? lane : lane + a;
  case EIN_EMU_SHFL_XOR:
    s = lane ^ a;
    return s >= base + width ? lane : s;
  default: return lane;
  }
}

/* What a lane reads from a lane outside the mask: a NaN as a float or
 * double, a large wrong number as an integer. */
static unsigned long long poison(int size) {
  return size == 4 ? 0x7fbadbadull : 0x7ff4badbadbadbadull;
}

/* The last lane to arrive hands every lane its value and wakes them. */
static unsigned long long complete(block *b, group *g, unsigned self_lane) {
  unsigned long long mine = 0;
  for (unsigned l = 0; l < 32; l++) {
    if (!(g->mask >> l & 1u))
      continue;
    unsigned s = source_lane(g->kind, l, g->arg[l], (unsigned)g->width);
    unsigned long long v = s < 32 && (g->mask >> s & 1u) ? g->val[s]
                                                          : poison(g->size);
    if (l == self_lane) {
      mine = v;
      continue;
    }
    g->fib[l]->shfl_out = v;
    release(b, g->fib[l]);
  }
  g->arrived = 0;
  return mine;
}

/* The pending group of this lane's mask, or a free one; a pending group
 * whose mask overlaps but differs is an error. */
static group *find_group(block *b, fiber *f, warp *wp, int kind,
                         unsigned mask, int line) {
  group *free_g = NULL;
  char ids[1024];
  for (int k = 0; k < GROUPS; k++) {
    group *g = &wp->g[k];
    if (!g->arrived) {
      free_g = free_g ? free_g : g;
      continue;
    }
    if (g->mask == mask)
      return g;
    if (g->mask & mask)
      fail(f,
           "threads %s wait in %s on line %d with mask 0x%08x while thread "
           "%u calls %s on line %d with mask 0x%08x: lanes of one warp "
           "disagree on the mask (on a GPU: undefined behaviour)",
           ids_of_lanes(b, f->id >> 5, g->arrived, ids, sizeof ids),
           op_name(g->kind), g->line, g->mask, f->id, op_name(kind), line,
           mask);
  }
  if (!free_g)
    fail(f, "more than %d shuffles with different masks pending in warp %u",
         GROUPS, f->id >> 5);
  return free_g;
}

static void check_call(fiber *f, warp *wp, int kind, unsigned mask,
                       int width, int line) {
  unsigned lane = f->id & 31;
  char ids[1024];
  if (!(mask >> lane & 1u))
    fail(f,
         "thread %u (lane %u of warp %u) calls %s on line %d with mask "
         "0x%08x, which leaves out its own lane (on a GPU: undefined "
         "behaviour)",
         f->id, lane, f->id >> 5, op_name(kind), line, mask);
  if (width < 1 || width > 32 || (width & (width - 1)))
    fail(f, "thread %u calls %s on line %d with width %d: not a power of 2 "
            "up to 32", f->id, op_name(kind), line, width);
  if (mask & wp->gone) {
    unsigned char lanes[32];
    for (int l = 0; l < 32; l++)
      lanes[l] = (mask & wp->gone) >> l & 1u;
    fmt_ids(ids, sizeof ids, lanes, 32);
    fail(f,
         "thread %u calls %s on line %d with mask 0x%08x, which names lanes "
         "%s of warp %u that exited or are not in the block (on a GPU: a "
         "hang or undefined behaviour)",
         f->id, op_name(kind), line, mask, ids, f->id >> 5);
  }
}

static unsigned long long emu_shfl(ein_emu_thread *self, int kind,
                                   unsigned mask, unsigned long long bits,
                                   int size, int arg, int width, int line) {
  fiber *f = (fiber *)self;
  block *b = &f->w->b;
  unsigned lane = f->id & 31;
  warp *wp = &b->warps[f->id >> 5];
  check_call(f, wp, kind, mask, width, line);
  group *g = find_group(b, f, wp, kind, mask, line);
  char ids[1024];
  if (!g->arrived) {
    g->mask = mask;
    g->kind = kind;
    g->size = size;
    g->width = width;
    g->line = line;
    wp->pending |= mask;
  } else if (g->kind != kind || g->line != line || g->size != size ||
             g->width != width) {
    fail(f,
         "threads %s wait in %s on line %d while thread %u calls %s on line "
         "%d (same mask 0x%08x): lanes of one warp at different shuffles "
         "(on a GPU: undefined behaviour)",
         ids_of_lanes(b, f->id >> 5, g->arrived, ids, sizeof ids),
         op_name(g->kind), g->line, f->id, op_name(kind), line, mask);
  }
  g->val[lane] = bits;
  g->arg[lane] = arg;
  g->fib[lane] = f;
  g->arrived |= 1u << lane;
  if (g->arrived == mask) {
    wp->pending &= ~mask;
    return complete(b, g, lane);
  }
  b->state[f->id] = T_SHFL;
  b->line[f->id] = line;
  b->op[f->id] = (signed char)kind;
  wait_here(f);
  return f->shfl_out;
}

/* ------------------------------------------------------------ counting */

/* A memory access of a counting-flavour kernel: kept for resolution at
 * the next barrier or the block's end (emu_count.h). An access wider than
 * 16 bytes (an aggregate the host compiler copies at once) is what a GPU
 * does in 16-byte instructions: one piece each, as sites of their own
 * (the site's address shifted left, the piece in the low byte). */
static void emu_access(ein_emu_thread *self, const void *addr, unsigned size,
                       int store, const void *site) {
  fiber *f = (fiber *)self;
  ein_emu_worker *w = f->w;
  if (!w->b.l->count)
    return;
  if (!w->count && !(w->count = ein_emu_count_buf_create()))
    fail(f, "no memory for the memory-access counters");
  for (unsigned k = 0; k * 16 < size; k++) {
    unsigned piece = size - k * 16 < 16 ? size - k * 16 : 16;
    if (!ein_emu_count_note(w->count, w->b.l->count, w->shared,
                            w->shared_size, f->id, (uintptr_t)addr + 16 * k,
                            piece, store != 0,
                            ((uintptr_t)site << 8) | (k & 255)))
      fail(f, "no memory for the memory-access counters");
  }
}

/* ---------------------------------------------------------- the block */

static void block_reset(ein_emu_worker *w, const ein_emu_run *l,
                        uint64_t linear) {
  block *b = &w->b;
  b->l = l;
  b->abi.block_dim = (ein_emu_uint3){l->block[0], l->block[1], l->block[2]};
  b->abi.grid_dim = (ein_emu_uint3){l->grid[0], l->grid[1], l->grid[2]};
  b->abi.block_idx.x = (unsigned)(linear % l->grid[0]);
  b->abi.block_idx.y = (unsigned)(linear / l->grid[0] % l->grid[1]);
  b->abi.block_idx.z = (unsigned)(linear / l->grid[0] / l->grid[1]);
  b->n = l->block[0] * l->block[1] * l->block[2];
  b->started = b->exited = b->blocked = b->bar_count = 0;
  b->bar_line = -1;
  b->failed = false;
  b->rhead = b->rcount = 0;
  memset(b->state, T_IDLE, b->n);
  for (unsigned i = 0; i < (b->n + 31) / 32; i++) {
    warp *wp = &b->warps[i];
    unsigned lanes = b->n - i * 32;
    wp->gone = lanes >= 32 ? 0 : ~((1u << lanes) - 1u);
    wp->pending = 0;
    wp->basic_blocks = 0;
    for (int k = 0; k < GROUPS; k++)
      wp->g[k].arrived = 0;
  }
}

/* Every stack the block took goes back to the pool. */
static void recycle(ein_emu_worker *w, bool abandoned) {
  while (w->used) {
    fiber *f = w->used;
    w->used = f->next;
    f->dirty |= abandoned;
    f->next = w->free;
    w->free = f;
  }
}

bool ein_emu_block_run(ein_emu_worker *w, const ein_emu_run *l,
                       uint64_t linear, char *msg, size_t cap) {
  block *b = &w->b;
  block_reset(w, l, linear);
  if (w->shared_size) /* unwritten shared memory reads as NaN or -1 */
    memset(w->shared, 0xff, w->shared_size);
  ein_emu_ctx *first = next_ctx(w);
  if (first != &w->sched)
    ein_emu_ctx_switch(&w->sched, first);
  if (!b->failed && b->blocked)
    describe_deadlock(b);
  if (!b->failed && l->count && w->count) {
    ein_emu_count_resolve(w->count, l->count, &w->counted);
    ein_emu_count_block_end(w->count, &w->counted);
    for (unsigned i = 0; i < (b->n + 31) / 32; i++)
      w->counted.warp_basic_blocks += b->warps[i].basic_blocks;
  }
  else if (w->count)
    ein_emu_count_buf_reset(w->count);
  recycle(w, b->failed);
  if (!b->failed)
    return true;
  snprintf(msg, cap,
           "%s, block (%u,%u,%u) of grid (%u,%u,%u), block size "
           "(%u,%u,%u), threads numbered x fastest: %s",
           l->kernel, b->abi.block_idx.x, b->abi.block_idx.y,
           b->abi.block_idx.z, l->grid[0], l->grid[1], l->grid[2],
           l->block[0], l->block[1], l->block[2], b->detail);
  return false;
}
