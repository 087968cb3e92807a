/*
 * path_given.h - a contraction order the caller gives instead of the
 * search's (`einc plan --path`, ein_options.path).
 *
 * Takes: the order as text in opt_einsum's linear form, "[(0, 1), (0, 1)]"
 * (each pair names two operands by their place in a list that every
 * contraction shrinks: the two removed, the result appended at the end),
 * spaces optional, tuples or lists alike ("[[0,1],[0,1]]"), and the number
 * of operands. Also cotengra's forms, read when the text is not a valid
 * linear path: SSA pairs ("((0, 1), (2, 3), (4, 5))": operands 0..n-1,
 * the k-th pair's result n+k), and a tree of nested pairs ("((0, 1), (2,
 * 3))", each tuple exactly two items). For n >= 3 the three never both
 * read (a linear path's last pair is (0, 1), an SSA path's names a result).
 * Gives: the same order as path.h's SSA pairs, or
 * EIN_ERR_INVALID_ARGUMENT with a message naming what is wrong (syntax, a
 * pair of other than two operands, a position out of range, the wrong
 * number of pairs; for a text no form reads, the linear form's error).
 * Owns nothing; pure.
 */
#ifndef EIN_PATH_GIVEN_H
#define EIN_PATH_GIVEN_H

#include "error.h"

/* Fills ssa[0..n-2] from `text` for n operands (n >= 1: "[]" for one). */
ein_status ein_path_given(const char *text, int n, int (*ssa)[2],
                          ein_error_rec *err);

#endif
