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


class Plan:
    """The plan of one expression for given shapes and dtype.

    Attributes: flops and naive_flops (opt_einsum's count), path (linear,
    as opt_einsum's contract_path gives), ssa_path (einc's own pairs),
    steps (one dict per step), output_shape, largest_intermediate,
    workspace_bytes, units (the slices of a sliced plan, 1 otherwise:
    slice="a:4,b" names them, memory_limit= bytes lets the planner choose;
    run_units runs some of them). str(plan) is `einc plan`'s report; to_dict() its JSON.
    """

    def __init__(self, expr, shapes, *, dtype="float32", reduce=None,
                 backend="auto", numpy=None, device=None, path=None,
                 slice=None, memory_limit=None, **axis_sizes):
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
                                slice, int(memory_limit or 0))
        stats = self._plan.stats()
        self.units = stats["units"]
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

    def run_units(self, *tensors, out, first, count=1):
        """Runs units (slices) [first, first + count) of a sliced plan into
        `out`, an array of the output's shape and the plan's dtype that the
        caller owns: it is overwritten with their contribution (zeros where
        none writes), so partials of ranges covering every unit once sum
        to the result (ein_plan_run_units). The tensors must have the
        compiled dtype and shapes, C-contiguous."""
        self._plan.run_units(tensors, out, int(first), int(count))
        return out

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
         numpy=None, device=None, **axis_sizes) -> Plan:
    """Plans expr for inputs given as arrays or shapes, without running it::

        >>> p = einc.plan('i j, j k, k l -> i l', (1000, 10), (10, 1000),
        ...               (1000, 10))
        >>> p.path, p.flops
        ([(1, 2), (0, 1)], 400000.0)
        >>> print(p)          # `einc plan`'s report

    dtype defaults to the first array's, else float32.
    """
    if dtype is None:
        dtype = next((t.dtype for t in tensors_or_shapes
                      if hasattr(t, "dtype")), "float32")
    return Plan(expr, tensors_or_shapes, dtype=dtype, reduce=reduce,
                backend=backend, numpy=numpy, device=device, **axis_sizes)


def compile(expr, *shapes, dtype="float32", reduce=None, backend="auto",
            numpy=None, **axis_sizes) -> Plan:
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
                numpy=numpy, **axis_sizes)
