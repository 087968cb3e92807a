"""einc under what JAX users do beyond jax.grad and jax.jit: vmap's
in_axes/out_axes, nested transforms, control flow (cond, switch,
fori_loop, while_loop, scan, map), checkpoint policies and remat,
custom_vjp/custom_jvp around einc, static and donated arguments, weak
types and mixed numpy/jnp inputs, eval_shape, ensure_compile_time_eval,
debug.print, pytrees, 0-d and empty arrays, every reduction and dtype
through jit and vmap, derivatives of every differentiable reduction and
dtype, jax.export round trips, and sharding (jit with NamedSharding,
in/out_shardings, shard_map, pmap) over 4 host devices in a subprocess.

Oracle: the same computation written with jnp (float64 under x64),
within the project's tolerances of the reference's norm (f64 1e-12, f32
1e-5, f16/bf16 2e-2). Seeded."""

import numpy as np
import pytest

from conftest import run_on_host_devices

import einc

jax = pytest.importorskip("jax")
jnp = jax.numpy
from jax import export  # noqa: E402
from jax.ad_checkpoint import checkpoint_name  # noqa: E402

from einc import _einc  # noqa: E402

pytestmark = pytest.mark.skipif(
    not _einc.xla_ffi_targets(),
    reason="einc built without XLA's FFI header")

TOL = {"float16": 2e-2, "bfloat16": 2e-2, "float32": 1e-5,
       "complex64": 1e-5, "float64": 1e-12, "complex128": 1e-12}
REDUCTIONS = ("sum", "mean", "max", "min", "prod", "any", "all")


def close(got, want, tol=1e-12):
    """Every leaf within tol of the reference's norm."""
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        g = np.asarray(jnp.asarray(g).astype(jnp.complex128))
        w = np.asarray(jnp.asarray(w).astype(jnp.complex128))
        scale = max(np.linalg.norm(w), 1.0)
        assert np.linalg.norm(g - w) <= tol * scale, (
            np.linalg.norm(g - w), scale)


def rng(seed):
    return np.random.default_rng(seed)


def mm(a, b):
    return einc.einsum("i j, j k -> i k", a, b)


def mm_ref(a, b):
    return jnp.einsum("ij,jk->ik", a, b)


def loss(f):
    return lambda *a: jnp.sum(jnp.sin(f(*a)))


def grads(f, args):
    return jax.grad(loss(f), tuple(range(len(args))))(*args)


# --- vmap --------------------------------------------------------------------

@pytest.mark.parametrize("in_axes,out_axes", [
    ((0, None), 0), ((-1, None), -1), ((None, -1), 1), ((0, 2), -2),
    ((1, 0), 2), ((None, 0), -3)])
def test_vmap_axes(in_axes, out_axes, x64):
    r = rng(1)
    shapes = [(4, 5), (5, 6)]
    args = [jnp.asarray(r.standard_normal(s)) if a is None else
            jnp.asarray(np.moveaxis(r.standard_normal((3,) + s), 0, a))
            for s, a in zip(shapes, in_axes)]
    for T in (lambda f: jax.vmap(f, in_axes, out_axes),
              lambda f: jax.jit(jax.vmap(f, in_axes, out_axes)),
              lambda f: jax.vmap(jax.grad(loss(f), (0, 1)), in_axes),
              lambda f: jax.grad(loss(jax.vmap(f, in_axes, out_axes)),
                                 (0, 1))):
        close(T(mm)(*args), T(mm_ref)(*args))


def test_nested_vmap_and_jacobians(x64):
    r = rng(2)
    c = jnp.asarray(r.standard_normal((2, 3, 4, 5)))
    a, b = jnp.asarray(r.standard_normal((3, 4, 5))), \
        jnp.asarray(r.standard_normal((5, 6)))
    b3 = jnp.asarray(r.standard_normal((5, 6, 3)))
    for T, args in (
            (lambda f: jax.vmap(jax.vmap(f, (0, None)), (1, None)), (c, b)),
            (lambda f: jax.vmap(jax.vmap(f, (None, 2)), (0, None)), (a, b3)),
            (lambda f: jax.vmap(jax.jacrev(f), (0, None)), (a, b)),
            (lambda f: jax.vmap(jax.jacfwd(f, 1), (0, None)), (a, b)),
            (lambda f: jax.jit(jax.vmap(jax.vmap(jax.grad(loss(f)),
                                                 (0, None)), (0, None))),
             (c, b))):
        close(T(mm)(*args), T(mm_ref)(*args))


