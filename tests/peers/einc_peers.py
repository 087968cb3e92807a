"""A pytest plugin that runs a peer's own tests on einc's drop-ins.

Loaded with ``-p einc_peers`` (tests/peers on PYTHONPATH) and told which
peer by EINC_PEER=numpy or EINC_PEER=opt_einsum. Before the peer's test
modules are imported it replaces the peer's functions (numpy.einsum,
numpy.einsum_path; opt_einsum.contract, contract_path,
contract_expression) by wrappers that call einc's drop-in, whose result the
test sees, and also call the peer's own function on the same arguments
(the peer first, on copies of out=, so inputs are as the caller gave them)
and compare: the same exception type, or results of the same type (a
numpy scalar where the peer gives one, an ndarray where it gives one),
shape, dtype and values (to the dtype's tolerance). Every mismatch is counted and
described; EINC_PEER_REPORT names a file that receives
"calls=N mismatches=M" and the first descriptions.

Tests in tests/peers/deselected.txt (``peer  nodeid-suffix  # reason``) are
deselected; a suffix matches a test and all its parametrizations.
"""

import os
import warnings

import numpy as np
import pytest
from peer_seed import seed_test

PEER = os.environ.get("EINC_PEER", "")
_stats = {"calls": 0, "mismatches": 0, "notes": []}


def _note(what):
    _stats["mismatches"] += 1
    if len(_stats["notes"]) < 40:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        _stats["notes"].append(f"{what} ({test.rsplit('/', 1)[-1]})")


def _tolerance(dtype):
    if dtype.kind in "biu":
        return 0.0
    return {2: 2e-2, 4: 1e-4, 8: 1e-9, 16: 1e-9}.get(
        dtype.itemsize if dtype.kind == "f" else dtype.itemsize // 2, 1e-9)


def _same(got, want, where):
    """Compares one result; notes what differs."""
    if isinstance(want, np.ndarray) or np.isscalar(want):
        if type(got) is not type(want):  # a 0-d array for a numpy scalar
            return _note(f"{where}: type {type(got).__name__} != "
                         f"{type(want).__name__}")
        want_a, got_a = np.asarray(want), np.asarray(got)
        if want_a.shape != got_a.shape:
            return _note(f"{where}: shape {got_a.shape} != {want_a.shape}")
        if want_a.dtype != got_a.dtype:
            return _note(f"{where}: dtype {got_a.dtype} != {want_a.dtype}")
        if want_a.dtype.kind == "O":
            return None  # computed by the peer itself (einc hands it over)
        if want_a.size == 0:
            return None
        tol = _tolerance(want_a.dtype)
        scale = max(float(np.max(np.abs(want_a.astype(np.complex128)))), 1.0)
        diff = np.abs(got_a.astype(np.complex128) -
                      want_a.astype(np.complex128))
        both_nan = np.isnan(diff) & np.isnan(want_a.astype(np.complex128))
        bad = (diff > tol * scale) & ~both_nan
        if want_a.dtype.kind in "iub":  # integer results wrap identically
            bad = got_a != want_a
        if np.any(bad):
            return _note(f"{where}: values differ (max diff "
                         f"{np.nanmax(diff):g}, scale {scale:g})")
    return None


def _copy_args(args, kwargs):
    """The peer's call gets its own out= (the drop-in writes the real one)."""
    out = kwargs.get("out")
    if isinstance(out, np.ndarray):
        kwargs = dict(kwargs, out=out.copy())
    return args, kwargs


def _describe(args):
    eq = next((a for a in args if isinstance(a, str)), None)
    return repr(eq) if eq is not None else "interleaved form"


def compared(peer_fn, einc_fn, name, compare=_same):
    """A function that runs both and returns einc's result."""

    def both(*args, **kwargs):
        _stats["calls"] += 1
        pargs, pkwargs = _copy_args(args, kwargs)
        want = err = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                want = peer_fn(*pargs, **pkwargs)
            except Exception as e:  # the drop-in must raise alike
                err = e
        where = f"{name}({_describe(args)})"
        try:
            got = einc_fn(*args, **kwargs)
        except Exception as e:
            if err is None:
                _note(f"{where}: einc raised {type(e).__name__}: {e}; the "
                      f"peer returned")
            elif not isinstance(e, _error_family(err)):
                _note(f"{where}: einc raised {type(e).__name__}, the peer "
                      f"{type(err).__name__}")
            raise
        if err is not None:
            _note(f"{where}: the peer raised {type(err).__name__}: {err}; "
                  f"einc returned")
            return got
        compare(got, want, where)
        return got

    both.__name__ = getattr(peer_fn, "__name__", name)
    both.__doc__ = getattr(peer_fn, "__doc__", None)
    return both


def _error_family(err):
    for base in (TypeError, ValueError, RuntimeError, KeyError):
        if isinstance(err, base):
            return base
    return type(err)


def _same_path(got, want, where):
    """einsum_path / contract_path: the path is einc's own (path internals
    differ); checked is the shape of the answer."""
    if not (isinstance(got, tuple) and len(got) == 2):
        return _note(f"{where}: not a (path, info) pair")
    gpath, wpath = got[0], want[0]
    if len(gpath) != len(wpath) and not any(
            len(s) != 2 for s in list(wpath)[1 if wpath and
                                             wpath[0] == "einsum_path"
                                             else 0:]):
        return _note(f"{where}: path of {len(gpath)} steps, the peer's "
                     f"{len(wpath)}")
    return None


class _ComparedExpression:
    def __init__(self, mine, theirs):
        self._mine, self._theirs = mine, theirs
        self._call = compared(theirs, mine, "ContractExpression")

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._mine, name)

    def __repr__(self):
        return repr(self._mine)

    def __str__(self):
        return str(self._mine)


