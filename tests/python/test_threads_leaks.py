"""Threads and resources: several threads calling einc at once on the one
shared context (results checked), and no leaks of references or memory
over 10,000 calls (sys.getrefcount flat, RSS roughly flat)."""
import gc
import sys

import numpy as np

import einc
from conftest import rss_kib, run_in_threads


def test_threads():
    r = np.random.default_rng(1)
    a = r.standard_normal((8, 64, 32)).astype(np.float32)
    b = r.standard_normal((8, 32, 48)).astype(np.float32)
    want = a @ b
    errors = []

    def work(seed):
        try:
            rr = np.random.default_rng(seed)
            for i in range(200):
                if i % 3 == 0:
                    got = einc.einsum("b i j, b j k -> b i k", a, b)
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
                elif i % 3 == 1:
                    x = rr.standard_normal((6, 4))
                    np.testing.assert_array_equal(
                        einc.rearrange(x, "a b -> b a"), x.T)
                else:
                    try:  # errors are per thread
                        einc.check("a b, b c -> a c", (2, 3), (4, 5))
                        errors.append("no error")
                    except einc.EincError as e:
                        assert "'b'" in str(e), str(e)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    run_in_threads(work, 8)
    assert errors == []


def test_no_leaks_over_10000_calls():
    a = np.ones((4, 5), np.float32)
    b = np.ones((5, 3), np.float32)
    out = np.empty((4, 3), np.float32)
    f = einc.compile("i j, j k -> i k", (4, 5), (5, 3))

    def one_round():
        einc.einsum("i j, j k -> i k", a, b)
        einc.einsum("i j, j k -> i k", a, b, out=out)
        einc.rearrange(a, "i j -> j i")
        f(a, b)
        try:
            einc.einsum("i j, j k -> i k", a, a)
        except einc.EincError:
            pass

    for _ in range(200):  # warm: caches, first allocations
        one_round()
    gc.collect()
    refs = [sys.getrefcount(x) for x in (a, b, out, f)]
    rss = rss_kib()
    for _ in range(10000):
        one_round()
    gc.collect()
    assert [sys.getrefcount(x) for x in (a, b, out, f)] == refs
    grown = rss_kib() - rss
    assert grown < 4096, f"RSS grew by {grown} KiB over 10,000 rounds"
