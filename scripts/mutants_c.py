"""The C target of scripts/mutants.py: src/ and runtime/ files, mutated in a
copy of the tree built once with gcov's counters; the oracles are the meson
unit tests, each run only for the lines it executes."""
import filecmp
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys

from mutants_common import ROOT, coverage_map, file_map, run, source_files

# Tests that need what a mutant copy lacks (an install prefix, the docs, a
# GPU) or only check generated files are not oracles.
SKIP_TESTS = {"install", "docs", "gpu_check_rehearsal", "lexer-generated-current",
              "utf8-generated-current", "nodiscard", "cuda_src_compiles",
              "kernel_syntax", "gpu_model_figures"}
# The slow oracles (minutes under coverage), mostly of the CUDA path: used
# with --all-tests only, so that a sampled run fits CI's budget.
SLOW_TESTS = {"eval_random_emu", "cuda_codegen", "cli"}


class CTarget:
    language = "c"
    suffix = ".c"
    jobs = os.cpu_count() or 1  # oracles at once in the coverage pass

    def __init__(self, work, all_tests):
        self.work = os.path.join(work, "c")
        self.copy = os.path.join(self.work, "src")
        self.build = os.path.join(self.work, "build")
        self.all_tests = all_tests

    def files(self, folders):
        return source_files(folders, self.suffix)

    def prepare(self, coverage=True):
        """coverage: True (the coverage pass, or its cache), False (none:
        --against), or the path of a file map (used unless cached)."""
        os.makedirs(self.work, exist_ok=True)
        sync_tree(self.copy)
        if tree_stamp() != read(os.path.join(self.work, "stamp")):
            if os.path.exists(os.path.join(self.work, "coverage.json")):
                os.remove(os.path.join(self.work, "coverage.json"))
            open(os.path.join(self.work, "stamp"), "w").write(tree_stamp())
        # One build serves both: gcov's counters cost the tests little, and a
        # mutant that only warns is still a mutant (no -Werror).
        setup_build(self.copy, self.build, "-Db_coverage=true")
        self.tests = oracle_tests(self.build, self.all_tests)
        self.durations = {}
        cached = os.path.isfile(os.path.join(self.work, "coverage.json"))
        if isinstance(coverage, str) and not cached:
            self.cmap = file_map(self, coverage)
        else:
            self.cmap = coverage_map(self, covered_by) if coverage else {}
        self.objects = objects_of(self.build, self.copy)
        self.digests = {}

    def apply(self, m, oracles):
        """Writes m into the copy and builds the oracles' programs with it:
        None, or why no test runs."""
        self.original = None
        obj = self.objects.get(m.file)
        if obj is None:
            return "invalid"
        if m.file not in self.digests:
            self.digests[m.file] = digest(obj)
        src = os.path.join(self.copy, m.file)
        self.original = open(src).read()
        open(src, "w").write(m.text)
        rc, _ = run(["ninja", "-C", self.build, os.path.relpath(obj, self.build)])
        if rc != 0:
            return "invalid"
        # Trivial compiler equivalence: the same object, the same program.
        if digest(obj) == self.digests[m.file]:
            return "tce"
        programs = sorted({t for name in oracles for t in self.tests[name]})
        if not programs:  # (ninja without targets would build everything)
            return None
        return "invalid" if run(["ninja", "-C", self.build, *programs])[0] else None

    def restore(self, m):
        if self.original is not None:
            src = os.path.join(self.copy, m.file)
            open(src, "w").write(self.original)
            os.utime(src)

    def run_oracle(self, name, timeout=None):
        rc, _ = run(["ninja", "-C", self.build, *self.tests[name]])
        if rc != 0:
            return "invalid"
        limit = timeout or 3 * self.durations.get(name, 60) + 20
        return run_test(self.build, name, limit)


def tree_stamp():
    """A digest of what the C build and its tests are made of, as they are
    in the work tree (the coverage map holds while it does not change)."""
    listed = subprocess.run(["git", "ls-files", "-z", "src", "runtime", "include",
                             "tests", "*meson.build", "meson_options.txt"],
                            cwd=ROOT, check=True, capture_output=True).stdout
    h = hashlib.sha1()
    skip = (b"tests/python/", b"tests/peers/", b"tests/mutants/", b"tests/run.sh")
    for f in sorted(f for f in listed.split(b"\0") if f and not f.startswith(skip)):
        path = os.path.join(ROOT, f.decode())
        if os.path.isfile(path):
            h.update(f + b"\0" + open(path, "rb").read())
    return h.hexdigest()


def read(path):
    return open(path).read() if os.path.isfile(path) else None


def digest(path):
    """The object's code and data without its debug information: a change
    of a type that only passes through (a parameter's array bound) alters
    the DWARF, not the program. Checked on path_given.c's read_tree
    `int (*ssa)[2]` -> `[1]`: the same stripped object (with SEEDED)."""
    if not os.path.exists(path):
        return None
    stripped = path + ".nodebug"
    if run(["objcopy", "--strip-debug", path, stripped])[0] != 0:
        stripped = path
    h = hashlib.sha1(open(stripped, "rb").read()).hexdigest()
    if stripped != path:
        os.remove(stripped)
    return h


