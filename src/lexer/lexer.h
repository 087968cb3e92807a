/*
 * lexer.h - tokens of einc expressions and shape specs.
 *
 * Takes: a NUL-terminated UTF-8 text of known length and a dialect.
 * Gives: tokens that are slices of that text (offset and length, never
 * copies), each marked with whether whitespace precedes it; shape specs use
 * that to tell "n+1" (one dim) from "n + 1" (an error).
 *
 * The lexer never fails: a byte it cannot place becomes a TOK_BAD_* token
 * and the parser turns it into a message.
 */
#ifndef EIN_LEXER_H
#define EIN_LEXER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ein.h"

typedef enum ein_tok_kind {
  TOK_EOF = 0,
  TOK_NAME,      /* a Python identifier in UTF-8, such as 'b', 'x_1', 'α';
                    one ASCII letter in the numpy dialect */
  TOK_INT,       /* [0-9]+ (the parser checks its value) */
  TOK_ELLIPSIS,  /* ... */
  TOK_LPAREN,    /* ( */
  TOK_RPAREN,    /* ) */
  TOK_COMMA,     /* , */
  TOK_ARROW,     /* -> */
  TOK_STAR,      /* * (shape specs) */
  TOK_HASH,      /* # (shape specs) */
  TOK_PLUS,      /* + (shape specs) */
  TOK_MINUS,     /* - not followed by > (shape specs) */
  TOK_BAD_DOTS,  /* one or two dots that do not make an ellipsis */
  TOK_NUMBER_NAME, /* digits then a name, "2b" (einops dialect): an error,
                      as in einops, not the number 2 and the axis b */
  TOK_BAD_BYTE,  /* a character no rule accepts (punctuation, control, a
                    non-letter such as '→'), all its bytes; or one byte
                    that is not UTF-8 */
  TOK_NUL        /* a NUL byte inside the text */
} ein_tok_kind;

typedef struct ein_token {
  ein_tok_kind kind;
  bool space_before; /* whitespace (or start of text) right before it */
  size_t offset, length;
} ein_token;

typedef struct ein_lexer {
  const char *src; /* src[len] must be '\0' */
  size_t len;
  size_t pos;
  ein_dialect dialect;
} ein_lexer;

void ein_lexer_init(ein_lexer *lx, const char *src, size_t len,
                    ein_dialect dialect);

/* The next token; TOK_EOF at the end, repeatedly. */
ein_token ein_lex_next(ein_lexer *lx);

/* A human name for a token kind, e.g. "'->'" or "a name". */
const char *ein_tok_kind_name(ein_tok_kind kind);

#endif
