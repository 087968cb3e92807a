"""What a PyTorch (or JAX) user writes for each case of cases.tsv, timed on
the GPU by the same rules as `einc bench`: random inputs in [-1, 1), copies
rotated when the inputs fit twice in L2, warm-up, median of `runs` runs each
timed alone with CUDA events.

  torch     torch eager: einops.einsum (torch.einsum underneath) for plain
            contractions, einops.rearrange/reduce/repeat with .contiguous()
            where the result must be materialised, `@` or einsum followed by
            rearrange for attn_merge and qkv_split
  compiled  the same function under torch.compile (Inductor, default mode),
            torch._dynamo.reset() before each case so none falls back to eager
  jax       jax.jit(jnp.einsum) where einsum expresses the case (f32 with
            precision HIGHEST, so no TF32); host-timed with block_until_ready

Run alone for a quick look:  python3 bench/torch_ref.py [case ...]
"""
import os
import sys

import torch
import einops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases as suite  # noqa: E402

DT = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}


def torch_fn(case):
    n, L, red = case.name, case.lengths(), case.reduction()
    if n == 'attn_merge':
        return lambda p, v: einops.rearrange(torch.einsum('bhij,bhjd->bhid', p, v),
                                             'b h i d -> b i (h d)').contiguous()
    if n == 'qkv_split':
        return lambda x, w: einops.rearrange(x @ w, 'b s (h d) -> b h s d', h=L['h']).contiguous()
    if n == 'diag':
        return lambda x: torch.einsum('bii->bi', x).contiguous()
    if red:
        return lambda x: einops.reduce(x, case.expr, red, **L)
    if ',' in case.expr:
        return lambda *xs: einops.einsum(*xs, case.expr)
    if n == 'repeat_kv':
        return lambda x: einops.repeat(x, case.expr, **L).contiguous()
    return lambda x: einops.rearrange(x, case.expr, **L).contiguous()


def letters(expr):
    """'b h i d, b h j d -> b h i j' as 'bhid,bhjd->bhij' (plain cases)."""
    names = {}
    def conv(side):
        return ','.join(''.join(names.setdefault(a, chr(ord('a') + len(names)))
                                for a in op.split()) for op in side.split(','))
    lhs, rhs = expr.split('->')
    return conv(lhs) + '->' + conv(rhs)


def jax_fn(case, dtype):
    if '(' in case.expr or case.reduction() or case.lengths():
        return None
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    sub = letters(case.expr)
    prec = jax.lax.Precision.HIGHEST if dtype == 'f32' else None
    return jax.jit(lambda *xs: jnp.einsum(sub, *xs, precision=prec))


def _copies(base):
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    nbytes = sum(x.numel() * x.element_size() for x in base)
    k = suite.rotation_copies(nbytes, l2)
    return [base] + [[x.clone() for x in base] for _ in range(k - 1)]


def cuda_time(fn, copies, runs, warmup=3):
    for r in range(warmup):
        fn(*copies[r % len(copies)])
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for r in range(runs):
        xs = copies[(warmup + r) % len(copies)]
        s.record()
        fn(*xs)
        e.record()
        e.synchronize()
        t.append(s.elapsed_time(e))
    return suite.median(t)


def time_case(case, dtype, runs=20):
    torch.manual_seed(0)
    shapes = case.gpu_shapes
    base = [(torch.rand(s, device='cuda', dtype=torch.float32) * 2 - 1).to(DT[dtype]) for s in shapes]
    copies = _copies(base)
    fn = torch_fn(case)
    out = {'torch': cuda_time(fn, copies, runs)}
    torch._dynamo.reset()
    try:
        out['compiled'] = cuda_time(torch.compile(fn), copies, runs)
    except Exception as ex:  # noqa: BLE001 - report and go on
        print(f'  torch.compile failed on {case.name}: {ex}', file=sys.stderr)
    jf = jax_fn(case, dtype)
    if jf is not None:
        import time
        import jax.numpy as jnp
        import numpy as np
        jdt = {'bf16': jnp.bfloat16, 'f16': jnp.float16, 'f32': jnp.float32}[dtype]
        jcopies = [[jnp.asarray(np.asarray(x.float().cpu()), dtype=jdt) for x in xs]
                   for xs in copies[:4]]
        for r in range(3):
            jf(*jcopies[r % len(jcopies)]).block_until_ready()
        t = []
        for r in range(runs):
            xs = jcopies[r % len(jcopies)]
            t0 = time.perf_counter()
            jf(*xs).block_until_ready()
            t.append((time.perf_counter() - t0) * 1e3)
        out['jax'] = suite.median(t)
    del copies, base
    torch.cuda.empty_cache()
    return out


if __name__ == '__main__':
    want = sys.argv[1:]
    for c in suite.load():
        if (want and c.name not in want) or not c.gpu_shapes:
            continue
        for dt in ('bf16', 'f32'):
            print(c.name, dt, time_case(c, dt))
