"""Training a small transformer block with einc in PyTorch (issue 25).

The same block is written twice: with einc (attention scores with
einc.einsum, heads with einc.rearrange, pooling with einc.reduce) and with
einops + torch.einsum. Both start from the same weights and see the same
batches; the script trains them side by side, eagerly and under
torch.compile(fullgraph=True) (graph breaks counted with
torch._dynamo.explain: there must be none), prints the loss curves and
exits nonzero when einc's losses leave the reference's (relative 1e-4) or
a graph breaks.

    python examples/train_torch.py [--steps 30] [--no-compile]
"""

from __future__ import annotations

import argparse
import copy
import sys

import torch

import einc

try:
    import einops
except ImportError:  # the reference needs einops
    sys.exit("examples/train_torch.py compares against einops: "
             "pip install einops")


class EincOps:
    """The block's tensor operations, written with einc."""

    rearrange = staticmethod(einc.rearrange)
    reduce = staticmethod(einc.reduce)

    @staticmethod
    def scores(q, k):
        return einc.einsum("b h i d, b h j d -> b h i j", q, k)

    @staticmethod
    def mix(a, v):
        return einc.einsum("b h i j, b h j d -> b h i d", a, v)


class ReferenceOps:
    """The same with einops and torch.einsum."""

    rearrange = staticmethod(einops.rearrange)
    reduce = staticmethod(einops.reduce)

    @staticmethod
    def scores(q, k):
        return torch.einsum("bhid,bhjd->bhij", q, k)

    @staticmethod
    def mix(a, v):
        return torch.einsum("bhij,bhjd->bhid", a, v)


class Block(torch.nn.Module):
    """Pre-norm attention and MLP, mean-pooled into a classifier."""

    def __init__(self, ops, dim=32, heads=4, classes=5):
        super().__init__()
        self.ops, self.heads = ops, heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim),
                                       torch.nn.GELU(),
                                       torch.nn.Linear(2 * dim, dim))
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, x):
        ops = self.ops
        q, k, v = ops.rearrange(self.qkv(self.norm1(x)),
                                "b t (three h d) -> three b h t d",
                                three=3, h=self.heads)
        scores = ops.scores(q, k) * q.shape[-1] ** -0.5
        attended = ops.mix(torch.softmax(scores, dim=-1), v)
        x = x + self.out(ops.rearrange(attended, "b h t d -> b t (h d)"))
        x = x + self.mlp(self.norm2(x))
        return self.head(ops.reduce(x, "b t d -> b d", "mean"))


def batches(steps, seed=0, batch=8, tokens=16, dim=32, classes=5):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(batch, tokens, dim, generator=g)
        yield x, (x.sum((1, 2)) > 0).long() + (x[:, 0, 0] > 1).long() * 2


def train(model, steps):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for x, y in batches(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def models():
    """The einc block and its reference, with the same weights."""
    torch.manual_seed(0)
    mine = Block(EincOps)
    reference = Block(ReferenceOps)
    reference.load_state_dict(copy.deepcopy(mine.state_dict()))
    return mine, reference


def graph_breaks(model) -> int:
    x, _ = next(batches(1))
    return torch._dynamo.explain(model)(x).graph_break_count


def compare(name, losses, want, rtol) -> bool:
    print(f"{name}:")
    worst = 0.0
    for i, (a, b) in enumerate(zip(losses, want)):
        worst = max(worst, abs(a - b) / abs(b))
        print(f"  step {i:3d}  einc {a:.6f}  reference {b:.6f}")
    ok = len(losses) == len(want) and worst <= rtol
    print(f"  largest relative difference {worst:.2e} "
          f"({'ok' if ok else 'MISMATCH'}, tolerance {rtol:.0e})")
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the same reduction order run to run
    mine, reference = models()
    want = train(reference, args.steps)
    ok = compare("eager", train(mine, args.steps), want, 1e-4)
    if not args.no_compile:
        mine, _ = models()
        breaks = graph_breaks(mine)
        print(f"torch.compile graph breaks in the einc block: {breaks}")
        compiled = torch.compile(mine, fullgraph=True)
        ok = compare("torch.compile(fullgraph=True)",
                     train(compiled, args.steps), want, 1e-4) and ok
        ok = ok and breaks == 0
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
