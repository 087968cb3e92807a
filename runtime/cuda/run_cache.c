/*
 * run_cache.c - kernel handle sets and the GEMM pointer-array key
 * (run_cache.h).
 *
 * The sets form a list that only grows at its head. A set is filled
 * completely, and links to the head it replaces, before it is published
 * with a release store; a reader's acquire load of the head therefore
 * sees every set reachable from it whole, and no set changes or goes away
 * until the collection is destroyed. Writers take a mutex, so two threads
 * adding for one owner publish one set between them.
 */
#include "run_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"

typedef struct kernel_set {
  uint64_t owner;
  struct kernel_set *next; /* the older sets; fixed once published */
  void *handles[];
} kernel_set;

struct ein_kernel_sets {
  int n;
  pthread_mutex_t lock; /* serialises ein_kernel_sets_add */
  _Atomic(kernel_set *) head;
};

uint64_t ein_kernel_owner_new(void) {
  static atomic_uint_fast64_t last;
  return (uint64_t)atomic_fetch_add(&last, 1) + 1;
}

ein_kernel_sets *ein_kernel_sets_create(int n) {
  ein_kernel_sets *s = ein_calloc(1, sizeof *s);
  if (!s)
    return NULL;
  s->n = n > 0 ? n : 0;
  pthread_mutex_init(&s->lock, NULL);
  atomic_init(&s->head, NULL);
  return s;
}

void ein_kernel_sets_destroy(ein_kernel_sets *s) {
  if (!s)
    return;
  kernel_set *e = atomic_load_explicit(&s->head, memory_order_relaxed);
  while (e) {
    kernel_set *next = e->next;
    ein_free(e);
    e = next;
  }
  pthread_mutex_destroy(&s->lock);
  ein_free(s);
}

static void *const *find_from(kernel_set *e, uint64_t owner) {
  for (; e; e = e->next)
    if (e->owner == owner)
      return e->handles;
  return NULL;
}

void *const *ein_kernel_sets_find(ein_kernel_sets *s, uint64_t owner) {
  return find_from(atomic_load_explicit(&s->head, memory_order_acquire),
                   owner);
}

void *const *ein_kernel_sets_add(ein_kernel_sets *s, uint64_t owner,
                                 void *const *handles) {
  pthread_mutex_lock(&s->lock);
  kernel_set *head = atomic_load_explicit(&s->head, memory_order_relaxed);
  void *const *found = find_from(head, owner);
  if (!found) {
    kernel_set *e =
        ein_malloc(sizeof *e + (size_t)s->n * sizeof e->handles[0]);
    if (e) {
      e->owner = owner;
      e->next = head;
      if (s->n)
        memcpy(e->handles, handles, (size_t)s->n * sizeof e->handles[0]);
      atomic_store_explicit(&s->head, e, memory_order_release);
      found = e->handles;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return found;
}

bool ein_gemm_arrays_match(const ein_cublas_gemm *x,
                           const ein_cublas_gemm *y) {
  if (x->ab_dtype != y->ab_dtype || x->c_dtype != y->c_dtype ||
      x->count != y->count || x->stride_a != y->stride_a ||
      x->stride_b != y->stride_b || x->stride_c != y->stride_c ||
      x->loops.n != y->loops.n)
    return false;
  for (int i = 0; i < x->loops.n; i++)
    if (x->loops.size[i] != y->loops.size[i] ||
        x->loops.st[i][0] != y->loops.st[i][0] ||
        x->loops.st[i][1] != y->loops.st[i][1] ||
        x->loops.st[i][2] != y->loops.st[i][2])
      return false;
  return true;
}
