"""einc in torch training code (issue 25): what the autograd path costs.

- eager per-call time on 8x8 f32 tensors: einc.einsum without grad (the
  C fast path), with inputs that require grad (forward only, and forward
  + backward), beside torch.einsum doing the same, and a trivial
  torch.autograd.Function (the floor of any Python-level autograd op);
- forward + backward on larger cases, einc against torch.einsum;
- the same functions under torch.compile (fullgraph=True), graph breaks
  counted with torch._dynamo.explain.

Every case is run interleaved with its peers, REPS rounds, each the best of
a few batches; the table shows each case's fastest round. Pass --cpu-time
to time with the thread's CPU time (time.thread_time) instead of the wall
clock, which helps on a machine shared with other work. One thread:
torch.set_num_threads(1) and EINC_NUM_THREADS=1 (set it in the
environment).

    EINC_NUM_THREADS=1 python bench/torch_autograd.py [--cpu-time]
"""

from __future__ import annotations

import argparse
import gc
import time

import torch

import einc

REPS = 9


class _Trivial(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return torch.empty(8, 8)

    @staticmethod
    def backward(ctx, g):
        return g, g


def _best(cases, number, clock):
    best = {k: float("inf") for k in cases}
    for f in cases.values():
        f()
    gc.disable()
    try:
        for _ in range(REPS):
            for k, f in cases.items():
                t0 = clock()
                for _ in range(number):
                    f()
                best[k] = min(best[k], (clock() - t0) / number)
    finally:
        gc.enable()
    return best


def small(clock):
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    ones = torch.ones(8, 8)
    expr, np_expr = "i j, j k -> i k", "ij,jk->ik"
    cases = {
        "einc.einsum, no grad": lambda: einc.einsum(expr, x, w),
        "torch.einsum, no grad": lambda: torch.einsum(np_expr, x, w),
        "einc.einsum, requires grad (fwd)": lambda: einc.einsum(expr, xg, wg),
        "torch.einsum, requires grad (fwd)":
            lambda: torch.einsum(np_expr, xg, wg),
        "trivial autograd.Function (fwd)": lambda: _Trivial.apply(xg, wg),
        "einc.einsum fwd+bwd":
            lambda: einc.einsum(expr, xg, wg).backward(ones),
        "torch.einsum fwd+bwd":
            lambda: torch.einsum(np_expr, xg, wg).backward(ones),
        "einc.rearrange, requires grad (view)":
            lambda: einc.rearrange(xg, "i j -> j i"),
    }
    print("8x8 f32, per call (us)")
    for k, t in _best(cases, 300, clock).items():
        print(f"  {k:40s} {t * 1e6:9.2f}")


LARGE = [
    ("attention scores", "b h i d, b h j d -> b h i j", "bhid,bhjd->bhij",
     [(4, 8, 128, 64), (4, 8, 128, 64)]),
    ("linear", "b t d, d f -> b t f", "btd,df->btf",
     [(8, 128, 512), (512, 1024)]),
    ("chain", "a b, b c, c d -> a d", "ab,bc,cd->ad",
     [(256, 512), (512, 64), (64, 512)]),
]


def large(clock):
    print("forward + backward (ms)        einc   torch.einsum   ratio")
    g = torch.Generator().manual_seed(0)
    for name, expr, np_expr, shapes in LARGE:
        xs = [torch.randn(s, generator=g).requires_grad_() for s in shapes]
        dout = torch.randn(torch.einsum(np_expr, *xs).shape)
        cases = {
            "einc": lambda: einc.einsum(expr, *xs).backward(dout),
            "torch": lambda: torch.einsum(np_expr, *xs).backward(dout),
        }
        t = _best(cases, 1, clock)
        print(f"  {name:24s} {t['einc'] * 1e3:9.2f} {t['torch'] * 1e3:12.2f}"
              f" {t['einc'] / t['torch']:9.2f}")


def compiled(clock):
    def with_einc(q, k):
        return einc.einsum("b h i d, b h j d -> b h i j", q, k).softmax(-1)

    def with_torch(q, k):
        return torch.einsum("bhid,bhjd->bhij", q, k).softmax(-1)

    q = torch.randn(4, 8, 64, 32, requires_grad=True)
    k = torch.randn(4, 8, 64, 32, requires_grad=True)
    breaks = torch._dynamo.explain(with_einc)(q, k).graph_break_count
    fe = torch.compile(with_einc, fullgraph=True)
    ft = torch.compile(with_torch, fullgraph=True)
    cases = {"einc": lambda: fe(q, k).sum().backward(),
             "torch": lambda: ft(q, k).sum().backward()}
    t = _best(cases, 5, clock)
    print(f"torch.compile fwd+bwd, attention 4x8x64x32 (ms): einc "
          f"{t['einc'] * 1e3:.3f}, torch.einsum {t['torch'] * 1e3:.3f} "
          f"(ratio {t['einc'] / t['torch']:.2f}); einc graph breaks: "
          f"{breaks}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-time", action="store_true")
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    clock = time.thread_time if args.cpu_time else time.perf_counter
    small(clock)
    large(clock)
    if not args.no_compile:
        compiled(clock)


if __name__ == "__main__":
    main()
