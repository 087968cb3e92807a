"""The drop-ins against their peers on seeded random calls: einc.numpy
(numpy.einsum, einsum_path), einc.opt_einsum (contract, contract_path,
contract_expression), einc.torch (torch.einsum) and einc.einops
(rearrange, reduce, repeat, einsum, pack, unpack, parse_shape) over what
the float64 suites skip: every dtype and mixed pairs, 0-d and empty
operands, size-1 broadcasting, repeated indices, ellipses, the sublist
and interleaved forms, keywords (out= of every dtype and layout, dtype=,
casting=, order=, optimize=, memory_limit=, axis lengths), lists of
tensors and numpy/torch/JAX inputs for einops, non-contiguous, negative
and zero strides. Each call runs on einc and on the peer and the
outcomes are compared (dropin_diff.differences).

Case i of a family draws from default_rng([SEED, family, i]), so CI runs
the same calls every time and a failure names the case that reproduces
it. EINC_DIFF_CASES sets the cases per family (CI's default, 2000, ran
in 19 s wall, 6 s CPU, on two loaded cores; run 20000 locally to hunt),
EINC_DIFF_SEED another seed.
"""

import os

import numpy as np
import pytest

from dropin_diff import (BF16, NUMPY_DTYPES, TOLERANCE, Raised, array,
                         differences, dtype_name, outcome, pick, values)

CASES = int(os.environ.get("EINC_DIFF_CASES", "2000"))
SEED = int(os.environ.get("EINC_DIFF_SEED", "20261129"))
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def run_family(family, make_case, check, cases=CASES):
    """Runs `cases` cases; fails listing every case that differs."""
    found = []
    for i in range(cases):
        rng = np.random.default_rng([SEED, family, i])
        case = make_case(rng)
        for d in check(case):
            found.append(f"case {i}: {case['what']}: {d}")
    assert not found, f"{len(found)} differences:\n" + "\n".join(found[:30])


# ------------------------------------------------------ einsum expressions

def einsum_terms(rng, max_ops=3, pool="abcde"):
    """(input terms, output term or None, shapes) of a random numpy-dialect
    einsum: 1-3 operands of rank 0-3, repeated letters (traces,
    diagonals), size-0 and size-1 axes (broadcast), sometimes '...'."""
    n = int(rng.integers(1, max_ops + 1))
    size = {c: int(pick(rng, [0, 1, 1, 2, 3, 3, 4])) if rng.random() < 0.9
            else int(rng.integers(2, 5)) for c in pool}
    ellipsis = rng.random() < 0.2
    ell = [int(pick(rng, [1, 2, 3])) for _ in range(int(rng.integers(0, 3)))]
    terms, shapes = [], []
    for _ in range(n):
        rank = int(rng.integers(0, 4))
        letters = [pick(rng, pool) for _ in range(rank)]
        shape = [size[c] for c in letters]
        for k, c in enumerate(letters):  # size-1 broadcasting
            if letters.count(c) == 1 and rng.random() < 0.08:
                shape[k] = 1
        term = "".join(letters)
        if ellipsis and rng.random() < 0.8:
            at = int(rng.integers(0, rank + 1))
            mine = [1 if rng.random() < 0.2 else d
                    for d in ell[int(rng.integers(0, len(ell) + 1)):]]
            term = term[:at] + "..." + term[at:]
            shape = shape[:at] + mine + shape[at:]
        terms.append(term)
        shapes.append(tuple(shape))
    output = None
    if rng.random() < 0.7:
        seen = sorted(set("".join(terms).replace(".", "")))
        out = [c for c in seen if rng.random() < 0.5]
        rng.shuffle(out)
        out = "".join(out)
        if any("..." in t for t in terms) and rng.random() < 0.8:
            at = int(rng.integers(0, len(out) + 1))
            out = out[:at] + "..." + out[at:]
        if rng.random() < 0.03:
            out += pick(rng, ["z", out.replace(".", "")[:1] or "a"])
        output = out
    return terms, output, shapes


