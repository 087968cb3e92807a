"""Resource accounting (issue 28): device models, predicted time, MFU,
memory and training FLOPs, in Python as in C; and every FLOP and byte
figure of the JSON report recomputed from the plan's steps."""
import json
import math
import subprocess

import numpy as np
import pytest

import einc
from conftest import einc_cli

GPUS = ["h100", "h100-sxm", "h100-pcie", "h200", "a100", "l4", "b200"]


@pytest.mark.parametrize("device", GPUS)
def test_gpu_devices_plan_for_cuda(device):
    p = einc.plan("i j, j k -> i k", (1024, 2048), (2048, 512),
                  dtype="bfloat16", device=device)
    d = p.to_dict()
    assert d["backend"] == "cuda"
    m = d["device_model"]
    assert m["source"] == "data sheet" and m["peak_kind"] == "bf16"
    # dense data-sheet figures: bf16 at least f32's, bandwidth known
    assert m["peak"]["bf16"] >= m["peak"]["f32"] > 0
    assert m["peak_bytes_per_s"] > 0
    assert p.peak_flops() == m["peak_flops_per_s"] == m["peak"]["bf16"]


# Each GPU's figures as its data sheet prints them (TFLOP/s; "sparse"
# figures are the sheets' with 2:4 sparsity, which einc halves to dense;
# TB/s), written here from the sheets, not from einc (issue 40: a typo in
# cost.c's table fails this). HGX B200's sheet gives eight GPUs' totals.
DATA_SHEETS = {
    # NVIDIA H100 Tensor Core GPU: SXM / PCIe columns
    "h100": dict(f64_tc=67, f32=67, tf32_sparse=989, bf16_sparse=1979,
                 fp16_sparse=1979, fp8_sparse=3958, tb_s=3.35),
    "h100-pcie": dict(f64_tc=51, f32=51, tf32_sparse=756, bf16_sparse=1513,
                      fp16_sparse=1513, fp8_sparse=3026, tb_s=2.0),
    # NVIDIA H200 Tensor Core GPU: SXM column
    "h200": dict(f64_tc=67, f32=67, tf32_sparse=989, bf16_sparse=1979,
                 fp16_sparse=1979, fp8_sparse=3958, tb_s=4.8),
    # NVIDIA A100 Tensor Core GPU: 80GB SXM column (no FP8)
    "a100": dict(f64_tc=19.5, f32=19.5, tf32_sparse=312, bf16_sparse=624,
                 fp16_sparse=624, fp8_sparse=0, tb_s=2.039),
    # NVIDIA L4 Tensor Core GPU (FP64 not on the sheet)
    "l4": dict(f64_tc=None, f32=30.3, tf32_sparse=120, bf16_sparse=242,
               fp16_sparse=242, fp8_sparse=485, tb_s=0.3),
    # NVIDIA HGX B200, eight GPUs
    "b200": dict(f64_tc=296 / 8, f32=600 / 8, tf32_sparse=18000 / 8,
                 bf16_sparse=36000 / 8, fp16_sparse=36000 / 8,
                 fp8_sparse=72000 / 8, tb_s=64 / 8),
}


@pytest.mark.parametrize("device", sorted(DATA_SHEETS))
def test_device_model_matches_its_data_sheet(device):
    sheet = DATA_SHEETS[device]
    m = einc.plan("i j, j k -> i k", (64, 64), (64, 64), dtype="bfloat16",
                  device=device).to_dict()["device_model"]
    want = {"f32": sheet["f32"], "tf32": sheet["tf32_sparse"] / 2,
            "bf16": sheet["bf16_sparse"] / 2, "f16": sheet["fp16_sparse"] / 2,
            "fp8": sheet["fp8_sparse"] / 2}
    if sheet["f64_tc"] is not None:
        want["f64"] = sheet["f64_tc"]
    for kind, tflops in want.items():
        if not tflops:  # not on the sheet: einc has no rate for it
            assert m["peak"][kind] is None, (device, kind)
            continue
        # the sheets round (L4's 242 sparse is 242.5 in einc: 485 / 2)
        assert m["peak"][kind] == pytest.approx(tflops * 1e12, rel=0.005), \
            (device, kind)
    assert m["peak_bytes_per_s"] == pytest.approx(sheet["tb_s"] * 1e12,
                                                  rel=1e-3)


def test_h100_measured_beside_data_sheet():
    m = einc.plan("i j, j k -> i k", (64, 64), (64, 64), dtype="bfloat16",
                  device="h100").to_dict()["device_model"]
    assert m["peak"]["bf16"] == 989.5e12 and m["measured"]["bf16"] == 780e12
    # the prediction uses the measured rate, MFU the data sheet's
    assert m["flops_per_s"] == 780e12 and m["peak_flops_per_s"] == 989.5e12
    assert m["bytes_per_s"] == 2.96e12 and m["peak_bytes_per_s"] == 3.35e12