def sync_tree(dest):
    """The tracked files as they are in the work tree, and nothing else (a
    file the tree no longer has could shadow a moved header); a file
    already the same keeps its mtime (the copy's build stays incremental),
    one that differs (an edit, an interrupted run's mutant) is copied
    again with the time of the copy."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.split(b"\0")
    tracked = {f for f in (x.decode() for x in listed) if f and
               os.path.isfile(os.path.join(ROOT, f))}
    for f in tracked:
        src, dst = os.path.join(ROOT, f), os.path.join(dest, f)
        if not (os.path.isfile(dst) and filecmp.cmp(src, dst, False)):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            # A fresh time, not the work tree's: a file edited before the
            # copy's last build would else look older than its objects.
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
    for folder, _, files in os.walk(dest):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.relpath(path, dest) not in tracked:
                os.remove(path)


# gcc stamps each --coverage object with the time unless given a seed, so
# that no mutant's object could equal the original's (no "tce" verdict).
SEEDED = "-frandom-seed=einc-mutants"


def setup_build(src, build, *options):
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        rc, out = run(["meson", "setup", build, src, "-Dbuildtype=debugoptimized",
                       "-Dc_args=" + SEEDED, *options])
        if rc != 0:
            sys.exit("meson setup failed:\n" + out[-4000:])
    elif SEEDED not in open(os.path.join(build, "build.ninja")).read():
        run(["meson", "configure", build, "-Dc_args=" + SEEDED])
    rc, out = run(["ninja", "-C", build])
    if rc != 0:
        sys.exit("the unmutated copy does not build:\n" + out[-4000:])


def oracle_tests(build, all_tests):
    """{test name: the ninja targets (its executables)} of the oracles."""
    info = os.path.join(build, "meson-info")
    targets = {t["id"]: t for t in json.load(open(os.path.join(info, "intro-targets.json")))}
    tests = {}
    for t in json.load(open(os.path.join(info, "intro-tests.json"))):
        name = t["name"]
        if ("einc:unit" in t["suite"] and name not in SKIP_TESTS
                and (all_tests or name not in SLOW_TESTS)):
            tests[name] = [os.path.relpath(f, build) for d in t["depends"]
                           if d in targets for f in targets[d]["filename"]]
    return tests


def run_test(build, name, timeout, env=None):
    """meson runs each test in a session of its own, so killing meson's
    group on our timeout left a hanging mutant's test running (one ran 10
    minutes after its verdict): meson's own timeout (300 s a unit test,
    scaled) kills it, ours only backs that up."""
    rc, _ = run(["meson", "test", "-C", build, "--no-rebuild", "-q",
                 "--timeout-multiplier", f"{timeout / 300:.3f}",
                 "--suite", "unit", name], timeout=timeout + 60, env=env)
    return rc


def covered_by(target, name):
    """Runs one oracle on the unmutated copy: {file: (executed lines,
    counted lines)}, or None when it fails there. Its counters go to a
    folder of its own (GCOV_PREFIX), so that oracles can run side by side."""
    prefix = os.path.join(target.work, "gcov", name)
    shutil.rmtree(prefix, ignore_errors=True)
    env = dict(os.environ, GCOV_PREFIX=prefix, GCOV_PREFIX_STRIP="0")
    if run_test(target.build, name, 1800, env=env) != 0:
        return None
    gcdas = glob.glob(os.path.join(prefix, "**", "*.gcda"), recursive=True)
    for g in gcdas:  # gcov reads the notes file beside the counters
        os.symlink(g[len(prefix):-len(".gcda")] + ".gcno", g[:-len(".gcda")] + ".gcno")
    lines = gcov_lines(target, gcdas) if gcdas else {}
    shutil.rmtree(prefix, ignore_errors=True)
    return lines


def gcov_lines(target, gcdas):
    """{source path relative to the root: ({executed lines}, {counted
    lines})} from .gcda files."""
    # Its status is not 0 when one file of many has a complaint; what it
    # could read is still right.
    _, out = run(["gcov", "--json-format", "--stdout", *gcdas], cwd=target.build)
    lines = {}
    for doc in out.splitlines():
        if doc.startswith("{"):
            for f in json.loads(doc).get("files", []):
                path = os.path.normpath(os.path.join(target.build, f["file"]))
                hit, counted = lines.setdefault(os.path.relpath(path, target.copy),
                                                (set(), set()))
                counted.update(ln["line_number"] for ln in f["lines"])
                hit.update(ln["line_number"] for ln in f["lines"] if ln["count"] > 0)
    return lines


def objects_of(build, copy):
    """{source path relative to the root: its object file}."""
    objs = {}
    for c in json.load(open(os.path.join(build, "compile_commands.json"))):
        path = os.path.normpath(os.path.join(c["directory"], c["file"]))
        objs[os.path.relpath(path, copy)] = os.path.join(build, c["output"])
    return objs
