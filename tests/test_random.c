/*
 * test_random.c - random bytes and random token soup through the parser,
 * the binder and the shape checker. Nothing may crash, and every answer
 * must be well formed: a known status, a message, spans inside the text.
 * Bounded (a fixed number of rounds) so it runs on every CI build; the
 * libFuzzer target in fuzz/ explores without bounds. EIN_SEED=N reproduces
 * a run; the seed is printed on failure.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "ein.h"
#include "harness.h"

/* Each round's checks report here; main() turns a batch into one CHECK. */
#define ROUND_CHECK(cond, ...)                                               \
  do {                                                                       \
    if (!(cond)) {                                                           \
      round_failures++;                                                      \
      fprintf(stderr, "FAIL: " __VA_ARGS__);                                 \
      fputc('\n', stderr);                                                   \
    }                                                                        \
  } while (0)

static uint64_t rng_state;
static int round_failures; /* failures in the current batch */

static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}

static int below(int n) { return (int)(rnd() % (uint64_t)n); }

static const char *const soup[] = {
    "a", "b", "h", "w", "ab", "_", "x_1", "(", ")", "(", ")", ",", "->",
    "->", "...", "1", "2", "3", "16", "0", "007", " ", " ", " ", "\t", "\n",
    "*", "#", "+", "-", ".", "..", "=", "()", "(h 2)", "i i", "\xff",
    "99999999999999999999"};

static bool well_formed(const ein_error *e, ein_status st, size_t len) {
  if (st > 0 || st < EIN_ERR_INTERNAL || st == EIN_ERR_INTERNAL) return false;
  if (e->status != st) return false;
  if (st == EIN_OK) return true;
  if (!e->message || !e->message[0]) return false;
  for (int i = 0; i < e->nspans; i++)
    if (e->spans[i].offset > len || e->spans[i].length > len - e->spans[i].offset)
      return false;
  char out[2048];
  return ein_error_format(e, out, sizeof out) > 0;
}

static void random_shapes(int n, int *ndims, int64_t dims[][8],
                          const int64_t **shapes) {
  for (int i = 0; i < n; i++) {
    ndims[i] = below(6);
    for (int d = 0; d < ndims[i]; d++) dims[i][d] = below(5) == 0 ? 1 : below(7);
    shapes[i] = dims[i];
  }
}

static void one_round(ein_ctx *ctx, ein_shape_memo *memo, char *text,
                      size_t len, uint64_t seed) {
  int n = below(4);
  int ndims[4];
  int64_t dims[4][8];
  const int64_t *shapes[4];
  random_shapes(n, ndims, dims, shapes);
  ein_length lengths[2] = {{"h", below(5)}, {"r", 3}};
  ein_options opt = {.dialect = below(3) == 0 ? EIN_DIALECT_NUMPY
                                              : EIN_DIALECT_EINOPS,
                     .reduction = (ein_reduction)below(7),
                     .lengths = lengths,
                     .nlengths = below(3)};
  ein_binding *b = NULL;
  ein_status st = ein_bind_shapes(ctx, text, shapes, ndims, n, &opt, &b);
  ROUND_CHECK(well_formed(ein_last_error(ctx), st, len) && (st == EIN_OK) == (b != NULL),
        "seed %llu: bind of '%.60s' gave %d", (unsigned long long)seed, text,
        st);
  if (b) {
    bool sizes_ok = ein_binding_output_ndim(b) <= EIN_MAX_DIMS;
    for (int d = 0; d < ein_binding_output_ndim(b); d++)
      sizes_ok = sizes_ok && ein_binding_output_shape(b)[d] >= 0;
    for (int a = 0; a < ein_binding_naxes(b); a++)
      sizes_ok = sizes_ok && ein_binding_axis(b, a).size >= 0;
    ROUND_CHECK(sizes_ok, "seed %llu: sizes of '%.60s'", (unsigned long long)seed,
          text);
  }
  ein_binding_destroy(b);
  st = ein_shape_check_dims(memo, text, n ? ndims[0] : 0,
                            n ? shapes[0] : NULL, "t", NULL, 0);
  ROUND_CHECK(well_formed(ein_shape_memo_error(memo), st, len),
        "seed %llu: shape check of '%.60s' gave %d",
        (unsigned long long)seed, text, st);
  if (below(8) == 0) ein_shape_memo_clear(memo);
}

int main(void) {
  const char *env = getenv("EIN_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 10) : 20261122;
  const int rounds = 200000, batch = 1000;
  ein_ctx *ctx;
  ein_shape_memo *memo;
  if (ein_ctx_create(&ctx) || ein_shape_memo_create(&memo)) return 1;
  char text[512];
  for (int r = 0; r < rounds; r++) {
    uint64_t round_seed = seed * 1000003u + (uint64_t)r;
    rng_state = round_seed | 1;
    size_t len = 0;
    if (r % 2 == 0) { /* random bytes, NUL excluded (C strings) */
      len = (size_t)below(64);
      for (size_t i = 0; i < len; i++) text[i] = (char)(1 + below(255));
    } else { /* token soup */
      int ntok = below(24);
      for (int t = 0; t < ntok; t++) {
        const char *tok = soup[below((int)(sizeof soup / sizeof *soup))];
        size_t tl = strlen(tok);
        if (len + tl >= sizeof text) break;
        memcpy(text + len, tok, tl);
        len += tl;
      }
    }
    text[len] = '\0';
    one_round(ctx, memo, text, len, round_seed);
    if ((r + 1) % batch == 0) {
      CHECK(round_failures == 0, "rounds %d..%d: %d failures (seed %llu)",
            r + 1 - batch, r, round_failures, (unsigned long long)seed);
      round_failures = 0;
    }
  }
  ein_shape_memo_destroy(memo);
  ein_ctx_destroy(ctx);
  return test_summary("random");
}
