"""Every Python example of the documentation runs, shows what it says it
shows, and its einc calls agree with numpy and einops.

The examples are the `>>>` sessions in fenced blocks of README.md and
docs/*.md, whole ```python blocks of those files, and the `>>>` examples
of the docstrings of the package einc. Each session runs in order in one
namespace in which the name `einc` is an Oracle: einc itself, except
that einsum, rearrange, reduce, repeat, pack, unpack, parse_shape, check,
plan and compile (and the callables compile returns) also make the same
call on numpy.einsum or einops and compare the two: the same shape and
dtype, values within the dtype's tolerance, or both raising. An example
with an expected output must print it (doctest's comparison, with '...'
matching anything); an expected "einc.EincError: ..." must be raised.
"""
import contextlib
import doctest
import inspect
import io
import re

import numpy as np
import pytest

import einc
from conftest import ROOT
from einc._core import numpy_dialect, split_expr

einops = pytest.importorskip("einops")

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
ERROR_PREFIX = "einc.EincError:"


def markdown_sessions():
    """(id, [doctest.Example]) for each fenced block of the documents with
    '>>>' in it, and each ```python block (one example, the whole block)."""
    out = []
    parser = doctest.DocTestParser()
    for path in DOCS:
        text = path.read_text()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            name = f"{path.name}:{line}"
            if ">>>" in m.group(2):
                out.append((name, parser.get_examples(m.group(2), name)))
            elif m.group(1) == "python":
                out.append((name, [doctest.Example(m.group(2), "")]))
    return out


def docstring_sessions():
    """(id, [doctest.Example]) for each docstring of the package with
    '>>>' in it: the module's, its functions' and its classes' methods."""
    objects = [("einc", einc)]
    for name in einc.__all__:
        obj = getattr(einc, name)
        objects.append((name, obj))
        if inspect.isclass(obj):
            objects += [(f"{name}.{k}", v) for k, v in vars(obj).items()
                        if inspect.isfunction(v)]
    parser, out, seen = doctest.DocTestParser(), [], set()
    for name, obj in objects:
        doc = inspect.getdoc(obj) if obj.__doc__ else None
        if doc and ">>>" in doc and id(obj) not in seen:
            seen.add(id(obj))
            out.append((f"docstring {name}", parser.get_examples(doc, name)))
    return out


SESSIONS = markdown_sessions() + docstring_sessions()


def assert_same(got, want, what):
    """einc's result against the oracle's: shape, dtype, values."""
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), what
        for g, w in zip(got, want):
            assert_same(g, w, what)
        return
    if isinstance(want, (dict, int, str)):
        assert got == want, what
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    tol = 1e-5 if got.dtype.itemsize <= 4 else 1e-12
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


