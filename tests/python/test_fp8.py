"""fp8 inputs in Python (docs/design.md, "fp8 dtypes"): ml_dtypes numpy
arrays and torch float8 tensors with scales=, every output dtype, compared
with a float64 reference computed on the fp8-rounded inputs times their
scales (f32 output 1e-5, bf16/f16 output 2e-2 of the reference's norm)."""
import numpy as np
import pytest

import einc

ml_dtypes = pytest.importorskip("ml_dtypes")

FP8 = ("float8_e4m3fn", "float8_e5m2")
OUT = {"float32": 1e-5, "bfloat16": 2e-2, "float16": 2e-2}
CASES = [
    ("i j, j k -> i k", ("ij", "jk"), "sum"),
    ("b i j, b j k -> b i k", ("bij", "bjk"), "sum"),
    ("i j, j k, k l -> i l", ("ij", "jk", "kl"), "sum"),
    ("i j -> i", ("ij",), "mean"),
    ("i j -> j", ("ij",), "max"),
]


def _inputs(rng, axes, kinds):
    sizes = {a: int(rng.integers(1, 33)) for a in "bijkl"}
    arrays = [(rng.standard_normal([sizes[a] for a in ax]) * 2.0 ** int(
        rng.integers(-3, 3))).astype(getattr(ml_dtypes, k))
        for ax, k in zip(axes, kinds)]
    scales = [float(rng.uniform(0.5, 1.5) * 2.0 ** int(rng.integers(-4, 4)))
              for _ in axes]
    return arrays, scales


def _reference(expr, arrays, scales, reduce):
    real = [a.astype(np.float64) * s for a, s in zip(arrays, scales)]
    return einc.einsum(expr, *real, reduce=reduce)  # f64: 1e-12 (tested)


def _rel_err(got, want):
    got = np.asarray(got, dtype=np.float64)
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300)


@pytest.mark.parametrize("out_dtype", sorted(OUT))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_numpy_fp8(rng, case, out_dtype):
    expr, axes, reduce = case
    for rep in range(3):
        kinds = [FP8[int(rng.integers(2))] for _ in axes]
        arrays, scales = _inputs(rng, axes, kinds)
        got = einc.einsum(expr, *arrays, scales=scales, out_dtype=out_dtype,
                          reduce=reduce)
        assert np.dtype(got.dtype).name == out_dtype
        want = _reference(expr, arrays, scales, reduce)
        assert _rel_err(got.astype(np.float64), want) <= OUT[out_dtype], (
            expr, kinds, out_dtype)


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dlpack", [True, False], ids=["dlpack", "uint8"])
@pytest.mark.parametrize("out_dtype", sorted(OUT))
def test_torch_fp8(rng, out_dtype, dlpack, monkeypatch):
    """torch float8 tensors through DLPack (codes 10 and 12), and through
    the uint8 view einc falls back to where torch's DLPack refuses fp8."""
    from einc import _arrays

    for k in FP8:
        monkeypatch.setitem(_arrays._TORCH_FP8_DLPACK, getattr(torch, k),
                            dlpack)
    for expr, axes, reduce in CASES:
        kinds = [FP8[int(rng.integers(2))] for _ in axes]
        arrays, scales = _inputs(rng, axes, kinds)
        tensors = [torch.from_numpy(a.astype(np.float32)).to(getattr(torch, k))
                   for a, k in zip(arrays, kinds)]
        # torch's rounding to fp8 is the same as ml_dtypes' in range
        for a, t in zip(arrays, tensors):
            assert np.array_equal(a.astype(np.float32), t.float().numpy())
        got = einc.einsum(expr, *tensors, reduce=reduce, out_dtype=out_dtype,
                          scales=[torch.tensor(s) for s in scales])
        assert isinstance(got, torch.Tensor)
        assert got.dtype == getattr(torch, out_dtype)
        want = _reference(expr, arrays, scales, reduce)
        assert _rel_err(got.double().numpy(), want) <= OUT[out_dtype], expr


def test_torch_strided_and_default_scales(rng):
    a = torch.randn(9, 5).to(torch.float8_e4m3fn)
    b = torch.randn(9, 4).to(torch.float8_e5m2)
    got = einc.einsum("k i, k j -> i j", a, b)  # no scales: all 1
    want = a.double().T @ b.double()
    assert got.dtype == torch.float32
    assert _rel_err(got.double().numpy(), want.numpy()) <= 1e-5
    got = einc.einsum("i k, k j -> i j", a.T, b, scales=(2.0, 0.25))
    assert _rel_err(got.double().numpy(), 0.5 * want.numpy()) <= 1e-5


@pytest.mark.parametrize("out_dtype", sorted(OUT))
def test_jax_fp8(rng, out_dtype):
    """JAX's float8 arrays (its DLPack carries them) give a JAX result."""
    jax = pytest.importorskip("jax")
    arrays, scales = _inputs(rng, ("ij", "jk"), FP8)
    got = einc.einsum("i j, j k -> i k", *[jax.numpy.asarray(a)
                                           for a in arrays],
                      scales=scales, out_dtype=out_dtype)
    assert isinstance(got, jax.Array) and got.dtype.name == out_dtype
    want = _reference("i j, j k -> i k", arrays, scales, "sum")
    assert _rel_err(np.asarray(got, np.float64), want) <= OUT[out_dtype]


def test_out_and_dtype_names(rng):
    a = rng.standard_normal((4, 6)).astype(ml_dtypes.float8_e4m3fn)
    out = np.empty(4, ml_dtypes.bfloat16)
    r = einc.einsum("i j -> i", a, scales=(0.5,), out=out)
    assert r is out
    want = a.astype(np.float64).sum(1) * 0.5
    assert _rel_err(out.astype(np.float64), want) <= 2e-2
    assert einc._arrays.dtype_code("float8_e4m3fn") == (10, 8)
    assert einc._arrays.dtype_code("float8_e5m2") == (12, 8)


