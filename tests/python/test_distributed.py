"""einc.distributed on a local Dask cluster of 2 worker processes on the
loopback interface (issue 29): the same results as in one piece and as
sliced in one process (f64 1e-12, f32 1e-5 against a float64 reference),
a worker killed mid-run (the result still exact), and bad input refused
before any task is sent. Skipped where dask.distributed is not installed.
"""
import os
import signal
import threading
import time

import numpy as np
import pytest

import einc

distributed = pytest.importorskip("distributed")
import einc.distributed as ed  # noqa: E402

RING = "i j k, k l m, m n i -> j l n"


def ring_inputs(dtype, seed=0, n=(6, 8, 6, 5, 4, 3)):
    i, j, k, l, m, nn = n
    rng = np.random.default_rng(seed)
    shapes = [(i, j, k), (k, l, m), (m, nn, i)]
    return [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]


def reference(arrays):
    return np.einsum("ijk,klm,mni->jln", *[a.astype(np.float64)
                                           for a in arrays])


def rel_err(got, want):
    return np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()


@pytest.fixture(scope="module")
def client():
    # Dask's nanny sets OMP_NUM_THREADS=1 (and more) in this process's
    # environment; later tests (the CLI's thread count) must not see it
    environ = dict(os.environ)
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()
    os.environ.clear()
    os.environ.update(environ)


def test_own_cluster_leaves_the_environment():
    arrays = ring_inputs(np.float64)
    before = dict(os.environ)
    r = ed.contract(RING, *arrays, slice="j:2", n_workers=1)
    assert rel_err(r, reference(arrays)) <= 1e-12
    assert dict(os.environ) == before


def test_ranges_cover_units():
    for units in (1, 5, 12, 100):
        for tasks in (1, 3, 8, 200):
            rs = ed.ranges(units, tasks)
            assert [f for f, _ in rs] == [sum(c for _, c in rs[:t])
                                          for t in range(len(rs))]
            assert sum(c for _, c in rs) == units and all(c > 0 for _, c in rs)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("slice_", ["j:4,k:3", "k", "j"])
def test_same_result_three_ways(client, dtype, tol, slice_):
    arrays = ring_inputs(dtype)
    want = reference(arrays)
    whole = einc.einsum(RING, *arrays)
    plan = einc.Plan(RING, [a.shape for a in arrays], dtype=np.dtype(dtype).name,
                     slice=slice_)
    assert plan.units > 1
    sliced = plan(*arrays)
    # unit by unit in this process, summed as partials
    parts = [plan.run_units(*arrays, out=np.empty(plan.output_shape, dtype),
                            first=u) for u in range(plan.units)]
    on_dask = ed.contract(RING, *arrays, client=client, slice=slice_)
    for name, got in [("whole", whole), ("sliced", sliced),
                      ("units", sum(parts)), ("dask", on_dask)]:
        assert got.dtype == dtype, name
        assert rel_err(got, want) <= tol, (name, rel_err(got, want))


def test_memory_limit_slices_on_dask(client):
    arrays = ring_inputs(np.float64)
    # the limit is what slices the plan, and every buffer keeps within it
    plan = einc.plan(RING, *arrays, memory_limit=600)
    assert plan.units > 1 and plan.memory_limit == 600
    assert max(plan.memory["temporaries"] or [0]) <= 600
    assert einc.plan(RING, *arrays).units == 1
    r = ed.contract(RING, *arrays, client=client, memory_limit=600, tasks=5)
    assert rel_err(r, reference(arrays)) <= 1e-12


def test_round_robin_placement():
    """Task t goes to worker t mod W (each worker's list of tasks), loosely
    (Dask may still move a task: stealing, a lost worker)."""
    workers = ["tcp://a", "tcp://b", "tcp://c"]
    lists = {w: [] for w in workers}
    for t in range(8):
        where = ed._placement(workers, t)
        assert where["allow_other_workers"] is True
        lists[where["workers"][0]].append(t)
    assert lists == {"tcp://a": [0, 3, 6], "tcp://b": [1, 4, 7],
                     "tcp://c": [2, 5]}
    assert ed._placement([], 3) == {}


def test_retries_a_closed_connection(monkeypatch):
    """A retry after a lost worker can find it still listed: the broadcast
    to it fails with CommClosedError (CI, 2026-11-29), which is retried
    like a cancelled future; three failures in a row raise."""
    from distributed.comm.core import CommClosedError

    calls = []

    def flaky(client, key, arrays, units, tasks):
        calls.append(1)
        if len(calls) < 3:
            raise CommClosedError("in <TCP (closed) ConnectionPool.scatter>")
        return "summed"

    monkeypatch.setattr(ed, "_attempt", flaky)
    monkeypatch.setattr("time.sleep", lambda s: None)
    assert ed._run(None, None, (), 1, 1) == "summed" and len(calls) == 3
    calls.clear()

    def gone(*args):
        calls.append(1)
        raise CommClosedError("gone")

    monkeypatch.setattr(ed, "_attempt", gone)
    with pytest.raises(CommClosedError):
        ed._run(None, None, (), 1, 1)
    assert len(calls) == 3


def test_worker_killed_mid_run(client):
    # many short tasks: one worker is killed (SIGKILL, its nanny restarts
    # it) while they run; Dask reruns what was lost
    arrays = ring_inputs(np.float64, seed=3, n=(8, 16, 8, 8, 8, 8))
    want = reference(arrays)
    pids = client.run(os.getpid)
    victim = sorted(pids.values())[-1]
    result = {}

    def run():
        result["r"] = ed.contract(RING, *arrays, client=client,
                                  slice="j,k", tasks=128)

    def done_ranges(dask_scheduler):
        return sum(1 for k, ts in dask_scheduler.tasks.items()
                   if "_run_range" in str(k) and ts.state == "memory")

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 60
    while client.run_on_scheduler(done_ranges) < 4:  # mid-run: some done
        assert time.monotonic() < deadline and t.is_alive()
        time.sleep(0.01)
    os.kill(victim, signal.SIGKILL)
    t.join(timeout=120)
    assert not t.is_alive(), "the run did not finish after a worker died"
    assert rel_err(result["r"], want) <= 1e-12
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid).values()


def _scheduler_tasks(client):
    return set(client.run_on_scheduler(
        lambda dask_scheduler: list(dask_scheduler.tasks)))


def test_bad_input_before_any_task(client):
    """Refused calls submit nothing: no task appears on the scheduler.
    Compared as sets of keys, not counts: an earlier test's tasks may
    still be being released while this one runs (a count fell from 126
    to 0 in one CI run)."""
    arrays = ring_inputs(np.float64)
    before = _scheduler_tasks(client)
    with pytest.raises(einc.EincError, match="slice_axes"):
        ed.contract(RING, *arrays, client=client, slice="q")
    with pytest.raises(einc.EincError):
        ed.contract(RING, arrays[0], arrays[1], arrays[1], client=client,
                    slice="j")
    with pytest.raises(TypeError, match="dtypes"):
        ed.contract(RING, arrays[0], arrays[1].astype(np.float32), arrays[2],
                    client=client, slice="j")
    with pytest.raises(einc.EincError, match="memory limit"):
        ed.contract(RING, *arrays, client=client, memory_limit=64)
    assert not _scheduler_tasks(client) - before
