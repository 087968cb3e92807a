"""einc.plan and einc.compile: one compiled plan, its report and its reuse.

A Plan is the C library's ein_plan for given shapes and a dtype. Its str()
is `einc plan`'s report and to_dict() the JSON of `einc plan --json` (both
from ein_plan_describe); .path is the contraction order in opt_einsum's
linear form. compile() returns a callable that runs the plan, as
opt_einsum.contract_expression does.
"""

from __future__ import annotations

import json

from . import _api, _einc
from ._api import _lengths, _reduction_name, _shape_of, numpy_dialect
from ._arrays import dtype_code, prepare


def _ssa_to_linear(ssa_path, ninputs):
    """einc's pairs name operands by creation (inputs 0..n-1, then each
    intermediate); opt_einsum's name positions in the current list, where
    a contraction removes its pair and appends its result."""
    if ninputs == 1 and not ssa_path:
        return [(0,)]
    alive = list(range(ninputs))
    linear = []
    for step, pair in enumerate(ssa_path):
        positions = tuple(sorted(alive.index(i) for i in pair))
        linear.append(positions)
        for i in pair:
            alive.remove(i)
        alive.append(ninputs + step)
    return linear


def _search_options(plan_time, seed, objective):
    """The order search's options as _einc.Plan takes them, checked."""
    if isinstance(seed, bool) or not isinstance(seed, int) or \
            not 0 <= seed < 2 ** 64:
        raise ValueError(f"seed must be an int from 0 to 2**64-1, not "
                         f"{seed!r}")
    if isinstance(plan_time, bool) or \
            not isinstance(plan_time, (int, float)):
        raise TypeError(f"plan_time takes seconds, not {plan_time!r}")
    if not isinstance(objective, str):
        raise TypeError(f"objective is 'flops', 'size' or 'combo', not "
                        f"{objective!r}")
    return float(plan_time), seed, objective


class Plan:
    """The plan of one expression for given shapes and dtype.

    Attributes: flops and naive_flops (opt_einsum's count), path (linear,
    as opt_einsum's contract_path gives), ssa_path (einc's own pairs),
    steps (one dict per step), output_shape, largest_intermediate,
    workspace_bytes. str(plan) is `einc plan`'s report; to_dict() its JSON.

    The order search past 12 operands takes plan_time (seconds, counted
    as work so that a seed always gives the same order; 0: the default,
    about 45 ms at 100 operands), seed (an int >= 0) and objective
    ('flops', 'size': the largest intermediate, or 'combo': flops + 64 x
    the elements written to intermediates, cotengra's names).
    """

    def __init__(self, expr, shapes, *, dtype="float32", reduce=None,
                 backend="auto", numpy=None, device=None, path=None,
                 plan_time=0.0, seed=0, objective="flops", **axis_sizes):
        shapes = tuple(_shape_of(s) for s in shapes)
        if numpy is None:
            numpy = numpy_dialect(expr, [len(s) for s in shapes])
        self.expr = expr
        self.shapes = shapes
        self.dtype = dtype
        # the device the plan targets, as `einc plan` predicts for it: this
        # CPU's measured rates, or the GPU present for cuda and emu
        self.device = device or ("cuda" if str(backend) in ("cuda", "emu")
                                 else "cpu")
        self._code = dtype_code(dtype)
        self._plan = _einc.Plan(expr, shapes, self._code[0], self._code[1],
                                bool(numpy), _reduction_name(reduce),
                                str(backend), _lengths(axis_sizes), path,
                                *_search_options(plan_time, seed, objective))
        stats = self._plan.stats()
        self.flops = stats["flops"]
        self.naive_flops = stats["naive_flops"]
        self.output_shape = stats["output_shape"]
        self.largest_intermediate = stats["largest_intermediate"]
        self.workspace_bytes = stats["workspace_bytes"]
        self.min_bytes = stats["min_bytes"]
        self._dict = None

    def to_dict(self) -> dict:
        """The JSON report of `einc plan --json`, as a dict."""
        if self._dict is None:
            self._dict = json.loads(self._plan.describe(True, self.device))
        return self._dict

    def describe(self, device=None) -> str:
        """The text report, with predicted times on a device model: 'cpu'
        (this host's measured rates), 'h100', 'h200', 'cuda' (the GPU
        present); by default the device the plan targets."""
        return self._plan.describe(False, device or self.device)

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return (f"<einc.Plan {self.expr!r} shapes={self.shapes} "
                f"flops={self.flops:g}>")

    @property
    def ssa_path(self):
        return [tuple(p) for p in self.to_dict()["path"]]

    @property
    def path(self):
        return _ssa_to_linear(self.ssa_path, len(self.shapes))

    @property
    def steps(self):
        return self.to_dict()["steps"]

    def __call__(self, *tensors, out=None):
        """Runs the plan (ein_eval for tensors of another layout)."""
        if out is None:
            result = self._plan.run_numpy(tensors)  # plain numpy, this layout
            if result is not None:
                return result
            if not _api._fast_ready:
                _api._fast_setup()
        prepared = prepare(tensors)
        out_arg = None if out is None else prepared.wrap_out(out)
        code, bits = prepared.retype
        result = self._plan.execute(prepared.tensors, out_arg, prepared.alloc,
                                    code, bits, prepared.stream, prepared.sync)
        return out if out is not None else prepared.unwrap(result)


def plan(expr, *tensors_or_shapes, dtype=None, reduce=None, backend="auto",
         numpy=None, device=None, plan_time=0.0, seed=0, objective="flops",
         **axis_sizes) -> Plan:
    """Plans expr for inputs given as arrays or shapes, without running it::

        >>> p = einc.plan('i j, j k, k l -> i l', (1000, 10), (10, 1000),
        ...               (1000, 10))
        >>> p.path, p.flops
        ([(1, 2), (0, 1)], 400000.0)
        >>> print(p)          # `einc plan`'s report

    dtype defaults to the first array's, else float32. plan_time, seed and
    objective steer the order search past 12 operands (Plan's doc).
    """
    if dtype is None:
        dtype = next((t.dtype for t in tensors_or_shapes
                      if hasattr(t, "dtype")), "float32")
    return Plan(expr, tensors_or_shapes, dtype=dtype, reduce=reduce,
                backend=backend, numpy=numpy, device=device,
                plan_time=plan_time, seed=seed, objective=objective,
                **axis_sizes)


def compile(expr, *shapes, dtype="float32", reduce=None, backend="auto",
            numpy=None, plan_time=0.0, seed=0, objective="flops",
            **axis_sizes) -> Plan:
    """A callable that runs expr with one plan compiled now, as
    opt_einsum.contract_expression does::

        >>> f = einc.compile('b i j, b j k -> b i k', (8, 64, 32),
        ...                  (8, 32, 16))
        >>> a = np.ones((8, 64, 32), np.float32)
        >>> b = np.ones((8, 32, 16), np.float32)
        >>> f(a, b).shape
        (8, 64, 16)
    """
    return Plan(expr, shapes, dtype=dtype, reduce=reduce, backend=backend,
                numpy=numpy, plan_time=plan_time, seed=seed,
                objective=objective, **axis_sizes)
