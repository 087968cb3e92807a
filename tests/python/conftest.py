"""Shared pieces of the Python package's tests (tests/python).

The package is tested installed (pip install .), never from the source
tree: python/einc has no extension until it is built.
"""
import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


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
