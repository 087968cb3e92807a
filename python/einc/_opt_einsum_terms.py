"""opt_einsum's subscripts as einc's expressions, and its path report:
the forms a call is written in (letters of any script, get_symbol's
range, the interleaved form of labels) mapped onto einc's einops
dialect (identifiers x0, x1, ...), and PathInfo, contract_path's report
of a path (einc.opt_einsum, einc.numpy). No array is touched here."""

from __future__ import annotations

from decimal import Decimal

_BASE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_cache = {}  # subscripts -> (einops expression, inputs, output)


def get_symbol(i: int) -> str:
    """The i-th subscript opt_einsum uses: the 52 letters, then Unicode
    from chr(192) on, past the surrogates."""
    if i < 52:
        return _BASE[i]
    return chr(i + 2048) if i >= 55296 else chr(i + 140)


def _interleaved(operands):
    """(subscripts, arrays) from op, labels, op, labels, ..., [output]."""
    ops = list(operands)
    arrays, labels = ops[0:len(ops) // 2 * 2:2], ops[1:len(ops) // 2 * 2:2]
    output = ops[-1] if len(ops) % 2 else None
    try:
        symbols = set()
        for sub in labels:
            symbols.update(s for s in sub if s is not Ellipsis)
        names = {s: get_symbol(i) for i, s in enumerate(sorted(symbols))}
    except TypeError:
        raise TypeError("For this input type lists must contain either "
                        "Ellipsis or hashable and comparable object (e.g. "
                        "int, str).") from None

    def term(sub):
        return "".join("..." if s is Ellipsis else names[s] for s in sub)

    subscripts = ",".join(term(s) for s in labels)
    if output is not None:
        subscripts += "->" + term(output)
    return subscripts, arrays


def _parse(operands):
    """(subscripts, arrays) for either form."""
    if not operands:
        raise ValueError("No input operands")
    if isinstance(operands[0], str):
        return operands[0].replace(" ", ""), list(operands[1:])
    return _interleaved(operands)


def _terms(subscripts):
    """(input terms, output term) as lists of symbols and '...', the
    output made explicit as opt_einsum makes it."""
    if "-" in subscripts or ">" in subscripts:
        if subscripts.count("->") != 1 or subscripts.count("-") > 1 or \
                subscripts.count(">") > 1:
            raise ValueError("Subscripts can only contain one '->'.")
    lhs, arrow, rhs = subscripts.partition("->")
    inputs = [_symbols(t) for t in lhs.split(",")]
    if arrow:
        output = _symbols(rhs)
        flat = [s for t in inputs for s in t]
        for s in output:
            if output.count(s) != 1:
                raise ValueError(f"Output character '{s}' appeared more "
                                 f"than once in the output.")
            if s not in flat:
                raise ValueError(f"Output character '{s}' did not appear "
                                 f"in the input")
        return inputs, output
    flat = [s for t in inputs for s in t if s != "..."]
    once = sorted(s for s in set(flat) if flat.count(s) == 1)
    dots = ["..."] if any("..." in t for t in inputs) else []
    return inputs, dots + once


def _symbols(term):
    """'ab...c' -> ['a', 'b', '...', 'c'], with opt_einsum's ellipsis
    checks."""
    if "." in term and (term.count(".") != 3 or term.count("...") != 1):
        raise ValueError("Invalid Ellipses.")
    head, dots, tail = term.partition("...")
    return list(head) + (["..."] if dots else []) + list(tail)


def _translate(subscripts, n):
    """(einc expression in identifiers, inputs, output), cached."""
    hit = _cache.get(subscripts)
    if hit is not None and len(hit[1]) == n:
        return hit
    inputs, output = _terms(subscripts)
    if len(inputs) != n:
        raise ValueError(f"Number of einsum subscripts, {len(inputs)}, must "
                         f"be equal to the number of operands, {n}.")
    ids = {}
    for s in [s for t in inputs for s in t] + output:
        if s != "..." and s not in ids:
            ids[s] = len(ids)
    if len(ids) <= len(_BASE):
        # numpy's dialect, whose size-1 axes broadcast as opt_einsum's do
        def term(t):
            return "".join("..." if s == "..." else _BASE[ids[s]] for s in t)

        expr = ",".join(term(t) for t in inputs) + "->" + term(output)
    else:
        def term(t):
            return " ".join("..." if s == "..." else f"x{ids[s]}" for s in t)

        expr = ", ".join(term(t) for t in inputs) + " -> " + term(output)
    hit = (expr, inputs, output, len(ids) <= len(_BASE))
    if len(_cache) < 4096:
        _cache[subscripts] = hit
    return hit


def _check_ranks(inputs, shapes):
    for t, shape in zip(inputs, shapes):
        named = len([s for s in t if s != "..."])
        if named > len(shape) or ("..." not in t and named != len(shape)):
            raise ValueError(f"Einstein sum subscript '{''.join(t)}' does "
                             f"not contain the correct number of indices "
                             f"for operand of shape {tuple(shape)}.")


def _shape(x):
    shape = getattr(x, "shape", None)
    if shape is None:
        import numpy

        shape = numpy.shape(x)
    return tuple(int(d) for d in shape)


def _arrays(xs):
    import numpy

    return [x if hasattr(x, "__dlpack__") and hasattr(x, "shape")
            else numpy.asarray(x) for x in xs]


def _path_text(optimize, n):
    """An explicit linear path as einc's path text, else None."""
    if isinstance(optimize, (list, tuple)) and not isinstance(optimize, str):
        steps = [tuple(int(i) for i in s) for s in optimize]
        if n > 1 and all(len(s) == 2 for s in steps) and len(steps) == n - 1:
            return "[" + ", ".join(f"({i}, {j})" for i, j in steps) + "]"
    return None


class PathInfo:
    """What opt_einsum's PathInfo says of a path: contraction_list,
    input_subscripts, output_subscript, indices, path, scale_list,
    naive_cost, opt_cost, speedup, size_list, size_dict, shapes, eq,
    largest_intermediate; repr() is the report."""

    def __init__(self, inputs, output, path, size_dict):
        self.input_subscripts = ",".join(inputs)
        self.output_subscript = output
        self.path = path
        self.size_dict = size_dict
        self.indices = set("".join(inputs))
        self.contraction_list, self.scale_list, self.size_list, cost = \
            _replay(inputs, output, path, size_dict)
        self.naive_cost = Decimal(_flops(
            self.indices, size_dict, len(inputs),
            bool(self.indices - set(output))))
        self.opt_cost = Decimal(cost)
        self.speedup = self.naive_cost / max(self.opt_cost, Decimal(1))
        self.shapes = [tuple(size_dict[k] for k in t) for t in inputs]
        self.eq = f"{self.input_subscripts}->{output}"
        self.largest_intermediate = Decimal(max(self.size_list, default=1))

    def __repr__(self) -> str:
        lines = [
            f"  Complete contraction:  {self.eq}",
            f"         Naive scaling:  {len(self.indices)}",
            f"     Optimized scaling:  {max(self.scale_list, default=0)}",
            f"      Naive FLOP count:  {self.naive_cost:.3e}",
            f"  Optimized FLOP count:  {self.opt_cost:.3e}",
            f"   Theoretical speedup:  {self.speedup:.3e}",
            f"  Largest intermediate:  {self.largest_intermediate:.3e} "
            f"elements",
            "-" * 80,
            f"{'scaling':>6} {'BLAS':>11} {'current':>22} "
            f"{'remaining':>37}",
            "-" * 80,
        ]
        for n, (_, _, step, remaining, blas) in \
                enumerate(self.contraction_list):
            rest = ",".join(remaining) + "->" + self.output_subscript
            width = max(0, 56 - max(22, len(step)))
            lines.append(f"{self.scale_list[n]:>4} {str(blas):>14} "
                         f"{step:>22}    {rest:>{width}}")
        return "\n".join(lines)

    __str__ = __repr__


def _flops(indices, size_dict, terms, inner):
    """opt_einsum's count: the size of the index space, times one
    multiply per extra term, plus one add where indices are summed."""
    size = 1
    for k in indices:
        size *= size_dict[k]
    return size * (max(terms - 1, 1) + (1 if inner else 0))


def _replay(inputs, output, path, size_dict):
    """opt_einsum's contraction_list for a linear path: each step's
    positions, the indices it sums, its einsum, what remains, and whether
    it is a BLAS-shaped pair (False: einc chooses its kernels itself)."""
    current = list(inputs)
    steps, scales, sizes, cost = [], [], [], 0
    for pos in path:
        # opt_einsum's order: positions popped from the last down
        picked = [current[i] for i in sorted(pos, reverse=True)]
        for i in sorted(pos, reverse=True):
            current.pop(i)
        kept = set(output).union(*[set(t) for t in current])
        seen = "".join(picked)
        result = "".join(dict.fromkeys(c for c in seen if c in kept))
        summed = set(seen) - set(result)
        steps.append((tuple(pos), summed, ",".join(picked) + "->" + result,
                      tuple(current + [result]), False))
        current.append(result)
        scales.append(len(set(seen)))
        size = 1
        for c in result:
            size *= size_dict[c]
        sizes.append(size)
        cost += _flops(set(seen), size_dict, len(picked), bool(summed))
    return steps, scales, sizes, cost


def _letters(inputs, output, shape_list):
    """Each term's symbols with the ellipsis written out as symbols (as
    opt_einsum's parser does), and each symbol's size."""
    used = {s for t in inputs for s in t if s != "..."}
    longest = max((len(sh) - (len(t) - 1) for t, sh in
                   zip(inputs, shape_list) if "..." in t), default=0)
    fresh, i = [], 0
    while len(fresh) < longest:
        if get_symbol(i) not in used:
            fresh.append(get_symbol(i))
        i += 1
    size_dict, terms = {}, []
    for t, sh in zip(inputs, shape_list):
        k = len(sh) - (len(t) - 1) if "..." in t else 0
        syms = []
        for s in t:
            syms.extend(fresh[len(fresh) - k:] if s == "..." and k else
                        [] if s == "..." else [s])
        for s, d in zip(syms, sh):
            if d != 1 or s not in size_dict:
                size_dict[s] = d
        terms.append(syms)
    out = []
    for s in output:
        out.extend(fresh[len(fresh) - longest:] if s == "..." and longest
                   else [] if s == "..." else [s])
    return terms, out, size_dict
