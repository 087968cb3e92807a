/*
 * loop_axes.c - normal form of a LOOP step's iteration space (loop_axes.h).
 */
#include "loop_axes.h"

#include <stdlib.h>
#include <string.h>

void ein_loop_axes_fuse(ein_loop_axes *la) {
  int w = 0;
  for (int i = 0; i < la->n; i++) {
    if (w > 0) {
      bool ok = true;
      for (int k = 0; k < 3; k++)
        ok &= la->st[w - 1][k] == la->st[i][k] * la->size[i];
      if (ok) {
        la->size[w - 1] *= la->size[i];
        for (int k = 0; k < 3; k++)
          la->st[w - 1][k] = la->st[i][k];
        continue;
      }
    }
    la->size[w] = la->size[i];
    memcpy(la->st[w], la->st[i], sizeof la->st[i]);
    w++;
  }
  la->n = w;
}

void ein_loop_axes_sort(ein_loop_axes *la, int key) {
  for (int i = 1; i < la->n; i++)
    for (int j = i; j > 0; j--) {
      if (llabs(la->st[j - 1][key]) >= llabs(la->st[j][key]))
        break;
      int64_t s = la->size[j];
      la->size[j] = la->size[j - 1];
      la->size[j - 1] = s;
      int64_t t[3];
      memcpy(t, la->st[j], sizeof t);
      memcpy(la->st[j], la->st[j - 1], sizeof t);
      memcpy(la->st[j - 1], t, sizeof t);
    }
}

void ein_loop_axes_take(ein_loop_axes *la, int at, int64_t *size,
                        int64_t st[3]) {
  *size = la->size[at];
  memcpy(st, la->st[at], sizeof la->st[at]);
  for (int i = at; i + 1 < la->n; i++) {
    la->size[i] = la->size[i + 1];
    memcpy(la->st[i], la->st[i + 1], sizeof la->st[i]);
  }
  la->n--;
}

int64_t ein_loop_axes_volume(const ein_loop_axes *la) {
  int64_t v = 1;
  for (int i = 0; i < la->n; i++)
    v *= la->size[i];
  return v;
}

void ein_loop_axes_offsets(const ein_loop_axes *la, int64_t idx,
                           int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int i = la->n - 1; i >= 0; i--) {
    int64_t c = idx % la->size[i];
    idx /= la->size[i];
    for (int k = 0; k < 3; k++)
      off[k] += c * la->st[i][k];
  }
}

void ein_loop_cursor_start(const ein_loop_axes *la, int64_t flat,
                           ein_loop_cursor *c) {
  c->off[0] = c->off[1] = c->off[2] = 0;
  for (int i = la->n - 1; i >= 0; i--) {
    c->idx[i] = flat % la->size[i];
    flat /= la->size[i];
    for (int k = 0; k < 3; k++) c->off[k] += c->idx[i] * la->st[i][k];
  }
}

bool ein_loop_axes_split(const ein_step *s, ein_loop_axes *kept,
                         ein_loop_axes *red, bool *empty) {
  kept->n = red->n = 0;
  *empty = false;
  for (int i = 0; i < s->naxes; i++) {
    const ein_loop_axis *a = &s->axes[i];
    if (a->size == 1)
      continue;
    if (a->size == 0)
      *empty = true;
    ein_loop_axes *to = a->stride[0] == 0 ? red : kept;
    if (to->n == EIN_LOOP_MAXAX)
      return false;
    to->size[to->n] = a->size;
    memcpy(to->st[to->n], a->stride, sizeof a->stride);
    to->n++;
  }
  ein_loop_axes_sort(kept, 0);
  ein_loop_axes_fuse(kept);
  ein_loop_axes_sort(red, 1);
  ein_loop_axes_fuse(red);
  return true;
}
