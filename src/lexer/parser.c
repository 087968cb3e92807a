/*
 * parser.c - recursive descent over the tokens of lexer.h.
 *
 * One token of lookahead, no backtracking. Each parse function has its
 * grammar rule above it. Sizes of terms and operands are bounded by the
 * limits in ein.h, so the parser collects them in fixed buffers and copies
 * each finished list into the arena once.
 */
#include "parser.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "checked.h"
#include "lexer.h"
#include "utf8.h"

typedef struct parser {
  ein_lexer lx;
  ein_token tok; /* the lookahead */
  ein_arena *arena;
  ein_error_rec *err;
  int sx_nodes; /* nodes in the size expression being parsed */
} parser;

/* Size expressions are short arithmetic (n+1, 2*h); the bound keeps the
 * recursive evaluation of their trees shallow whatever the input. */
enum { MAX_SX_NODES = 63 };

static void advance(parser *p) { p->tok = ein_lex_next(&p->lx); }

static ein_span span_of(size_t offset, size_t length) {
  return (ein_span){offset, length};
}

static ein_span tok_span(ein_token t) { return span_of(t.offset, t.length); }

/* Records an error at one span. */
static ein_status fail_at(parser *p, ein_status status, ein_span at,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ein_status fail_at(parser *p, ein_status status, ein_span at,
                          const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ein_error_vset(p->err, status, p->lx.src, p->lx.len, &at, 1, fmt, ap);
  va_end(ap);
  return status;
}

/* Records an error at two spans: the culprit and the place it conflicts
 * with. */
static ein_status fail_at2(parser *p, ein_status status, ein_span at,
                           ein_span other, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static ein_status fail_at2(parser *p, ein_status status, ein_span at,
                           ein_span other, const char *fmt, ...) {
  ein_span spans[2] = {at, other};
  va_list ap;
  va_start(ap, fmt);
  ein_error_vset(p->err, status, p->lx.src, p->lx.len, spans, 2, fmt, ap);
  va_end(ap);
  return status;
}

static ein_status no_memory(parser *p) {
  return ein_fail_memory(p->err, "out of memory while parsing");
}

/* Describes a TOK_BAD_BYTE token, s[0, len): a character shown as itself
 * where a terminal shows it, else by its bytes. */
static void describe_bad_char(const unsigned char *s, size_t len, char *buf,
                              size_t cap) {
  size_t clen;
  int width = ein_utf8_char((const char *)s, &clen);
  if (*s < 0x21 || *s == 0x7f)
    snprintf(buf, cap, "control byte 0x%02X", *s);
  else if (width >= 0)
    snprintf(buf, cap, "'%.*s'", (int)len, (const char *)s);
  else if (len == 1)
    snprintf(buf, cap, "byte 0x%02X (the text is not UTF-8)", *s);
  else { /* a format or private-use character: its bytes, not itself */
    int n = snprintf(buf, cap, "invisible character (UTF-8");
    for (size_t i = 0; i < len && n > 0 && (size_t)n < cap; i++)
      n += snprintf(buf + n, cap - (size_t)n, " %02X", s[i]);
    if (n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, ")");
  }
}

/* Describes the lookahead for "found ..." in messages. */
static void describe_tok(parser *p, char *buf, size_t cap) {
  ein_token t = p->tok;
  const unsigned char *s = (const unsigned char *)p->lx.src + t.offset;
  switch (t.kind) {
  case TOK_NAME:
    ein_quote_name(buf, cap, (const char *)s, t.length);
    return;
  case TOK_INT:
    snprintf(buf, cap, "the number %.*s", t.length > 24 ? 24 : (int)t.length,
             (const char *)s);
    return;
  case TOK_BAD_DOTS:
    snprintf(buf, cap, "'%.*s'", (int)t.length, (const char *)s);
    return;
  case TOK_BAD_BYTE:
    describe_bad_char(s, t.length, buf, cap);
    return;
  default:
    snprintf(buf, cap, "%s", ein_tok_kind_name(t.kind));
  }
}

/* Reports a lookahead that cannot start or continue what is expected. Bytes
 * that belong to no construct get a message about the byte itself. */
static ein_status unexpected(parser *p, const char *expected) {
  char found[96];
  describe_tok(p, found, sizeof found);
  ein_span at = tok_span(p->tok);
  switch (p->tok.kind) {
  case TOK_NUL:
    return fail_at(p, EIN_ERR_SYNTAX, at,
                   "unexpected NUL byte inside the text; expected %s",
                   expected);
  case TOK_BAD_DOTS:
    return fail_at(p, EIN_ERR_SYNTAX, at,
                   "expected '...' (three dots), found %s", found);
  case TOK_NUMBER_NAME:
    return fail_at(p, EIN_ERR_SYNTAX, at,
                   "'%.*s' is a number glued to a name: an axis name starts "
                   "with a letter or '_', and a number is followed by a space",
                   p->tok.length > 40 ? 40 : (int)p->tok.length,
                   p->lx.src + p->tok.offset);
  case TOK_BAD_BYTE:
    return fail_at(p, EIN_ERR_SYNTAX, at, "unexpected %s; expected %s",
                   found, expected);
  case TOK_MINUS:
    return fail_at(p, EIN_ERR_SYNTAX, at,
                   "expected %s, found '-' (did you mean '->'?)", expected);
  default:
    return fail_at(p, EIN_ERR_SYNTAX, at, "expected %s, found %s", expected,
                   found);
  }
}

/* The value of an INT token: checked for leading zeros and for int64. */
static ein_status int_value(parser *p, ein_token t, int64_t *out) {
  const char *s = p->lx.src + t.offset;
  if (t.length > 1 && s[0] == '0')
    return fail_at(p, EIN_ERR_SYNTAX, tok_span(t),
                   "a number cannot start with 0: found '%.*s'",
                   t.length > 24 ? 24 : (int)t.length, s);
  int64_t v = 0;
  for (size_t i = 0; i < t.length; i++) {
    if (!ein_mul_i64(v, 10, &v) || !ein_add_i64(v, s[i] - '0', &v))
      return fail_at(p, EIN_ERR_OVERFLOW, tok_span(t),
                     "the number %.*s%s does not fit in int64 (max "
                     "9223372036854775807)",
                     t.length > 24 ? 24 : (int)t.length, s,
                     t.length > 24 ? "..." : "");
  }
  *out = v;
  return EIN_OK;
}

/* In the numpy dialect, constructs of the einops dialect get a message that
 * names the dialect rather than a bare syntax error. */
static ein_status numpy_dialect_error(parser *p) {
  const char *what = NULL;
  const char *s = p->lx.src + p->tok.offset;
  switch (p->tok.kind) {
  case TOK_LPAREN:
  case TOK_RPAREN: what = "groups '( )'"; break;
  case TOK_INT: what = "numbers"; break;
  case TOK_BAD_BYTE:
    if (*s == '_') what = "'_' in names";
    break;
  default: break;
  }
  if (!what) return EIN_OK;
  return fail_at(p, EIN_ERR_DIALECT, tok_span(p->tok),
                 "%s are not part of the numpy dialect, where each letter is "
                 "an axis; use the einops dialect (no --numpy) for them",
                 what);
}

/* factor := NAME | INT | '...'   (inside a group)
 * term   := factor | '(' factor* ')'
 * Parses one term at the lookahead into *t. */
static ein_status parse_term(parser *p, ein_term *t);

static ein_status parse_atom(parser *p, ein_term *t) {
  ein_token tok = p->tok;
  memset(t, 0, sizeof *t);
  t->offset = tok.offset;
  t->length = tok.length;
  switch (tok.kind) {
  case TOK_NAME:
    t->kind = TERM_NAME;
    t->name = p->lx.src + tok.offset;
    t->name_len = tok.length;
    break;
  case TOK_INT: {
    int64_t v;
    ein_status st = int_value(p, tok, &v);
    if (st) return st;
    if (v == 0)
      return fail_at(p, EIN_ERR_SYNTAX, tok_span(tok),
                     "expected an axis size of 1 or more, found 0");
    t->kind = v == 1 ? TERM_UNIT : TERM_NUMBER;
    t->value = v;
    break;
  }
  case TOK_ELLIPSIS: t->kind = TERM_ELLIPSIS; break;
  default: return EIN_ERR_INTERNAL; /* callers check the kind first */
  }
  advance(p);
  return EIN_OK;
}

static bool starts_atom(ein_tok_kind k) {
  return k == TOK_NAME || k == TOK_INT || k == TOK_ELLIPSIS;
}

static ein_status parse_group(parser *p, ein_term *t) {
  ein_token open = p->tok;
  ein_term factors[EIN_MAX_DIMS];
  int n = 0;
  advance(p);
  for (;;) {
    if (p->tok.kind == TOK_RPAREN) break;
    if (p->tok.kind == TOK_LPAREN)
      return fail_at2(p, EIN_ERR_SYNTAX, tok_span(p->tok), tok_span(open),
                      "nested parentheses are not allowed: a group is one "
                      "level deep");
    if (p->tok.kind == TOK_EOF)
      return fail_at2(p, EIN_ERR_SYNTAX, tok_span(open), tok_span(p->tok),
                      "unclosed '(': expected ')' before the end of the "
                      "expression");
    if (!starts_atom(p->tok.kind)) {
      if (p->tok.kind == TOK_COMMA || p->tok.kind == TOK_ARROW) {
        char found[96];
        describe_tok(p, found, sizeof found);
        return fail_at2(p, EIN_ERR_SYNTAX, tok_span(p->tok), tok_span(open),
                        "expected ')' to close the group, found %s", found);
      }
      return unexpected(p, "an axis name, a number, '...' or ')' in a group");
    }
    if (n == EIN_MAX_DIMS)
      return fail_at(p, EIN_ERR_LIMIT, tok_span(p->tok),
                     "a group has more than %d factors", EIN_MAX_DIMS);
    ein_status st = parse_atom(p, &factors[n]);
    if (st) return st;
    n++;
  }
  memset(t, 0, sizeof *t);
  t->kind = TERM_GROUP;
  t->offset = open.offset;
  t->length = p->tok.offset + p->tok.length - open.offset;
  t->nfactors = n;
  if (n > 0) {
    t->factors = ein_arena_alloc(p->arena, (size_t)n, sizeof *t->factors);
    if (!t->factors) return no_memory(p);
    memcpy(t->factors, factors, (size_t)n * sizeof *factors);
  }
  advance(p); /* ')' */
  return EIN_OK;
}

static ein_status parse_term(parser *p, ein_term *t) {
  if (p->tok.kind == TOK_LPAREN) return parse_group(p, t);
  return parse_atom(p, t);
}

/* Where a term holds '...', if anywhere: the term itself or a factor. */
static const ein_term *ellipsis_in(const ein_term *t) {
  if (t->kind == TERM_ELLIPSIS) return t;
  if (t->kind == TERM_GROUP)
    for (int i = 0; i < t->nfactors; i++)
      if (t->factors[i].kind == TERM_ELLIPSIS) return &t->factors[i];
  return NULL;
}

/* The token at a term's start must begin one (an atom or '('); the
 * numpy dialect refuses what it cannot spell. */
static ein_status check_term_start(parser *p, bool is_output) {
  ein_tok_kind k = p->tok.kind;
  if (p->lx.dialect == EIN_DIALECT_NUMPY) {
    ein_status st = numpy_dialect_error(p);
    if (st) return st;
  }
  if (k == TOK_RPAREN)
    return fail_at(p, EIN_ERR_SYNTAX, tok_span(p->tok),
                   "unbalanced ')': no group is open");
  if (starts_atom(k) || k == TOK_LPAREN) return EIN_OK;
  if (k == TOK_STAR || k == TOK_HASH || k == TOK_PLUS)
    return fail_at(p, EIN_ERR_SYNTAX, tok_span(p->tok),
                   "'%c' belongs to shape specs, not expressions; "
                   "expected an axis name, a number, '...' or '('",
                   p->lx.src[p->tok.offset]);
  return unexpected(p, is_output ? "an axis name, a number, '...', '(' "
                                   "or the end of the expression"
                                 : "an axis name, a number, '...', '(', "
                                   "',' or '->'");
}

/* '...' at most once per operand, and inside a group only on the output;
 * *ellipsis is the one seen so far, and becomes term's when it has one. */
static ein_status check_term_ellipsis(parser *p, const ein_term *term,
                                      bool is_output,
                                      const ein_term **ellipsis) {
  const ein_term *e = ellipsis_in(term);
  if (!e) return EIN_OK;
  const char *whose = is_output ? "the output" : "an operand";
  if (term->kind == TERM_GROUP) /* a second '...' inside the same group */
    for (int f = 0; f < term->nfactors; f++) {
      const ein_term *g = &term->factors[f];
      if (g->kind == TERM_ELLIPSIS && g != e)
        return fail_at2(p, EIN_ERR_BAD_ELLIPSIS, span_of(g->offset, 3),
                        span_of(e->offset, 3),
                        "'...' appears twice in %s; it may appear at most "
                        "once",
                        whose);
    }
  if (*ellipsis)
    return fail_at2(p, EIN_ERR_BAD_ELLIPSIS, span_of(e->offset, 3),
                    span_of((*ellipsis)->offset, 3),
                    "'...' appears twice in %s; it may appear at most "
                    "once",
                    whose);
  if (!is_output && term->kind == TERM_GROUP)
    return fail_at2(p, EIN_ERR_BAD_ELLIPSIS, span_of(e->offset, 3),
                    span_of(term->offset, term->length),
                    "'...' inside a group on an input is not allowed: "
                    "its size cannot be split; write it outside the "
                    "group");
  *ellipsis = e;
  return EIN_OK;
}

/* operand := term*
 * Stops at ',', '->', or the end. `is_output` only changes messages. */
static ein_status parse_operand(parser *p, ein_operand *op, int index,
                                bool is_output) {
  ein_term terms[EIN_MAX_DIMS + 1];
  int n = 0;
  const ein_term *ellipsis = NULL;
  char what[32];
  if (is_output)
    snprintf(what, sizeof what, "the output");
  else
    snprintf(what, sizeof what, "operand %d", index + 1);
  memset(op, 0, sizeof *op);
  op->ellipsis_term = -1;
  op->offset = p->tok.offset;
  for (;;) {
    ein_tok_kind k = p->tok.kind;
    if (k == TOK_COMMA || k == TOK_ARROW || k == TOK_EOF) break;
    ein_status st = check_term_start(p, is_output);
    if (st) return st;
    if (n == EIN_MAX_DIMS + 1)
      return fail_at(p, EIN_ERR_LIMIT, tok_span(p->tok),
                     "%s has more than %d dims", what, EIN_MAX_DIMS);
    if ((st = parse_term(p, &terms[n]))) return st;
    const ein_term *before = ellipsis;
    if ((st = check_term_ellipsis(p, &terms[n], is_output, &ellipsis)))
      return st;
    if (ellipsis != before) op->ellipsis_term = n;
    n++;
  }
  /* 65 terms fit only when one of them is the ellipsis */
  if (n == EIN_MAX_DIMS + 1 && op->ellipsis_term < 0)
    return fail_at(p, EIN_ERR_LIMIT,
                   span_of(terms[n - 1].offset, terms[n - 1].length),
                   "%s has more than %d dims", what, EIN_MAX_DIMS);
  op->nterms = n;
  if (n > 0) {
    op->length = terms[n - 1].offset + terms[n - 1].length - op->offset;
    op->terms = ein_arena_alloc(p->arena, (size_t)n, sizeof *op->terms);
    if (!op->terms) return no_memory(p);
    memcpy(op->terms, terms, (size_t)n * sizeof *terms);
  }
  return EIN_OK;
}

/* operand (',' operand)*: the inputs, into the AST's arena. They are
 * gathered in a buffer that doubles as needed (a tensor network may have
 * thousands), then copied. */
static ein_status parse_inputs(parser *p, ein_ast *out) {
  ein_operand *inputs = NULL;
  int n = 0, cap = 0;
  ein_status st = EIN_OK;
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      ein_operand *grown = ein_realloc(inputs, (size_t)cap * sizeof *inputs);
      if (!grown) {
        st = no_memory(p);
        break;
      }
      inputs = grown;
    }
    if ((st = parse_operand(p, &inputs[n], n, false))) break;
    n++;
    if (p->tok.kind != TOK_COMMA) break;
    if (n == EIN_MAX_OPERANDS) {
      st = fail_at(p, EIN_ERR_LIMIT, tok_span(p->tok),
                   "more than %d operands; einc takes at most %d",
                   EIN_MAX_OPERANDS, EIN_MAX_OPERANDS);
      break;
    }
    advance(p);
  }
  if (!st) {
    out->ninputs = n;
    out->inputs = ein_arena_alloc(p->arena, (size_t)n, sizeof *out->inputs);
    if (out->inputs)
      memcpy(out->inputs, inputs, (size_t)n * sizeof *inputs);
    else
      st = no_memory(p);
  }
  ein_free(inputs);
  return st;
}

