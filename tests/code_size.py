"""Hand-written C files of at most 900 lines, functions of at most 60
(the developers' guide). Generated files (re2c output, the embedded
preludes) are left out. The Python package's modules (python/einc) of at
most 600 lines, functions of at most 60 (drawn with ast, from the def
line to the last line of the body, less the docstring: a C function's
documentation stands above it and is not counted either).

A function is counted from the line its name stands on to the closing
brace in column 0, the way the project formats C (clang-format: a
definition opens with its return type in column 0 and closes with '}' in
column 0).

Usage: code_size.py SOURCE_ROOT [--list] [--all] [--only FILE...]
  --list: every file and function over the limits, and the counts
  --all: the C of the tests, benchmarks, examples and fuzz targets too
         (by default the library, src/, runtime/, include/, the Python
         extension's C, python/src/, and the package, python/einc)
  --only: look at these files alone (paths from SOURCE_ROOT)
Prints ein-test-summary; fails when a file or function is over and not
in KNOWN."""
import ast
import os
import re
import sys

FILE_LIMIT, FUNC_LIMIT = 900, 60
PY_FILE_LIMIT = 600
PY_PACKAGE = os.path.join("python", "einc")
DIRS = ("src", "runtime", "include", "tests", "python", "bench", "fuzz",
        "examples")
LIBRARY = ("src", "runtime", "include", "python/src")
GENERATED = re.compile(r"_re2c\.c$")
# Over the limits and known, each with its reason; anything else over
# fails. Shrink this list, never grow it without a reason a reader accepts.
KNOWN = {
    "src/cli/cmd_plan.c:cmd_plan_help": "one string literal, the help text",
}
START = re.compile(r"^[A-Za-z_][\w \*,]*?\b(\w+)\s*\(")


def c_files(root, dirs):
    out = []
    for top in dirs:
        for d, _, names in os.walk(os.path.join(root, top)):
            if "/build" in d or "/." in d:
                continue
            out += [os.path.relpath(os.path.join(d, n), root) for n in names
                    if n.endswith((".c", ".h", ".cuh"))
                    and not GENERATED.search(n)]
    return sorted(out)


def functions(lines):
    """(name, first line, length) of each function definition."""
    out, name, first, body = [], None, 0, False
    for i, line in enumerate(lines):
        if name is None:
            m = START.match(line)
            if m and not line.startswith(("typedef", "struct", "enum",
                                          "union", "#", "return")):
                name, first, body = m.group(1), i, False
            else:
                continue
        if not body:
            text = line.split("//")[0].rstrip()
            if text.endswith("{"):
                body = True
            elif text.endswith(";"):
                name = None  # a declaration, not a definition
            continue
        if line.startswith("}"):
            out.append((name, first + 1, i - first + 1))
            name = None
    return out


def py_files(root):
    out = []
    for d, _, names in os.walk(os.path.join(root, PY_PACKAGE)):
        out += [os.path.relpath(os.path.join(d, n), root) for n in names
                if n.endswith(".py")]
    return sorted(out)


def py_functions(text):
    """(name, first line, length less the docstring) of each function."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        length = node.end_lineno - node.lineno + 1
        first = node.body[0]
        if (isinstance(first, ast.Expr) and isinstance(first.value,
                                                       ast.Constant)
                and isinstance(first.value.value, str)):
            length -= first.end_lineno - first.lineno + 1
        out.append((node.name, node.lineno, length))
    return out


def measure(root, f):
    """(lines, file limit, functions) of one file."""
    with open(os.path.join(root, f), encoding="utf-8") as fh:
        text = fh.read()
    lines = text.split("\n")
    n = len(lines) - (1 if lines and lines[-1] == "" else 0)
    if f.endswith(".py"):
        return n, PY_FILE_LIMIT, py_functions(text)
    return n, FILE_LIMIT, functions(lines)


def main():
    root = sys.argv[1]
    listing = "--list" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1:] if "--only" in sys.argv \
        else None
    dirs = DIRS if "--all" in sys.argv else LIBRARY
    files = only if only else c_files(root, dirs) + py_files(root)
    big_files, big_funcs = [], []
    for f in files:
        n, limit, funcs = measure(root, f)
        if n > limit:
            big_files.append((f, n))
        for name, first, length in funcs:
            if length > FUNC_LIMIT:
                big_funcs.append((f, first, name, length))
    failed = 0
    for f, n in big_files:
        known = KNOWN.get(f)
        failed += known is None
        if listing or known is None:
            print(f"{'known' if known else 'FAIL'}: file {f}: {n} lines"
                  f"{' (' + known + ')' if known else ''}",
                  file=sys.stdout if known else sys.stderr)
    for f, first, name, length in big_funcs:
        known = KNOWN.get(f"{f}:{name}")
        failed += known is None
        if listing or known is None:
            print(f"{'known' if known else 'FAIL'}: function {f}:{first} "
                  f"{name}: {length} lines"
                  f"{' (' + known + ')' if known else ''}",
                  file=sys.stdout if known else sys.stderr)
    print(f"ein-test-summary: code_size: {len(files) - failed} passed, "
          f"{failed} failed ({len(files)} files; {len(big_files)} over "
          f"{FILE_LIMIT} lines ({PY_FILE_LIMIT} for Python), "
          f"{len(big_funcs)} functions over "
          f"{FUNC_LIMIT}, {len(big_files) + len(big_funcs) - failed} of "
          f"them known)")
    return 1 if failed and not listing else 0


if __name__ == "__main__":
    sys.exit(main())
