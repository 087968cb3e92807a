"""The Python target of scripts/mutants.py: the modules of python/einc,
mutated in a copy of the installed package (its compiled extension kept, its
.py files taken from the tree) that PYTHONPATH puts first; the oracles are
the files of tests/python, each run only for the lines it executes
(coverage.py, installed into the venv on first use)."""
import ast
import doctest
import glob
import json
import os
import shutil
import subprocess
import sys

from mutants_common import ROOT, coverage_map, file_map, run, source_files

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
        # coverage: True (the pass, or its cache), False (none: --against),
        # or the file map's path (--gate: used unless the pass is cached)
        cached = os.path.isfile(os.path.join(self.work, "coverage.json"))
        if isinstance(coverage, str) and not cached:
            self.cmap = file_map(self, coverage)
        else:
            self.cmap = coverage_map(self, covered_lines) if coverage else {}

    def installed(self, rel):
        return os.path.join(self.package, os.path.relpath(rel, "python/einc"))

    def apply(self, m, oracles):
        path = self.installed(m.file)
        self.original = None
        try:
            # compile(), not only ast.parse: 'break' after a line outside a
            # loop parses, and fails only when the module is compiled
            compile(m.text, path, "exec", dont_inherit=True)
            mutated = program_tree(m.text)
        except (SyntaxError, ValueError):
            return "invalid"
        self.original = open(path).read()
        open(path, "w").write(m.text)
        # The same syntax tree is the same program (redundant parentheses),
        # and so is one that differs in a docstring only (the program
        # python -OO runs: universalmutator's regular expressions do not
        # know a docstring's inner lines are a string)
        return "tce" if mutated == program_tree(self.original) else None

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


def program_tree(text):
    """The module's syntax tree with each docstring (a module's, a
    class's, a function's first statement when it is a string) reduced
    to its doctest examples (tests/python/test_doc_examples.py runs
    them): prose is not the program."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                              ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            examples = doctest.DocTestParser().get_examples(body[0].value.value)
            body[0].value.value = repr([(e.source, e.want) for e in examples])
    return ast.dump(tree)


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
    rc_file = os.path.join(target.work, "coverage-" + name + ".rc")
    for f in glob.glob(data + "*") + glob.glob(report):
        os.remove(f)
    # Python processes the test starts are measured too (test_jax_sharding
    # runs its cases on 2 host devices in a subprocess): coverage.py's
    # patch = subprocess, each process writing data.<suffix>, combined.
    open(rc_file, "w").write(
        "[run]\n"
        f"data_file = {data}\n"
        f"include = {target.package}/*\n"
        "parallel = true\n"
        "patch =\n    subprocess\n    _exit\n")
    if target.run_oracle(name, timeout=3600, prefix=(
            "-m", "coverage", "run", "--rcfile=" + rc_file)) != 0:
        return None
    rc, _ = run([target.python, "-m", "coverage", "combine", "--rcfile=" + rc_file])
    if rc == 0:
        rc, _ = run([target.python, "-m", "coverage", "json", "--rcfile=" + rc_file,
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
