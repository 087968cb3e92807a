"""What the mutation targets share: the mutant, running a command with a
time limit, and the mutants universalmutator generates for one file."""
import concurrent.futures
import dataclasses
import difflib
import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTATOR = "universalmutator==1.14.1"


@dataclasses.dataclass
class Mutant:
    file: str          # path relative to the root
    line: int          # 1-based line of the change in the original
    old: str
    new: str
    key: str = ""
    status: str = ""   # killed survived uncovered equivalent tce invalid
    killer: str = ""

    def __post_init__(self):
        # The key names the change, not its line, so that it survives edits
        # elsewhere in the file (equivalent.tsv lists keys).
        h = hashlib.sha1("\0".join([self.file, self.old.strip(),
                                    self.new.strip()]).encode())
        self.key = h.hexdigest()[:12]

    @property
    def text(self):
        """The whole mutated file (made when needed: a folder's pool holds
        tens of thousands of mutants)."""
        original = open(os.path.join(ROOT, self.file)).read().splitlines(keepends=True)
        return "".join(original[:self.line - 1]) + self.new + "".join(original[self.line:])

    def diff(self):
        return "".join(difflib.unified_diff(
            self.old.splitlines(True), self.new.splitlines(True),
            f"{self.file}:{self.line}", f"{self.file}:{self.line}"))


def log(msg):
    print(msg, flush=True)


