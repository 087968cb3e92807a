"""einc.plan and einc.compile: one compiled plan, its report and its reuse.

A Plan is the C library's ein_plan for given shapes and a dtype. Its str()
is `einc plan`'s report and to_dict() the JSON of `einc plan --json` (both
from ein_plan_describe); .path is the contraction order in opt_einsum's
linear form. compile() returns a callable that runs the plan, as
opt_einsum.contract_expression does.
"""

from __future__ import annotations

import json
import sys

from . import _core, _einc
from ._arrays import check_out, dtype_code, prepare
from ._core import (_lengths, _reduction_name, _shape_of, memory_limit_bytes,
                    numpy_dialect, route)


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

    Attributes: flops and naive_flops (opt_einsum's count), model_flops
    (what MFU counts: the expression's FLOPs once, where a sliced plan
    repeats work), path (linear, as opt_einsum's contract_path gives),
    ssa_path (einc's own pairs), steps (one dict per step), output_shape,
    largest_intermediate, workspace_bytes, memory (bytes of inputs,
    output, each temporary, workspace, and the peaks), grad_flops and
    grad_bytes (forward + backward), is_view (the output is a view of an
    input: nothing runs, 0 FLOPs and bytes). str(plan) is `einc plan`'s
    report; to_dict() its JSON. Device models: 'cpu' (this host,
    measured), 'h100' (= 'h100-sxm'), 'h100-pcie', 'h200', 'a100', 'l4',
    'b200' (data sheets) and 'cuda' (the GPU present); `peak=` (FLOP/s
    for the plan's dtype) and `bandwidth=` (bytes/s) replace the model's
    figures.
    path= gives the contraction order (opt_einsum's linear form) and
    memory_limit= the bytes one intermediate may take (the planner picks
    an order within it, or slices; 0 or None: no limit; 'free': a third
    of the free memory of the device the plan runs on, resolved now;
    plan.memory_limit is the limit planned within). units: the slices of a
    sliced plan, 1 otherwise (slice="a:4,b" names them, memory_limit= lets
    the planner choose; run_units runs some of them).

    The order search past 12 operands takes plan_time (seconds, counted
    as work so that a seed always gives the same order; 0: the default,
    about 45 ms at 100 operands), seed (an int >= 0) and objective
    ('flops', 'size': the largest intermediate, or 'combo': flops + 64 x
    the elements written to intermediates, cotengra's names). devices=N
    spreads a sliced plan's units over N devices of its backend (cuda, or
    emu with EINC_EMU_DEVICES set; ein_options.devices): each call then
    goes through ein_eval, which sums the partials on the output's
    device.
    """

    def __init__(self, expr, shapes, *, dtype="float32", reduce=None,
                 backend="auto", numpy=None, device=None, path=None,
                 peak=None, bandwidth=None, slice=None, memory_limit=0,
                 plan_time=0.0, seed=0, objective="flops", devices=0,
                 **axis_sizes):
        shapes = tuple(_shape_of(s) for s in shapes)
        if numpy is None:
            numpy = numpy_dialect(expr, [len(s) for s in shapes])
        self.expr = expr
        self.shapes = shapes
        self.dtype = dtype
        self._grad_args = (numpy, reduce, axis_sizes)
        backend = _backend_for(device, backend)
        # the device the plan targets, as `einc plan` predicts for it: this
        # CPU's measured rates, or the GPU present for cuda and emu
        self.device = device or ("cuda" if str(backend) in ("cuda", "emu")
                                 else "cpu")
        self.peak = peak
        self.bandwidth = bandwidth
        self._code = dtype_code(dtype)
        self._plan = _einc.Plan(expr, shapes, self._code[0], self._code[1],
                                bool(numpy), _reduction_name(reduce),
                                str(backend), _lengths(axis_sizes), path,
                                slice, memory_limit_bytes(memory_limit),
                                *_search_options(plan_time, seed, objective),
                                int(devices or 0))
        stats = self._plan.stats()
        self.units = stats["units"]
        # the limit planned within, 'free' resolved on the device (0: none)
        self.memory_limit = stats["memory_limit"]
        self.flops = stats["flops"]
        self.naive_flops = stats["naive_flops"]
        self.output_shape = stats["output_shape"]
        self.largest_intermediate = stats["largest_intermediate"]
        self.workspace_bytes = stats["workspace_bytes"]
        self.min_bytes = stats["min_bytes"]
        self.model_flops = stats["model_flops"]
        self.memory = stats["memory"]
        # the output is a view of an input (ein_plan_is_view): einsum
        # returns it and runs nothing; flops and bytes are then 0
        self.is_view = stats["is_view"]
        self._dict = None
        self._grad_cost = None
        # torch CPU tensors take einc.einsum's cached C path (python/src/call.c),
        # which plans as this plan was planned where the plan has einsum's
        # defaults (backend auto, searched path); a plan whose result is a
        # view of an input stays on execute(), which returns a new tensor
        # as the plan returns for numpy
        self._fast_args = None
        if (str(backend) == "auto" and path is None
                and not self.is_view and not slice and not memory_limit
                and int(devices or 0) <= 1):
            self._fast_args = (bool(numpy), _reduction_name(reduce),
                               _lengths(axis_sizes) or None)
        # an unknown device, or one of another backend, fails here
        self._account(device, None, None, 0)

    def _figures(self, peak, bandwidth):
        """The caller's peak and bandwidth for the C calls (0: the
        model's): these, else the plan's own."""
        peak = self.peak if peak is None else peak
        bandwidth = self.bandwidth if bandwidth is None else bandwidth
        return float(peak or 0), float(bandwidth or 0)

    def _account(self, device, peak, bandwidth, seconds):
        return self._plan.account(device or self.device,
                                  *self._figures(peak, bandwidth),
                                  float(seconds))

    def to_dict(self) -> dict:
        """The JSON report of `einc plan --json`, as a dict."""
        if self._dict is None:
            self._dict = json.loads(self._plan.describe(
                True, self.device, *self._figures(None, None)))
        return self._dict

    def describe(self, device=None, *, peak=None, bandwidth=None) -> str:
        """The text report, with predicted times on a device model (see
        the class); by default the device the plan targets."""
        return self._plan.describe(False, device or self.device,
                                   *self._figures(peak, bandwidth))

    def predicted_seconds(self, device=None, *, peak=None,
                          bandwidth=None) -> float:
        """Predicted time of one run on a device model: per-call and
        per-step overheads plus a roofline per step (einc's measured rates
        where it has them, else the data sheet's; docs/design.md,
        "Resource accounting")."""
        return self._account(device, peak, bandwidth, 0)["predicted_seconds"]

    def mfu(self, seconds, device=None, *, peak=None) -> float:
        """Model FLOPs utilization of a run that took `seconds`:
        model_flops / seconds / the data-sheet peak of the device for the
        plan's dtype (hfu() counts the plan's own FLOPs)."""
        return self._account(device, peak, None, seconds)["mfu"]

    def hfu(self, seconds, device=None, *, peak=None) -> float:
        """Hardware FLOPs utilization: flops / seconds / peak."""
        return self._account(device, peak, None, seconds)["hfu"]

    def peak_flops(self, device=None, *, peak=None) -> float:
        """The data-sheet peak FLOP/s of the device for the plan's dtype."""
        return self._account(device, peak, None, 0)["peak_flops"]

    @property
    def grad_flops(self) -> float:
        """Forward + backward FLOPs: this plan's and each input's gradient
        program's (ein_grad_flops), as `einc plan --grad` totals them; a
        linear layer's is 6 x parameters x tokens."""
        return self._training()[0]

    @property
    def grad_bytes(self) -> float:
        """Forward + backward least bytes (min_bytes and each gradient
        program's ein_grad_bytes), as `einc plan --grad` totals them."""
        return self._training()[1]

    def _training(self):
        if self._grad_cost is None:
            from ._grad import _training_cost
            numpy, reduce, axis_sizes = self._grad_args
            self._grad_cost = _training_cost(
                self.expr, self.shapes, self.dtype, numpy, reduce,
                axis_sizes, self.flops, self.min_bytes)
        return self._grad_cost

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
        """Runs the plan (ein_eval for tensors of another layout or of
        other sizes: the result has the shape the expression gives them)."""
        if _is_compiling is not None and _is_compiling():
            return self._traced(tensors, out)  # Dynamo (compile, export)
        if out is None:
            result = self._plan.run_numpy(tensors)  # plain numpy, this layout
            if result is not None:
                return result
            if not _core._fast_done:
                _core._fast_setup()
            if self._fast_args is not None:
                result = _core._fast((self.expr,) + tensors, *self._fast_args)
                if result is not None:
                    return result
            # torch tensors that need grad or carry a forward-mode tangent,
            # and tracers: the framework's machinery, as einc.einsum's
            # (DLPack refuses the first and drops the tangents)
            numpy, reduce, axis_sizes = self._grad_args
            routed = route(self.expr, tensors, reduce=reduce, numpy=numpy,
                           lengths=_lengths(axis_sizes))
            if routed is not NotImplemented:
                return routed
        prepared = prepare(tensors)
        out_arg = None if out is None else prepared.wrap_out(check_out(out))
        code, bits = prepared.retype
        result = self._plan.execute(prepared.tensors, out_arg, prepared.alloc,
                                    code, bits, prepared.stream, prepared.sync)
        return out if out is not None else prepared.unwrap(result)

    def _traced(self, tensors, out):
        """The call as Dynamo records einc.einsum's: one node, run by
        AOTAutograd as the view, the lowering or the operator."""
        if out is not None:
            raise _core.EincError("a compiled plan's out= cannot be traced: "
                                  "use the result")

        numpy, reduce, axis_sizes = self._grad_args
        return _core.traced_call(self.expr, tensors,
                                 _reduction_name(reduce), numpy,
                                 _lengths(axis_sizes))


# torch.compiler.is_compiling once Dynamo is imported (a global read per
# call until then): whether Dynamo is tracing (torch.compile, strict
# torch.export), which cannot trace the plan's C methods.
_is_compiling = None


def _arm_dynamo():
    global _is_compiling
    _is_compiling = sys.modules["torch"].compiler.is_compiling


_core.after_import("torch._dynamo", _arm_dynamo)


def _backend_for(device, backend):
    """The backend a plan for `device` is made for: the one the device
    runs (a GPU plans for cuda, which needs no GPU) unless `backend` says;
    a backend the device does not run is an error."""
    if device is None:
        return backend
    runs = _einc.device_model_backend(device)
    if str(backend) == "auto":
        return runs
    if (runs == "cuda") != (str(backend) in ("cuda", "emu")):
        raise _core.EincError(
            f"device {device!r} prices {runs} plans, not backend="
            f"{str(backend)!r}'s: leave backend out")
    return backend