/* expression := operand (',' operand)* ['->' operand] EOF
 * ('->' is required in the einops dialect.) */
ein_status ein_parse_expr(const char *src, size_t len, ein_dialect dialect,
                          ein_arena *arena, ein_error_rec *err,
                          ein_ast *out) {
  parser p = {.arena = arena, .err = err};
  memset(out, 0, sizeof *out);
  if (len > EIN_MAX_EXPR_BYTES)
    return ein_fail_limit(err,
                          "the expression is %zu bytes long; the limit is %u",
                          len, EIN_MAX_EXPR_BYTES);
  if (dialect != EIN_DIALECT_EINOPS && dialect != EIN_DIALECT_NUMPY)
    return ein_fail_argument(err, "unknown dialect %d", (int)dialect);
  ein_lexer_init(&p.lx, src, len, dialect);
  advance(&p);
  out->src = src;
  out->len = len;
  out->dialect = dialect;
  out->output.ellipsis_term = -1; /* an implicit output has none */

  ein_status st = parse_inputs(&p, out);
  if (st) return st;
  if (p.tok.kind == TOK_EOF) {
    if (dialect == EIN_DIALECT_EINOPS)
      return fail_at(&p, EIN_ERR_SYNTAX, tok_span(p.tok),
                     "expected '->' and the output, found the end of the "
                     "expression (only the numpy dialect infers the "
                     "output)");
    out->explicit_output = false;
    return EIN_OK;
  }
  /* parse_operand stops only at ',', '->' or EOF */
  out->explicit_output = true;
  out->arrow_offset = p.tok.offset;
  ein_token arrow = p.tok;
  advance(&p);
  if ((st = parse_operand(&p, &out->output, out->ninputs, true))) return st;
  if (p.tok.kind == TOK_ARROW)
    return fail_at2(&p, EIN_ERR_SYNTAX, tok_span(p.tok), tok_span(arrow),
                    "a second '->': an expression has exactly one output");
  if (p.tok.kind == TOK_COMMA)
    return fail_at(&p, EIN_ERR_SYNTAX, tok_span(p.tok),
                   "expected a single output after '->', found ','");
  return EIN_OK;
}

