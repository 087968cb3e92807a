/*
 * test_shapes.c - output shapes of real-world expressions, worked out by
 * hand: attention, GQA, ViT patchify, pixel shuffle, space-to-depth,
 * pooling, diagonals, ellipsis broadcasting, repeats, numpy implicit output.
 * Some cases also pin every axis with its size and role.
 */
#include "cases.h"
#include "harness.h"

typedef struct shape_case {
  const char *expr, *shapes, *opts;
  const char *want; /* "8x16x2048" or "scalar" */
  const char *axes; /* NULL, or "b=8 h=16 d=128- r=4+": '-' reduced,
                       '+' repeated */
} shape_case;

static const shape_case cases[] = {
    /* einsum: contractions */
    {"b h i d, b h j d -> b h i j", "8x16x2048x128 8x16x2048x128", "",
     "8x16x2048x2048", "b=8 h=16 i=2048 d=128- j=2048"},
    {"b h i j, b h j d -> b i (h d)", "8x16x64x64 8x16x64x128", "",
     "8x64x2048", NULL},
    {"b s e, e (h d) -> b h s d", "8x2048x2048 2048x2048", "h=16",
     "8x16x2048x128", "b=8 s=2048 e=2048- h=16 d=128"},
    {"b g r i d, b g j d -> b g r i j", "4x8x4x1024x128 4x8x1024x128", "",
     "4x8x4x1024x1024", NULL},
    {"b i, i j k, b j -> b k", "4096x256 256x256x256 4096x256", "",
     "4096x256", "b=4096 i=256- j=256- k=256"},
    {"e c d, e d f -> e c f", "64x512x1024 64x1024x4096", "", "64x512x4096",
     NULL},
    {"b i, b j -> b i j", "32x4096 32x4096", "", "32x4096x4096", NULL},
    {"e a, f b, a b c d, g c, h d -> e f g h",
     "64x64 64x64 64x64x64x64 64x64 64x64", "", "64x64x64x64", NULL},
    {"m k, k n -> m n", "8192x8192 8192x8192", "", "8192x8192", NULL},
    {"m k, k n -> n m", "3x4 4x5", "", "5x3", NULL},
    {"i, i ->", "7 7", "", "scalar", "i=7-"},
    {"i, j -> i j", "3 4", "", "3x4", NULL},
    {"i j, j -> i", "3x4 4", "", "3", NULL},
    {"a b c, c d e, e f -> a b d f", "2x3x4 4x5x6 6x7", "", "2x3x5x7", NULL},
    {"batch seq dim, dim out -> batch seq out", "2x10x32 32x64", "",
     "2x10x64", NULL},
    {" -> ", "scalar", "", "scalar", NULL},
    {", -> ", "scalar scalar", "", "scalar", NULL},
    {"a, -> a", "5 scalar", "", "5", NULL},
    {"x -> ", "0", "", "scalar", "x=0-"},
    {"a b, b c -> a c", "0x3 3x4", "", "0x4", NULL},
    {"a b, b c -> a c", "2x0 0x4", "", "2x4", NULL},
    /* rearrange: transposes, splits, merges */
    {"b c h w -> b h w c", "64x256x64x64", "", "64x64x64x256", NULL},
    {"b (heads d) -> b heads d", "2x512", "heads=8", "2x8x64",
     "b=2 heads=8 d=64"},
    {"b (heads d) -> b heads d", "2x512", "d=64", "2x8x64", NULL},
    {"b heads d -> b (heads d)", "2x8x64", "", "2x512", NULL},
    {"b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "256x3x224x224",
     "p1=16,p2=16", "256x196x768", "b=256 c=3 h=14 p1=16 w=14 p2=16"},
    {"b (h w) (p1 p2 c) -> b c (h p1) (w p2)", "256x196x768",
     "h=14,p1=16,p2=16", "256x3x224x224", NULL},
    {"b (c r1 r2) h w -> b c (h r1) (w r2)", "1x36x8x8", "r1=3,r2=3",
     "1x4x24x24", NULL}, /* pixel shuffle */
    {"b c (h s1) (w s2) -> b (c s1 s2) h w", "2x3x32x32", "s1=2,s2=2",
     "2x12x16x16", NULL}, /* space to depth */
    {"b c (h 2) (w 2) -> b (c 4) h w", "2x3x32x32", "", "2x12x16x16",
     NULL},
    {"b c (h 2) (w 2) -> b c h w 4", "2x3x32x32", "", "2x3x16x16x4", NULL},
    {"a b c -> (a b) c", "2x3x4", "", "6x4", NULL},
    {"a b c -> c (b a)", "2x3x4", "", "4x6", NULL},
    {"(a b) c -> a (c b)", "6x4", "a=2", "2x12", NULL},
    {"t b (k h d) -> k b h t d", "10x2x384", "k=3,h=8", "3x2x8x10x16",
     NULL}, /* qkv unpack */
    {"(b1 b2) h w c -> (b1 h) (b2 w) c", "6x4x5x3", "b1=2", "8x15x3", NULL},
    {"b h w c -> b (h w) c", "2x0x5x3", "", "2x0x3", NULL},
    {"(h w) -> h w", "0", "w=3", "0x3", NULL},
    {"x -> x", "9223372036854775807", "", "9223372036854775807", NULL},
    /* units */
    {"a 1 b -> a b", "2x1x3", "", "2x3", NULL},
    {"a () b -> a b 1", "2x1x3", "", "2x3x1", NULL},
    {"a b -> a 1 b ()", "2x3", "", "2x1x3x1", NULL},
    {"(a 1) b -> (1 a) (b 1)", "2x3", "", "2x3", NULL},
    {"1 -> ", "1", "", "scalar", NULL},
    /* reductions */
    {"b c (h h2) (w w2) -> b c h w", "64x256x64x64", "h2=2,w2=2,reduce=mean",
     "64x256x32x32", "b=64 c=256 h=32 h2=2- w=32 w2=2-"},
    {"b s d -> b s", "32x4096x1024", "", "32x4096", NULL},
    {"b s d -> d", "32x4096x1024", "reduce=max", "1024", NULL},
    {"b (h 2) -> b h", "4x6", "reduce=max", "4x3", "b=4 h=3 2=2-"},
    {"a b c -> ", "2x3x4", "reduce=prod", "scalar", NULL},
    {"a b -> b", "2x3", "reduce=any", "3", NULL},
    {"a b -> a", "2x3", "reduce=all", "2", NULL},
    {"a b -> a 1", "2x3", "reduce=min", "2x1", NULL},
    /* diagonals */
    {"b i i -> b i", "1024x512x512", "", "1024x512", "b=1024 i=512"},
    {"i i -> ", "5x5", "", "scalar", "i=5-"},
    {"i i -> i", "5x5", "", "5", NULL},
    {"i i i -> i", "4x4x4", "", "4", NULL},
    {"b i j i -> b j", "2x3x4x3", "", "2x4", NULL},
    {"i j, j i -> i", "3x4 4x3", "", "3", NULL},
    {"b (i j) i -> b j", "2x12x3", "", "2x4", NULL},
    /* repeats */
    {"h w -> h w 3", "4x5", "", "4x5x3", "h=4 w=5 3=3+"},
    {"h w -> h w c", "4x5", "c=3", "4x5x3", "h=4 w=5 c=3+"},
    {"b h s d -> b (h r) s d", "8x8x2048x128", "r=4", "8x32x2048x128",
     "b=8 h=8 s=2048 d=128 r=4+"},
    {"h w -> (h 2) (w 2)", "4x5", "", "8x10", NULL},
    {"h w -> (2 h) (w r)", "4x5", "r=0", "8x0", NULL},
    {" -> r c", "scalar", "r=2,c=3", "2x3", NULL},
    {"b -> b 1 r", "7", "r=5", "7x1x5", NULL},
    /* ellipsis */
    {"b ... -> b", "2x3x4", "", "2", "b=2 ...0=3- ...1=4-"},
    {"b ... -> b (...)", "2x3x4", "", "2x12", NULL},
    {"... h w -> ... w h", "2x3x4x5", "", "2x3x5x4", NULL},
    {"... h w -> ... w h", "4x5", "", "5x4", NULL},
    {"... i j, ... j k -> ... i k", "7x1x3x4 6x4x5", "", "7x6x3x5",
     "...0=7 ...1=6 i=3 j=4- k=5"},
    {"... i, ... i -> ...", "3x1x4 1x5x4", "", "3x5", NULL},
    {"..., ... -> ...", "2x1 3", "", "2x3", NULL},
    {"a ... -> ... a", "3", "", "3", NULL},
    {"... -> (...)", "scalar", "", "1", NULL},
    {"... a -> a ...", "2x3x4x5x6", "", "6x2x3x4x5", NULL},
    {"a ... -> (a ...) 1", "2x3x4", "", "24x1", NULL},
    /* length bindings that only check */
    {"a b -> b a", "2x3", "a=2,b=3", "3x2", NULL},
    {"a b -> b a", "2x3", "a=2,a=2", "3x2", NULL},
    /* names: underscores, long names, numbers as sizes */
    {"_a b_ __ -> __ b_ _a", "1x2x3", "", "3x2x1", NULL},
    {"batch_size seq_len -> seq_len batch_size", "8x100", "", "100x8", NULL},
    {"b (h 16) -> b h 16", "2x64", "", "2x4x16", NULL},
    {"a b c d e f g h -> h g f e d c b a", "1x2x3x4x5x6x7x8", "",
     "8x7x6x5x4x3x2x1", NULL},
    /* numpy dialect */
    {"ij,jk->ik", "3x4 4x5", "numpy", "3x5", NULL},
    {"ij,jk", "3x4 4x5", "numpy", "3x5", NULL},
    {"ba,cb", "4x3 5x4", "numpy", "3x5", NULL},
    {"ii", "3x3", "numpy", "scalar", NULL},
    {"ii->i", "3x3", "numpy", "3", NULL},
    {"ij", "3x4", "numpy", "3x4", NULL},
    {"ji", "3x4", "numpy", "4x3", NULL},
    {"Ab,bA", "3x4 4x3", "numpy", "scalar", NULL},
    {"aB,Bc", "3x4 4x5", "numpy", "3x5", "a=3 B=4- c=5"},
    {"...ij,...jk", "2x3x4 7x1x4x5", "numpy", "7x2x3x5", NULL},
    {"...ij->...ji", "5x2x3", "numpy", "5x3x2", NULL},
    {"i...->...", "2x3", "numpy", "3", NULL},
    {"ij,ij->ij", "3x1 3x4", "numpy", "3x4", "i=3 j=4"},
    {"ij,ij->ij", "3x4 1x4", "numpy", "3x4", NULL},
    {"i,i", "5 5", "numpy", "scalar", NULL},
    {"i,j", "2 3", "numpy", "2x3", NULL},
    {"i j , j k -> i k", "3x4 4x5", "numpy", "3x5", NULL},
    {"", "scalar", "numpy", "scalar", NULL},
    {"bhid,bhjd->bhij", "2x4x8x16 2x4x9x16", "numpy", "2x4x8x9", NULL},
};