# --- every reduction and dtype through jit and vmap --------------------------

def _values(dtype, shape, r, low=None):
    x = r.uniform(0.5, 1.5, shape) if low else r.standard_normal(shape)
    if dtype == "bool":
        return jnp.asarray(x > 0)
    if "int" in dtype:
        return jnp.asarray(np.round(x * 3).astype(dtype))
    if "complex" in dtype:
        x = x + 0.3j * r.standard_normal(shape)
    return jnp.asarray(x).astype(dtype)


def _allowed(red, dtype):
    """What the planner computes (src/planner/contract.c); the rest is
    refused (test_refused_at_trace_time)."""
    if "complex" in dtype:
        return red in ("sum", "mean", "prod")
    if dtype == "bool":
        return red not in ("sum", "mean", "prod")
    return not (red == "mean" and "int" in dtype)


@pytest.mark.parametrize("red", REDUCTIONS)
def test_reductions_through_jit_and_vmap(red, x64):
    """Values as jnp's (any/all: 0/1 in the operand's dtype, einc's
    convention, docs/design.md; sums of ints keep the dtype)."""
    r = rng(3)
    for dtype in ("int32", "int64", "bool", "float16", "bfloat16", "float32",
                  "float64", "complex64", "complex128"):
        if not _allowed(red, dtype):
            continue
        x = _values(dtype, (3, 4, 5), r)
        mine = lambda a: einc.reduce(a, "... i j -> ... j", red)  # noqa
        ref = lambda a: getattr(jnp, red)(a, axis=a.ndim - 2)  # noqa
        for T in (lambda f: f, jax.jit, jax.vmap,
                  lambda f: jax.jit(jax.vmap(f, -1, -1))):
            got, want = T(mine)(x), T(ref)(x)
            assert got.dtype == x.dtype
            close(got, want.astype(x.dtype), TOL.get(dtype, 0))


@pytest.mark.parametrize("red", ("sum", "mean", "max", "min", "prod"))
def test_reduction_derivatives(red, x64):
    r = rng(4)
    for dtype in TOL:
        if not _allowed(red, dtype):
            continue
        x = _values(dtype, (3, 4, 5), r, low=True)
        mine = lambda a: einc.reduce(a, "b i j -> b j", red)  # noqa
        ref = lambda a: getattr(jnp, red)(a, axis=1)  # noqa
        sq = lambda f: (lambda a: jnp.sum(jnp.abs(f(a)) ** 2))  # noqa
        transforms = [lambda f: jax.jit(jax.grad(sq(f))),
                      lambda f: lambda a: jax.jvp(f, (a,), (a * 0.5,))[1]]
        if dtype in ("float32", "float64"):  # (the rest: CI's time)
            transforms += [lambda f: jax.grad(sq(f)),
                           lambda f: lambda a: jax.vjp(f, a)[1](f(a))[0],
                           lambda f: lambda a: jax.linearize(f, a)[1](a)]
        if dtype == "float64":
            transforms.append(lambda f: lambda a: jax.jvp(
                jax.grad(sq(f)), (a,), (jnp.ones_like(a),))[1])
        for T in transforms:
            close(T(mine)(x), T(ref)(x), TOL[dtype])


