"""Planning time and memory of `einc plan` as a tensor network grows
(issue 26, item 1): random 3-regular graphs, bond 2, a scalar output, at
100, 1,000 and 10,000 operands, the expression and shapes read through
`einc plan --input -`. Reports the wall time of the whole command (parse,
bind, path search, plan, report; the search's default budget grows with
the operand count; a memory limit of 1 GiB, so the larger networks are
planned sliced), einc's own planning time (EINC_TRACE's plan phase),
the peak resident memory (getrusage of the child), and each one's growth
against the previous size.

  python bench/scale.py --einc build-ci/einc [--sizes 100,1000,10000]
"""
import argparse
import os
import random
import re
import resource
import subprocess
import time


def regular(n, deg, bond, seed):
    """Operands as lists of axis names of a random deg-regular multigraph
    (self-loops dropped), every edge an axis of size bond."""
    rng = random.Random(seed)
    stubs = [v for v in range(n) for _ in range(deg)]
    rng.shuffle(stubs)
    ops = [[] for _ in range(n)]
    nedges = 0
    for k in range(0, len(stubs) - 1, 2):
        a, b = stubs[k], stubs[k + 1]
        if a == b:
            continue
        name = f"e{nedges}"
        nedges += 1
        ops[a].append(name)
        ops[b].append(name)
    return ops, bond


def input_text(ops, bond):
    expr = ", ".join(" ".join(op) for op in ops) + " ->"
    shapes = ["x".join([str(bond)] * len(op)) if op else "scalar" for op in ops]
    return expr + "\n" + "\n".join(shapes) + "\n"


def run(einc, text, limit):
    env = dict(os.environ, EINC_TRACE="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    p = subprocess.run([einc, "plan", "--input", "-", "--memory-limit",
                        str(limit)], input=text,
                       capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if p.returncode:
        return wall, None, peak / 1024, "-", "refused: " + p.stderr.strip()[:160]
    m = re.search(r"plan \(bind, contraction path, steps\)\D*([0-9.]+) ?(ms|s|us|µs)",
                  p.stderr)
    plan_s = None
    if m:
        v, u = float(m.group(1)), m.group(2)
        plan_s = v * {"s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}[u]
    flops = re.search(r"plan FLOPs\s+(\S+)", p.stdout).group(1)
    method = re.search(r"^path\s+(\S+)", p.stdout, re.M).group(1)
    sl = re.search(r"^sliced .*?(\S+) slices of", p.stdout, re.M)
    if sl:
        method += f", {sl.group(1)} slices"
    # ru_maxrss of the children is their maximum so far: grows monotonically
    return wall, plan_s, max(peak, before) / 1024, flops, method


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--einc", required=True)
    ap.add_argument("--sizes", default="100,1000,10000")
    # past ~500 operands these networks' best orders have intermediates
    # past int64 elements: they are planned sliced, as they would be run
    ap.add_argument("--memory-limit", type=int, default=1 << 30)
    a = ap.parse_args()
    print("| operands | axes | input bytes | wall s | plan s | peak RSS MiB "
          "| path | plan FLOPs | wall growth |")
    print("|---|---|---|---|---|---|---|---|---|")
    prev = None
    for n in map(int, a.sizes.split(",")):
        ops, bond = regular(n, 3, 2, seed=n)
        text = input_text(ops, bond)
        naxes = len({x for op in ops for x in op})
        wall, plan_s, rss, flops, method = run(a.einc, text, a.memory_limit)
        growth = f"{wall / prev[1]:.1f}x for {n / prev[0]:.0f}x" if prev else ""
        ps = f"{plan_s:.3f}" if plan_s is not None else "?"
        print(f"| {n} | {naxes} | {len(text)} | {wall:.3f} | {ps} | "
              f"{rss:.1f} | {method} | {flops} | {growth} |")
        prev = (n, wall)


if __name__ == "__main__":
    main()
