"""JAX with no build flags, jax.export and symbolic shapes (issue 38).

- einc's XLA FFI handlers are always built, against einc's own
  declaration of XLA's stable FFI C ABI (python/src/xla_ffi_abi.h), which
  is checked here field by field against the header jaxlib ships.
- The target is registered on `import einc` (jax imported before or
  after), so a jax.export program deserialized in a new process runs.
- The custom call's target is versioned (einc_eval_v1) and declared
  stable to jax.export: no disabled_checks.
- Symbolic dimensions: forward, grad and vmap exported with a symbolic
  batch run at other batch sizes, against numpy / JAX's own operations in
  float64 (1e-12)."""
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import einc

jax = pytest.importorskip("jax")
jnp = jax.numpy
from jax import export  # noqa: E402

from einc import _einc  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]




def close(got, want, tol=1e-12):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(np.linalg.norm(want), 1.0)
    assert np.linalg.norm(got - want) <= tol * scale


def test_handlers_always_built():
    assert set(_einc.xla_ffi_targets()) == {"cpu", "CUDA"}


def test_abi_declaration_matches_jaxlib_header():
    """python/src/xla_ffi_abi.h against jaxlib's xla/ffi/api/c_api.h:
    tests/python/xla_ffi_abi_check.c static-asserts every offset, size and
    enum value einc relies on."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    include = pathlib.Path(jax.ffi.include_dir())
    if cc is None or not (include / "xla/ffi/api/c_api.h").exists():
        pytest.skip("no C compiler or no jaxlib FFI header")
    run = subprocess.run(
        [cc, "-std=c17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
         "-isystem", str(include), "-I", str(ROOT / "python/src"),
         str(ROOT / "tests/python/xla_ffi_abi_check.c")],
        capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def _matmul(a, w):
    return einc.einsum("b i j, j k -> b i k", a, w)


def test_export_needs_no_disabled_checks():
    """The versioned target passes jax.export's custom-call check."""
    spec = (jax.ShapeDtypeStruct((2, 3, 4), jnp.float32),
            jax.ShapeDtypeStruct((4, 5), jnp.float32))
    exp = export.export(jax.jit(_matmul))(*spec)
    assert "einc_eval_v1" in exp.mlir_module()
    a = np.random.default_rng(0).random((2, 3, 4), np.float32)
    w = np.random.default_rng(1).random((4, 5), np.float32)
    close(exp.call(a, w), np.einsum("bij,jk->bik", a, w), 1e-5)


_NEW_PROCESS = """
import sys
import numpy as np
{imports}
from jax import export
jax.config.update("jax_enable_x64", True)
exp = export.deserialize(bytearray(open(sys.argv[1], "rb").read()))
r = np.random.default_rng(5)
a, w = r.standard_normal((6, 3, 4)), r.standard_normal((4, 5))
got = np.asarray(exp.call(a, w)[0])
want = np.einsum("bij,jk->bik", a, w)
err = np.linalg.norm(got - want) / np.linalg.norm(want)
print("relerr", err)
sys.exit(0 if err <= 1e-12 else 3)
"""


@pytest.mark.parametrize("imports", ["import einc\nimport jax",
                                     "import jax\nimport einc"],
                         ids=["einc_first", "jax_first"])
