"""einc's JAX primitive under sharding (issue 38): a Shardy sharding rule
for its custom call, so XLA keeps a batch-sharded einsum batch-sharded
(each device runs einc on its shard, no all-gather) and contracts a
sharded summed axis locally, then all-reduces.

Where the program being lowered is partitioned over several devices
(jit with NamedSharding inputs), the primitive lowers through
jax.experimental.custom_partitioning: its rule, in Shardy's einsum-like
notation, names one factor per axis of einc's binding, so each operand
dim that is exactly one axis may be sharded along it. What must stay
whole is marked need_replication: axes inside a merged dim '(h d)' (the
shard of a merge is not a merge of shards), a diagonal's axis, an axis
given a length (the length is the global size), a repeat's new axis and
a size-1 dim broadcast over a longer axis, and the summed axes of prod,
any and all (no collective combines them). The summed axes of sum,
mean, max and min are reduction factors: each device reduces its shard,
then psum, pmean (shards are even), pmax or pmin over the mesh axes
they were sharded on. Inside shard_map (manual axes) and on one device
the primitive lowers to its custom call as before; jax.export lowers it
so too (custom_partitioning's callback does not serialize).
"""

from __future__ import annotations

import functools

import jax
from jax.experimental.custom_partitioning import custom_partitioning

from . import _shapes

_COMBINE = {"sum": jax.lax.psum, "mean": jax.lax.pmean,
            "max": jax.lax.pmax, "min": jax.lax.pmin}


def partitioned(ctx) -> bool:
    """Whether this lowering is of a program partitioned over several
    devices by XLA (not manual, not for export)."""
    from jax._src.sharding_impls import ShardingContext

    module = ctx.module_context
    if getattr(module.lowering_parameters, "for_export", False):
        return False
    axis = module.axis_context
    return (isinstance(axis, ShardingContext) and axis.num_devices > 1
            and getattr(axis, "device_assignment", None) is not None)


def lower(ctx, operands, bind, params):
    """The primitive's call as a custom_partitioning op with einc's rule;
    bind(*tensors, **params) binds the primitive itself (per shard)."""
    shapes = tuple(tuple(a.shape) for a in ctx.avals_in)
    fn = _partitioned(bind, tuple(sorted(params.items())), shapes)
    from jax.interpreters import mlir

    return mlir.lower_fun(fn, multiple_results=False)(ctx, *operands)


@functools.lru_cache(maxsize=1024)
def _partitioned(bind, items, shapes):
    params = dict(items)
    rule, reduced, replicated, factors = sharding_rule(params, shapes)
    # Shardy asks the special factors in the order of their indices, which
    # are the order of first appearance in the rule (not the names' order:
    # 'f10' < 'f2', 'm0' < 'f3' as text)
    first = list(dict.fromkeys(f for names in factors for f in names))

    def order(names):
        return tuple(sorted(names, key=first.index))

    @custom_partitioning
    def call(*tensors):
        return bind(*tensors, **params)

    def partition(mesh, arg_shapes, result_shape):
        # One mesh assignment per factor, read from the operands'
        # shardings (inputs first, then the result), so that every
        # operand's shard of an axis is the same part of it (what the
        # rule keeps whole is asked whole: the partitioner gathers it)
        given = [a.sharding for a in arg_shapes] + [result_shape.sharding]
        assign = _assign(given, factors, replicated)
        specs = [_named(mesh, f, assign) for f in factors]
        axes = tuple(a for f in order(reduced_factors) if f in assign
                     for a in assign[f])

        def local(*tensors):
            y = bind(*tensors, **params)
            return _COMBINE[params["reduction"]](y, axes) if axes else y

        return mesh, local, specs[-1], tuple(specs[:-1])

    reduced_factors = {f for dims in reduced for f in dims if f}
    call.def_partition(partition=partition, sharding_rule=rule,
                       reduction_factors=order(reduced_factors),
                       need_replication_factors=order(replicated))
    return call


def sharding_rule(params, shapes):
    """(rule, reduced, replicated, factors): the Shardy rule ('f0 f1, f1
    f2 -> f0 f2'), per input the reduction factor of each dim (None where
    the dim is not a summed axis), the factors that must not be sharded,
    and each operand's factor per dim (inputs, then the output)."""
    expr, reduction, numpy, lengths = (params["expr"], params["reduction"],
                                       params["numpy"], params["lengths"])
    hints = tuple(tuple(_shapes.hint(d) for d in s) for s in shapes)
    axes, dims = _shapes.structure(expr, hints, bool(numpy), reduction,
                                   tuple(lengths), 0)
    whole = _whole_axes(axes, dims, hints, dict(lengths), reduction)
    replicated, fresh = set(), 0
    terms, reduced = [], []
    for k, operand in enumerate(dims):
        names, red = [], []
        for ids in operand:
            if len(ids) == 1:
                name = f"f{ids[0]}"
                if ids[0] in whole:
                    replicated.add(name)
            else:  # a merged (or empty: size 1) dim: a factor of its own
                name = f"m{fresh}"
                fresh += 1
                replicated.add(name)
            names.append(name)
            red.append(name if len(ids) == 1 and k < len(shapes) and
                       axes[ids[0]][2] == "reduced" and
                       ids[0] not in whole else None)
        terms.append(names)
        reduced.append(tuple(red))
    text = [" ".join(names) for names in terms]
    rule = ", ".join(text[:-1]) + " -> " + text[-1]
    return (rule, tuple(reduced[:-1]), tuple(sorted(replicated)),
            tuple(tuple(names) for names in terms))


def _assign(shardings, factors, replicated):
    """{factor: mesh axes}: each factor sharded the way the first operand
    that shards it does, unless it must stay whole or one of those mesh
    axes already shards another factor (a mesh axis splits one axis)."""
    assign, used = {}, set()
    for sharding, names in zip(shardings, factors):
        spec = tuple(getattr(sharding, "spec", ()))
        for d, f in enumerate(names):
            if d >= len(spec) or spec[d] is None or f in replicated or \
                    f in assign:
                continue
            mesh_axes = spec[d] if isinstance(spec[d], tuple) else (spec[d],)
            if used.isdisjoint(mesh_axes):
                assign[f] = mesh_axes
                used.update(mesh_axes)
    return assign


def _named(mesh, names, assign):
    """The NamedSharding of an operand whose dims are these factors."""
    from jax.sharding import NamedSharding, PartitionSpec

    spec = [None if f not in assign else
            assign[f][0] if len(assign[f]) == 1 else assign[f]
            for f in names]
    return NamedSharding(mesh, PartitionSpec(*spec))


def _whole_axes(axes, dims, hints, lengths, reduction):
    """The axes no device may hold a part of (the module's docstring)."""
    whole = set()
    for hint, operand in zip(list(hints) + [None], dims):
        seen = set()
        for d, ids in enumerate(operand):
            if len(ids) != 1:
                whole.update(ids)
            for i in ids:
                if i in seen:
                    whole.add(i)  # a diagonal
                seen.add(i)
                if hint is not None and len(ids) == 1 and \
                        hint[d] != axes[i][1]:
                    whole.add(i)  # a size-1 dim broadcast
    for i, (name, _, role) in enumerate(axes):
        if name in lengths or role == "repeated" or (
                role == "reduced" and reduction not in _COMBINE):
            whole.add(i)
    return whole
