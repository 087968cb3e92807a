"""einc.distributed: a sliced contraction on a Dask cluster (issue 29).

    >>> from distributed import Client
    >>> r = einc.distributed.contract('a b, b c, c d, d a ->', A, B, C, D,
    ...                               client=Client(...), slice="a:16")

The plan is made here first, so bad input (shapes, dtypes, a memory limit
no slicing meets, an unknown sliced axis) raises einc's error before any
task is sent. The inputs are scattered to every worker once (a copy on each,
so losing a worker loses no input); each task runs
a contiguous range of the plan's units (slices) into a partial of its own
(Plan.run_units); the partials are summed pairwise in a tree of tasks on
the workers, and only the result is gathered. A worker lost mid-run is
Dask's to retry: a task is a function of its inputs, so a retried range
gives the same partial and the result is still exact.

Without `client`, a local cluster of `n_workers` processes is started for
the call and closed after it. Each worker runs einc on its own CPU.
"""

from __future__ import annotations

import os

import numpy as np

from ._plan import Plan

__all__ = ["contract", "ranges"]

# Plans made on a worker, by what makes them (a worker runs many tasks of
# one contraction; planning once per process amortizes it).
_worker_plans: dict = {}


def ranges(units, tasks):
    """`tasks` contiguous ranges (first, count) covering units 0..units-1,
    as even as integers allow; fewer when there are fewer units."""
    tasks = max(1, min(int(tasks), units))
    return [(units * t // tasks, units * (t + 1) // tasks - units * t // tasks)
            for t in range(tasks)]


def _plan_on_worker(key):
    plan = _worker_plans.get(key)
    if plan is None:
        expr, shapes, dtype, slice_, limit, reduce_, sizes = key
        plan = Plan(expr, shapes, dtype=dtype, slice=slice_,
                    memory_limit=limit, reduce=reduce_, backend="cpu",
                    **dict(sizes))
        _worker_plans[key] = plan
    return plan


def _run_range(key, first, count, *arrays):
    """One task: units [first, first + count) into a fresh partial."""
    plan = _plan_on_worker(key)
    out = np.empty(plan.output_shape, dtype=key[2])
    return plan.run_units(*arrays, out=out, first=first, count=count)


def _add(a, b):
    return np.add(a, b, out=a if a.flags.writeable else None)


def _tree_sum(client, parts):
    """Pairwise sums as tasks, level by level, until one is left."""
    while len(parts) > 1:
        nxt = [client.submit(_add, parts[i], parts[i + 1], pure=False)
               for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def _placement(workers, t):
    """Task t's worker, round robin: the ranges are equal work, and left to
    itself Dask's queue gave one of 2 workers 5 of 8 tasks (the other idle
    for a task's time). A loose restriction: Dask may still run the task
    elsewhere (stealing, a lost worker's tasks)."""
    if not workers:
        return {}
    return {"workers": [workers[t % len(workers)]],
            "allow_other_workers": True}


def _run(client, key, arrays, units, tasks):
    """Scatter, tasks, tree, gather. Dask reruns the tasks a lost worker
    held; scattered data has no recipe, so where a worker died before the
    copies of an input were made, the inputs are scattered again (up to
    two more times). A retry can find the dead worker still listed (the
    scheduler has not noticed yet): the broadcast to it fails with a
    closed connection, which is retried too, after a pause that grows."""
    import time

    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError
    for attempt in range(3):
        try:
            return _attempt(client, key, arrays, units, tasks)
        except (FutureCancelledError, CommClosedError, OSError):
            if attempt == 2:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def _attempt(client, key, arrays, units, tasks):
    workers = sorted(client.scheduler_info()["workers"])
    count = tasks or 4 * max(1, len(workers))
    scattered = client.scatter(arrays, broadcast=True)
    parts = [client.submit(_run_range, key, first, n, *scattered,
                           pure=False, **_placement(workers, t))
             for t, (first, n) in enumerate(ranges(units, count))]
    return _tree_sum(client, parts).result()


def contract(expr, *arrays, client=None, slice=None, memory_limit=None,
             tasks=None, n_workers=2, reduce=None, **axis_sizes):
    """The contraction `expr` of numpy `arrays` run slice by slice on a Dask
    cluster; the result as a numpy array.

    slice: the axes to slice (einc's form, "a:8,b"); memory_limit: bytes
    one slice may use (the planner slices to fit). One of them must make
    the plan sliced. tasks: how many tasks to split the units into
    (default: 4 per worker, so each task is long enough to amortize
    scheduling and the cluster stays busy; at most the number of units).
    """
    arrays = [np.ascontiguousarray(a) for a in arrays]
    if not arrays:
        raise ValueError("einc.distributed.contract: no input arrays")
    dtype = arrays[0].dtype
    if any(a.dtype != dtype for a in arrays):
        raise TypeError("einc.distributed.contract: the inputs have dtypes "
                        f"{sorted({str(a.dtype) for a in arrays})}; give "
                        "them one dtype")
    shapes = tuple(tuple(a.shape) for a in arrays)
    key = (expr, shapes, dtype.name, slice, int(memory_limit or 0), reduce,
           tuple(sorted(axis_sizes.items())))
    plan = Plan(expr, shapes, dtype=dtype.name, slice=slice,
                memory_limit=int(memory_limit or 0), reduce=reduce,
                backend="cpu", **axis_sizes)  # raises before any task
    own = client is None
    if own:
        from distributed import Client, LocalCluster
        # Dask's nanny sets OMP_NUM_THREADS=1 and the like in this
        # process's environment when it spawns workers: put it back after
        environ = dict(os.environ)
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1,
                               processes=True, host="127.0.0.1",
                               dashboard_address=None)
        client = Client(cluster)
    try:
        return _run(client, key, arrays, plan.units, tasks)
    finally:
        if own:
            client.close()
            cluster.close()
            os.environ.clear()
            os.environ.update(environ)

