"""Runs the peers' own test files on einc's drop-ins (issue 27) and prints
the counts.

    python tests/peers/run_peer_suites.py [--junit-dir DIR] [--only numpy]

numpy: numpy/_core/tests/test_einsum.py from the installed numpy wheel,
  whose version must be NUMPY_PIN (the deselections were made against it).
opt_einsum: test_contract.py, test_edge_cases.py and test_input.py from
  the sdist of opt_einsum OPT_EINSUM_PIN, downloaded now by pip into a
  temporary directory (nothing of it is kept in this repository); the
  installed opt_einsum, which the comparison calls, must be that version.

Each suite runs under the plugin einc_peers.py (the peer's functions
replaced by einc's, every call also run by the peer and compared).
The last line is `ein-test-summary: peer-suites: N passed, N failed`:
the tests that passed, and the tests that failed plus every mismatch
between einc and the peer plus one for a suite that could not run.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET

NUMPY_PIN = "2.4.6"
OPT_EINSUM_PIN = "3.4.0"
OPT_EINSUM_FILES = ("test_contract.py", "test_edge_cases.py",
                    "test_input.py")
HERE = os.path.dirname(os.path.abspath(__file__))


def installed_version(module):
    out = subprocess.run([sys.executable, "-c",
                          f"import {module}; print({module}.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def run_pytest(peer, files, workdir, junit, import_mode):
    """(passed, failed, skipped, mismatches) of one suite. import_mode:
    numpy's tests import as the installed numpy._core.tests package
    (prepend); the sdist's as files (importlib), so that `opt_einsum`
    stays the installed package."""
    report = os.path.join(workdir, f"{peer}-compare.txt")
    env = dict(os.environ, EINC_PEER=peer, EINC_PEER_REPORT=report,
               PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH",
                                                             ""))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "einc_peers", f"--import-mode={import_mode}",
           f"--rootdir={workdir}",
           f"--confcutdir={os.path.dirname(files[0])}",
           f"--junitxml={junit}", "-o", "junit_family=xunit2", *files]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          cwd=workdir)
    lines = proc.stdout.splitlines()
    for line in lines:
        if line.startswith(("FAILED", "ERROR", "einc-peer-compare",
                            "  mismatch")):
            print(f"  {line}")
    print(f"  {peer}: {lines[-1] if lines else proc.stderr[-2000:]}")
    if not os.path.exists(junit):
        return 0, 1, 0, 0
    passed = failed = skipped = 0
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        n, s = int(suite.get("tests")), int(suite.get("skipped"))
        f = int(suite.get("failures")) + int(suite.get("errors"))
        passed, failed, skipped = passed + n - s - f, failed + f, skipped + s
    mismatches = 1  # no report: the plugin did not finish
    if os.path.exists(report):
        m = re.search(r"mismatches=(\d+)", open(report).read())
        mismatches = int(m.group(1)) if m else 1
    return passed, failed, skipped, mismatches


def pinned(module, pin):
    """Whether the installed `module` is the version its suite's
    deselections were made against (else says which it is)."""
    version = installed_version(module)
    if version != pin:
        print(f"  {module} {version} installed; the suite is pinned to "
              f"{pin}")
    return version == pin


def numpy_suite(workdir, junit_dir):
    if not pinned("numpy", NUMPY_PIN):
        return 0, 1, 0, 0
    import numpy

    path = os.path.join(os.path.dirname(numpy.__file__), "_core", "tests",
                        "test_einsum.py")
    return run_pytest("numpy", [path], workdir,
                      os.path.join(junit_dir, "peers-numpy.xml"), "prepend")


def opt_einsum_suite(workdir, junit_dir):
    if not pinned("opt_einsum", OPT_EINSUM_PIN):
        return 0, 1, 0, 0
    get = subprocess.run([sys.executable, "-m", "pip", "download", "-q",
                          "--no-binary", ":all:", "--no-deps", "-d", workdir,
                          f"opt_einsum=={OPT_EINSUM_PIN}"],
                         capture_output=True, text=True)
    sdists = glob.glob(os.path.join(workdir, "opt_einsum-*.tar.gz"))
    if get.returncode != 0 or not sdists:
        print(f"  opt_einsum sdist not downloaded: {get.stderr[-500:]}")
        return 0, 1, 0, 0
    with tarfile.open(sdists[0]) as tar:
        tar.extractall(workdir, filter="data")
    tests = os.path.join(workdir, f"opt_einsum-{OPT_EINSUM_PIN}",
                         "opt_einsum", "tests")
    files = [os.path.join(tests, f) for f in OPT_EINSUM_FILES]
    return run_pytest("opt_einsum", files, workdir,
                      os.path.join(junit_dir, "peers-opt_einsum.xml"), "importlib")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--junit-dir", default=None)
    ap.add_argument("--only", choices=("numpy", "opt_einsum"))
    args = ap.parse_args()
    total = [0, 0, 0, 0]
    with tempfile.TemporaryDirectory(prefix="einc-peers-") as workdir:
        junit_dir = args.junit_dir or workdir
        for name, suite in (("numpy", numpy_suite),
                            ("opt_einsum", opt_einsum_suite)):
            if args.only and args.only != name:
                continue
            print(f"== {name}'s own tests on einc.{name}")
            counts = suite(workdir, junit_dir)
            print(f"  {name}: {counts[0]} passed, {counts[1]} failed, "
                  f"{counts[2]} skipped, {counts[3]} mismatches")
            total = [t + c for t, c in zip(total, counts)]
    passed, failed = total[0], total[1] + total[3]
    print(f"ein-test-summary: peer-suites: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
