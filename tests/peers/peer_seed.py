"""Fixed random data for the peers' own tests (issue 37).

The peers' test files draw random data unseeded: einops' create
`rng = np.random.default_rng()` at import (test_ops, test_other,
test_packing) and call torch.rand, numpy's call np.random; einops'
test_torch_compile_for_functions compares float32 against float64 at rtol
1e-5 on such data, and some draws fall outside it. Run on einc's drop-ins
they would pass or fail by chance. The plugins call seed_test before every
test's setup: Python's, numpy's and torch's global generators are seeded
from the test's file and name, and every numpy Generator or RandomState a
test module holds at module level is replaced by one seeded the same way,
so each test sees the same data in every run, whatever ran before it.
"""

import importlib.util
import random
import zlib

import numpy as np


def _torch():
    """torch, imported here where installed: a test that imports it
    lazily must find it seeded already."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return torch


def seed_test(item) -> None:
    """Seeds from the file's name and the test's name within it (a node
    id can hold the temporary folder the suite was unpacked into)."""
    name = item.path.name + "::" + item.nodeid.split("::", 1)[-1]
    seed = zlib.crc32(name.encode())
    random.seed(seed)
    np.random.seed(seed)
    torch = _torch()
    if torch is not None:
        torch.manual_seed(seed)
    module = getattr(item, "module", None)
    for attr, value in list(vars(module).items()) if module else []:
        if isinstance(value, np.random.Generator):
            setattr(module, attr, np.random.default_rng(seed))
        elif isinstance(value, np.random.RandomState):
            setattr(module, attr, np.random.RandomState(seed))
