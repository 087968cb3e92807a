/* test_lexer.c - token streams of both dialects, spans and spacing flags. */
#include <stdlib.h>

#include "harness.h"
#include "lexer.h"

static const char *kind_tag(ein_tok_kind k) {
  switch (k) {
  case TOK_EOF: return "EOF";
  case TOK_NAME: return "NAME";
  case TOK_INT: return "INT";
  case TOK_ELLIPSIS: return "ELL";
  case TOK_LPAREN: return "(";
  case TOK_RPAREN: return ")";
  case TOK_COMMA: return ",";
  case TOK_ARROW: return "->";
  case TOK_STAR: return "*";
  case TOK_HASH: return "#";
  case TOK_PLUS: return "+";
  case TOK_MINUS: return "-";
  case TOK_BAD_DOTS: return "BADDOTS";
  case TOK_NUMBER_NAME: return "NUMNAME";
  case TOK_BAD_BYTE: return "BADBYTE";
  case TOK_NUL: return "NUL";
  }
  return "?";
}

/* "NAME:b@0 ..." with '_' before a token glued to the previous one. */
static void lex_all(const char *src, size_t len, ein_dialect d, char *out,
                    size_t cap) {
  ein_lexer lx;
  ein_lexer_init(&lx, src, len, d);
  size_t n = 0;
  out[0] = '\0';
  for (int guard = 0; guard < 200; guard++) {
    ein_token t = ein_lex_next(&lx);
    if (t.kind == TOK_NAME || t.kind == TOK_INT)
      n += (size_t)snprintf(out + n, cap - n, "%s%s:%.*s@%zu ",
                            t.space_before ? "" : "_", kind_tag(t.kind),
                            (int)t.length, src + t.offset, t.offset);
    else
      n += (size_t)snprintf(out + n, cap - n, "%s%s@%zu ",
                            t.space_before ? "" : "_", kind_tag(t.kind),
                            t.offset);
    if (t.kind == TOK_EOF) break;
  }
}

static void expect(const char *src, ein_dialect d, const char *want) {
  char got[2048];
  lex_all(src, strlen(src), d, got, sizeof got);
  CHECK_STR(got, want, "lexing \"%s\"", src);
}