def _expression(peer_fn, einc_fn):
    def make(*args, **kwargs):
        _stats["calls"] += 1
        try:
            theirs = peer_fn(*args, **kwargs)
        except Exception as e:
            try:
                einc_fn(*args, **kwargs)
            except Exception as mine_err:
                if not isinstance(mine_err, _error_family(e)):
                    _note(f"contract_expression: einc raised "
                          f"{type(mine_err).__name__}, the peer "
                          f"{type(e).__name__}")
                raise
            _note(f"contract_expression: the peer raised "
                  f"{type(e).__name__}; einc returned")
            raise
        return _ComparedExpression(einc_fn(*args, **kwargs), theirs)

    return make


def _patch_numpy():
    import einc.numpy as mine

    np.einsum = compared(np.einsum, mine.einsum, "einsum")
    np.einsum_path = compared(np.einsum_path, mine.einsum_path,
                              "einsum_path", _same_path)


def _patch_opt_einsum():
    import opt_einsum
    import einc.opt_einsum as mine

    opt_einsum.contract = compared(opt_einsum.contract, mine.contract,
                                   "contract")
    opt_einsum.contract_path = compared(opt_einsum.contract_path,
                                        mine.contract_path, "contract_path",
                                        _same_path)
    opt_einsum.contract_expression = _expression(
        opt_einsum.contract_expression, mine.contract_expression)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Every test on fixed data (tests/peers/peer_seed.py), seeded before
    its fixtures run."""
    seed_test(item)


def pytest_configure(config):
    if PEER == "numpy":
        _patch_numpy()
    elif PEER == "opt_einsum":
        _patch_opt_einsum()
    else:
        raise pytest.UsageError("EINC_PEER must be numpy or opt_einsum")


def _deselected():
    path = os.path.join(os.path.dirname(__file__), "deselected.txt")
    entries = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if len(line) == 2 and line[0] == PEER:
                entries.append(line[1])
    return entries


def pytest_collection_modifyitems(config, items):
    entries = _deselected()
    keep, drop = [], []
    for item in items:
        # file::Class::test[params], whatever the rootdir makes of the path
        full = item.path.name + "::" + item.nodeid.split("::", 1)[1]
        base = full.split("[", 1)[0]
        hit = any(base.endswith(e) or full.endswith(e) for e in entries)
        (drop if hit else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter):
    line = (f"einc-peer-compare: {PEER}: calls={_stats['calls']} "
            f"mismatches={_stats['mismatches']}")
    terminalreporter.write_line(line)
    for note in _stats["notes"]:
        terminalreporter.write_line("  mismatch: " + note)
    report = os.environ.get("EINC_PEER_REPORT")
    if report:
        with open(report, "w", encoding="utf-8") as f:
            f.write(line + "\n")