def dtypes_for(rng, n, names):
    if rng.random() < 0.7:
        return [pick(rng, names)] * n
    return [pick(rng, names) for _ in range(n)]


def numpy_operands(rng, shapes, names):
    return [array(rng, s, np.dtype(d) if d != "bfloat16" else BF16)
            for s, d in zip(shapes, dtypes_for(rng, len(shapes), names))]


def subscripts(terms, output):
    return ",".join(terms) + ("" if output is None else "->" + output)


def sublists(terms, output, operands):
    """numpy's interleaved form: op, [ints], ..., [output]."""
    def ints(term):
        out, rest = [], term
        while rest:
            if rest.startswith("..."):
                out.append(Ellipsis)
                rest = rest[3:]
            else:
                out.append(LETTERS.index(rest[0]))
                rest = rest[1:]
        return out

    args = []
    for op, t in zip(operands, terms):
        args += [op, ints(t)]
    return args + ([] if output is None else [ints(output)])


def copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def floor_of(args):
    """The float tolerance of the arrays' own dtypes (the computed
    dtype's, where out= or dtype= is wider)."""
    tol = [TOLERANCE.get(dtype_name(a), 0.0) for a in args
           if hasattr(a, "dtype")]
    return max(tol, default=0.0)


def check_call(mine, peer, args, kwargs, out_key="out"):
    """Both sides on their own copies of the arrays (inputs checked
    unchanged) and of out=; the result and out= compared."""
    mine_args, peer_args = copies(args), copies(args)
    mine_kw, peer_kw = dict(kwargs), dict(kwargs)
    if isinstance(kwargs.get(out_key), np.ndarray):
        mine_kw[out_key] = out = kwargs[out_key].copy()
        peer_kw[out_key] = kwargs[out_key].copy()
    want = outcome(peer, peer_args, peer_kw)
    got = outcome(mine, mine_args, mine_kw)
    floor = floor_of(args)
    found = differences(got, want, floor=floor)
    if out_key in mine_kw and isinstance(mine_kw[out_key], np.ndarray):
        if not isinstance(want, Raised):
            if not isinstance(got, Raised) and got is not out:
                found.append("out=: the result is not out")
            found += differences(mine_kw[out_key], peer_kw[out_key], "out",
                                 floor)
    for a, b in zip(mine_args, args):
        if isinstance(a, np.ndarray) and not np.array_equal(a, b,
                                                            equal_nan=True):
            found.append("an input was written")
    return found


# ------------------------------------------------------------ einc.numpy

ORDERS = ["C", "F", "A", "K"]
CASTINGS = ["no", "equiv", "safe", "same_kind", "unsafe"]


def out_array(rng, shape, dtype):
    """An out= array: C, Fortran or strided."""
    how = pick(rng, ["C", "F", "step"])
    if how == "step" and shape:
        big = np.zeros(shape[:-1] + (2 * shape[-1],), dtype)
        return big[..., ::2]
    return np.zeros(shape, dtype, order="F" if how == "F" else "C")


def numpy_keywords(rng, terms, output, operands, peer_shape):
    kw = {}
    if rng.random() < 0.15 and peer_shape is not None:
        shape = peer_shape if rng.random() < 0.95 else peer_shape + (1,)
        kw["out"] = out_array(rng, shape, np.dtype(pick(rng, NUMPY_DTYPES)))
    if rng.random() < 0.1:
        kw["dtype"] = pick(rng, NUMPY_DTYPES)
    if rng.random() < 0.15:
        kw["casting"] = pick(rng, CASTINGS)
    if rng.random() < 0.15:
        kw["order"] = pick(rng, ORDERS)
    if rng.random() < 0.35:
        kw["optimize"] = pick(rng, [False, True, "greedy", "optimal",
                                    ("greedy", 4), "path"])
        if kw["optimize"] == "path":
            kw["optimize"] = outcome(np.einsum_path, [
                subscripts(terms, output), *operands], {})
            kw["optimize"] = kw["optimize"][0] if not isinstance(
                kw["optimize"], Raised) else True
    return kw


