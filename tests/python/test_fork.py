"""einc in forked workers after the parent ran threaded einc work (issue
25; docs/design.md, "Fork safety"): a torch DataLoader with two workers
under the fork start method whose dataset calls einc.einsum, rearrange and
reduce on numpy arrays and torch tensors, and multiprocessing.Pool(2) with
fork. Results are compared with numpy and torch.

Each scenario runs in a fresh interpreter (this file run as a script) with
EINC_NUM_THREADS=2, so the parent's einc context is made with two threads
whatever ran before in pytest's process and however many cores the host
has. A hang fails instead of hanging the suite: DataLoader(timeout=...),
map_async(...).get(timeout) inside, and subprocess.run(timeout=...)
around it all.
"""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import einc

WAIT_S = 60  # per batch, per map
SCENARIO_S = 240  # the whole scenario, interpreter start included
OK = "fork scenario passed"


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1.0))


def numpy_errors(seed):
    """einc against numpy, f64: sizes that reach OpenBLAS's threads (a
    GEMM of 160 x 144 x 128), the GEMM batch splitter (160 products of
    32^3) and the loops' OpenMP regions (a reduction, a transpose)."""
    r = np.random.default_rng(seed)
    a, b = r.standard_normal((160, 128)), r.standard_normal((128, 144))
    p, q = r.standard_normal((160, 32, 32)), r.standard_normal((160, 32, 32))
    x = r.standard_normal((384, 1024))
    t = r.standard_normal((64, 48, 80))
    return [
        rel_err(einc.einsum("i k, k j -> i j", a, b), a @ b),
        rel_err(einc.einsum("b i k, b k j -> b i j", p, q), p @ q),
        rel_err(einc.reduce(x, "a b -> a", "sum"), x.sum(1)),
        rel_err(einc.reduce(x, "a (b c) -> a c", "max", c=4),
                x.reshape(384, 256, 4).max(1)),
        rel_err(einc.rearrange(t, "a b c -> c a b"), t.transpose(2, 0, 1)),
        rel_err(einc.rearrange(x, "a (b c) -> (c a) b", c=8),
                x.reshape(384, 128, 8).transpose(2, 0, 1).reshape(-1, 128)),
    ]


def torch_errors(seed):
    """The same on torch tensors (f32) against torch's own operations."""
    import torch
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(160, 128, generator=g), torch.randn(128, 144, generator=g)
    p, q = torch.randn(160, 32, 32, generator=g), torch.randn(160, 32, 32, generator=g)
    x = torch.randn(384, 1024, generator=g)
    t = torch.randn(64, 48, 80, generator=g)
    out = [
        (einc.einsum("i k, k j -> i j", a, b), torch.einsum("ik,kj->ij", a, b)),
        (einc.einsum("b i k, b k j -> b i j", p, q), torch.bmm(p, q)),
        (einc.reduce(x, "a b -> a", "sum"), x.sum(1)),
        (einc.rearrange(t, "a b c -> c a b"), t.permute(2, 0, 1)),
    ]
    for got, _ in out:
        assert isinstance(got, torch.Tensor), type(got)
    return [rel_err(got.numpy(), want.numpy()) for got, want in out]


def work(seed):
    """What a worker does: (its pid, einc's errors against numpy, against
    torch or [] without it)."""
    try:
        import torch  # noqa: F401
        terr = torch_errors(seed)
    except ImportError:
        terr = []
    return os.getpid(), numpy_errors(seed), terr


def check(results, parent_pid):
    for pid, nerr, terr in results:
        assert pid != parent_pid, "the work ran in the parent, not a worker"
        assert max(nerr) <= 1e-12, nerr  # f64
        assert not terr or max(terr) <= 1e-5, terr  # f32


class EincDataset:
    """A map-style dataset whose items are computed with einc."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return work(100 + i)


def scenario_dataloader():
    import torch
    work(1)  # the parent's threaded einc work
    loader = torch.utils.data.DataLoader(
        EincDataset(), batch_size=None, num_workers=2,
        multiprocessing_context="fork", timeout=WAIT_S)
    results = list(loader)
    assert len(results) == 8
    check(results, os.getpid())
    work(2)  # the parent still runs with its threads


def scenario_dataloader_torch_parent():
    """The parent's threads were torch's only (its OpenMP team, in the
    libgomp einc shares): einc's first call is in the workers."""
    import torch
    a = torch.randn(512, 512)
    torch.testing.assert_close(torch.einsum("ij,jk->ik", a, a), a @ a)
    loader = torch.utils.data.DataLoader(
        EincDataset(), batch_size=None, num_workers=2,
        multiprocessing_context="fork", timeout=WAIT_S)
    check(list(loader), os.getpid())


def torch_one_thread():
    """torch's own operations hang in a forked Pool worker after torch ran
    threaded in the parent (its MKL GEMM waits in libgomp, einc or not);
    its DataLoader workers avoid that with one thread, and so do the Pool's
    workers and the forked child here."""
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass


def scenario_pool():
    import multiprocessing
    work(1)
    with multiprocessing.get_context("fork").Pool(2, torch_one_thread) as pool:
        results = pool.map_async(work, range(8)).get(WAIT_S)
    check(results, os.getpid())
    work(2)


SCENARIOS = {"dataloader": scenario_dataloader,
             "dataloader_torch_parent": scenario_dataloader_torch_parent,
             "pool": scenario_pool}


def run_scenario(name):
    env = dict(os.environ, EINC_NUM_THREADS="2")
    try:
        r = subprocess.run([sys.executable, __file__, name], env=env,
                           capture_output=True, text=True, timeout=SCENARIO_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name}: no result after {SCENARIO_S} s (hung); "
                    f"output: {e.stdout!r} {e.stderr!r}")
    assert r.returncode == 0 and OK in r.stdout, (
        f"{name}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")


def test_dataloader_fork_workers():
    pytest.importorskip("torch")
    run_scenario("dataloader")


def test_dataloader_after_torch_threads():
    pytest.importorskip("torch")
    run_scenario("dataloader_torch_parent")


def test_pool_fork():
    run_scenario("pool")


def test_in_process_fork():
    """The same in pytest's own process (its einc context as earlier
    tests left it): a forked child computes with einc after the parent did."""
    work(3)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            torch_one_thread()
            check([work(4)], -1)
            code = 0
        finally:
            os._exit(code)
    for _ in range(WAIT_S * 100):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail(f"the forked child hung for {WAIT_S} s")
    assert os.waitstatus_to_exitcode(status) == 0


if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
    print(OK)
