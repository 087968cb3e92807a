"""The Python target of scripts/mutants.py: the modules of python/einc,
mutated in a copy of the installed package (its compiled extension kept, its
.py files taken from the tree) that PYTHONPATH puts first; the oracles are
the files of tests/python, each run only for the lines it executes
(coverage.py, installed into the venv on first use)."""
import ast
import glob
import json
import os
import shutil
import subprocess
import sys

from mutants_common import ROOT, coverage_map, run, source_files

TESTS = os.path.join(ROOT, "tests", "python")
# Test files that need a GPU, or start clusters and pools that a mutant
# run has no time for, are not oracles unless --all-tests.
SLOW_TESTS = {"test_cuda_frameworks.py", "test_jax_trace_cuda.py",
              "test_distributed.py", "test_doc_examples.py"}


class PyTarget:
    language = "python"
    suffix = ".py"
    jobs = 1  # test files share the device-model cache and a CLI

    def __init__(self, work, all_tests, python):
        self.work = os.path.join(work, "py")
        self.site = os.path.join(self.work, "site")
        self.python = python
        self.all_tests = all_tests

    def files(self, folders):
        return source_files(folders, self.suffix)

    def prepare(self, coverage=True):
        os.makedirs(self.work, exist_ok=True)
        self.package = copy_package(self.python, self.site)
        self.tests = sorted(os.path.basename(f) for f in
                            glob.glob(os.path.join(TESTS, "test_*.py"))
                            if self.all_tests or os.path.basename(f) not in SLOW_TESTS)
        self.durations = {}
        ensure_coverage(self.python)
        self.cmap = coverage_map(self, covered_lines) if coverage else {}  # no file map

    def installed(self, rel):
        return os.path.join(self.package, os.path.relpath(rel, "python/einc"))

    def apply(self, m, oracles):
        path = self.installed(m.file)
        self.original = None
        try:
            mutated = ast.dump(ast.parse(m.text))
        except SyntaxError:
            return "invalid"
        self.original = open(path).read()
        open(path, "w").write(m.text)
        # The same syntax tree is the same program (redundant parentheses).
        return "tce" if mutated == ast.dump(ast.parse(self.original)) else None

    def restore(self, m):
        if self.original is not None:
            open(self.installed(m.file), "w").write(self.original)

    def run_oracle(self, name, timeout=None, prefix=()):
        limit = timeout or 3 * self.durations.get(name, 60) + 30
        env = dict(os.environ, PYTHONPATH=self.site, PYTHONDONTWRITEBYTECODE="1")
        rc, _ = run([self.python, *prefix, "-m", "pytest", "-q", "-x",
                     "-p", "no:cacheprovider", os.path.join(TESTS, name)],
                    timeout=limit, env=env, cwd=ROOT)
        # pytest's 5: no test ran (all skipped here): not a failure.
        return 0 if rc == 5 else rc


def copy_package(python, site):
    """The installed einc (for its extension) with the tree's .py files."""
    where = subprocess.run([python, "-c", "import einc, os; print(os.path.dirname(einc.__file__))"],
                           capture_output=True, text=True, cwd="/")
    if where.returncode != 0:
        sys.exit("einc is not installed in " + python + " (scripts/python_env.sh)")
    package = os.path.join(site, "einc")
    if os.path.isdir(site):
        shutil.rmtree(site)
    shutil.copytree(where.stdout.strip(), package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    tree = os.path.join(ROOT, "python", "einc")
    for f in glob.glob(os.path.join(tree, "**", "*.py"), recursive=True):
        shutil.copy2(f, os.path.join(package, os.path.relpath(f, tree)))
    return package


def ensure_coverage(python):
    if subprocess.run([python, "-c", "import coverage"], capture_output=True).returncode:
        subprocess.run([python, "-m", "pip", "install", "-q", "coverage"], check=True)


def covered_lines(target, name):
    data = os.path.join(target.work, "coverage-" + name + ".data")
    report = os.path.join(target.work, "coverage-" + name + ".json")
    for f in (data, report):
        if os.path.exists(f):
            os.remove(f)
    if target.run_oracle(name, timeout=3600, prefix=(
            "-m", "coverage", "run", "--data-file=" + data,
            "--include=" + target.package + "/*")) != 0:
        return None
    rc, _ = run([target.python, "-m", "coverage", "json", "--data-file=" + data,
                 "-o", report])
    lines = {}
    if rc == 0:
        for path, f in json.load(open(report))["files"].items():
            rel = os.path.join("python/einc", os.path.relpath(
                os.path.join(ROOT, path),
                target.package))
            hit = set(f["executed_lines"])
            lines[rel] = (hit, hit | set(f["missing_lines"]))
    return lines