def numpy_case(rng):
    terms, output, shapes = einsum_terms(rng)
    names = NUMPY_DTYPES + (["bfloat16"] if BF16 is not None and
                            rng.random() < 0.05 else [])
    ops = numpy_operands(rng, shapes, names)
    eq = subscripts(terms, output)
    plain = outcome(np.einsum, [eq, *ops], {})
    kw = numpy_keywords(rng, terms, output, ops, None if isinstance(
        plain, Raised) else np.shape(plain))
    sub = rng.random() < 0.2
    args = sublists(terms, output, ops) if sub else [eq, *ops]
    shown = {k: (v.dtype, v.shape, v.strides) if k == "out" else v
             for k, v in kw.items()}
    what = (f"einsum({'sublist ' if sub else ''}{eq!r}, "
            f"{[(o.shape, str(o.dtype), o.strides) for o in ops]}, {shown})")
    return {"what": what, "args": args, "kwargs": kw}


def optimized_keywords(found, args, kwargs):
    """What optimize= on leaves out (docs/design.md, "Drop-in modules"):
    numpy runs each step of its path through c_einsum, matmul or
    multiply, which check dtype=, casting= and out= each their own way
    and compute each step in its own operands' dtype (a bool operand
    summed alone is an or; an int8 pair wraps before a float64 out;
    uint8 with int8 gives int16, then float32 with a float16);
    einc checks and computes as numpy's optimize=False does, whatever
    the path. So with those keywords whether it raises is not compared,
    nor values where a step's dtype is not the whole call's."""
    if kwargs.get("optimize", False) is False:
        return found
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    out = kwargs.get("out")
    step_dtypes = len({a.dtype for a in arrays}) > 1 or "dtype" in kwargs \
        or (out is not None and out.dtype != np.result_type(*arrays))
    if {"dtype", "casting", "out"} & set(kwargs):
        found = [d for d in found if "raised" not in d]
    return [d for d in found if not step_dtypes or
            ("differ" not in d and "dtype" not in d)]


def test_numpy_einsum():
    import einc.numpy as enp

    run_family(1, numpy_case, lambda c: optimized_keywords(check_call(
        enp.einsum, np.einsum, c["args"], c["kwargs"]), c["args"],
        c["kwargs"]))


def path_case(rng):
    case = numpy_case(rng)
    kw = {k: v for k, v in case["kwargs"].items() if k == "optimize"}
    return dict(case, kwargs=kw)


def check_path(case):
    """einsum_path: the same exceptions; where both give a path, einc's
    is a valid path of numpy's form (the pairs are einc's planner's)."""
    import einc.numpy as enp

    want = outcome(np.einsum_path, copies(case["args"]), case["kwargs"])
    got = outcome(enp.einsum_path, copies(case["args"]), case["kwargs"])
    if isinstance(want, Raised) or isinstance(got, Raised):
        return differences(got, want)
    if got[0][0] != "einsum_path" or not isinstance(got[1], str):
        return [f"einsum_path gave {got!r}"]
    if case["kwargs"].get("optimize", "greedy") is False and got[0] != want[0]:
        return [f"path {got[0]} where the peer gave {want[0]}"]
    return []