def test_bf16_on_h100_is_priced_as_the_cuda_plan():
    """The issue's case: bf16 1024x2048x512 was priced as the CPU plan on
    H100 rates (49.5 us, slower than f32)."""
    shapes = ((1024, 2048), (2048, 512))
    bf16 = einc.plan("i j, j k -> i k", *shapes, dtype="bfloat16",
                     device="h100").predicted_seconds()
    f32 = einc.plan("i j, j k -> i k", *shapes, dtype="float32",
                    device="h100").predicted_seconds()
    assert bf16 < f32 and bf16 < 20e-6


@pytest.mark.parametrize("name", ["foo", "gpu", "H100", "tpu"])
def test_unknown_devices_are_errors(name):
    with pytest.raises(einc.EincError, match="h100-pcie, h200, a100, l4"):
        einc.plan("i j, j k -> i k", (8, 8), (8, 8), device=name)


def test_device_of_another_backend_is_an_error():
    with pytest.raises(einc.EincError, match="prices cuda plans"):
        einc.plan("i j, j k -> i k", (8, 8), (8, 8), device="h100",
                  backend="cpu")
    p = einc.plan("i j, j k -> i k", (8, 8), (8, 8))  # a CPU plan
    with pytest.raises(einc.EincError, match="plan with device='a100'"):
        p.predicted_seconds("a100")
    assert p.predicted_seconds("cpu") > 0


def test_small_matmul_pays_the_overheads():
    """An 8x8 matmul on an H100 was predicted at 0.26 ns."""
    p = einc.plan("i j, j k -> i k", (8, 8), (8, 8), device="h100")
    m = p.to_dict()["device_model"]
    fixed = m["call_seconds"] + len(p.steps) * m["step_seconds"]
    t = p.predicted_seconds()
    assert fixed >= 5e-6 and fixed < t < fixed + 1e-8


def test_mfu_and_given_peak():
    p = einc.plan("b i, i j -> b j", (4096, 4096), (4096, 4096),
                  dtype="bfloat16", device="h100")
    assert p.model_flops == p.flops == 2 * 4096 ** 3
    assert p.mfu(1e-3) == pytest.approx(p.flops / 1e-3 / 989.5e12, rel=1e-12)
    assert p.hfu(1e-3) == p.mfu(1e-3)
    assert p.mfu(1e-3, peak=1e15) == pytest.approx(p.flops / 1e-3 / 1e15,
                                                   rel=1e-12)
    # a given peak is also the prediction's rate
    slow = p.predicted_seconds(peak=1e12)
    m = p.to_dict()["device_model"]
    fixed = m["call_seconds"] + len(p.steps) * m["step_seconds"]
    assert slow == pytest.approx(fixed + p.flops / 1e12, rel=1e-9)
    with pytest.raises(einc.EincError, match="must be positive"):
        p.predicted_seconds(peak=-1.0)


def test_memory():
    p = einc.plan("i j, j k, k l -> i l", (1000, 10), (10, 1000), (1000, 10))
    m = p.memory
    assert m == p.to_dict()["memory"] | {
        "temporaries": [t["bytes"] for t in p.to_dict()["memory"]
                        ["temporaries"]]}
    assert m["input_bytes"] == 3 * 10000 * 4
    assert m["output_bytes"] == 1000 * 10 * 4
    assert m["temporaries"] == [10 * 10 * 4]
    assert m["peak_bytes"] == (m["input_bytes"] + m["output_bytes"]
                               + m["workspace_bytes"])
    assert m["peak_live_bytes"] == m["input_bytes"] + m["output_bytes"] + 400


def test_linear_layer_training_flops():
    """forward + backward = 6 x parameters x tokens, exactly."""
    b, s, d, f = 8, 128, 512, 2048
    p = einc.plan("b s d, d f -> b s f", (b, s, d), (d, f))
    assert p.grad_flops == 6 * (d * f) * (b * s)
    assert p.grad_flops == 3 * p.flops
    # least bytes: forward reads x, w and writes y; the backward reads
    # dy and w (x) and writes dx (dw)
    x, w, y = b * s * d * 4, d * f * 4, b * s * f * 4
    assert p.grad_bytes == (x + w + y) + (y + w + x) + (y + x + w)


def test_training_cost_equals_the_clis():
    cli = einc_cli()
    if cli is None:
        pytest.skip("no einc CLI built in this checkout")
    args = [cli, "plan", "b s d, d f -> b s f", "4x16x32", "32x64", "--grad",
            "--json"]
    g = json.loads(subprocess.run(args, capture_output=True, text=True,
                                  check=True).stdout)["grad"]
    p = einc.plan("b s d, d f -> b s f", (4, 16, 32), (32, 64))
    assert p.grad_flops == g["total_flops"]
    assert p.grad_bytes == g["total_bytes"]


