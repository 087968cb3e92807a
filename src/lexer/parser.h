/*
 * parser.h - text to syntax tree.
 *
 * Takes: a NUL-terminated source of known length, a dialect, an arena.
 * Gives: an ein_ast (expressions) or an ein_spec (shape specs), allocated in
 * the arena; or a status with the error recorded on `err`, pointing at the
 * offending bytes and saying what was expected and what was found.
 *
 * The parser checks syntax only: sizes, ranks and names are the binder's.
 */
#ifndef EIN_PARSER_H
#define EIN_PARSER_H

#include "arena.h"
#include "ast.h"
#include "error.h"

/* Parses "operand, operand -> output" (or numpy subscripts). */
ein_status ein_parse_expr(const char *src, size_t len, ein_dialect dialect,
                          ein_arena *arena, ein_error_rec *err, ein_ast *out);

/* Parses a shape spec such as "batch *rest (heads d) n+1". */
ein_status ein_parse_spec(const char *src, size_t len, ein_arena *arena,
                          ein_error_rec *err, ein_spec *out);

#endif
