"""No stage reaches back: every symbol a stage's archive uses is defined in
that archive or in a stage below it (meson.build's stage order), the C
library and the system's libraries aside. The include paths stop a header
of a later stage from being found; this stops a function declared in ein.h
(seen by every stage) but defined in a later stage from being called.

Usage: stage_symbols.py BUILD_DIR; prints ein-test-summary."""
import os
import subprocess
import sys

# bottom first, as meson.build builds them; shapecheck and the binder
# both stand on lexer, the planner on the binder, codegen on planner,
# runtime on codegen, api on all
STAGES = {
    "util": [],
    "lexer": ["util"],
    "binder": ["lexer", "util"],
    "planner": ["binder", "lexer", "util"],
    "shapecheck": ["lexer", "util"],
    "codegen": ["planner", "binder", "lexer", "util"],
    "runtime": ["codegen", "planner", "binder", "lexer", "util"],
    "api": ["runtime", "codegen", "shapecheck", "planner", "binder", "lexer",
            "util"],
}


def symbols(archive, flag):
    out = subprocess.run(["nm", "-g", "-P", flag, archive], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.endswith(":"):
            names.add(parts[0])
    return names


def main():
    build = sys.argv[1]
    defined, used = {}, {}
    for s in STAGES:
        a = os.path.join(build, f"libein_{s}.a")
        defined[s] = symbols(a, "--defined-only")
        used[s] = symbols(a, "--undefined-only") - defined[s]
    passed = failed = 0
    for s, below in STAGES.items():
        allowed = set(defined[s]).union(*(defined[b] for b in below))
        for other in STAGES:
            if other == s or other in below:
                continue
            reach = sorted(used[s] & (defined[other] - allowed))
            if reach:
                failed += 1
                print(f"FAIL: stage {s} calls into {other}: "
                      f"{', '.join(reach)}", file=sys.stderr)
            else:
                passed += 1
    print(f"ein-test-summary: stage_symbols: {passed} passed, "
          f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
