#!/usr/bin/env bash
# python_env.sh VENV [--test] - a virtual environment with the Python
# package einc installed from this checkout (pip install ., built by
# meson-python from the same meson.build), plus numpy; --test adds what
# tests/python needs (pytest, einops, opt_einsum, ml_dtypes), JAX for the
# CPU (about 100 MB) and torch (PyPI's wheel, about 3 GB installed with
# the CUDA libraries it brings; EINC_TORCH=0 leaves it out, and a failed
# torch install is reported and its tests skip; docs/design.md,
# "Frameworks in CI"). einc's XLA FFI handler (einc under jax.jit) is
# built with no option (docs/design.md, "JAX").
#
# A venv, not the system Python: Debian's python3 refuses pip installs
# (PEP 668), and the build stays out of the user's site-packages. Use it
# with VENV/bin/python, or `. VENV/bin/activate`. Needs python3-venv and
# python3-dev (Python.h) and PyPI (or a pip mirror) for the build tools.
set -eu
cd "$(dirname "$0")/.."
venv=$1
test_deps=${2:-}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" numpy
if [ "$test_deps" = --test ]; then
  # numpy and opt_einsum pinned: tests/peers runs their own test files at
  # these versions (tests/peers/run_peer_suites.py, deselected.txt)
  # (flatbuffers: jax.export's serialization, tests/python/test_jax_export)
  "${pip[@]}" numpy==2.4.6 pytest einops opt_einsum==3.4.0 ml_dtypes jax \
    flatbuffers
  # einc.distributed's tests (a local cluster of 2 processes); they skip
  # where it does not install
  "${pip[@]}" dask distributed ||
    echo "python_env.sh: dask did not install; test_distributed skips" >&2
  if [ "${EINC_TORCH:-1}" != 0 ] && ! "${pip[@]}" torch; then
    echo "python_env.sh: torch did not install; its tests will skip" >&2
  fi
fi
"${pip[@]}" .
