"""Fixed random data for the peers' own tests (issue 37).

einops' and numpy's test files draw from the global generators unseeded
(einops' test_torch_compile_for_functions compares float32 against
float64 at rtol 1e-5 on torch.rand data: some draws fall outside it), so
run on einc's drop-ins they would pass or fail by chance. The plugins call
seed_test before every test's setup: Python's, numpy's and torch's global
generators are seeded from the test's id, so each test sees the same data
in every run, whatever ran before it.
"""

import random
import sys
import zlib

import numpy as np


def seed_test(item) -> None:
    """Seeds from the file's name and the test's name within it (a node
    id can hold the temporary folder the suite was unpacked into)."""
    name = item.path.name + "::" + item.nodeid.split("::", 1)[-1]
    seed = zlib.crc32(name.encode())
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
