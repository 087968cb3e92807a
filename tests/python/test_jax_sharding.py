"""einc under JAX sharding (issue 38), on 2 host devices
(XLA_FLAGS=--xla_force_host_platform_device_count=2, in a subprocess so
the other tests keep one device): a batch-sharded einsum stays
batch-sharded with no all-gather in the compiled HLO; a contraction over
a sharded axis contracts locally and all-reduces; mean over a sharded
axis, a merged dim (kept whole) and grad under jit and under shard_map,
each against JAX's own operations in float64 (1e-12)."""

import pytest

from conftest import run_on_host_devices

jax = pytest.importorskip("jax")

_SCRIPT = r'''
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import einc

jax.config.update("jax_enable_x64", True)
mesh = Mesh(np.array(jax.devices()), ("data",))
r = np.random.default_rng(38)
A, W = r.standard_normal((4, 3, 6)), r.standard_normal((6, 5))
out = {"devices": len(jax.devices())}


def put(x, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


def rel(got, want):
    got, want = np.asarray(got), np.asarray(want)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1))


def hlo(f, *args):
    return f.lower(*args).compile().as_text()


def record(name, f, ref, *args):
    try:
        got = f(*args)
        text = hlo(f, *args)
    except Exception as e:  # (each case fails on its own in pytest)
        out[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
        return
    leaves = jax.tree.leaves(got)
    out[name] = {
        "err": max(rel(g, w) for g, w in zip(leaves, jax.tree.leaves(ref))),
        "specs": [str(tuple(x.sharding.spec)) for x in leaves],
        "all_gather": "all-gather" in text,
        "all_reduce": "all-reduce" in text,
    }


mm = lambda a, w: einc.einsum("b i j, j k -> b i k", a, w)
mm_ref = lambda a, w: jnp.einsum("bij,jk->bik", a, w)
loss = lambda a, w: jnp.sum(mm(a, w) ** 2)
loss_ref = lambda a, w: jnp.sum(mm_ref(a, w) ** 2)

record("batch", jax.jit(mm), mm_ref(A, W), put(A, P("data")), put(W, P()))
record("contracted", jax.jit(mm), mm_ref(A, W), put(A, P(None, None, "data")),
       put(W, P("data")))
record("grad_batch", jax.jit(jax.grad(loss, (0, 1))),
       jax.grad(loss_ref, (0, 1))(A, W), put(A, P("data")), put(W, P()))
record("mean_sharded", jax.jit(lambda a: einc.reduce(a, "b i j -> i j",
                                                     "mean")),
       A.mean(0), put(A, P("data")))
record("merged", jax.jit(lambda a: einc.rearrange(a, "b i j -> (b i) j")),
       A.reshape(12, 6), put(A, P("data")))

sm = jax.shard_map(mm, mesh=mesh, in_specs=(P("data"), P()),
                   out_specs=P("data"))
record("shard_map_grad",
       jax.jit(jax.grad(lambda a, w: jnp.sum(sm(a, w) ** 2), (0, 1))),
       jax.grad(loss_ref, (0, 1))(A, W), A, W)
print("RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = run_on_host_devices(tmp_path_factory, _SCRIPT, 2)
    assert out["devices"] == 2
    return out


def _case(results, name):
    case = results[name]
    assert "error" not in case, case.get("error")
    return case


def test_batch_sharded_stays_sharded_without_all_gather(results):
    case = _case(results, "batch")
    assert case["err"] <= 1e-12
    assert case["specs"] == ["('data',)"]
    assert not case["all_gather"]


def test_contracted_axis_contracts_locally_then_all_reduces(results):
    case = _case(results, "contracted")
    assert case["err"] <= 1e-12
    assert case["all_reduce"] and not case["all_gather"]


def test_grad_under_batch_sharding(results):
    case = _case(results, "grad_batch")
    assert case["err"] <= 1e-12
    assert case["specs"][0] == "('data',)"  # the input's gradient
    assert not case["all_gather"]


def test_mean_over_a_sharded_axis(results):
    case = _case(results, "mean_sharded")
    assert case["err"] <= 1e-12
    assert not case["all_gather"]


def test_merged_dim_kept_whole(results):
    assert _case(results, "merged")["err"] <= 1e-12


def test_grad_of_shard_map(results):
    assert _case(results, "shard_map_grad")["err"] <= 1e-12
