/* test_parser.c - the syntax tree of every construct, spans included, and
 * the syntax of shape specs. */
#include "harness.h"
#include "parser.h"

static size_t put_term(const ein_term *t, char *out, size_t cap) {
  switch (t->kind) {
  case TERM_NAME:
    return (size_t)snprintf(out, cap, "%.*s", (int)t->name_len, t->name);
  case TERM_NUMBER:
    return (size_t)snprintf(out, cap, "#%lld", (long long)t->value);
  case TERM_UNIT: return (size_t)snprintf(out, cap, "1");
  case TERM_ELLIPSIS: return (size_t)snprintf(out, cap, "...");
  case TERM_GROUP: {
    size_t n = (size_t)snprintf(out, cap, "(");
    for (int i = 0; i < t->nfactors; i++) {
      if (i) n += (size_t)snprintf(out + n, cap - n, " ");
      n += put_term(&t->factors[i], out + n, cap - n);
    }
    return n + (size_t)snprintf(out + n, cap - n, ")");
  }
  }
  return 0;
}

static size_t put_operand(const ein_operand *op, char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "[");
  for (int i = 0; i < op->nterms; i++) {
    if (i) n += (size_t)snprintf(out + n, cap - n, " ");
    n += put_term(&op->terms[i], out + n, cap - n);
  }
  return n + (size_t)snprintf(out + n, cap - n, "]");
}

/* "[a b] [c] -> [a c]"; implicit output prints "-> ?". */
static void dump(const ein_ast *ast, char *out, size_t cap) {
  size_t n = 0;
  for (int i = 0; i < ast->ninputs; i++) {
    if (i) n += (size_t)snprintf(out + n, cap - n, " ");
    n += put_operand(&ast->inputs[i], out + n, cap - n);
  }
  if (ast->explicit_output) {
    n += (size_t)snprintf(out + n, cap - n, " -> ");
    put_operand(&ast->output, out + n, cap - n);
  } else {
    snprintf(out + n, cap - n, " -> ?");
  }
}

static void expect_ast(const char *src, ein_dialect d, const char *want) {
  ein_arena arena;
  ein_arena_init(&arena);
  ein_error_rec err;
  ein_error_init(&err);
  ein_ast ast;
  ein_status st = ein_parse_expr(src, strlen(src), d, &arena, &err, &ast);
  char got[1024] = "";
  if (st)
    snprintf(got, sizeof got, "error %d: %s", st, err.message);
  else
    dump(&ast, got, sizeof got);
  CHECK_STR(got, want, "parsing \"%s\"", src);
  ein_error_clear(&err);
  ein_arena_destroy(&arena);
}

static const char *spec_kind(ein_spec_kind k) {
  static const char *const names[] = {"name", "fixed", "any", "run",
                                      "bcast", "expr", "group"};
  return names[k];
}

static void expect_spec(const char *src, const char *want) {
  ein_arena arena;
  ein_arena_init(&arena);
  ein_error_rec err;
  ein_error_init(&err);
  ein_spec spec;
  ein_status st = ein_parse_spec(src, strlen(src), &arena, &err, &spec);
  char got[1024] = "";
  size_t n = 0;
  if (st) {
    snprintf(got, sizeof got, "error %d @%zu: %s", st,
             err.pub.nspans ? err.pub.spans[0].offset : 0, err.message);
  } else {
    for (int i = 0; i < spec.ndims; i++) {
      const ein_spec_dim *dim = &spec.dims[i];
      n += (size_t)snprintf(got + n, sizeof got - n, "%s%s%s:%.*s",
                            i ? " " : "", spec_kind(dim->kind),
                            dim->broadcast ? "#" : "", (int)dim->length,
                            src + dim->offset);
      if (dim->kind == SPEC_GROUP)
        n += (size_t)snprintf(got + n, sizeof got - n, "/%d",
                              dim->nfactors);
    }
  }
  CHECK_STR(got, want, "spec \"%s\"", src);
  ein_error_clear(&err);
  ein_arena_destroy(&arena);
}

static void check_spans(void) {
  const char *src = "b (h  d), ... x -> b h (d ...) 3";
  ein_arena arena;
  ein_arena_init(&arena);
  ein_error_rec err;
  ein_error_init(&err);
  ein_ast ast;
  ein_status st = ein_parse_expr(src, strlen(src), EIN_DIALECT_EINOPS,
                                 &arena, &err, &ast);
  CHECK(st == EIN_OK, "spans parse: %s", err.message);
  if (!st) {
    const ein_term *g = &ast.inputs[0].terms[1];
    CHECK(g->kind == TERM_GROUP && g->offset == 2 && g->length == 6,
          "group span %zu+%zu", g->offset, g->length);
    CHECK(g->factors[1].offset == 6 && g->factors[1].length == 1,
          "factor span %zu", g->factors[1].offset);
    CHECK(ast.inputs[0].offset == 0 && ast.inputs[0].length == 8,
          "operand span %zu+%zu", ast.inputs[0].offset,
          ast.inputs[0].length);
    CHECK(ast.inputs[1].ellipsis_term == 0, "ellipsis index %d",
          ast.inputs[1].ellipsis_term);
    CHECK(ast.output.ellipsis_term == 2, "output ellipsis in group: %d",
          ast.output.ellipsis_term);
    CHECK(ast.arrow_offset == 16, "arrow at %zu", ast.arrow_offset);
    const ein_term *three = &ast.output.terms[3];
    CHECK(three->kind == TERM_NUMBER && three->value == 3 &&
              three->offset == 31,
          "number term");
  }
  ein_error_clear(&err);
  ein_arena_destroy(&arena);
}