static void shape_string(const ein_binding *b, char *out, size_t cap) {
  int nd = ein_binding_output_ndim(b);
  const int64_t *s = ein_binding_output_shape(b);
  if (nd == 0) {
    snprintf(out, cap, "scalar");
    return;
  }
  size_t n = 0;
  for (int d = 0; d < nd; d++)
    n += (size_t)snprintf(out + n, cap - n, "%s%lld", d ? "x" : "",
                          (long long)s[d]);
}

static void axes_string(const ein_binding *b, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; i < ein_binding_naxes(b); i++) {
    ein_axis_info a = ein_binding_axis(b, i);
    n += (size_t)snprintf(out + n, cap - n, "%s%s=%lld%s", i ? " " : "",
                          a.name, (long long)a.size,
                          a.role == EIN_AXIS_REDUCED    ? "-"
                          : a.role == EIN_AXIS_REPEATED ? "+"
                                                        : "");
  }
}

/* Every operand's dims as axis names: "b|h.d -> b|h|d" (dims split by
 * '|', the axes of a merged dim joined by '.', inputs by ", "). */
static void dims_string(const ein_binding *b, char *out, size_t cap) {
  size_t n = 0;
  int nin = ein_binding_ninputs(b);
  out[0] = '\0';
  for (int k = 0; k <= nin; k++) {
    n += (size_t)snprintf(out + n, cap - n, "%s", k == nin ? " -> "
                                                  : k     ? ", "
                                                          : "");
    for (int d = 0; d < ein_binding_operand_ndim(b, k); d++) {
      int ids[EIN_MAX_DIMS];
      int c = ein_binding_dim_axes(b, k, d, ids, EIN_MAX_DIMS);
      for (int i = 0; i < c; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? "." : d ? "|" : "",
                              ein_binding_axis(b, ids[i]).name);
    }
  }
}

