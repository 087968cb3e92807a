"""One plan table: the extension's plans for the common call (plan_table.c)
live in the context's plan cache (ein.h, "the plan cache"), the table that
ein_eval fills too. A call the extension serves from it is a hit in the
cache's own counts, and ein_eval's entries evict the extension's by the
one least-recently-used rule; a thread running an evicted plan keeps it
(and the Python objects hung on it) until it is done."""
import threading

import numpy as np

import einc
from einc import _einc

EXPR = "row mid, mid col -> row col"  # no other test's expression


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def flood_with_ein_eval(count, tag):
    """count new ein_eval entries (out= takes the general path): transposes
    of count shapes under an expression of the caller's own."""
    expr = f"{tag}a {tag}b -> {tag}b {tag}a"
    for n in range(1, count + 1):
        x = np.ones((n, 3))
        out = np.empty((3, n))
        einc.einsum(expr, x, out=out)
        np.testing.assert_array_equal(out, x.T)


def test_an_extension_hit_is_a_cache_hit():
    a, b = rand((13, 11), 39), rand((11, 17), 40)
    s0 = _einc.cache_stats()
    first = einc.einsum(EXPR, a, b)  # planned, then cached
    s1 = _einc.cache_stats()
    second = einc.einsum(EXPR, a, b)  # served from the cache
    s2 = _einc.cache_stats()
    np.testing.assert_allclose(first, a @ b, rtol=1e-12)
    np.testing.assert_array_equal(second, first)
    assert (s1["misses"] - s0["misses"], s1["hits"] - s0["hits"]) == (1, 0)
    assert (s2["misses"] - s1["misses"], s2["hits"] - s1["hits"]) == (0, 1)
    assert s1["capacity"] == 128


def test_ein_eval_evicts_the_extensions_entries():
    a, b = rand((7, 5), 41), rand((5, 9), 42)
    einc.einsum(EXPR, a, b)  # cached (or touched) now
    s0 = _einc.cache_stats()
    einc.einsum(EXPR, a, b)
    flood_with_ein_eval(s0["capacity"], "ev")
    s1 = _einc.cache_stats()
    assert s1["misses"] - s0["misses"] == s0["capacity"]
    assert s1["evictions"] > s0["evictions"]
    got = einc.einsum(EXPR, a, b)  # evicted with the rest: planned again
    s2 = _einc.cache_stats()
    assert s2["misses"] == s1["misses"] + 1
    np.testing.assert_allclose(got, a @ b, rtol=1e-12)


def test_running_while_evicted():
    """A thread runs a plan big enough to leave the GIL while the main
    thread's ein_eval calls evict it: its reference keeps plan and
    entry."""
    a, b = rand((96, 64), 43), rand((64, 80), 44)
    want = a @ b
    errors = []
    stop = threading.Event()

    def work():
        try:
            while not stop.is_set():
                np.testing.assert_allclose(einc.einsum(EXPR, a, b), want,
                                           rtol=1e-12)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    t = threading.Thread(target=work)
    t.start()
    try:
        for k in range(3):
            flood_with_ein_eval(140, f"t{k}")
    finally:
        stop.set()
        t.join()
    assert errors == []