/* ------------------------------------------------------------ specs */

static ein_sexpr *new_sexpr(parser *p, ein_sexpr_kind kind, size_t offset,
                            size_t length) {
  ein_sexpr *e = ein_arena_alloc(p->arena, 1, sizeof *e);
  if (e) {
    e->kind = kind;
    e->offset = offset;
    e->length = length;
  }
  return e;
}

/* True when the lookahead continues the current dim: no space before it. */
static bool glued(const parser *p) { return !p->tok.space_before; }

/* sx_atom := NAME | INT */
static ein_status parse_sx_atom(parser *p, ein_sexpr **out) {
  ein_token t = p->tok;
  if (++p->sx_nodes > MAX_SX_NODES)
    return fail_at(p, EIN_ERR_LIMIT, tok_span(t),
                   "a size expression has more than %d terms",
                   MAX_SX_NODES);
  if (t.kind == TOK_NAME) {
    ein_sexpr *e = new_sexpr(p, SEXPR_NAME, t.offset, t.length);
    if (!e) return no_memory(p);
    e->name = p->lx.src + t.offset;
    e->name_len = t.length;
    *out = e;
  } else if (t.kind == TOK_INT) {
    int64_t v;
    ein_status st = int_value(p, t, &v);
    if (st) return st;
    ein_sexpr *e = new_sexpr(p, SEXPR_NUMBER, t.offset, t.length);
    if (!e) return no_memory(p);
    e->value = v;
    *out = e;
  } else {
    return unexpected(p, "a name or a number");
  }
  advance(p);
  return EIN_OK;
}

