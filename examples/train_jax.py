"""A small transformer block trained with JAX, written twice: with einc
(scores with einc.einsum, heads with einc.rearrange, pooling with
einc.reduce) and with jnp.einsum and einops. Both train under
jax.jit(jax.value_and_grad(loss)) from the same initial weights on the
same data; the losses must agree step by step.

    python examples/train_jax.py [--steps N]

Prints both losses per step; exits nonzero when they differ by more than
the tolerance (f32: 1e-4 of the loss) or when einc cannot run under
jax.jit (einc built without XLA's FFI header).
"""
from __future__ import annotations

import argparse
import sys

import einops
import jax
import jax.numpy as jnp
import numpy as np

import einc

HEADS, DIM, HIDDEN, CLASSES = 4, 32, 64, 3


def init(key):
    keys = jax.random.split(key, 7)
    shapes = {"wq": (DIM, DIM), "wk": (DIM, DIM), "wv": (DIM, DIM),
              "wo": (DIM, DIM), "w1": (DIM, HIDDEN), "w2": (HIDDEN, DIM),
              "wc": (DIM, CLASSES)}
    return {name: jax.random.normal(k, shape) / np.sqrt(shape[0])
            for k, (name, shape) in zip(keys, shapes.items())}


def layer_norm(x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)


def block(p, x, ops):
    """Attention, an MLP and mean pooling, with ops' einsum, rearrange and
    reduce (einc's or jnp/einops')."""
    einsum, rearrange, reduce = ops
    heads = lambda t: rearrange(t, "b n (h k) -> b h n k", h=HEADS)  # noqa
    q, k, v = (heads(einsum("b n d, d e -> b n e", x, p[w]))
               for w in ("wq", "wk", "wv"))
    scores = einsum("b h i k, b h j k -> b h i j", q, k) / np.sqrt(DIM // HEADS)
    attn = einsum("b h i j, b h j k -> b h i k", jax.nn.softmax(scores), v)
    x = layer_norm(x + einsum("b n e, e d -> b n d",
                              rearrange(attn, "b h n k -> b n (h k)"),
                              p["wo"]))
    mlp = einsum("b n f, f d -> b n d",
                 jax.nn.gelu(einsum("b n d, d f -> b n f", x, p["w1"])),
                 p["w2"])
    x = layer_norm(x + mlp)
    pooled = reduce(x, "b n d -> b d", "mean")
    peak = reduce(x, "b n d -> b d", "max")
    return einsum("b d, d c -> b c", pooled + peak, p["wc"])


def loss(p, x, y, ops):
    logits = block(p, x, ops)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits),
                                         y[:, None], axis=1))


EINC = (einc.einsum, einc.rearrange, einc.reduce)
# einops.einsum runs jnp.einsum on JAX arrays
REFERENCE = (lambda expr, *a: einops.einsum(*a, expr), einops.rearrange,
             einops.reduce)


def data(key, n=32, tokens=8):
    """Sequences labelled by which of their first CLASSES features sums
    highest over the tokens."""
    x = jax.random.normal(key, (n, tokens, DIM))
    return x, jnp.argmax(x[:, :, :CLASSES].sum(1), axis=1)


def train(ops, p, x, y, steps, lr=0.1):
    step = jax.jit(jax.value_and_grad(lambda q: loss(q, x, y, ops)))
    losses = []
    for _ in range(steps):
        value, grads = step(p)
        p = jax.tree_util.tree_map(lambda w, g: w - lr * g, p, grads)
        losses.append(float(value))
    return losses


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--tol", type=float, default=1e-4)
    args = parser.parse_args(argv)
    key_p, key_x = jax.random.split(jax.random.PRNGKey(0))
    p, (x, y) = init(key_p), data(key_x)
    try:
        mine = train(EINC, p, x, y, args.steps)
    except einc.EincError as e:
        print(f"einc under jax.jit failed: {e}", file=sys.stderr)
        return 2
    theirs = train(REFERENCE, p, x, y, args.steps)
    worst = 0.0
    print("step  einc        jnp/einops  rel.diff")
    for i, (a, b) in enumerate(zip(mine, theirs)):
        diff = abs(a - b) / max(abs(b), 1e-30)
        worst = max(worst, diff)
        print(f"{i:4d}  {a:.8f}  {b:.8f}  {diff:.1e}")
    ok = worst <= args.tol and mine[-1] < mine[0]
    print(f"{'same losses' if ok else 'MISMATCH'}: worst relative "
          f"difference {worst:.1e} (tolerance {args.tol:g}); loss "
          f"{mine[0]:.4f} -> {mine[-1]:.4f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