/* ein_binding_dim_axes: how each dim is made of axes. */
static void check_dims(ein_ctx *ctx) {
  static const struct {
    const char *expr, *shapes, *opts, *want;
  } dcases[] = {
      {"b (h d) -> b h d", "2x12", "h=3", "b|h.d -> b|h|d"},
      {"b c (h 2) (w 2) -> b c h w", "2x3x8x8", "", "b|c|h.2|w.2 -> b|c|h|w"},
      {"b h i d, b h j d -> b h i j", "2x4x8x16 2x4x9x16", "",
       "b|h|i|d, b|h|j|d -> b|h|i|j"},
      {"... i, i j -> ... j", "2x3x4 4x5", "", "...0|...1|i, i|j -> ...0|...1|j"},
      {"b s -> b s r", "2x3", "r=4", "b|s -> b|s|r"},
      {"b s ->", "2x3", "", "b|s -> "},
  };
  for (size_t i = 0; i < sizeof dcases / sizeof dcases[0]; i++) {
    ein_binding *b;
    if (bind_case(ctx, dcases[i].expr, dcases[i].shapes, dcases[i].opts, &b)) {
      CHECK(0, "'%s': %s", dcases[i].expr, ein_last_error(ctx)->message);
      continue;
    }
    char got[512];
    dims_string(b, got, sizeof got);
    CHECK_STR(got, dcases[i].want, "dims of '%s'", dcases[i].expr);
    int ids[1], past = ein_binding_ninputs(b) + 1;
    CHECK(ein_binding_dim_axes(b, past, 0, ids, 1) == -1 &&
              ein_binding_dim_axes(b, 0, 99, ids, 1) == -1 &&
              ein_binding_dim_axes(b, -1, 0, ids, 1) == -1 &&
              ein_binding_operand_ndim(b, 5) == -1,
          "out-of-range operands and dims of '%s'", dcases[i].expr);
    ein_binding_destroy(b);
  }
}