@pytest.mark.parametrize("kwargs, match", [
    ({"out_dtype": "float8_e4m3fn"}, "float32, bfloat16 or float16"),
    ({"scales": (1.0,)}, "1 scales for 2 tensors"),
    ({"scales": (1.0, float("inf"))}, "finite"),
])
def test_errors(kwargs, match):
    a = np.ones((2, 3), ml_dtypes.float8_e4m3fn)
    b = np.ones((3, 2), ml_dtypes.float8_e5m2)
    with pytest.raises(einc.EincError, match=match):
        einc.einsum("i j, j k -> i k", a, b, **kwargs)


def test_mixed_and_misplaced_scales():
    a = np.ones((2, 3), ml_dtypes.float8_e4m3fn)
    f = np.ones((3, 2), np.float32)
    with pytest.raises(einc.EincError, match="another input is fp8"):
        einc.einsum("i j, j k -> i k", a, f)
    with pytest.raises(einc.EincError, match="scales apply to fp8"):
        einc.einsum("i j, j k -> i k", f.T.copy(), f, scales=(1, 1))


# ------------------------------------------------------------- the CLI

def _cli():
    from conftest import einc_cli

    cli = einc_cli()
    if cli is None:
        pytest.skip("no einc CLI built (EINC_CLI)")
    return cli


@pytest.mark.parametrize("backend", ["cpu", "emu"])
@pytest.mark.parametrize("out_dtype", ["f32", "bf16", "f16"])
def test_cli_eval_fp8(tmp_path, rng, backend, out_dtype):
    """`einc eval` on ml_dtypes' .npy files: float8_e5m2 saves as '<f1'
    (read as e5m2), float8_e4m3fn as '<V1' (needs --dtype)."""
    import subprocess

    arrays, scales = _inputs(rng, ("ij", "jk"), FP8)
    for name, a in zip("ab", arrays):
        np.save(tmp_path / f"{name}.npy", a)
    out = tmp_path / "c.npy"
    cmd = [_cli(), "eval", "i j, j k -> i k", str(tmp_path / "a.npy"),
           str(tmp_path / "b.npy"), "--dtype", "float8_e4m3fn,float8_e5m2",
           "--scale", ",".join(repr(s) for s in scales), "--out-dtype",
           out_dtype, "--backend", backend, "-o", str(out)]
    subprocess.run(cmd, check=True)
    got = np.load(out)
    if out_dtype == "bf16":
        got = got.view(ml_dtypes.bfloat16)
    want = _reference("i j, j k -> i k", arrays, scales, "sum")
    tol = 1e-5 if out_dtype == "f32" else 2e-2
    assert _rel_err(got.astype(np.float64), want) <= tol


@pytest.mark.parametrize("out_dtype", ["f32", "bf16"])
def test_cli_fp8_gemm_emu(tmp_path, rng, out_dtype):
    """A contraction big enough to be a GEMM (128^3) on the emulated device
    runs as the FP8 GEMM (cublasLtMatmul, counted by -v), B K-major so
    einc copies it into cuBLASLt's layout first; Python's einsum cannot
    reach the emulated device with host arrays, the CLI can."""
    import subprocess

    a = rng.standard_normal((128, 128)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((128, 128)).astype(ml_dtypes.float8_e5m2)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "c.npy"
    r = subprocess.run(
        [_cli(), "eval", "i k, k j -> i j", str(tmp_path / "a.npy"),
         str(tmp_path / "b.npy"), "--dtype", "float8_e4m3fn,float8_e5m2",
         "--scale", "0.5,3", "--out-dtype", out_dtype, "--backend", "emu",
         "-v", "-o", str(out)], capture_output=True, text=True, check=True)
    assert "FP8 GEMMs: 1 (cublasLtMatmul)" in r.stdout + r.stderr
    got = np.load(out)
    if out_dtype == "bf16":
        got = got.view(ml_dtypes.bfloat16)
    want = (a.astype(np.float64) * 0.5) @ (b.astype(np.float64) * 3)
    tol = 1e-5 if out_dtype == "f32" else 2e-2
    assert _rel_err(got.astype(np.float64), want) <= tol


def test_cli_fp8_errors(tmp_path):
    import subprocess

    np.save(tmp_path / "a.npy", np.ones((2, 3), ml_dtypes.float8_e4m3fn))
    np.save(tmp_path / "b.npy", np.ones((3, 2), ml_dtypes.float8_e5m2))
    base = [_cli(), "eval", "i j, j k -> i k", str(tmp_path / "a.npy"),
            str(tmp_path / "b.npy"), "--print"]
    for extra, match in [
            ([], "--dtype float8_e4m3fn"),
            (["--dtype", "float8_e4m3fn,float8_e5m2", "--scale", "1"],
             "1 scales for 2 inputs"),
            (["--dtype", "float8_e4m3fn,float8_e5m2", "--out-dtype",
              "float8_e5m2"], "f32, bf16 or f16"),
            (["--dtype", "float8_e4m3fn,float8_e5m2", "--scale", "1,x"],
             "not a number")]:
        r = subprocess.run(base + extra, capture_output=True, text=True)
        assert r.returncode == 2 and match in r.stderr, (extra, r.stderr)
    r = subprocess.run(base + ["--dtype", "float8_e4m3fn,float8_e5m2",
                               "--scale", "2,0.5"],
                       capture_output=True, text=True, check=True)
    assert "3." in r.stdout  # 3 x (1 x 2) x (1 x 0.5)