/* *out becomes the node `*out kind rhs`, spanning both. */
static ein_status join_binary(parser *p, ein_sexpr_kind kind, ein_sexpr **out,
                              ein_sexpr *rhs) {
  ein_sexpr *e = new_sexpr(p, kind, (*out)->offset,
                           rhs->offset + rhs->length - (*out)->offset);
  if (!e) return no_memory(p);
  e->lhs = *out;
  e->rhs = rhs;
  *out = e;
  return EIN_OK;
}

/* sx_mul := sx_atom ('*' sx_atom)*      (no spaces inside) */
static ein_status parse_sx_mul(parser *p, ein_sexpr **out) {
  ein_status st = parse_sx_atom(p, out);
  while (!st && p->tok.kind == TOK_STAR && glued(p)) {
    advance(p);
    if (!glued(p))
      return fail_at(p, EIN_ERR_SYNTAX, tok_span(p->tok),
                     "expected a name or a number right after '*' (size "
                     "expressions have no spaces, like 2*h)");
    ein_sexpr *rhs = NULL; /* set on success; -O3 cannot tell */
    st = parse_sx_atom(p, &rhs);
    if (st) return st;
    st = join_binary(p, SEXPR_MUL, out, rhs);
  }
  return st;
}

/* sx_add := sx_mul (('+' | '-') sx_mul)*   (no spaces inside) */
static ein_status parse_sx_add(parser *p, ein_sexpr **out) {
  ein_status st = parse_sx_mul(p, out);
  while (!st && (p->tok.kind == TOK_PLUS || p->tok.kind == TOK_MINUS) &&
         glued(p)) {
    ein_sexpr_kind kind = p->tok.kind == TOK_PLUS ? SEXPR_ADD : SEXPR_SUB;
    advance(p);
    if (!glued(p))
      return fail_at(p, EIN_ERR_SYNTAX, tok_span(p->tok),
                     "expected a name or a number right after the operator "
                     "(size expressions have no spaces, like n+1)");
    ein_sexpr *rhs = NULL; /* set on success; -O3 cannot tell */
    st = parse_sx_mul(p, &rhs);
    if (st) return st;
    st = join_binary(p, kind, out, rhs);
  }
  return st;
}

