"""einc.plan's order-search keywords (issue 26): plan_time, seed, objective.

Each changes what it should (the same seed, the same path; 'size' lowers
the largest intermediate where the FLOPs-optimal order's is large; a tiny
plan_time runs one greedy trial), results stay equal to numpy's in f64, and
bad values raise.
"""
import random

import numpy as np
import pytest

import einc

# The FLOPs-optimal order's largest intermediate is 504 elements; 'size'
# and 'combo' find 112 (tests/cli_test.sh has the same case).
OBJ_EXPR = "b h d, a i f, h d g b, f e c, e c g j, j i -> a"
OBJ_SHAPES = [(9, 5, 2), (2, 2, 5), (5, 2, 4, 9), (5, 8, 7), (8, 7, 4, 9),
              (9, 2)]


def regular(n, seed):
    """A random 3-regular network of n operands, bond 2, scalar output."""
    rng = random.Random(seed)
    stubs = [v for v in range(n) for _ in range(3)]
    rng.shuffle(stubs)
    ops = [[] for _ in range(n)]
    axis = 0
    for k in range(0, len(stubs) - 1, 2):
        a, b = stubs[k], stubs[k + 1]
        if a != b:
            ops[a].append(f"x{axis}")
            ops[b].append(f"x{axis}")
            axis += 1
    for k, op in enumerate(ops):
        if not op:
            op.append(f"p{k}")
    expr = ", ".join(" ".join(o) for o in ops) + " ->"
    return expr, [(2,) * len(o) for o in ops]


def test_objective_changes_largest():
    got = {o: einc.plan(OBJ_EXPR, *OBJ_SHAPES, objective=o)
           for o in ("flops", "size", "combo")}
    assert got["flops"].largest_intermediate == 504
    assert got["size"].largest_intermediate == 112
    assert got["combo"].largest_intermediate == 112
    assert got["flops"].flops < got["size"].flops


def test_seed_deterministic_and_varies():
    expr, shapes = regular(40, 1)
    paths = [einc.plan(expr, *shapes, seed=s).path for s in range(6)]
    assert einc.plan(expr, *shapes, seed=3).path == paths[3]
    assert len({str(p) for p in paths}) >= 2


def test_plan_time_tiny_is_one_greedy():
    expr, shapes = regular(30, 2)
    tiny = einc.plan(expr, *shapes, plan_time=1e-7).to_dict()
    default = einc.plan(expr, *shapes).to_dict()
    assert tiny["path_method"] == "greedy+reconf"
    assert default["path_method"] == "random-greedy+reconf"
    assert default["flops"] <= tiny["flops"]


@pytest.mark.parametrize("objective", ["flops", "size", "combo"])
@pytest.mark.parametrize("seed", [0, 7])
def test_results_equal_numpy(objective, seed):
    expr, shapes = regular(16, 3)
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1, 1, s) for s in shapes]
    f = einc.compile(expr, *shapes, dtype="float64", objective=objective,
                     seed=seed, plan_time=0.01)
    got = f(*arrays)
    subs = {}
    eq = ",".join("".join(subs.setdefault(a, chr(ord("A") + len(subs))
                                          if len(subs) < 26 else
                                          chr(ord("a") + len(subs) - 26))
                          for a in op.split())
                  for op in expr[:-3].split(", ")) + "->"
    want = np.einsum(eq, *arrays, optimize="greedy")
    assert abs(got - want) <= 1e-12 * max(abs(want), 1e-300)


@pytest.mark.parametrize("kw", [dict(objective="memory"),
                                dict(plan_time=-1.0),
                                dict(plan_time=float("nan"))])
def test_bad_values_raise(kw):
    with pytest.raises(einc.EincError):
        einc.plan(OBJ_EXPR, *OBJ_SHAPES, **kw)


@pytest.mark.parametrize("kw", [dict(seed=-1), dict(seed=2 ** 64),
                                dict(seed=1.5)])
def test_bad_seed_raises(kw):
    with pytest.raises(ValueError):
        einc.plan(OBJ_EXPR, *OBJ_SHAPES, **kw)