def test_refused_at_trace_time():
    """The planner's refusals that the binder does not see raise einc's
    error while tracing, as eagerly (before: jit compiled the call and
    its run failed with XLA's INVALID_ARGUMENT)."""
    cases = [(jnp.ones((3, 4), bool), "sum", "numeric dtype"),
             (jnp.ones((3, 4), jnp.int32), "mean", "floating-point"),
             (jnp.ones((3, 4), jnp.complex64), "max", "no order"),
             (jnp.ones((0, 4)), "max", "empty axis")]
    for x, red, message in cases:
        f = jax.jit(lambda a: einc.reduce(a, "i j -> j", red))  # noqa
        with pytest.raises(einc.EincError, match=message):
            f.lower(x)
        with pytest.raises(einc.EincError, match=message):
            jax.vmap(lambda a: einc.reduce(a, "j -> ", red))(x.T)  # noqa


# --- control flow, checkpointing, custom rules -------------------------------

def _scan(f):
    def g(a, b):
        def body(c, x):
            y = f(c, b) + x
            return y, f(y, b)
        c, ys = jax.lax.scan(body, a, jnp.stack([a, a * 2, a * 3]))
        return c + ys.sum(0)
    return g


def _custom_vjp(f):
    @jax.custom_vjp
    def g(a, b):
        return f(a, b)

    def fwd(a, b):
        return f(a, b), (a, b)

    def bwd(res, ct):
        a, b = res
        return f(ct, b.T), f(a.T, ct)
    g.defvjp(fwd, bwd)
    return g


def _custom_jvp(f):
    @jax.custom_jvp
    def g(a, b):
        return f(a, b)

    @g.defjvp
    def _(primals, tangents):
        (a, b), (da, db) = primals, tangents
        return f(a, b), f(da, b) + f(a, db)
    return g


POLICIES = ("nothing_saveable", "everything_saveable", "dots_saveable",
            "dots_with_no_batch_dims_saveable")
BUILDS = {
    "cond": lambda f: lambda a, b: jax.lax.cond(
        a[0, 0] > 0, lambda: f(a, b), lambda: -f(a * 2, b)),
    "switch": lambda f: lambda a, b: jax.lax.switch(
        1, [lambda: f(a, b), lambda: f(a, b) * 3, lambda: a[:, :5]]),
    "fori_loop": lambda f: lambda a, b: jax.lax.fori_loop(
        0, 3, lambda i, c: f(c, b), a),
    "scan": _scan,
    "scan_unrolled": lambda f: lambda a, b: jax.lax.scan(
        lambda c, x: (f(c, b) * x, c), a, jnp.arange(1., 4.),
        unroll=2)[0],
    "map": lambda f: lambda a, b: jax.lax.map(lambda x: f(x, b),
                                              jnp.stack([a, -a])),
    "remat": lambda f: jax.remat(lambda a, b: jnp.sin(f(a, b))),
    "checkpoint_name": lambda f: jax.checkpoint(
        lambda a, b: jnp.sin(checkpoint_name(f(a, b), "y")),
        policy=jax.checkpoint_policies.save_only_these_names("y")),
    "custom_vjp": _custom_vjp,
    "custom_jvp": _custom_jvp,
    **{f"checkpoint_{p}": (lambda p: lambda f: jax.checkpoint(
        lambda a, b: jnp.sin(f(a, b)) * f(a, b),
        policy=getattr(jax.checkpoint_policies, p)))(p) for p in POLICIES},
}


@pytest.mark.parametrize("name", BUILDS)
def test_control_flow_and_checkpoints(name, x64):
    """Values, grad and jit of grad; the loops' carries are square."""
    r = rng(5)
    a = jnp.asarray(r.standard_normal((5, 5)))
    b = jnp.asarray(r.standard_normal((5, 5))) * 0.3
    build = BUILDS[name]
    close(jax.jit(build(mm))(a, b), build(mm_ref)(a, b))
    close(grads(build(mm), (a, b)), grads(build(mm_ref), (a, b)))
    close(jax.jit(lambda *x: grads(build(mm), x))(a, b),
          grads(build(mm_ref), (a, b)))


def test_while_loop(x64):
    r = rng(6)
    a = jnp.asarray(r.standard_normal((4, 5)))
    s = jnp.asarray(r.standard_normal((5, 5))) * 0.3

    def build(f):
        return lambda a, b: jax.lax.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + 1, f(c[1], b)), (0, a))[1]
    close(jax.jit(build(mm))(a, s), build(mm_ref)(a, s))
    close(jax.jvp(build(mm), (a, s), (a, s))[1],
          jax.jvp(build(mm_ref), (a, s), (a, s))[1])


