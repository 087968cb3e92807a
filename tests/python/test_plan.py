"""einc.plan and einc.compile: the report is `einc plan`'s (text and JSON),
the path is opt_einsum's linear form (opt_einsum, given it, counts the same
FLOPs), and a compiled expression gives einsum's results for any layout."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import einc
from conftest import einc_cli

PLANS = [
    ("i j, j k, k l -> i l", [(1000, 10), (10, 1000), (1000, 10)], "f32"),
    ("b h i d, b h j d -> b h i j", [(8, 16, 2048, 128)] * 2, "bf16"),
    ("b s d -> b s", [(32, 4096, 1024)], "f16"),
    ("b i, i j k, b j -> b k", [(4096, 256), (256, 256, 256), (4096, 256)],
     "f64"),
]


# Enough processes to measure the "cpu" model (RATE_RUNS in
# src/api/device_models.c); each later one reads the cached entry.
MODEL_RUNS = 3

PYTHON_REPORT = """import json, sys, einc
expr, shapes, dtype = json.loads(sys.argv[1])
p = einc.plan(expr, *map(tuple, shapes), dtype=dtype, peak=1e11,
              bandwidth=2e10)
print(json.dumps([str(p), p.to_dict()]))
"""


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    """A cache directory whose "cpu" model is measured (MODEL_RUNS einc
    processes) and from then on read, the same by every process; None
    without a CLI."""
    cli = einc_cli()
    if cli is None:
        return None
    d = tmp_path_factory.mktemp("model-cache")
    env = dict(os.environ, EINC_CACHE_DIR=str(d))
    for _ in range(MODEL_RUNS):
        subprocess.run([cli, "plan", "i j, j k -> i k", "8x8", "8x8",
                        "--device", "cpu"], env=env, check=True,
                       capture_output=True, timeout=600)
    return env


@pytest.mark.parametrize("expr,shapes,dtype", PLANS)
def test_report_equals_the_clis(expr, shapes, dtype, model_cache):
    cli = einc_cli()
    if cli is None:
        pytest.skip("no einc CLI built in this checkout")
    args = [cli, "plan", expr] + ["x".join(map(str, s)) for s in shapes]
    args += ["--dtype", dtype]
    # The report shows the whole "cpu" model (every rate and its source),
    # not only the rates --peak and --bandwidth give, and a process keeps
    # the model it resolved first. So Python plans in a fresh process on
    # the CLI's cache, where both read one entry: this process's model was
    # measured, or read before some process raised the entry (an `einc
    # bench`, issue 35), and the reports differed (issue 40).
    rates = ["--peak", "1e11", "--bandwidth", "2e10"]
    py = subprocess.run([sys.executable, "-c", PYTHON_REPORT,
                         json.dumps([expr, shapes, dtype])], env=model_cache,
                        capture_output=True, text=True, check=True)
    p_text, p_dict = json.loads(py.stdout)
    assert p_dict["device_model"]["source"] == "cache"
    args += rates
    text = subprocess.run(args, capture_output=True, text=True, check=True,
                          env=model_cache)
    assert p_text == text.stdout
    js = subprocess.run(args + ["--json"], capture_output=True, text=True,
                        check=True, env=model_cache)
    assert p_dict == json.loads(js.stdout)
    # a GPU device plans for the cuda backend, in the CLI and in Python
    args = args[:-len(rates)]
    h200 = subprocess.run(args + ["--device", "h200"], capture_output=True,
                          text=True, check=True)
    g = einc.plan(expr, *shapes, dtype=dtype, device="h200")
    assert str(g) == h200.stdout and g.to_dict()["backend"] == "cuda"
    pk = subprocess.run(args + ["--device", "h200", "--peak", "5e14",
                                "--bandwidth", "1e12", "--json"],
                        capture_output=True, text=True, check=True)
    g = einc.plan(expr, *shapes, dtype=dtype, device="h200", peak=5e14,
                  bandwidth=1e12)
    assert g.to_dict() == json.loads(pk.stdout)


def test_plan_numbers():
    p = einc.plan("i j, j k, k l -> i l", (1000, 10), (10, 1000), (1000, 10))
    assert p.flops == 4e5 and p.naive_flops == 3e8
    assert p.ssa_path == [(1, 2), (0, 3)]
    assert p.path == [(1, 2), (0, 1)]
    assert p.output_shape == (1000, 10)
    assert [s["kind"] for s in p.steps] == ["gemm", "gemm"]
    assert "plan FLOPs   4e+05" in str(p)
    a = np.ones((3, 4), np.float32)
    assert einc.plan("i j -> j", a).to_dict()["dtype"] == "f32"


def random_chain(r):
    """A network where every summed letter is in two operands or more, so
    that einc has nothing to reduce before contracting (it would, and
    count fewer FLOPs than opt_einsum does on the same path)."""
    letters = "abcdefgh"
    while True:
        n = int(r.integers(2, 6))
        terms = ["".join(r.choice(list(letters), size=int(r.integers(1, 4)),
                                  replace=False)) for _ in range(n)]
        used = sorted(set("".join(terms)))
        out = "".join(c for c in used if r.random() < 0.3)
        if all(out.count(c) or sum(c in t for t in terms) >= 2 for c in used):
            break
    sizes = {c: int(r.integers(2, 9)) for c in letters}
    shapes = [tuple(sizes[c] for c in t) for t in terms]
    return ",".join(terms) + "->" + out, shapes


@pytest.mark.parametrize("expr,shapes", [random_chain(np.random.default_rng(s))
                                         for s in range(60)])
def test_path_in_opt_einsums_form(expr, shapes):
    oe = pytest.importorskip("opt_einsum")
    p = einc.plan(expr, *shapes)
    _, info = oe.contract_path(expr, *shapes, shapes=True)
    lhs, out = expr.split("->")
    if set(lhs) - set(out) - {","}:  # (without a sum opt_einsum counts 2
        # FLOPs per product of shared axes, einc 1: see the report)
        assert p.naive_flops == pytest.approx(float(info.naive_cost))
    # replaying the linear path gives einc's own pairs back
    alive, ssa = list(range(len(shapes))), []
    for step in p.path:
        ssa.append(tuple(sorted(alive[i] for i in step)))
        alive = [a for i, a in enumerate(alive) if i not in step]
        alive.append(len(shapes) + len(ssa) - 1)
    assert ssa == [tuple(sorted(x)) for x in p.ssa_path]
    # opt_einsum takes it, and where every step sums an axis (opt_einsum
    # counts a product without a sum as 2 FLOPs an element, einc as 1)
    # counts einc's FLOPs
    path, mine = oe.contract_path(expr, *shapes, shapes=True,
                                  optimize=p.path)
    assert len(path) == len(shapes) - 1
    if all(step[1] for step in mine.contraction_list):
        assert p.flops == pytest.approx(float(mine.opt_cost))


def test_compile_reuses_one_plan():
    r = np.random.default_rng(3)
    f = einc.compile("b i j, b j k -> b i k", (4, 6, 5), (4, 5, 3))
    for _ in range(3):
        a = r.standard_normal((4, 6, 5)).astype(np.float32)
        b = r.standard_normal((4, 5, 3)).astype(np.float32)
        np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-5)
    out = np.empty((4, 6, 3), np.float32)
    assert f(a, b, out=out) is out
    # other layouts and dtypes still work (ein_eval's cache)
    a64 = r.standard_normal((4, 5, 6)).transpose(0, 2, 1)
    b64 = r.standard_normal((4, 5, 3))
    np.testing.assert_allclose(f(a64, b64), a64 @ b64, rtol=1e-12)
    with pytest.raises(einc.EincError):
        f(np.ones((4, 6, 5), np.float32), np.ones((4, 6, 3), np.float32))



def test_compiled_plan_takes_other_sizes():
    """A plan compiled for batch 4 called with batch 8 (einops' functions
    and opt_einsum's contract_expression take new sizes): the result has
    the shape the expression gives those inputs, numpy and torch, and a
    true size mismatch still names its axis and both sizes."""
    r = np.random.default_rng(5)
    f = einc.compile("b i j, b j k -> b i k", (4, 64, 32), (4, 32, 16))
    for batch in (8, 4, 2):
        a = r.standard_normal((batch, 64, 32)).astype(np.float32)
        b = r.standard_normal((batch, 32, 16)).astype(np.float32)
        got = f(a, b)
        assert got.shape == (batch, 64, 16)
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
    g = einc.compile("b s d -> b d", (4, 8, 3), reduce="max")
    x = r.standard_normal((6, 8, 3)).astype(np.float32)
    np.testing.assert_array_equal(g(x), x.max(axis=1))
    with pytest.raises(einc.EincError) as e:
        f(np.ones((8, 64, 32), np.float32), np.ones((4, 32, 16), np.float32))
    assert "axis 'b' is 4 in operand 2 but 8 in operand 1" in str(e.value)
    assert "output tensor" not in str(e.value)
    torch = pytest.importorskip("torch")
    ta, tb = torch.randn(8, 64, 32), torch.randn(8, 32, 16)
    got = f(ta, tb)
    assert isinstance(got, torch.Tensor) and got.shape == (8, 64, 16)
    torch.testing.assert_close(got, ta @ tb, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(f(ta[:4], tb[:4]), ta[:4] @ tb[:4],
                               rtol=1e-4, atol=1e-4)


def test_compiled_view_plan_returns_new_tensors():
    """A compiled plan returns a new array for numpy and torch alike, also
    where einc.einsum would return a view (the torch fast path is not
    taken for those)."""
    torch = pytest.importorskip("torch")
    f = einc.compile("b h s d -> b h (s d)", (2, 3, 4, 5))
    for x in (np.arange(120.0, dtype=np.float32).reshape(2, 3, 4, 5),
              torch.arange(120.0).reshape(2, 3, 4, 5)):
        y = f(x)
        y[0, 0, 0] = -1
        assert x[0, 0, 0, 0] == 0 and y.shape == (2, 3, 20)


def test_compile_like_contract_expression():
    oe = pytest.importorskip("opt_einsum")
    shapes = [(10, 20), (20, 30), (30, 5)]
    ours = einc.compile("ij,jk,kl->il", *shapes, dtype=np.float64)
    theirs = oe.contract_expression("ij,jk,kl->il", *shapes)
    r = np.random.default_rng(4)
    ts = [r.standard_normal(s) for s in shapes]
    np.testing.assert_allclose(ours(*ts), theirs(*ts), rtol=1e-12)


def test_check_and_memo():
    assert einc.check("b (h d) -> b h d", (2, 12), h=3) == (2, 3, 4)
    assert einc.check("ij,jk", (2, 3), (3, 4)) == (2, 4)
    m = einc.ShapeMemo()
    x = np.zeros((2, 7, 24))
    assert m.check("batch seq (heads d)", x, heads=8) is x
    m.check("batch heads seq d", (2, 8, 7, 3))
    assert (m["batch"], m["d"], m.get("nope")) == (2, 3, None)
    with pytest.raises(einc.EincError) as info:
        m.check("batch heads seq d", (2, 8, 7, 4), "q")
    assert "d" in str(info.value) and "^" in str(info.value)
    m.clear()
    m.check("batch heads seq d", (2, 8, 7, 4))


def test_first_report_with_an_empty_cache(tmp_path):
    """A process's first report measures the CPU's rates; the JSON that
    Plan.path, .steps and .to_dict() read is whole (it once ended in a NUL
    and stale bytes: JSONDecodeError "Extra data")."""
    code = ("import einc\n"
            "p = einc.plan('i j, j k -> i k', (8, 8), (8, 8), device='cpu')\n"
            "print(p.to_dict()['device_model']['source'], len(p.steps))\n"
            "print(p.path)\n")
    env = dict(os.environ, EINC_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["measured", "1"], out.stdout


def test_plan_units_and_run_units():
    # issue 29: a sliced plan's units run into partials that sum to the
    # result (f64 against numpy's float64 einsum, 1e-12); bad ranges raise
    rng = np.random.default_rng(29)
    a, b = rng.uniform(-1, 1, (6, 8)), rng.uniform(-1, 1, (8, 5))
    p = einc.Plan("i j, j k -> i k", [a.shape, b.shape], dtype="float64",
                  slice="i:3,j:4")
    assert p.units == 12
    parts = [p.run_units(a, b, out=np.full((6, 5), np.nan), first=f, count=c)
             for f, c in [(0, 5), (5, 1), (6, 6)]]
    want = a @ b
    assert np.abs(sum(parts) - want).max() <= 1e-12 * np.abs(want).max()
    for first, count in [(-1, 1), (0, 0), (11, 2)]:
        with pytest.raises(einc.EincError, match="a plan of 12 units"):
            p.run_units(a, b, out=np.empty((6, 5)), first=first, count=count)
    assert einc.Plan("i j, j k, k l -> i l", [(4, 20), (20, 20), (20, 4)],
                     memory_limit=200).units > 1
    with pytest.raises(einc.EincError, match="slice_axes"):
        einc.Plan("i j -> i", [(3, 4)], slice="j:5")


def test_plan_devices():
    """issue 29: Plan(devices=N) passes ein_options.devices, which spreads
    a sliced plan's units over N devices of a CUDA (or emulated) backend
    (Python has no emulated-device arrays: the spreading itself is
    tests/test_units.c's and the CLI's, and scripts/gpu_check.sh's on a
    GPU). On host arrays: 1 device runs as without, 2 is the CPU backend's
    clear error, a negative count is refused when the plan is made, and a
    plan with devices never takes einsum's unsliced fast path."""
    rng = np.random.default_rng(4)
    a, b = rng.uniform(-1, 1, (8, 6)), rng.uniform(-1, 1, (6, 5))
    shapes = [a.shape, b.shape]
    one = einc.Plan("i j, j k -> i k", shapes, dtype="float64",
                    slice="i:4,j:2", devices=1)
    want = a @ b
    assert np.abs(one(a, b) - want).max() <= 1e-12 * np.abs(want).max()
    two = einc.Plan("i j, j k -> i k", shapes, dtype="float64",
                    slice="i:4", devices=2)
    with pytest.raises(einc.EincError, match="CPU backend is one device"):
        two(a, b)
    with pytest.raises(einc.EincError, match="devices=-1"):
        einc.Plan("i j, j k -> i k", shapes, dtype="float64", devices=-1)
