"""Shared pieces of the Python package's tests (tests/python).

The package is tested installed (pip install .), never from the source
tree: python/einc has no extension until it is built.
"""
import atexit
import importlib.util
import os
import pathlib
import random
import shutil
import sys
import tempfile
import threading
import zlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The suite's own disk cache (runtime/disk_cache.h): the "cpu" device model
# and compiled kernels go there, for this process and every subprocess it
# starts, never to the user's ~/.cache/einc: a test must not depend on what
# the machine measured before (or another process raises meanwhile), nor
# change it.
_CACHE = tempfile.mkdtemp(prefix="einc-pytest-cache-")
os.environ["EINC_CACHE_DIR"] = _CACHE
_OWNER = os.getpid()  # a forked child's exit must not remove it


@atexit.register
def _remove_cache():
    if os.getpid() == _OWNER:
        shutil.rmtree(_CACHE, ignore_errors=True)


def seed_everything(nodeid):
    """Seeds Python's, numpy's and (where imported) torch's global random
    generators from the test's id: every test draws the same numbers in
    every run, whatever ran before it (CI must never flake on data)."""
    seed = zlib.crc32(nodeid.encode())
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is None and importlib.util.find_spec("torch") is not None:
        import torch  # (a test that imports it lazily finds it seeded)
    if torch is not None:
        torch.manual_seed(seed)


@pytest.fixture(autouse=True)
def _seeded(request):
    seed_everything(request.node.nodeid)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def einc_cli():
    """The einc CLI of a build of this checkout (EINC_CLI, else the first
    build*/einc found), or None."""
    env = os.environ.get("EINC_CLI")
    if env and os.access(env, os.X_OK):
        return env
    for d in sorted(ROOT.glob("build*/einc")):
        if d.is_file() and os.access(d, os.X_OK):
            return str(d)
    return None


def run_in_threads(work, n):
    """Runs work(0) .. work(n - 1) on n threads at once and waits for all;
    work reports its own failures (an exception in a thread is lost)."""
    threads = [threading.Thread(target=work, args=(s,)) for s in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def rss_kib():
    """This process's resident memory in KiB (0 where /proc is missing)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def spied_fallback(name, arm):
    """A generator for a fixture: the calls einc.NAME (a C builtin) hands to
    its Python fallback einc._api._NAME, recorded by a spy put in its
    place and taken out after. arm(array) makes one served call per
    framework first, so the plan table is armed."""
    import einc
    from einc import _api, _einc

    calls = []
    fallback = getattr(_api, "_" + name)
    set_fallback = getattr(_einc, "fast_" + name)

    def spy(*args, **kwargs):
        calls.append(args)
        return fallback(*args, **kwargs)

    arm(np.ones((2, 3)))
    try:
        import torch
        arm(torch.ones(2, 3))
    except ImportError:
        pass
    set_fallback(spy, "")
    try:
        yield calls
    finally:
        set_fallback(fallback, "")


@pytest.fixture
def x64():
    """f64 arrays in JAX for a test, restored afterwards (JAX's tests)."""
    import jax
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


@pytest.fixture
def einc_kernels():
    """Every call on einc's own path: small eager calls that record
    autograd are otherwise lowered to torch operations, whose gradients
    torch computes (einc._torch_lower)."""
    from einc import _torch, _torch_lower

    before = _torch_lower.ENABLED
    _torch.set_lowering(False)
    yield
    _torch.set_lowering(before)


def run_on_host_devices(tmp_path_factory, script_text, devices, **env_extra):
    """Runs a JAX script in a subprocess that sees `devices` host devices
    (XLA's --xla_force_host_platform_device_count) and returns the JSON
    of its last 'RESULT ' line; fails with its output otherwise."""
    import json
    import subprocess

    script = tmp_path_factory.mktemp("host_devices") / "run.py"
    script.write_text(script_text)
    env = dict(os.environ, **env_extra)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        f" --xla_force_host_platform_device_count={devices}"
                        ).strip()
    run = subprocess.run([sys.executable, str(script)], capture_output=True,
                         text=True, timeout=600, env=env)
    lines = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stdout + run.stderr
    return json.loads(lines[-1][len("RESULT "):])
