/*
 * shape_text.h - the one way einc writes a shape for people: "8x16x2048",
 * "scalar" for rank 0, shortened to "8x16x...(40 dims)" past 16 dims so a
 * message stays one line. Messages, reports and the CLI all use it, so a
 * shape reads the same wherever it appears (and one search finds where).
 */
#ifndef EIN_UTIL_SHAPE_TEXT_H
#define EIN_UTIL_SHAPE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* A buffer this large holds any shape ein_format_shape writes. */
#define EIN_SHAPE_TEXT_CAP 400

/* Writes the shape of ndim dims into buf (cap bytes, cap >= 1; the text
 * is cut at cap - 1 bytes). Takes nothing, owns nothing; dims may be NULL
 * when ndim is 0. Returns buf, for use inside a printf argument list. */
char *ein_format_shape(char *buf, size_t cap, const int64_t *dims, int ndim);

#endif