# --- arguments: static, donated, weak types, numpy, lists, pytrees -----------

def test_static_and_donated_arguments(x64):
    r = rng(7)
    a, b = jnp.asarray(r.standard_normal((4, 5))), \
        jnp.asarray(r.standard_normal((5, 3)))
    f = jax.jit(lambda e, x, y: einc.einsum(e, x, y), static_argnums=0)
    close(f("i j, j k -> i k", a, b), mm_ref(a, b))
    close(f("i j, j k -> k i", a, b), mm_ref(a, b).T)
    g = jax.jit(lambda x, red: einc.reduce(x, "i j -> i", red),
                static_argnames="red")
    for red in ("max", "sum"):
        close(g(a, red=red), getattr(jnp, red)(a, 1))
    close(jax.jit(mm, donate_argnums=(0, 1))(a + 0, b + 0), mm_ref(a, b))
    h = jax.jit(lambda x: einc.rearrange(x, "i j -> j i") * 2,
                donate_argnums=0)
    close(h(a + 0), a.T * 2)


def test_weak_types_numpy_and_lists():
    """Promoted as jnp.einsum promotes; a nested list as an operand under
    jit (before: TypeError 'Cannot determine dtype of [[...')."""
    r = rng(8)
    a32 = jnp.asarray(r.standard_normal((4, 5)), jnp.float32)
    b = r.standard_normal((5, 3)).astype(np.float32)
    scaled = jax.jit(lambda x: einc.einsum("i j, -> i j", x, 2.0))(a32)
    assert scaled.dtype == jnp.float32
    close(scaled, a32 * 2, 1e-6)
    ints = jnp.arange(20, dtype=jnp.int32).reshape(4, 5)
    mixed = jax.jit(mm)(ints, b)
    assert mixed.dtype == jnp.einsum("ij,jk->ik", ints, b).dtype
    close(mixed, mm_ref(ints.astype(jnp.float32), b), 1e-5)
    close(jax.jit(lambda x: mm(x, b))(a32), mm_ref(a32, b), 1e-5)
    close(jax.grad(lambda x: jnp.sum(mm(x, b)))(a32),
          jax.grad(lambda x: jnp.sum(mm_ref(x, b)))(a32), 1e-5)
    close(jax.jit(lambda x: mm(x, b.tolist()))(a32), mm_ref(a32, b), 1e-5)
    close(jax.jit(lambda x: mm(x, [list(v) for v in x.T]))(a32),
          mm_ref(a32, a32.T), 1e-5)


def test_pytrees_zero_d_and_empty(x64):
    r = rng(9)
    a, b = jnp.asarray(r.standard_normal((4, 5))), \
        jnp.asarray(r.standard_normal((5, 3)))
    tree = jax.jit(lambda d: {"o": mm(d["a"], d["b"]), "t": (
        einc.rearrange(d["a"], "i j -> j i"),)})({"a": a, "b": b})
    close(tree, {"o": mm_ref(a, b), "t": (a.T,)})
    close(jax.jit(lambda xs: mm(*xs))([a, b]), mm_ref(a, b))
    s = jnp.asarray(3.0)
    close(jax.jit(lambda x: einc.einsum(", -> ", x, x))(s), s * s)
    close(jax.grad(lambda x: einc.einsum(", -> ", x, x))(s), 2 * s)
    close(jax.vmap(lambda x: einc.einsum(", -> ", x, x))(a[0]), a[0] ** 2)
    empty = jnp.zeros((0, 5))
    for red in ("sum", "prod", "any", "all"):
        close(jax.jit(lambda x: einc.reduce(x, "i j -> j", red))(empty),
              getattr(jnp, red)(empty, axis=0).astype(empty.dtype))
    assert np.isnan(jax.jit(lambda x: einc.reduce(x, "i j -> j", "mean"))(
        empty)).all()
    close(jax.jit(jax.grad(lambda x, y: jnp.sum(mm(x, y)), (0, 1)))(
        jnp.zeros((4, 0)), jnp.zeros((0, 3))),
        (jnp.zeros((4, 0)), jnp.zeros((0, 3))))
    close(jax.vmap(mm, (0, None))(jnp.zeros((0, 4, 5)), b),
          jnp.zeros((0, 4, 3)))