class Oracle:
    """The module einc, with its array functions checked on every call.

    `checked` counts the calls compared with an oracle; `unchecked` lists
    the calls that none could take (an example that makes one fails, so
    every documented call stays covered)."""

    def __init__(self):
        self.checked = 0
        self.unchecked = []

    def __getattr__(self, name):
        return getattr(einc, name)

    def _both(self, what, mine, theirs):
        """mine() and theirs(): the same result, or both raising."""
        try:
            got = mine()
        except einc.EincError:
            with pytest.raises(Exception):
                theirs()
            self.checked += 1
            raise
        assert_same(got, theirs(), what)
        self.checked += 1
        return got

    def _einsum_oracle(self, expr, tensors, numpy=None, reduce=None,
                       **sizes):
        """numpy.einsum for numpy's dialect, einops otherwise."""
        if numpy is None:
            numpy = numpy_dialect(expr, [np.ndim(t) for t in tensors])
        if numpy and reduce is None and not sizes:
            return lambda: np.einsum(expr, *tensors)
        if not numpy and len(tensors) == 1 and (reduce or sizes):
            return lambda: einops.reduce(tensors[0], expr, reduce or "sum",
                                         **sizes)
        if not numpy and reduce is None and not sizes:
            return lambda: einops.einsum(*tensors, expr)
        self.unchecked.append(("einsum", expr))
        return None

    def einsum(self, *args, **kw):
        expr, tensors = split_expr(args)
        oracle = self._einsum_oracle(expr, tensors, **kw)
        call = lambda: einc.einsum(*args, **kw)  # noqa: E731
        return self._both(f"einsum {expr!r}", call, oracle) if oracle else call()

    def _einops(self, name, *args, **kw):
        return self._both(f"{name} {args[1:]!r}",
                          lambda: getattr(einc, name)(*args, **kw),
                          lambda: getattr(einops, name)(*args, **kw))

    def rearrange(self, *args, **kw):
        return self._einops("rearrange", *args, **kw)

    def reduce(self, *args, **kw):
        return self._einops("reduce", *args, **kw)

    def repeat(self, *args, **kw):
        return self._einops("repeat", *args, **kw)

    def pack(self, *args, **kw):
        return self._einops("pack", *args, **kw)

    def unpack(self, *args, **kw):
        return self._einops("unpack", *args, **kw)

    def parse_shape(self, *args, **kw):
        return self._einops("parse_shape", *args, **kw)

    def _on_zeros(self, expr, shapes, kw):
        """The oracle's output shape for inputs of these shapes."""
        zeros = [np.zeros(s) for s in shapes]
        oracle = self._einsum_oracle(expr, zeros, **kw)
        return (lambda: np.shape(oracle())) if oracle else None

    def check(self, expr, *shapes, **kw):
        oracle = self._on_zeros(expr, shapes, kw)
        call = lambda: einc.check(expr, *shapes, **kw)  # noqa: E731
        return self._both(f"check {expr!r}", call, oracle) if oracle else call()

    def plan(self, expr, *shapes, **kw):
        p = einc.plan(expr, *shapes, **kw)
        oracle = self._on_zeros(expr, [np.shape(s) if hasattr(s, "shape")
                                       else s for s in shapes],
                                {k: v for k, v in kw.items()
                                 if k in ("numpy", "reduce")})
        if oracle:
            self._both(f"plan {expr!r}", lambda: p.output_shape, oracle)
        return p

    def compile(self, expr, *shapes, **kw):
        f = einc.compile(expr, *shapes, **kw)
        options = {k: v for k, v in kw.items() if k in ("numpy", "reduce")}

        def checked(*tensors, **call_kw):
            oracle = self._einsum_oracle(expr, tensors, **options)
            call = lambda: f(*tensors, **call_kw)  # noqa: E731
            return (self._both(f"compiled {expr!r}", call, oracle)
                    if oracle else call())

        return checked


def run_example(example, ns, oracle, where):
    """Runs one example as the interpreter would (expression values
    printed) and compares what it printed or raised with its want."""
    if ns.get("einc") is einc:  # the session imported einc itself
        ns["einc"] = oracle
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(example.source, where, "single"), ns)
        got = out.getvalue()
    except einc.EincError as e:
        got = f"{ERROR_PREFIX} {e}\n"
        assert example.want.startswith(ERROR_PREFIX), (
            f"{where}: {example.source.strip()} raised\n{got}")
    if example.want:
        flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        assert doctest.OutputChecker().check_output(example.want, got, flags), (
            f"{where}: {example.source.strip()}\nexpected:\n{example.want}"
            f"got:\n{got}")


@pytest.mark.parametrize("name,examples", SESSIONS,
                         ids=[s[0] for s in SESSIONS])
def test_doc_session(name, examples):
    oracle = Oracle()
    ns = {"np": np, "einc": oracle}
    for ex in examples:
        run_example(ex, ns, oracle, f"{name}+{ex.lineno}")
    assert not oracle.unchecked, f"calls no oracle takes: {oracle.unchecked}"


def test_sessions_found_and_checked():
    """The collection finds the documents' examples (README's session and
    the docstrings), and most of their calls meet an oracle."""
    names = [s[0] for s in SESSIONS]
    assert any(n.startswith("README.md") for n in names), names
    for fn in ("einsum", "rearrange", "reduce", "repeat", "pack", "unpack",
               "parse_shape", "check", "plan", "compile", "ShapeMemo"):
        assert f"docstring {fn}" in names, fn
    total = 0
    for name, examples in SESSIONS:
        oracle = Oracle()
        ns = {"np": np, "einc": oracle}
        for ex in examples:
            run_example(ex, ns, oracle, name)
        total += oracle.checked
    assert total >= 20, total


def test_oracle_catches_a_wrong_result(monkeypatch):
    """The Oracle fails an example whose einc result is wrong."""
    real = einc.rearrange
    monkeypatch.setattr(einc, "rearrange",
                        lambda x, p, **k: real(x, p, **k) * 2)
    oracle = Oracle()
    with pytest.raises(AssertionError):
        oracle.rearrange(np.ones((2, 3)), "a b -> b a")
    monkeypatch.setattr(einc, "rearrange", real)
    with pytest.raises(AssertionError):  # and an output that differs
        run_example(doctest.Example("einc.rearrange(np.ones((2, 3)), "
                                    "'a b -> b a').shape\n", "(2, 3)\n"),
                    {"np": np, "einc": oracle}, oracle, "planted")
