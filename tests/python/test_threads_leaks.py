"""Threads and resources: several threads calling einc at once on the one
shared context (results checked), the GIL released while a plan runs, and
no leaks of references or memory over 10,000 calls (sys.getrefcount flat,
RSS roughly flat, and Python's own allocations flat under tracemalloc
across every entry point)."""
import gc
import sys
import threading
import time
import tracemalloc

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


def python_progress_during(call, repeats):
    """How far a spinning Python thread counts while `call` runs `repeats`
    times on this thread. The switch interval is raised to a second, so
    the spinner never takes the GIL by force within the test; it gives the
    GIL up of its own accord (time.sleep(0)) every 1,000 counts, so this
    thread is not kept waiting. While a call holds the GIL the spinner
    cannot count at all."""
    count, stop, started = [0], threading.Event(), threading.Event()

    def spin():
        started.set()
        while not stop.is_set():
            count[0] += 1
            if count[0] % 1000 == 0:
                time.sleep(0)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    spinner = threading.Thread(target=spin)
    spinner.start()
    started.wait()
    progress = 0
    try:
        for _ in range(repeats):
            before = count[0]
            call()
            progress += count[0] - before
    finally:
        stop.set()
        sys.setswitchinterval(old)
        spinner.join()
    return progress


def test_gil_released_while_a_plan_runs():
    """A large plan (a 768^3 GEMM, tens of ms) lets another Python thread
    run, on the cached C path, the general path (out=) and a compiled
    plan alike; a call that held the GIL would leave the spinner at zero
    (as sum(range(10**6)) does)."""
    n = 768
    a = np.ones((n, n), np.float32)
    out = np.empty((n, n), np.float32)
    f = einc.compile("i j, j k -> i k", a, a)
    calls = {
        "fast": lambda: einc.einsum("i j, j k -> i k", a, a),
        "general": lambda: einc.einsum("i j, j k -> i k", a, a, out=out),
        "compiled": lambda: f(a, a),
    }
    assert python_progress_during(lambda: sum(range(10**6)), 3) == 0
    for name, call in calls.items():
        call()  # plan cached, first-touch costs paid
        assert python_progress_during(call, 3) > 0, name


def every_entry_point(a, b, x, f, memo):
    """One call of each of einc's functions, errors included."""
    einc.einsum("i j, j k -> i k", a, b)
    einc.einsum("ij,jk", a, b)
    einc.reduce(x, "a b c -> c", "max")
    einc.reduce(x, "a b c -> a", np.max)
    einc.repeat(a, "i j -> i j r", r=2)
    packed, shapes = einc.pack([a, x[:, 0]], "i *")
    einc.unpack(packed, shapes, "i *")
    einc.parse_shape(x, "a _ c")
    f(a, b)
    p = einc.plan("i j, j k -> i k", a, b)
    str(p), p.to_dict(), p.path, p.steps
    einc.check("i j, j k -> i k", (4, 5), (5, 3))
    memo.check("i j", a)
    for bad in (lambda: einc.einsum("i j, j k -> i k", a, a),
                lambda: einc.check("a b -> c", (2, 3)),
                lambda: einc.rearrange(x, "a b c -> a (b c) d"),
                lambda: memo.check("j j", a)):
        try:
            bad()
        except einc.EincError:
            pass


def test_no_python_allocations_kept_over_1000_rounds():
    """tracemalloc sees every Python object the extension makes: over
    1,000 rounds of every entry point (about 20,000 calls), Python's
    traced memory stays where it was (one leaked object a round would be
    1,000 objects, 32 KiB or more)."""
    r = np.random.default_rng(2)
    a = r.standard_normal((4, 5)).astype(np.float32)
    b = r.standard_normal((5, 3)).astype(np.float32)
    x = r.standard_normal((4, 3, 2)).astype(np.float32)
    f = einc.compile("i j, j k -> i k", (4, 5), (5, 3))
    memo = einc.ShapeMemo()
    tracemalloc.start()
    try:
        # warm while traced: the caches and free lists of Python and numpy
        # (their blocks count as live) fill to their bounds; measured on
        # this machine, the growth per 1,000 rounds after 500, 1,500 and
        # 2,500 traced rounds was 15 KiB, 1.8 KiB, 0.2 KiB
        for _ in range(1000):
            every_entry_point(a, b, x, f, memo)
        # Two windows of 1,000 rounds: a leak grows both by 32 KiB or more,
        # while churn left from earlier tests (JAX's imports and caches
        # were seen to add 17-21 KiB to the first window) dies out.
        growth = []
        for _ in range(2):
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(1000):
                every_entry_point(a, b, x, f, memo)
            gc.collect()
            growth.append(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
    assert min(growth) < 16 * 1024, f"traced memory grew by {growth} bytes"