def _elements(step):
    """Elements a step writes, from its axes: a GEMM's batch x M x N, a
    loop's axes that are not reduced."""
    if step["kind"] == "gemm":
        return step["batch"]["size"] * step["m"]["size"] * step["n"]["size"]
    return math.prod(a["size"] for a in step["axes"] if not a["reduced"])


KIND = {"f64": "f64", "c128": "f64", "bf16": "bf16", "f16": "f16"}
ITEMSIZE = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "c64": 8, "c128": 16}

CASES = [
    ("i j, j k, k l -> i l", [(1000, 10), (10, 1000), (1000, 10)], "float32",
     {}),
    ("b h i d, b h j d -> b h i j", [(2, 4, 64, 32)] * 2, "float16", {}),
    ("b i, i j k, b j -> b k", [(64, 16), (16, 16, 16), (64, 16)], "float64",
     {}),
    ("a b c, c d, d e, e a -> b", [(6, 5, 4), (4, 7), (7, 3), (3, 6)],
     "float32", {}),
    ("b s d -> b s", [(8, 16, 32)], "float16", {}),
    ("b c h w -> b h w c", [(2, 3, 4, 5)], "float32", {}),
    ("i j, j k -> i k", [(300, 400), (400, 500)], "float32",
     {"device": "h100"}),
    ("b i j, b j k -> b i k", [(8, 64, 32), (8, 32, 16)], "bfloat16",
     {"device": "a100"}),
    # gathers on a GPU model: the roofline prices 32-byte sectors
    ("i i -> i", [(64, 64)], "float32", {"device": "h100"}),
    ("i i, i -> i", [(64, 64), (64,)], "float32", {"device": "h100"}),
]


@pytest.mark.parametrize("expr,shapes,dtype,kw", CASES)
def test_json_figures_recomputed_from_steps(expr, shapes, dtype, kw):
    """No figure of the report is computed twice by two rules: every plan
    total, the memory and the prediction follow from the steps."""
    p = einc.plan(expr, *shapes, dtype=dtype, **kw)
    d = p.to_dict()
    steps = d["steps"]
    assert d["flops"] == sum(s["flops"] for s in steps) == p.flops
    assert d["model_flops"] == p.model_flops == d["flops"]  # unsliced
    assert d["bytes_moved"] == sum(s["bytes_read"] + s["bytes_written"]
                                   for s in steps)
    gpu = d["backend"] == "cuda"  # a GPU model prices sector bytes
    for s in steps:
        moved = s["sector_bytes"] if gpu else s["bytes_read"] + s[
            "bytes_written"]
        assert s["intensity"] == pytest.approx(
            s["flops"] / moved if moved else 0, rel=1e-5)
    m = d["device_model"]
    for s in steps:
        assert s["predicted_seconds"] == pytest.approx(
            m["step_seconds"] + s["roofline_seconds"], rel=1e-5, abs=1e-15)
        # the roofline at the rate of the step's own arithmetic
        kind = KIND.get(s["dtype_in"], "f32")
        rate = m["measured"][kind] or m["peak"][kind] or m["peak"]["f32"]
        rate /= 4 if s["dtype_in"] in ("c64", "c128") else 1
        moved = s["bytes_read"] + s["bytes_written"]
        if gpu:  # whole sectors; a view's copy included
            moved = s["sector_bytes"]
        elif d["is_view"]:  # an execute copies the view into its output
            moved = 2 * math.prod(d["output_shape"]) * np.dtype(
                einc_dtype(dtype)).itemsize
        assert s["roofline_seconds"] == pytest.approx(max(
            s["flops"] / rate, moved / m["bytes_per_s"]),
            rel=1e-5, abs=1e-15)
    assert d["predicted_seconds"] == pytest.approx(
        m["call_seconds"] + sum(s["predicted_seconds"] for s in steps),
        rel=1e-5)
    assert p.predicted_seconds() == pytest.approx(d["predicted_seconds"],
                                                  rel=1e-5)
    mem = d["memory"]
    itemsize = np.dtype(einc_dtype(dtype)).itemsize
    assert mem["input_bytes"] == sum(math.prod(s) for s in shapes) * itemsize
    assert mem["output_bytes"] == math.prod(d["output_shape"]) * itemsize
    # each temporary holds what the steps writing it write
    written = {}
    for s in steps:
        if s["writes"].startswith("t"):
            n = _elements(s) * ITEMSIZE[s["dtype_out"]]
            written[s["writes"]] = max(written.get(s["writes"], 0), n)
    assert {t["name"]: t["bytes"] for t in mem["temporaries"]} == written
    assert mem["workspace_bytes"] >= max(written.values(), default=0)
    assert mem["peak_bytes"] == (mem["input_bytes"] + mem["output_bytes"]
                                 + mem["workspace_bytes"])
    assert (mem["input_bytes"] + mem["output_bytes"]
            + max(written.values(), default=0)
            <= mem["peak_live_bytes"] <= mem["peak_bytes"])


def einc_dtype(name):
    if name == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return name