/* size := sx_add; a lone name or number becomes SPEC_NAME or SPEC_FIXED. */
static ein_status parse_size(parser *p, ein_spec_dim *d) {
  ein_sexpr *e;
  p->sx_nodes = 0;
  ein_status st = parse_sx_add(p, &e);
  if (st) return st;
  d->offset = e->offset;
  d->length = e->length;
  if (e->kind == SEXPR_NAME) {
    d->kind = SPEC_NAME;
    d->name = e->name;
    d->name_len = e->name_len;
  } else if (e->kind == SEXPR_NUMBER) {
    d->kind = SPEC_FIXED;
    d->value = e->value;
  } else {
    d->kind = SPEC_EXPR;
    d->expr = e;
  }
  return EIN_OK;
}

static bool is_underscore(const parser *p, ein_token t) {
  return t.kind == TOK_NAME && t.length == 1 && p->lx.src[t.offset] == '_';
}

/* '*name', '#name', '*#name' or '#*name' (the prefixes glued), and '*_',
 * an anonymous run. */
static ein_status parse_spec_prefixed(parser *p, ein_token first,
                                      ein_spec_dim *d) {
  bool run = first.kind == TOK_STAR, bcast = first.kind == TOK_HASH;
  advance(p);
  if (glued(p) && (p->tok.kind == TOK_STAR || p->tok.kind == TOK_HASH) &&
      p->tok.kind != first.kind) {
    run = bcast = true;
    advance(p);
  }
  if (p->tok.kind != TOK_NAME || !glued(p))
    return unexpected(p, "a name right after the '*' or '#' prefix");
  d->length = p->tok.offset + p->tok.length - first.offset;
  if (is_underscore(p, p->tok)) {
    if (!run || bcast)
      return fail_at(p, EIN_ERR_SYNTAX, span_of(d->offset, d->length),
                     "'#_' means nothing: '_' already matches any size");
    d->kind = SPEC_RUN; /* *_ : an anonymous run */
  } else {
    d->kind = run ? SPEC_RUN : SPEC_BCAST;
    d->name = p->lx.src + p->tok.offset;
    d->name_len = p->tok.length;
  }
  d->broadcast = run && bcast;
  advance(p);
  return EIN_OK;
}