int main(void) {
  const ein_dialect E = EIN_DIALECT_EINOPS, N = EIN_DIALECT_NUMPY;
  /* names, commas, arrow */
  expect_ast("b h i d, b h j d -> b h i j", E,
             "[b h i d] [b h j d] -> [b h i j]");
  expect_ast("a->a", E, "[a] -> [a]");
  expect_ast("  a  ->  ", E, "[a] -> []");
  expect_ast(" -> ", E, "[] -> []");
  expect_ast(",->", E, "[] [] -> []");
  expect_ast("_a b_ __ ->_a", E, "[_a b_ __] -> [_a]");
  expect_ast("x\n\t,\ny\r->\tx y", E, "[x] [y] -> [x y]");
  /* groups: splits, merges, units, numbers */
  expect_ast("b (heads d) -> b heads d", E, "[b (heads d)] -> [b heads d]");
  expect_ast("b c (h 2) (w 2) -> b c h w", E,
             "[b c (h #2) (w #2)] -> [b c h w]");
  expect_ast("a b c -> (a b) c", E, "[a b c] -> [(a b) c]");
  expect_ast("a () 1 -> a", E, "[a () 1] -> [a]");
  expect_ast("(a 1 b) -> (1) ()", E, "[(a 1 b)] -> [(1) ()]");
  expect_ast("h w -> h w 3", E, "[h w] -> [h w #3]");
  /* Numbers of several digits whose later digits are 0: only a leading 0
   * is refused ("a 07" in error_cases.inc). */
  expect_ast("(h 10) w -> h w 100 1024", E,
             "[(h #10) w] -> [h w #100 #1024]");
  expect_ast("(h)->(h)", E, "[(h)] -> [(h)]");
  expect_ast("a(b c)d->a b c d", E, "[a (b c) d] -> [a b c d]");
  /* ellipsis */
  expect_ast("b ... -> b (...)", E, "[b ...] -> [b (...)]");
  expect_ast("... h w, ... -> ...", E, "[... h w] [...] -> [...]");
  expect_ast("b...c -> ...", E, "[b ... c] -> [...]");
  expect_ast("b ... -> (b ...) 1", E, "[b ...] -> [(b ...) 1]");
  /* diagonals and repeats parse like anything else */
  expect_ast("b i i -> b i", E, "[b i i] -> [b i]");
  expect_ast("i i ->", E, "[i i] -> []");
  expect_ast("b h s d -> b (h r) s d", E, "[b h s d] -> [b (h r) s d]");
  /* numpy dialect */
  expect_ast("ij,jk->ik", N, "[i j] [j k] -> [i k]");
  expect_ast("ij,jk", N, "[i j] [j k] -> ?");
  expect_ast("...ii->...i", N, "[... i i] -> [... i]");
  expect_ast("i j , j k", N, "[i j] [j k] -> ?");
  expect_ast("", N, "[] -> ?");
  expect_ast("Aa", N, "[A a] -> ?");
  expect_ast(",", N, "[] [] -> ?");
  /* a few failures (test_errors covers them in depth) */
  expect_ast("a b", E,
             "error -1: expected '->' and the output, found the end of the "
             "expression (only the numpy dialect infers the output)");
  expect_ast("((a)) -> a", E,
             "error -1: nested parentheses are not allowed: a group is one "
             "level deep");
  expect_ast("(2 a) -> a", E, "[(#2 a)] -> [a]");
  expect_ast("a b -> 0", E,
             "error -1: expected an axis size of 1 or more, found 0");
  check_spans();

  /* shape specs */
  expect_spec("batch seq (heads d)",
              "name:batch name:seq group:(heads d)/2");
  expect_spec("_ ... 12 #b", "any:_ run:... fixed:12 bcast:#b");
  expect_spec("*batch n+1 2*h n-1 a*b+c",
              "run:*batch expr:n+1 expr:2*h expr:n-1 expr:a*b+c");
  expect_spec("*#b #*c", "error -8 @4: a second run of dims: a spec may "
                         "have one '*name' or '...'");
  expect_spec("*#b", "run#:*#b");
  expect_spec("#*c", "run#:#*c");
  expect_spec("*_ x", "run:*_ name:x");
  expect_spec("(h 2) (n+1 m)", "group:(h 2)/2 group:(n+1 m)/2");
  expect_spec("", "");
  expect_spec("()", "group:()/0");
  expect_spec("n + 1",
              "error -1 @2: expected a dim: a name, a number, '_', '...', "
              "'*name', '#name' or '(', found '+'");
  expect_spec("n+ 1", "error -1 @3: expected a name or a number right after "
                      "the operator (size expressions have no spaces, like "
                      "n+1)");
  expect_spec("a(b)", "error -1 @1: expected whitespace between dims before "
                      "this");
  expect_spec("* b", "error -1 @2: expected a name right after the '*' or "
                     "'#' prefix, found 'b'");
  expect_spec("#_", "error -1 @0: '#_' means nothing: '_' already matches "
                    "any size");
  expect_spec("(_ a)", "error -1 @1: '_' cannot be a factor of a group: a "
                       "product of an unknown size checks nothing");
  expect_spec("((a))", "error -1 @1: nested parentheses are not allowed: a "
                       "group is one level deep");
  expect_spec("(a", "error -1 @0: unclosed '(': expected ')' before the end");
  expect_spec("... ...", "error -8 @4: a second run of dims: a spec may have "
                         "one '*name' or '...'");
  return test_summary("parser");
}
