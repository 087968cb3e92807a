"""The modules of the Python package einc stack in one direction: a reader
can order python/einc so that every module imports only modules below it.

The graph is drawn with ast from the tree (not by importing anything):
module A -> module B for every import of an einc module in A, at module
level or inside a function (a deferred import is still a dependency).
A package's own __init__ is not counted as imported by its submodules
(Python runs it first, but it is the top of the stack, not a dependency).
``_einc`` is the C extension: a node with no edges.

Three checks, each printed with what failed:
- circles: no strongly connected component of two or more modules; the
  modules are printed in an order where each imports only earlier ones;
- the core: einc._core imports only the C extension and the leaves
  (modules that import nothing of einc but the extension), so every
  route can use it and it can reach none of them; the adapters register
  with it instead (docs/design.md, "Python package");
- import cost: what `import einc` runs (module-level imports, followed
  from einc/__init__.py) imports neither torch nor jax;
- installed: every module is in python/meson.build's install_sources
  (pip install . installs only what is listed there).

Usage: py_import_graph.py SOURCE_ROOT [--order]; prints ein-test-summary."""
import ast
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from file_graph import report  # noqa: E402  (one Tarjan for both graphs)

PACKAGE = "einc"
EXTENSION = "einc._einc"
CORE = "einc._core"
FRAMEWORKS = ("torch", "jax", "jaxlib")


def modules(root):
    """{module name: path} of every .py file of python/einc."""
    top = os.path.join(root, "python", PACKAGE)
    out = {}
    for d, _, names in os.walk(top):
        for n in names:
            if not n.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(d, n), os.path.dirname(top))
            parts = rel[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = os.path.join(d, n)
    return out


def resolve(name, path, node):
    """The absolute module an ImportFrom names (its `from` part)."""
    if node.level == 0:
        return node.module or ""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def imports(name, path, known):
    """[(module imported, at module level?)] for every import in the file:
    einc's modules as their names, other modules as given."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    top_level = {id(n) for n in tree.body}
    for n in tree.body:  # `if TYPE_CHECKING:`-free; try/if bodies count
        if isinstance(n, (ast.If, ast.Try)):
            top_level |= {id(c) for c in ast.walk(n)}
    out = []
    for node in ast.walk(tree):
        level = id(node) in top_level
        if isinstance(node, ast.Import):
            out += [(a.name, level) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = resolve(name, path, node)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub if sub in known or sub == EXTENSION
                            else base, level))
    return out


def graph_of(root):
    """(einc graph {module: set of einc modules}, module-level edges
    {module: set of any modules})."""
    known = modules(root)
    graph = {EXTENSION: set()}
    eager = {EXTENSION: set()}
    for name, path in known.items():
        graph[name], eager[name] = set(), set()
        for target, level in imports(name, path, known):
            if level:
                eager[name].add(target)
            if target in known or target == EXTENSION:
                # the package's __init__ is not a dependency of its parts
                if not (target == PACKAGE or name.startswith(target + ".")):
                    graph[name].add(target)
    return graph, eager


def order(graph):
    """The modules bottom up: each after everything it imports (by depth,
    then name); None when there is a circle."""
    depth = {}

    def level(v, seen):
        if v in depth:
            return depth[v]
        if v in seen:
            return None
        below = [level(w, seen | {v}) for w in graph[v]]
        if any(d is None for d in below):
            return None
        depth[v] = 1 + max(below, default=-1)
        return depth[v]

    if any(level(v, frozenset()) is None for v in graph):
        return None
    return sorted(graph, key=lambda v: (depth[v], v)), depth


def check_circles(graph):
    return report("import", graph, "modules") == 0


def check_core(graph):
    leaves = {v for v, out in graph.items() if out <= {EXTENSION}}
    above = sorted(graph.get(CORE, set()) - leaves)
    if CORE not in graph or above:
        print(f"FAIL: {CORE} imports {above or 'nothing: it is missing'}; "
              f"it may import only the extension and the leaves "
              f"{sorted(leaves)}", file=sys.stderr)
        return False
    return True


def check_import_cost(eager):
    """Follows module-level imports from the package: none may be a
    framework."""
    seen, work, bad = set(), [PACKAGE], []
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        for w in eager.get(v, ()):
            if w.split(".")[0] in FRAMEWORKS:
                bad.append(f"{v} imports {w}")
            elif w in eager:
                work.append(w)
    for b in bad:
        print(f"FAIL: `import einc` would import a framework: {b}",
              file=sys.stderr)
    return not bad


def check_installed(root):
    with open(os.path.join(root, "python", "meson.build"),
              encoding="utf-8") as fh:
        listed = set(re.findall(r"'(einc/[^']+\.py)'", fh.read()))
    missing = sorted(os.path.relpath(p, os.path.join(root, "python"))
                     for p in modules(root).values()
                     if os.path.relpath(p, os.path.join(root, "python"))
                     not in listed)
    for m in missing:
        print(f"FAIL: python/{m} is not in python/meson.build's "
              f"install_sources", file=sys.stderr)
    return not missing


def main():
    root = sys.argv[1]
    graph, eager = graph_of(root)
    checks = [check_circles(graph), check_core(graph),
              check_import_cost(eager), check_installed(root)]
    ordered = order(graph)
    if ordered and ("--order" in sys.argv or not all(checks)):
        names, depth = ordered
        for v in names:
            print(f"  {depth[v]:2d} {v}: {', '.join(sorted(graph[v]))}")
    failed = checks.count(False)
    print(f"ein-test-summary: py_import_graph: {len(checks) - failed} "
          f"passed, {failed} failed ({len(graph)} modules, "
          f"{sum(len(e) for e in graph.values())} imports among them)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
