"""What a NumPy user writes for each case of cases.tsv, on the CPU.

numpy_fn(case, shapes) gives numpy.einsum(optimize=True) where einsum can
express the case (after a reshape view for split axes), else plain NumPy
(max, repeat). einops_fn gives einops on NumPy arrays. Both materialise the
result in C order, as einc does.
"""
import numpy as np

try:
    import einops
except ImportError:  # the einops column is then left empty
    einops = None


def _c(x):
    return np.ascontiguousarray(x)


def numpy_fn(case, shapes):
    n, L = case.name, case.lengths()
    E = lambda sub: (lambda *xs: _c(np.einsum(sub, *xs, optimize=True)))
    if n == 'gemm': return E('mk,kn->mn')
    if n == 'attn_scores': return E('bhid,bhjd->bhij')
    if n == 'attn_merge':
        def f(p, v):
            b, h, i, _ = p.shape
            return np.einsum('bhij,bhjd->bihd', p, v, optimize=True).reshape(b, i, -1)
        return f
    if n == 'qkv_split':
        h = L['h']
        return lambda x, w: _c(np.einsum('bse,ehd->bhsd', x,
                                         w.reshape(w.shape[0], h, -1), optimize=True))
    if n == 'gqa_scores': return E('bgrid,bgjd->bgrij')
    if n == 'bilinear': return E('bi,ijk,bj->bk')
    if n == 'moe': return E('ecd,edf->ecf')
    if n == 'outer': return E('bi,bj->bij')
    if n == 'tn5': return E('ea,fb,abcd,gc,hd->efgh')
    if n == 'nchw_nhwc': return E('bchw->bhwc')
    if n == 'patchify':
        p1, p2 = L['p1'], L['p2']
        def f(x):
            b, c, H, W = x.shape
            v = x.reshape(b, c, H // p1, p1, W // p2, p2)
            return _c(np.einsum('bchpwq->bhwpqc', v)).reshape(b, (H // p1) * (W // p2), -1)
        return f
    if n == 'pool_mean':
        h2, w2 = L['h2'], L['w2']
        def f(x):
            b, c, H, W = x.shape
            v = x.reshape(b, c, H // h2, h2, W // w2, w2)
            return np.einsum('bchpwq->bchw', v, optimize=True) * (1.0 / (h2 * w2))
        return f
    if n == 'rowsum': return E('bsd->bs')
    if n == 'colmax': return lambda x: x.max(axis=(0, 1))
    if n == 'diag': return E('bii->bi')
    if n == 'repeat_kv':
        r = L['r']
        def f(x):
            b, h, s, d = x.shape
            return _c(np.broadcast_to(x[:, :, None], (b, h, r, s, d))).reshape(b, h * r, s, d)
        return f
    raise KeyError(n)


def einops_fn(case, shapes):
    if einops is None:
        return None
    n, L, red = case.name, case.lengths(), case.reduction()
    lhs, rhs = [s.strip() for s in case.expr.split('->')]
    if n == 'diag':
        return None  # einops has no repeated axes
    if red:
        return lambda x: einops.reduce(x, case.expr, red, **L)
    if ',' in lhs:
        if n in ('attn_merge', 'qkv_split'):
            return None  # einops.einsum has no axis groups
        if lhs.count(',') > 1:
            return None  # einops calls np.einsum without optimize: tn5 is 32^8 steps
        return lambda *xs: _c(einops.einsum(*xs, case.expr))
    if n == 'repeat_kv':
        return lambda x: einops.repeat(x, case.expr, **L)
    return lambda x: _c(einops.rearrange(x, case.expr, **L))