int main(void) {
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) return 1;
  int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) {
    const shape_case *c = &cases[i];
    ein_binding *b;
    ein_status st = bind_case(ctx, c->expr, c->shapes, c->opts, &b);
    if (st) {
      CHECK(0, "'%s' %s %s: %s", c->expr, c->shapes, c->opts,
            ein_last_error(ctx)->message);
      continue;
    }
    char got[512];
    shape_string(b, got, sizeof got);
    CHECK_STR(got, c->want, "'%s' %s %s", c->expr, c->shapes, c->opts);
    if (c->axes) {
      axes_string(b, got, sizeof got);
      CHECK_STR(got, c->axes, "axes of '%s'", c->expr);
    }
    ein_binding_destroy(b);
  }
  CHECK(n >= 80, "the table has %d cases", n);

  /* the DLTensor entry points read ndim and shape only */
  int64_t qs[4] = {2, 4, 8, 16}, ks[4] = {2, 4, 9, 16};
  DLTensor q = {.ndim = 4, .shape = qs}, k = {.ndim = 4, .shape = ks};
  const DLTensor *in[2] = {&q, &k};
  int64_t out[EIN_MAX_DIMS];
  int nd = -1;
  ein_status st = ein_output_shape(ctx, "b h i d, b h j d -> b h i j", in, 2,
                                   NULL, out, &nd);
  CHECK(st == EIN_OK && nd == 4 && out[0] == 2 && out[1] == 4 &&
            out[2] == 8 && out[3] == 9,
        "ein_output_shape: %d, ndim %d", st, nd);
  check_dims(ctx);
  ein_ctx_destroy(ctx);
  return test_summary("shapes");
}