/* '(' size* ')': a group of names and numbers, one level deep. */
static ein_status parse_spec_group(parser *p, ein_token first,
                                   ein_spec_dim *d) {
  ein_spec_dim factors[EIN_MAX_DIMS];
  int n = 0;
  advance(p);
  while (p->tok.kind != TOK_RPAREN) {
    if (p->tok.kind == TOK_EOF)
      return fail_at(p, EIN_ERR_SYNTAX, tok_span(first),
                     "unclosed '(': expected ')' before the end");
    if (p->tok.kind == TOK_LPAREN)
      return fail_at2(p, EIN_ERR_SYNTAX, tok_span(p->tok), tok_span(first),
                      "nested parentheses are not allowed: a group is one "
                      "level deep");
    if (p->tok.kind != TOK_NAME && p->tok.kind != TOK_INT)
      return unexpected(p, "a name, a number or ')' in a group");
    if (is_underscore(p, p->tok))
      return fail_at(p, EIN_ERR_SYNTAX, tok_span(p->tok),
                     "'_' cannot be a factor of a group: a product of an "
                     "unknown size checks nothing");
    if (n == EIN_MAX_DIMS)
      return fail_at(p, EIN_ERR_LIMIT, tok_span(p->tok),
                     "a group has more than %d factors", EIN_MAX_DIMS);
    ein_status st = parse_size(p, &factors[n]);
    if (st) return st;
    n++;
  }
  d->kind = SPEC_GROUP;
  d->length = p->tok.offset + 1 - first.offset;
  d->nfactors = n;
  if (n) {
    d->factors = ein_arena_alloc(p->arena, (size_t)n, sizeof *factors);
    if (!d->factors) return no_memory(p);
    memcpy(d->factors, factors, (size_t)n * sizeof *factors);
  }
  advance(p);
  return EIN_OK;
}