def test_eval_shape_compile_time_eval_and_debug_print(x64, capfd):
    f32 = jax.ShapeDtypeStruct
    out = jax.eval_shape(mm, f32((4, 5), jnp.float32),
                         f32((5, 3), jnp.float32))
    assert (out.shape, out.dtype) == ((4, 3), jnp.float32)
    g = jax.eval_shape(jax.grad(lambda x, y: jnp.sum(mm(x, y))),
                       f32((4, 5), jnp.float32), f32((5, 3), jnp.float32))
    assert g.shape == (4, 5)
    r = rng(10)
    a, b = r.standard_normal((4, 5)), r.standard_normal((5, 3))
    with jax.ensure_compile_time_eval():
        close(mm(jnp.asarray(a), jnp.asarray(b)), a @ b)

    @jax.jit
    def h(x):
        with jax.ensure_compile_time_eval():
            c = mm(jnp.asarray(a), b)
        y = mm(x, b)
        jax.debug.print("einc y00={v:.6f}", v=y[0, 0])
        return y + c
    close(h(jnp.asarray(a)), 2 * (a @ b))
    jax.effects_barrier()
    assert f"einc y00={(a @ b)[0, 0]:.6f}" in capfd.readouterr().out


# --- jax.export --------------------------------------------------------------

def _round_trip(exported):
    try:
        import flatbuffers  # noqa: F401
    except ImportError:
        return exported
    return export.deserialize(exported.serialize(vjp_order=1))


def test_export_round_trips(x64):
    r = rng(11)
    a, b = jnp.asarray(r.standard_normal((4, 5))), \
        jnp.asarray(r.standard_normal((5, 3)))
    sds = jax.ShapeDtypeStruct
    e = _round_trip(export.export(jax.jit(mm))(a, b))
    close(e.call(a, b), mm_ref(a, b))
    with pytest.raises(ValueError, match="Shape mismatch"):
        e.call(jnp.ones((4, 6)), jnp.ones((6, 3)))
    n, k = export.symbolic_shape("n, k")
    e = _round_trip(export.export(jax.jit(mm))(
        sds((n, k), a.dtype), sds((k, 3), a.dtype)))
    a2, b2 = jnp.asarray(r.standard_normal((7, 2))), \
        jnp.asarray(r.standard_normal((2, 3)))
    close(e.call(a2, b2), mm_ref(a2, b2))
    close(grads(e.call, (a2, b2)), grads(mm_ref, (a2, b2)))
    bsz, = export.symbolic_shape("b")
    e = _round_trip(export.export(jax.jit(jax.vmap(mm, (0, None))))(
        sds((bsz, 4, 5), a.dtype), b))
    x = jnp.asarray(r.standard_normal((3, 4, 5)))
    close(e.call(x, b), jax.vmap(mm_ref, (0, None))(x, b))
    m, = export.symbolic_shape("m")
    for red in ("sum", "mean", "max", "prod"):
        f = lambda v: einc.reduce(v, "(a two) c -> a c", red, two=2)  # noqa
        e = _round_trip(export.export(jax.jit(f))(sds((2 * m, 3), a.dtype)))
        v = jnp.asarray(r.uniform(0.5, 1.5, (10, 3)))
        ref = lambda v: getattr(jnp, red)(v.reshape(-1, 2, 3), 1)  # noqa
        close(e.call(v), ref(v))
        close(grads(e.call, (v,)), grads(ref, (v,)))


# --- sharding over 4 host devices (a subprocess: XLA_FLAGS) ------------------