def test_deserialized_program_runs_in_a_new_process(imports, tmp_path, x64):
    """Serialized here (symbolic batch), run in a fresh interpreter that
    only imports einc: its target is registered on import."""
    pytest.importorskip("flatbuffers")
    b, = export.symbolic_shape("b")
    exp = export.export(jax.jit(lambda a, w: (_matmul(a, w),)))(
        jax.ShapeDtypeStruct((b, 3, 4), jnp.float64),
        jax.ShapeDtypeStruct((4, 5), jnp.float64))
    blob = tmp_path / "einc.jax_export"
    blob.write_bytes(exp.serialize())
    script = tmp_path / "run.py"
    script.write_text(_NEW_PROCESS.format(imports=imports))
    run = subprocess.run([sys.executable, str(script), str(blob)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_new_process_without_einc_fails_clearly(tmp_path, x64):
    """Without `import einc` XLA has no handler: its own error names the
    target (einc cannot register from a process that never imports it)."""
    pytest.importorskip("flatbuffers")
    exp = export.export(jax.jit(lambda a, w: (_matmul(a, w),)))(
        jax.ShapeDtypeStruct((6, 3, 4), jnp.float64),
        jax.ShapeDtypeStruct((4, 5), jnp.float64))
    blob = tmp_path / "einc.jax_export"
    blob.write_bytes(exp.serialize())
    script = tmp_path / "run.py"
    script.write_text(_NEW_PROCESS.format(imports="import jax"))
    run = subprocess.run([sys.executable, str(script), str(blob)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "einc_eval_v1" in run.stderr


B = "b"

SYMBOLIC = [
    ("einsum", lambda x: einc.einsum("b i j, b i k -> b j k", x, x),
     lambda x: np.einsum("bij,bik->bjk", x, x)),
    ("numpy_dialect", lambda x: einc.einsum("bij->bj", x),
     lambda x: x.sum(1)),
    ("rearrange_merge", lambda x: einc.rearrange(x, "b i j -> (b i) j"),
     lambda x: x.reshape(-1, x.shape[2])),
    ("rearrange_split",
     lambda x: einc.rearrange(x, "b i (j k) -> b k i j", k=2),
     lambda x: x.reshape(x.shape[0], x.shape[1], -1, 2).transpose(0, 3, 1,
                                                                   2)),
    ("reduce_mean", lambda x: einc.reduce(x, "b i j -> j", "mean"),
     lambda x: x.mean((0, 1))),
    ("reduce_max", lambda x: einc.reduce(x, "b i j -> b", "max"),
     lambda x: x.max((1, 2))),
    ("repeat", lambda x: einc.repeat(x, "b i j -> b i j r", r=2),
     lambda x: np.repeat(x[..., None], 2, -1)),
    ("repeat_symbolic_length",
     lambda x: einc.repeat(x[0], "i j -> b i j", b=x.shape[0]),
     lambda x: np.broadcast_to(x[0], x.shape)),
]


@pytest.mark.parametrize("name,fn,ref", SYMBOLIC,
                         ids=[c[0] for c in SYMBOLIC])
def test_symbolic_batch(name, fn, ref, x64):
    b, = export.symbolic_shape(B)
    exp = export.export(jax.jit(fn))(
        jax.ShapeDtypeStruct((b, 3, 4), jnp.float64))
    assert "einc_eval_v1" in exp.mlir_module()
    for n in (2, 5, 9):
        x = np.random.default_rng(n).standard_normal((n, 3, 4))
        close(exp.call(x), ref(x))


def test_symbolic_grad_and_vmap(x64):
    """grad (mean's 1/count and the backward's repeat symbolic) and vmap
    exported with a symbolic batch, against JAX's own derivatives."""
    def loss(a, w):
        return (jnp.sum(einc.einsum("b i j, j k -> b i k", a, w) ** 2)
                + jnp.sum(einc.reduce(a, "b i j -> i", "mean")))

    def loss_ref(a, w):
        return (jnp.sum(jnp.einsum("bij,jk->bik", a, w) ** 2)
                + jnp.sum(jnp.mean(a, (0, 2))))

    b, = export.symbolic_shape(B)
    exp = export.export(jax.jit(jax.grad(loss, (0, 1))))(
        jax.ShapeDtypeStruct((b, 3, 4), jnp.float64),
        jax.ShapeDtypeStruct((4, 5), jnp.float64))
    vexp = export.export(jax.jit(jax.vmap(
        lambda x: einc.reduce(x, "b j -> j", "max"))))(
        jax.ShapeDtypeStruct((3, b, 4), jnp.float64))
    for n in (2, 7):
        r = np.random.default_rng(n)
        a, w = r.standard_normal((n, 3, 4)), r.standard_normal((4, 5))
        for got, want in zip(exp.call(a, w),
                             jax.grad(loss_ref, (0, 1))(a, w)):
            close(got, want)
        x = r.standard_normal((3, n, 4))
        close(vexp.call(x), x.max(1))
