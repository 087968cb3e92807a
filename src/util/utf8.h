/*
 * utf8.h - characters of UTF-8 text as a terminal shows them.
 *
 * The caret display of an error (error.c) and the CLI's aligned columns
 * count characters, not bytes: an axis named 'α' is two bytes and one
 * column, '形' three bytes and two columns. re2c's UTF-8 mode does the
 * decoding (utf8.re), as it does for the lexer's names.
 *
 * Takes: NUL-terminated text (the NUL stops every sequence, so nothing past
 * it is read). Gives: lengths and widths; owns nothing.
 */
#ifndef EIN_UTIL_UTF8_H
#define EIN_UTIL_UTF8_H

#include <stddef.h>

/* The character that starts at s: sets *len to its length in bytes (at
 * least 1) and returns its width in terminal columns: 1, 2 (East Asian
 * wide), 0 (a combining mark), or -1 for what should not be printed as is:
 * a control or format character (bidi overrides among them), a private-use
 * character, or a byte that is not UTF-8 (then *len is 1). */
int ein_utf8_char(const char *s, size_t *len);

/* Columns of s[0, n) as ein_utf8_char counts them, with -1 as 1 (the '?'
 * it is shown as). */
size_t ein_utf8_columns(const char *s, size_t n);

/* The largest length <= n that does not cut a character of s in two. */
size_t ein_utf8_floor(const char *s, size_t n);

#endif