_SHARDED = r'''
import json
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax import shard_map
import einc
jax.config.update("jax_enable_x64", True)
mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("x", "y"))
line = Mesh(np.array(jax.devices()), ("d",))
r = np.random.default_rng(12)
A, B = r.standard_normal((8, 8)), r.standard_normal((8, 4))
X = r.standard_normal((4, 8, 8))
mm = lambda a, b: einc.einsum("i j, j k -> i k", a, b)
mm_ref = lambda a, b: jnp.einsum("ij,jk->ik", a, b)
put = lambda x, *s: jax.device_put(x, NamedSharding(mesh, P(*s)))
loss = lambda f: lambda a, b: jnp.sum(jnp.sin(f(a, b)))
out = {}


def rel(got, want):
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    return max(float(np.linalg.norm(np.asarray(g) - np.asarray(w)) /
                     max(np.linalg.norm(np.asarray(w)), 1))
               for g, w in zip(got, want))


def case(name, run, want):
    try:
        out[name] = rel(run(), want)
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"[:300]


for sa, sb in [(("x", None), (None, "y")), (("x", "y"), ("y", None)),
               ((None, "x"), ("x", "y")), (("y", "x"), (None, None))]:
    case(f"jit {sa} {sb}", lambda: jax.jit(mm)(put(A, *sa), put(B, *sb)),
         A @ B)
    case(f"jit grad {sa} {sb}", lambda: jax.jit(jax.grad(loss(mm), (0, 1)))(
        put(A, *sa), put(B, *sb)), jax.grad(loss(mm_ref), (0, 1))(A, B))
for so in [("y", "x"), (None, "x"), ("x", "y")]:
    case(f"out_shardings {so}", lambda: jax.jit(
        mm, out_shardings=NamedSharding(mesh, P(*so)))(put(A, "x", None), B),
        A @ B)
case("in_shardings", lambda: jax.jit(mm, in_shardings=(
    NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P("y", None))))(
    A, B), A @ B)
for red in ("sum", "mean", "max", "min", "prod"):
    case(f"reduce {red}", lambda: jax.jit(
        lambda a: einc.reduce(a, "i j -> j", red))(put(A, "x", "y")),
        getattr(np, red)(A, 0))
    case(f"reduce merged {red}", lambda: jax.jit(
        lambda a: einc.reduce(a, "(i two) j -> i j", red, two=2))(
        put(A, "x", "y")), getattr(np, red)(A.reshape(4, 2, 8), 1))
case("vmap sharded", lambda: jax.jit(jax.vmap(mm, (0, None)))(
    put(X, "x", "y"), B), X @ B)
sm = shard_map(lambda a, b: jax.lax.psum(mm(a, b), "d"), mesh=line,
               in_specs=(P(None, "d"), P("d", None)), out_specs=P())
case("shard_map", lambda: jax.jit(sm)(A, B), A @ B)
case("shard_map grad", lambda: jax.grad(loss(sm), (0, 1))(A, B),
     jax.grad(loss(mm_ref), (0, 1))(A, B))
case("pmap", lambda: jax.pmap(mm, in_axes=(0, None))(X, B), X @ B)
case("pmap grad", lambda: jax.pmap(jax.grad(loss(mm)), in_axes=(0, None))(
    X, B), jax.vmap(jax.grad(loss(mm_ref)), (0, None))(X, B))
print("RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    return run_on_host_devices(tmp_path_factory, _SHARDED, 4,
                               JAX_PLATFORMS="cpu")


def test_sharded(sharded):
    """jit with NamedSharding inputs and in/out_shardings, reductions over
    sharded and merged axes, shard_map, pmap. Before: out_shardings that
    shard an axis the inputs do not (or on another mesh axis) gave wrong
    values (0.9 relative), a 2-D mesh's ('y', 'x') input failed in the
    partitioner, a merged dim's rule failed Shardy's verifier ('special
    factors must be sorted') and a prod over a sharded axis raised
    KeyError."""
    bad = {k: v for k, v in sharded.items()
           if isinstance(v, str) or v > 1e-12}
    assert not bad, bad
    assert len(sharded) == 27