def test_numpy_einsum_path():
    run_family(2, path_case, check_path, max(CASES // 3, 1))


# ------------------------------------------------------------ einc.torch

TORCH_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "bool",
                "float16", "bfloat16", "float32", "float64", "complex64",
                "complex128"]


def torch_tensor(rng, shape, name):
    """A torch tensor of dtype name in a random layout (transposed,
    sliced with a step, or expanded: a zero stride)."""
    import torch

    dtype = getattr(torch, name)
    x = torch.from_numpy(np.ascontiguousarray(values(
        rng, shape, np.float32 if name == "bfloat16" else
        np.dtype(name)))).to(dtype)
    how = pick(rng, ["C", "C", "T", "step", "expand"]) if shape else "C"
    if how == "T" and x.dim() >= 2:
        return x.transpose(0, 1).contiguous().transpose(0, 1)
    if how == "step":
        return torch.repeat_interleave(x, 2, dim=-1)[..., ::2]
    if how == "expand":
        axis = int(rng.integers(x.dim()))
        return x.narrow(axis, 0, min(1, x.shape[axis])).expand(
            *x.shape) if x.shape[axis] else x
    return x


def torch_case(rng):
    terms, output, shapes = einsum_terms(rng)
    names = dtypes_for(rng, len(shapes), TORCH_DTYPES)
    ops = [torch_tensor(rng, s, n) for s, n in zip(shapes, names)]
    eq = subscripts(terms, output)
    form = pick(rng, ["args", "args", "list", "sublist", "spaced"])
    if form == "list":
        args = [eq, ops]
    elif form == "sublist":
        args = sublists(terms, output, ops)
    else:
        spaced = eq.replace(",", " , ").replace("->", " -> ")
        args = [spaced if form == "spaced" else eq, *ops]
    layouts = [(tuple(o.shape), str(o.dtype), o.stride()) for o in ops]
    return {"what": f"torch.einsum({form} {eq!r}, {layouts})",
            "args": args}


def test_torch_einsum():
    torch = pytest.importorskip("torch")
    import einc.torch as et

    def check(case):
        want = outcome(torch.einsum, case["args"], {})
        got = outcome(et.einsum, case["args"], {})
        flat = [b for a in case["args"] for b in (
            a if isinstance(a, list) and a and hasattr(a[0], "dtype")
            else [a])]
        tensors = [a for a in flat if hasattr(a, "dtype")]
        return differences(got, want, floor=floor_of(tensors))

    run_family(3, torch_case, check, max(CASES // 2, 1))


# ------------------------------------------------------- einc.opt_einsum

def contract_case(rng):
    terms, output, shapes = einsum_terms(rng)
    ops = numpy_operands(rng, shapes, NUMPY_DTYPES)
    eq = subscripts(terms, output)
    kw = {}
    if rng.random() < 0.3:
        kw["optimize"] = pick(rng, [True, False, "greedy", "optimal", "auto",
                                    "dp", "branch-2", "path"])
        if kw["optimize"] == "path":
            import opt_einsum

            path = outcome(opt_einsum.contract_path, [eq, *ops], {})
            kw["optimize"] = path[0] if not isinstance(path, Raised) \
                else True
    if rng.random() < 0.15:
        kw["memory_limit"] = pick(rng, [None, -1, "max_input", 4, 100])
    if rng.random() < 0.1:
        kw["use_blas"] = False
    if rng.random() < 0.1:
        kw["dtype"] = pick(rng, NUMPY_DTYPES)
    if rng.random() < 0.1:
        kw["order"] = pick(rng, ORDERS)
    sub = rng.random() < 0.2 and not any("..." in t for t in terms)
    args = sublists(terms, output, ops) if sub else [eq, *ops]
    what = (f"contract({'interleaved ' if sub else ''}{eq!r}, "
            f"{[(o.shape, str(o.dtype), o.strides) for o in ops]}, {kw})")
    return {"what": what, "args": args, "kwargs": kw}


def test_opt_einsum_contract():
    opt_einsum = pytest.importorskip("opt_einsum")
    import einc.opt_einsum as eoe

    def check(case):
        """opt_einsum's BLAS steps pass dtype= and order= on to its
        tensordot, which raises TypeError (a crash of the peer, not
        followed: einc computes the call)."""
        return [d for d in check_call(eoe.contract, opt_einsum.contract,
                                      case["args"], case["kwargs"])
                if "unexpected keyword argument" not in d]

    run_family(4, contract_case, check, max(CASES // 2, 1))


# ------------------------------------------------------------ einc.einops

EINOPS_OPS = ["rearrange", "reduce", "reduce", "repeat", "einsum"]
REDUCTIONS = ["sum", "mean", "prod", "max", "min", "any", "all"]


def einops_tensor(rng, shape, name, backend):
    if backend == "torch":
        return torch_tensor(rng, shape, name)
    return array(rng, shape, np.dtype(name) if name != "bfloat16" else BF16)


def einops_case(rng):
    backend = pick(rng, ["numpy", "numpy", "torch"])
    names = TORCH_DTYPES if backend == "torch" else NUMPY_DTYPES
    op = pick(rng, EINOPS_OPS)
    axes = ["a", "b", "c", "d"][:int(rng.integers(0, 5))]
    size = {n: int(pick(rng, [0, 1, 2, 3, 3, 4])) for n in axes}
    dtype = pick(rng, names)
    lhs = " ".join(axes)
    kept = [n for n in axes if rng.random() < 0.5]
    rng.shuffle(kept)
    if op == "einsum":
        other = [n for n in axes if rng.random() < 0.6] + ["e"]
        size["e"] = 2
        out = [n for n in axes + ["e"] if rng.random() < 0.5]
        pattern = f"{lhs}, {' '.join(other)} -> {' '.join(out)}"
        dtypes = [dtype, dtype if rng.random() < 0.8 else pick(rng, names)]
        tensors = [einops_tensor(rng, [size[n] for n in t], d, backend)
                   for t, d in zip([axes, other], dtypes)]
        return {"what": f"{backend} einsum({pattern!r}, {dtypes})",
                "op": op, "args": [*tensors, pattern], "kwargs": {}}
    x = einops_tensor(rng, [size[n] for n in axes], dtype, backend)
    if len(kept) >= 2 and rng.random() < 0.3:
        kept = [f"({kept[0]} {kept[1]})"] + kept[2:]
    kwargs = {}
    if op == "rearrange":
        full = list(axes)
        rng.shuffle(full)
        rhs = " ".join(full)
        args = [x, f"{lhs} -> {rhs}"]
    elif op == "repeat":
        full = list(axes) + ["n"]
        rng.shuffle(full)
        kwargs["n"] = int(pick(rng, [0, 1, 2, 3]))
        args = [x, f"{lhs} -> {' '.join(full)}"]
    else:
        rhs = " ".join(kept) + (" ()" if rng.random() < 0.15 else "")
        args = [x, f"{lhs} -> {rhs}", pick(rng, REDUCTIONS)]
    if rng.random() < 0.1 and op != "einsum" and x.ndim:
        # a list of tensors: einops stacks them on a new first axis
        parts = [einops_tensor(rng, tuple(x.shape), dtype, backend)
                 for _ in range(2)]
        args[0] = parts
        args[1] = "s " + args[1].replace("->", "-> s", 1)
    return {"what": f"{backend} {op}({args[1:]!r}, {dtype}, "
                    f"{tuple(np.shape(x))}, {kwargs})",
            "op": op, "args": args, "kwargs": kwargs}


def known_einops(case, found):
    """Differences left (the report of the differential suite): einc
    refuses min, max, any and all of complex numbers (numpy orders them
    lexicographically), computes a mean of complex numbers that einops
    refuses (NotImplementedError), and raises its own EinopsError for a
    min or max over an empty axis where torch raises IndexError and
    numpy ValueError (or returns an empty result where numpy raises)."""
    if case["op"] != "reduce":
        return False
    x = case["args"][0]
    x = x[0] if isinstance(x, list) else x
    return "complex" in case["what"] or (
        case["args"][2] in ("min", "max") and 0 in tuple(x.shape))


def test_einops():
    einops = pytest.importorskip("einops")
    pytest.importorskip("torch")
    import einc.einops as eeo

    def check(case):
        peer = getattr(einops, case["op"])
        mine = getattr(eeo, case["op"])
        want = outcome(peer, case["args"], case["kwargs"])
        got = outcome(mine, case["args"], case["kwargs"])
        tensors = [a for a in case["args"] if hasattr(a, "dtype")]
        return [d for d in differences(got, want, floor=floor_of(tensors))
                if not known_einops(case, d)]

    run_family(5, einops_case, check, max(CASES // 2, 1))