int main(void) {
  const ein_dialect E = EIN_DIALECT_EINOPS, N = EIN_DIALECT_NUMPY;
  expect("", E, "EOF@0 ");
  expect("   ", E, "EOF@3 ");
  expect("a", E, "NAME:a@0 _EOF@1 ");
  expect("b h i d, b h j d -> b h i j", E,
         "NAME:b@0 NAME:h@2 NAME:i@4 NAME:d@6 _,@7 NAME:b@9 NAME:h@11 "
         "NAME:j@13 NAME:d@15 ->@17 NAME:b@20 NAME:h@22 NAME:i@24 NAME:j@26 "
         "_EOF@27 ");
  expect("b (heads d)->b", E,
         "NAME:b@0 (@2 _NAME:heads@3 NAME:d@9 _)@10 _->@11 _NAME:b@13 "
         "_EOF@14 ");
  expect("_x x_ _ a1_b2", E,
         "NAME:_x@0 NAME:x_@3 NAME:_@6 NAME:a1_b2@8 _EOF@13 ");
  expect("(h 2) 10 007 1", E,
         "(@0 _NAME:h@1 INT:2@3 _)@4 INT:10@6 INT:007@9 INT:1@13 _EOF@14 ");
  expect("2h", E, "NUMNAME@0 _EOF@2 "); /* einops rejects "2h" too */
  expect("x 2b_1 2 b", E, "NAME:x@0 NUMNAME@2 INT:2@7 NAME:b@9 _EOF@10 ");
  expect("2h", N, "INT:2@0 _NAME:h@1 _EOF@2 ");
  expect("... .. . ....", E,
         "ELL@0 BADDOTS@4 BADDOTS@7 ELL@9 _BADDOTS@12 _EOF@13 ");
  expect("b...", E, "NAME:b@0 _ELL@1 _EOF@4 ");
  expect("\tb\n\r\v\fh ->", E, "NAME:b@1 NAME:h@6 ->@8 _EOF@10 ");
  expect("- > ->->", E, "-@0 BADBYTE@2 ->@4 _->@6 _EOF@8 ");
  expect("*rest #b n+1 2*h n-1", E,
         "*@0 _NAME:rest@1 #@6 _NAME:b@7 NAME:n@9 _+@10 _INT:1@11 INT:2@13 "
         "_*@14 _NAME:h@15 NAME:n@17 _-@18 _INT:1@19 _EOF@20 ");
  expect("a;b", E, "NAME:a@0 _BADBYTE@1 _NAME:b@2 _EOF@3 ");
  expect("\x01", E, "BADBYTE@0 _EOF@1 ");

  /* UTF-8 names: Python identifiers (letters of any script, marks, digits
   * and connectors after the first); offsets are bytes */
  expect("a\xc3\xa9", E, "NAME:a\xc3\xa9@0 _EOF@3 ");            /* aé */
  expect("\xce\xb1 \xce\xb2->\xce\xb2", E,                      /* α β->β */
         "NAME:\xce\xb1@0 NAME:\xce\xb2@3 _->@5 _NAME:\xce\xb2@7 _EOF@9 ");
  expect("x\xc2\xb7y _\xd0\xb6 \xe5\xbd\xa2\xe7\x8a\xb6", E, /* x·y _ж 形状 */
         "NAME:x\xc2\xb7y@0 NAME:_\xd0\xb6@5 "
         "NAME:\xe5\xbd\xa2\xe7\x8a\xb6@9 _EOF@15 ");
  /* as Python: x₁ and x² are no identifiers (No, not Nd), x١ is */
  expect("x\xe2\x82\x81 x\xd9\xa1", E,
         "NAME:x@0 _BADBYTE@1 NAME:x\xd9\xa1@5 _EOF@8 ");
  expect("e\xcc\x81 \xe2\x85\xa0", E,     /* e + combining acute; Ⅰ (Nl) */
         "NAME:e\xcc\x81@0 NAME:\xe2\x85\xa0@4 _EOF@7 ");
  expect("2\xce\xb1", E, "NUMNAME@0 _EOF@3 "); /* 2α: glued, as 2b */
  /* a character that is no name is one token over all its bytes; a byte
   * that is not UTF-8 (a stray continuation, a cut sequence, 0xFF) one on
   * its own */
  expect("a\xe2\x86\x92" "b", E, "NAME:a@0 _BADBYTE@1 _NAME:b@4 _EOF@5 "); /* → */
  expect("\xcc\x81" "a", E, "BADBYTE@0 _NAME:a@2 _EOF@3 "); /* a lone mark */
  expect("\x80" "a \xc3 b \xff", E,
         "BADBYTE@0 _NAME:a@1 BADBYTE@3 NAME:b@5 BADBYTE@7 _EOF@8 ");
  expect("\xed\xa0\x80", E, "BADBYTE@0 _EOF@3 "); /* a surrogate */
  expect("\xe2\x80\xae", E, "BADBYTE@0 _EOF@3 ");      /* a bidi override */
  expect("\xc2\xa0" "a", E, "BADBYTE@0 _NAME:a@2 _EOF@3 "); /* no-break space */

  /* numpy: every letter is its own token; digits and '_' stay tokens the
   * parser rejects with a dialect message */
  expect("ij,jk->ik", N,
         "NAME:i@0 _NAME:j@1 _,@2 _NAME:j@3 _NAME:k@4 _->@5 _NAME:i@7 "
         "_NAME:k@8 _EOF@9 ");
  expect("...ii", N, "ELL@0 _NAME:i@3 _NAME:i@4 _EOF@5 ");
  expect("Ab, b", N, "NAME:A@0 _NAME:b@1 _,@2 NAME:b@4 _EOF@5 ");
  expect("i_1", N, "NAME:i@0 _BADBYTE@1 _INT:1@2 _EOF@3 ");
  /* numpy: any non-ASCII character but separators is an axis, as
   * opt_einsum's symbols past 52 are; a no-break space is not */
  expect("i\xce\xb1", N, "NAME:i@0 _NAME:\xce\xb1@1 _EOF@3 ");
  expect("i\xc2\xa0", N, "NAME:i@0 _BADBYTE@1 _EOF@3 ");
  expect("(i)", N, "(@0 _NAME:i@1 _)@2 _EOF@3 ");

  /* an embedded NUL is a token of its own, not the end */
  {
    const char src[] = {'a', '\0', 'b', '\0'};
    char got[256];
    lex_all(src, 3, E, got, sizeof got);
    CHECK_STR(got, "NAME:a@0 _NUL@1 _NAME:b@2 _EOF@3 ", "embedded NUL");
  }
  /* a long identifier is one token */
  {
    size_t len = 70000;
    char *s = malloc(len + 1);
    memset(s, 'q', len);
    s[len] = '\0';
    ein_lexer lx;
    ein_lexer_init(&lx, s, len, E);
    ein_token t = ein_lex_next(&lx);
    CHECK(t.kind == TOK_NAME && t.length == len, "long name: kind %d len %zu",
          t.kind, t.length);
    CHECK(ein_lex_next(&lx).kind == TOK_EOF, "long name then EOF");
    CHECK(ein_lex_next(&lx).kind == TOK_EOF, "EOF repeats");
    free(s);
  }
  return test_summary("lexer");
}