/* dim := '_' | '...' | '*' ['#'] NAME | '#' ['*'] NAME | '#' NAME | size
 *      | '(' size* ')' */
static ein_status parse_spec_dim(parser *p, ein_spec_dim *d) {
  ein_token first = p->tok;
  memset(d, 0, sizeof *d);
  d->offset = first.offset;
  d->length = first.length;
  if (first.kind == TOK_ELLIPSIS) {
    d->kind = SPEC_RUN;
    d->name = "...";
    d->name_len = 3;
    advance(p);
    return EIN_OK;
  }
  if (is_underscore(p, first)) {
    d->kind = SPEC_ANY;
    advance(p);
    return EIN_OK;
  }
  if (first.kind == TOK_STAR || first.kind == TOK_HASH)
    return parse_spec_prefixed(p, first, d);
  if (first.kind == TOK_LPAREN) return parse_spec_group(p, first, d);
  if (first.kind == TOK_NAME || first.kind == TOK_INT) return parse_size(p, d);
  return unexpected(p, "a dim: a name, a number, '_', '...', '*name', "
                       "'#name' or '('");
}

/* spec := dim*   (dims separated by whitespace) */
ein_status ein_parse_spec(const char *src, size_t len, ein_arena *arena,
                          ein_error_rec *err, ein_spec *out) {
  parser p = {.arena = arena, .err = err};
  memset(out, 0, sizeof *out);
  out->run_index = -1;
  if (len > EIN_MAX_EXPR_BYTES)
    return ein_fail_limit(err,
                          "the shape spec is %zu bytes long; the limit is %u",
                          len, EIN_MAX_EXPR_BYTES);
  ein_lexer_init(&p.lx, src, len, EIN_DIALECT_EINOPS);
  advance(&p);
  out->src = src;
  out->len = len;
  ein_spec_dim dims[EIN_MAX_DIMS + 1];
  int n = 0;
  while (p.tok.kind != TOK_EOF) {
    if (n > 0 && !p.tok.space_before)
      return fail_at(&p, EIN_ERR_SYNTAX, tok_span(p.tok),
                     "expected whitespace between dims before this");
    if (n == EIN_MAX_DIMS + 1)
      return fail_at(&p, EIN_ERR_LIMIT, tok_span(p.tok),
                     "a shape spec has more than %d dims", EIN_MAX_DIMS);
    ein_status st = parse_spec_dim(&p, &dims[n]);
    if (st) return st;
    if (dims[n].kind == SPEC_RUN) {
      if (out->run_index >= 0) {
        const ein_spec_dim *prev = &dims[out->run_index];
        return fail_at2(&p, EIN_ERR_BAD_ELLIPSIS,
                        span_of(dims[n].offset, dims[n].length),
                        span_of(prev->offset, prev->length),
                        "a second run of dims: a spec may have one '*name' "
                        "or '...'");
      }
      out->run_index = n;
    }
    n++;
  }
  if (n == EIN_MAX_DIMS + 1 && out->run_index < 0)
    return fail_at(&p, EIN_ERR_LIMIT, span_of(dims[n - 1].offset, 1),
                   "a shape spec has more than %d dims", EIN_MAX_DIMS);
  out->ndims = n;
  if (n) {
    out->dims = ein_arena_alloc(arena, (size_t)n, sizeof *dims);
    if (!out->dims) return no_memory(&p);
    memcpy(out->dims, dims, (size_t)n * sizeof *dims);
  }
  return EIN_OK;
}
