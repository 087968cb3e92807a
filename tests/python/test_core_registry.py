"""einc._core's registry of framework adapters: the routes a call consults
and the callbacks that install an adapter when its framework is imported
(docs/design.md, "Modules and routes")."""
import subprocess
import sys
import textwrap

import pytest

from einc import _core


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A folder on sys.path for made-up framework modules, and einc's
    pending callbacks and routes restored afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_core, "_pending", {})
    monkeypatch.setattr(_core, "_routes", dict(_core._routes))
    hooks = list(sys.meta_path)
    yield tmp_path
    sys.meta_path[:] = hooks
    for name in [n for n in sys.modules if n.startswith("einc_fw_")]:
        del sys.modules[name]


def module(folder, name, text=""):
    (folder / f"{name}.py").write_text(textwrap.dedent(text))


def test_callback_runs_after_the_module_is_imported(fresh):
    module(fresh, "einc_fw_a", "STEP = 1\nDONE = True\n")
    seen = []
    _core.after_import("einc_fw_a", lambda: seen.append(
        getattr(sys.modules["einc_fw_a"], "DONE", False)))
    assert seen == []
    import einc_fw_a  # noqa: F401
    assert seen == [True]  # run once, on the whole module
    assert "einc_fw_a" not in _core._pending


def test_callback_runs_now_when_the_module_is_loaded(fresh):
    seen = []
    _core.after_import("sys", lambda: seen.append(1))
    assert seen == [1] and _core._pending == {}


def test_an_import_runs_only_its_own_callbacks(fresh):
    """A module still being imported is in sys.modules already: another
    module's import (one it imports itself, as torch imports its parts)
    must not run its callbacks before it has finished."""
    module(fresh, "einc_fw_part", "X = 1\n")
    module(fresh, "einc_fw_whole", """\
        import einc_fw_part
        DONE = True
        """)
    seen = []
    _core.after_import("einc_fw_whole", lambda: seen.append(
        ("whole", getattr(sys.modules["einc_fw_whole"], "DONE", False))))
    _core.after_import("einc_fw_part", lambda: seen.append(("part", True)))
    import einc_fw_whole  # noqa: F401
    assert seen == [("part", True), ("whole", True)]


def test_a_failing_callback_is_retried_by_the_next_call(fresh):
    module(fresh, "einc_fw_b", "Y = 2\n")
    attempts = []

    def install():
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("not ready")

    _core.after_import("einc_fw_b", install)
    import einc_fw_b  # noqa: F401  (the import itself does not fail)
    assert len(attempts) == 1 and "einc_fw_b" in _core._pending
    assert _core.route("i -> i", (), reduce=None, numpy=False,
                       lengths=()) is NotImplemented
    assert len(attempts) == 2 and "einc_fw_b" not in _core._pending


def test_route_asks_the_registered_routes(fresh):
    calls = []

    def mine(expr, tensors, *, reduce, numpy, lengths):
        calls.append(expr)
        return "served" if tensors == ("mine",) else NotImplemented

    _core.register_route("einc_fw_mine", mine)
    assert _core.route("i -> i", ("mine",), reduce=None, numpy=False,
                       lengths=()) == "served"
    assert _core.route("i -> i", ("other",), reduce=None, numpy=False,
                       lengths=()) is NotImplemented
    assert calls == ["i -> i", "i -> i"]


def test_importing_einc_imports_no_framework_and_torch_registers():
    """import einc leaves torch and jax alone; torch imported afterwards
    brings its adapter (route, eager shortcut, traced call) before any
    einc call."""
    code = textwrap.dedent("""\
        import sys
        import einc
        assert not {"torch", "jax"} & set(sys.modules), sys.modules.keys()
        try:
            import torch
        except ImportError:
            print("no torch")
            raise SystemExit(0)
        from einc import _core
        assert "torch" in _core._routes and _core.eager_grad is not None
        assert _core.traced_call is not None and "torch" not in _core._pending
        print("ok")
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in ("ok", "no torch")


def test_a_find_spec_before_the_import_leaves_the_hook(fresh):
    """importlib.util.find_spec(name), the usual availability check
    (transformers' is_torch_available), finds the module without
    executing it: the callback still runs when the module is imported
    (torch.compile found no stand-ins for einc otherwise)."""
    import importlib.util

    module(fresh, "einc_fw_f", "DONE = True\n")
    seen = []
    _core.after_import("einc_fw_f", lambda: seen.append(
        getattr(sys.modules["einc_fw_f"], "DONE", False)))
    assert importlib.util.find_spec("einc_fw_f") is not None
    assert seen == [] and "einc_fw_f" not in sys.modules
    import einc_fw_f  # noqa: F401
    assert seen == [True]
    assert "einc_fw_f" not in _core._pending
