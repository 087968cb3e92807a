"""No circle between the files of the library: a reader can order src/ and
runtime/ so that every file calls only files before it.

Two graphs, both drawn from what the build made and the tree holds rather
than from names in the text:
- calls: object file A -> B when A leaves a symbol undefined that B
  defines (nm on each stage's archive, member by member). That is every
  call and every use of a global, whatever header declared it; static
  inline functions in headers are part of the caller and draw no edge.
- includes: header A -> header B when A has #include "B" (found beside A
  or on a stage's include path).
Each graph must have no strongly connected component of two or more
files. stage_symbols.py checks the coarser rule (no stage reaches back);
this one holds inside a stage too.

With --extension ARCHIVE (the Python extension's C files, python/src,
compiled into one archive by tests/meson.build), a third graph: the
calls among the extension's own object files, drawn the same way.

Usage: file_graph.py SOURCE_ROOT BUILD_DIR [--extension ARCHIVE];
prints ein-test-summary."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stage_symbols import STAGES  # noqa: E402  (the stages: one list)
DIRS = ("src", "runtime")
EXTENSION_DIRS = ("python/src",)


def tree_files(root, ends, dirs=DIRS):
    out = []
    for top in dirs:
        for d, _, names in os.walk(os.path.join(root, top)):
            out += [os.path.relpath(os.path.join(d, n), root)
                    for n in names if n.endswith(ends)]
    return sorted(out)


def object_name(member, by_mangled):
    """The source file behind an archive member (meson names an object
    after its source's path with '/' as '_')."""
    base = os.path.basename(member)
    base = base[:-2] if base.endswith(".o") else base
    # (a source outside the target's folder: "../python/src/x.c")
    base = base[3:] if base.startswith(".._") else base
    return by_mangled.get(base, base)


def symbol_graph(root, archives, dirs=DIRS):
    by_mangled = {p.replace("/", "_"): p
                  for p in tree_files(root, ".c", dirs)}
    defined, undefined = {}, {}
    for archive in archives:
        out = subprocess.run(["nm", "-A", "-P", archive], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.match(r"^.*\[(.*)\]: (\S+) (\S)", line)
            if not m:
                continue
            f = object_name(m.group(1), by_mangled)
            name, kind = m.group(2), m.group(3)
            defined.setdefault(f, set())
            undefined.setdefault(f, set())
            if kind == "U":
                undefined[f].add(name)
            elif kind.isupper() or kind in "vw":
                defined[f].add(name)
    owner = {}
    for f, names in defined.items():
        for n in names:
            owner.setdefault(n, f)
    return {f: {owner[n] for n in undefined[f] if n in owner} - {f}
            for f in defined}


def include_graph(root):
    headers = tree_files(root, (".h", ".cuh"))
    by_name = {}
    for h in headers:
        by_name.setdefault(os.path.basename(h), []).append(h)
    graph = {}
    for h in headers:
        text = open(os.path.join(root, h), encoding="utf-8").read()
        graph[h] = set()
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            beside = os.path.normpath(os.path.join(os.path.dirname(h), inc))
            if beside in graph or os.path.exists(os.path.join(root, beside)):
                target = beside
            elif len(by_name.get(os.path.basename(inc), [])) == 1:
                target = by_name[os.path.basename(inc)][0]
            else:
                continue  # a system or public header
            if target != h and target.endswith((".h", ".cuh")):
                graph[h].add(target)
    return graph


def circles(graph):
    """Strongly connected components of two or more nodes (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def report(kind, graph, noun="files"):
    """Prints each circle of graph as a FAIL line; gives how many."""
    found = circles(graph)
    for comp in found:
        edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a])
                 if b in comp]
        print(f"FAIL: {kind} circle among {len(comp)} {noun}: "
              f"{'; '.join(edges)}", file=sys.stderr)
    return len(found)


def main():
    root, build = sys.argv[1], sys.argv[2]
    stages = [os.path.join(build, f"libein_{s}.a") for s in STAGES]
    calls = symbol_graph(root, stages)
    includes = include_graph(root)
    found = [report("call", calls), report("include", includes)]
    what = f"{len(calls)} object files, {len(includes)} headers"
    if "--extension" in sys.argv:
        archive = sys.argv[sys.argv.index("--extension") + 1]
        ext = symbol_graph(root, [archive], EXTENSION_DIRS)
        found.append(report("extension call", ext))
        what += f", {len(ext)} extension object files"
    failed = sum(1 for n in found if n)
    print(f"ein-test-summary: file_graph: {len(found) - failed} passed, "
          f"{failed} failed ({what}; {sum(found)} circles)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