def run(cmd, timeout=None, **kw):
    """Runs cmd in its own process group; returns (rc, output), rc None when
    it ran past timeout (then the whole group is killed)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, text=True, errors="replace", **kw)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out


# re2c's output (lexer_re2c.c from lexer.re, utf8_re2c.c from utf8.re):
# its mutants would test re2c's tables, and one file of it is 8,700 lines
# (tens of thousands of mutants, each written out whole by the generator).
GENERATED = "_re2c.c"


def source_files(folders, suffix):
    """The hand-written files ending in suffix below the folders, relative
    to the root."""
    found = []
    for folder in folders:
        found += glob.glob(os.path.join(ROOT, folder, "**", "*" + suffix), recursive=True)
    return sorted(os.path.relpath(f, ROOT) for f in found if not f.endswith(GENERATED))


def mutate_tool(work):
    """universalmutator's `mutate`, installed into WORK/tools on first use
    (or EINC_MUTATE)."""
    exe = os.environ.get("EINC_MUTATE") or os.path.join(work, "tools", "bin", "mutate")
    if not os.path.exists(exe):
        venv = os.path.join(work, "tools")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install",
                        "-q", MUTATOR], check=True)
    return exe


# universalmutator's own rule choice for a language (its genmutants.py),
# asked of its library: the command line writes every mutant out as a
# whole file (57 s for cpu_loops.c's 6,709; the library call takes 1 s).
LIST_MUTANTS = """
import json, sys
from universalmutator import mutator
path, language = sys.argv[1:3]
rules = ["universal.rules", language + ".rules"] + (["c_like.rules"] if language == "c" else [])
source = open(path).readlines()
found = mutator.mutants_regexp(source, ruleFiles=rules, ignorePatterns=[], ignoreStringOnly=True)
sys.stderr.flush()
print(json.dumps([[n, new] for n, new, *_ in found]))
"""


def generate(tool, work, rel, language):
    """The distinct one-line mutants of one file, cached by its content."""
    content = open(os.path.join(ROOT, rel), "rb").read()
    out = os.path.join(work, "generated", rel.replace("/", "__") + "-" +
                       hashlib.sha1(content).hexdigest()[:10] + ".json")
    if not os.path.isfile(out):
        python = os.path.join(os.path.dirname(tool), "python")
        done = subprocess.run([python, "-c", LIST_MUTANTS, os.path.join(ROOT, rel), language],
                              check=True, capture_output=True, text=True)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        open(out + ".tmp", "w").write(done.stdout.splitlines()[-1])
        os.replace(out + ".tmp", out)
    original = content.decode().splitlines(keepends=True)
    seen, mutants = set(), []
    for n, new in json.load(open(out)):
        if original[n - 1] != new:
            m = Mutant(rel, n, original[n - 1], new)
            if m.key not in seen:
                seen.add(m.key)
                mutants.append(m)
    return mutants


def first_failure(m, oracles, target, kills, cap=None):
    """Runs the oracles that reach m, the ones that killed this file's
    mutants before first, then the fastest; stops at the first failure.
    With cap (seconds), a mutant still alive after its oracles ran that
    long is "capped": counted as a survivor (the score is then a lower
    bound), the oracles not reached named in m.killer."""
    order = sorted(set(oracles), key=lambda n: (-kills.get((m.file, n), 0),
                                                target.durations.get(n, 60)))
    t0 = time.monotonic()
    for i, name in enumerate(order):
        if cap is not None and time.monotonic() - t0 > cap:
            m.killer = f"{len(order) - i} of {len(order)} oracles not run: " + \
                " ".join(order[i:])
            return "capped"
        rc = target.run_oracle(name)
        if rc == "invalid":
            return "invalid"
        if rc != 0:
            m.killer = name if rc is not None else name + " (timeout)"
            kills[(m.file, name)] = kills.get((m.file, name), 0) + 1
            return "killed"
    return "survived"


def coverage_map(target, covered_by):
    """{file: {"lines": {line: [oracles executing it]}, "any": [oracles
    executing the file], "instrumented": {lines the tool counts}}}, and each
    oracle's time on the unmutated copy (target.durations), cached in
    WORK/coverage.json while the oracles stay the same. covered_by(target,
    name) runs one oracle and gives {file: (executed, counted lines)}, or
    None when the oracle fails on the unmutated copy (then it is dropped:
    a timing check that an instrumented build misses, say). A
    line the tool does not count (a table's entry, a declaration) is
    reached by every oracle that executes its file."""
    cache = os.path.join(target.work, "coverage.json")
    if os.path.isfile(cache):
        cmap = json.load(open(cache))
        target.durations = cmap.pop("//durations", {})
        if cmap.pop("//tests", None) == sorted(target.tests):
            for f in cmap.values():
                f["lines"] = {int(k): v for k, v in f["lines"].items()}
                f["instrumented"] = set(f["instrumented"])
            return cmap
    cmap = {}

    def one(name):
        t0 = time.monotonic()
        lines = covered_by(target, name)
        return name, lines, time.monotonic() - t0

    # target.jobs oracles at once (each keeps its counters apart); their
    # times, the timeouts' base, are then those of a busy machine.
    with concurrent.futures.ThreadPoolExecutor(target.jobs) as pool:
        for name, lines, seconds in pool.map(one, sorted(target.tests)):
            if lines is None:  # it cannot tell a mutant from the original
                log(f"coverage: {name} fails on the unmutated copy: not an oracle")
                continue
            for f, (hit, counted) in lines.items():
                entry = cmap.setdefault(f, {"lines": {}, "any": [], "instrumented": set()})
                entry["instrumented"] |= counted
                for ln in hit:
                    entry["lines"].setdefault(ln, []).append(name)
                if hit:
                    entry["any"].append(name)
            target.durations[name] = seconds
            log(f"coverage: {name} ({seconds:.1f} s)")
    saved = {f: {**e, "instrumented": sorted(e["instrumented"])} for f, e in cmap.items()}
    json.dump({**saved, "//tests": sorted(target.tests), "//durations": target.durations},
              open(cache, "w"))
    return cmap


def save_file_map(target, path):
    """Writes which tests execute each file and their times, from the
    coverage pass, for runs that cannot afford one (CI): file-level, so a
    mutant there runs every test of its file, fastest first."""
    saved = json.load(open(path)) if os.path.isfile(path) else {}
    saved.setdefault("//durations", {}).update(
        {k: round(v, 1) for k, v in target.durations.items()})
    # Those that failed on the unmutated copy (path_hard's CPU-time checks
    # under coverage and load): not oracles, and not "newer" either.
    saved["//not_oracles"] = sorted(set(saved.get("//not_oracles", [])) |
                                    {t for t in target.tests if t not in target.durations})
    saved.update({f: sorted(e["any"]) for f, e in target.cmap.items()
                  if e["any"] and f.startswith(("src/", "runtime/", "python/einc/"))})
    # A line a file, so that a change of the map reads as a diff.
    open(path, "w").write("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}"
                                              for k, v in sorted(saved.items())) + "\n}\n")


def file_map(target, path):
    """The coverage map's shape from save_file_map's file: every line of a
    file reached by all its tests (those this build still has), and by
    every test newer than the file (it may reach any file)."""
    saved = json.load(open(path)) if os.path.isfile(path) else {}
    target.durations = saved.pop("//durations", {})
    dropped = set(saved.pop("//not_oracles", []))
    newer = [t for t in target.tests if t not in target.durations and t not in dropped]
    # A file newer than the map (path_sweep.c at ad93665) is not known to
    # be uncovered: every oracle may reach it.
    target.unmapped = [t for t in target.tests if t not in dropped]
    return {f: {"lines": {}, "instrumented": set(),
                "any": [t for t in tests if t in target.tests] + newer}
            for f, tests in saved.items()}


def oracles_of(target, m):
    """The oracles that reach m's line (see coverage_map). A line the tool
    does not count that continues a counted statement (an argument on the
    next line) is reached by that statement's oracles."""
    entry = target.cmap.get(m.file)
    if entry is None:  # no test executes it, or (a file map) it is new
        return getattr(target, "unmapped", [])
    line = statement_start(m.file, m.line, entry["instrumented"])
    if line in entry["instrumented"]:
        return entry["lines"].get(line, [])
    return entry["any"]


def statement_start(rel, line, counted, reach=8):
    """The counted line whose statement `line` continues, else `line`."""
    text = source_lines(rel)
    for start in range(line, max(line - reach, 0) - 1, -1):
        if start in counted:
            between = text[start - 1:line - 1]
            ended = any(t.split("//")[0].rstrip().endswith((";", "{", "}", ":"))
                        for t in between)
            return line if ended else start
    return line


_SOURCES = {}


def source_lines(rel):
    if rel not in _SOURCES:
        _SOURCES[rel] = open(os.path.join(ROOT, rel)).read().splitlines()
    return _SOURCES[rel]
