#!/usr/bin/env python3
"""eval_cli_test.py - `einc eval` and `einc plan` end to end, with only the
Python standard library (CI has no numpy): .npy files are written and read
here with struct, results compared with a direct sum in Python.

usage: eval_cli_test.py PATH/TO/einc
"""
import itertools
import json
import os
import shutil
import random
import struct
import subprocess
import sys
import tempfile

EINC = sys.argv[1]
passed = failed = 0
FMT = {"<f4": "f", "<f8": "d", "<f2": "e", "<i4": "i", "<i8": "q",
       "|i1": "b", "|u1": "B", "|b1": "?", "<i2": "h", "<u2": "H",
       "<V2": "H", "|V2": "H",  # V2: bfloat16 bits, as ml_dtypes saves them
       "<c8": "f", "<c16": "d"}  # complex: values given as (re, im) floats
COMPLEX = ("<c8", "<c16")


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)


def write_npy(path, descr, shape, values, fortran=False, version=1,
              truncate=0, raw_header=None):
    header = raw_header or "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, "True" if fortran else "False",
        "".join("%d," % s for s in shape) if len(shape) == 1
        else ", ".join(str(s) for s in shape))
    pre = 10 if version == 1 else 12
    pad = (64 - (pre + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    code = FMT.get(descr, "f")
    if fortran:  # values are given in C order; store column-major
        idx = list(itertools.product(*[range(s) for s in shape]))
        flat = {i: v for i, v in zip(idx, values)}
        order = sorted(idx, key=lambda t: t[::-1])
        values = [flat[i] for i in order]
    data = struct.pack("<%d%s" % (len(values), code), *values)
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY" + bytes([version, 0]))
        f.write(struct.pack("<H" if version == 1 else "<I", len(header)))
        f.write(header.encode())
        f.write(data[:len(data) - truncate] if truncate else data)


def read_npy(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:6] == b"\x93NUMPY", "bad magic"
    hlen = struct.unpack("<H", raw[8:10])[0]
    header = eval(raw[10:10 + hlen].decode())  # a Python dict literal
    shape = header["shape"]
    n = 1
    for s in shape:
        n *= s
    code = FMT[header["descr"]]
    parts = 2 if header["descr"] in COMPLEX else 1
    vals = struct.unpack("<%d%s" % (n * parts, code), raw[10 + hlen:])
    assert not header["fortran_order"]
    if parts == 2:
        vals = [complex(vals[2 * i], vals[2 * i + 1]) for i in range(n)]
    return shape, list(vals)


def has_gpu():
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True,
                                        text=True).returncode == 0


def einc(*args):
    return subprocess.run([EINC] + list(args), capture_output=True, text=True)


def rand_values(n, integer=False):
    if integer:
        return [random.randint(-4, 4) for _ in range(n)]
    return [random.uniform(-1, 1) for _ in range(n)]


def close(got, want, tol):
    num = sum(abs(g - w) ** 2 for g, w in zip(got, want))
    den = sum(abs(w) ** 2 for w in want) or 1.0
    return len(got) == len(want) and (num / den) ** 0.5 <= tol


random.seed(20261122)
tmp = tempfile.mkdtemp(prefix="einc-eval-test-")
P = lambda name: os.path.join(tmp, name)

# --- matrix product, C-order f4 times Fortran-order f4 (v2 header) ---
A = rand_values(12)
B = rand_values(20)
write_npy(P("a.npy"), "<f4", (3, 4), A)
write_npy(P("b.npy"), "<f4", (4, 5), B, fortran=True, version=2)
r = einc("eval", "i j, j k -> i k", P("a.npy"), P("b.npy"), "-o", P("c.npy"))
check(r.returncode == 0, "matmul exit %d: %s" % (r.returncode, r.stderr))
shape, got = read_npy(P("c.npy"))
want = [sum(A[i * 4 + j] * B[j * 5 + k] for j in range(4))
        for i in range(3) for k in range(5)]
check(shape == (3, 5), "matmul shape %s" % (shape,))
check(close(got, want, 1e-5), "matmul values")

# --- f8 einsum of three operands in numpy syntax ---
X = rand_values(6)
Y = rand_values(12)
Z = rand_values(8)
write_npy(P("x.npy"), "<f8", (2, 3), X)
write_npy(P("y.npy"), "<f8", (3, 4), Y)
write_npy(P("z.npy"), "<f8", (4, 2), Z)
r = einc("eval", "--numpy", "ij,jk,kl->il", P("x.npy"), P("y.npy"),
         P("z.npy"), "-o", P("w.npy"))
check(r.returncode == 0, "chain exit: %s" % r.stderr)
shape, got = read_npy(P("w.npy"))
want = [sum(X[i * 3 + j] * Y[j * 4 + k] * Z[k * 2 + l]
            for j in range(3) for k in range(4))
        for i in range(2) for l in range(2)]
check(shape == (2, 2) and close(got, want, 1e-12), "chain values")

# --- rearrange of int32 and a bool repeat keep their dtype ---
I = rand_values(24, integer=True)
write_npy(P("i.npy"), "<i4", (2, 3, 4), I)
r = einc("eval", "b h w -> w (b h)", P("i.npy"), "-o", P("t.npy"))
shape, got = read_npy(P("t.npy"))
want = [I[b * 12 + h * 4 + w] for w in range(4) for b in range(2)
        for h in range(3)]
check(r.returncode == 0 and shape == (4, 6) and got == want,
      "int rearrange: %s" % r.stderr)
M = [random.random() < 0.5 for _ in range(6)]
write_npy(P("m.npy"), "|b1", (2, 3), M)
r = einc("eval", "a b -> a b r", P("m.npy"), "-D", "r=2", "-o", P("mr.npy"))
shape, got = read_npy(P("mr.npy"))
check(r.returncode == 0 and shape == (2, 3, 2) and
      got == [m for m in M for _ in range(2)], "bool repeat: %s" % r.stderr)

# --- f16 mean pooling, rounded once ---
H = rand_values(16)
write_npy(P("h.npy"), "<f2", (4, 4), H)
_, H = read_npy(P("h.npy"))  # the values as stored in f16
r = einc("eval", "(h 2) (w 2) -> h w", P("h.npy"), "--reduce", "mean",
         "-o", P("hp.npy"))
shape, got = read_npy(P("hp.npy"))
want = [sum(H[(2 * h + i) * 4 + 2 * w + j] for i in range(2) for j in range(2))
        / 4 for h in range(2) for w in range(2)]
check(r.returncode == 0 and shape == (2, 2) and close(got, want, 2e-2),
      "f16 mean: %s" % r.stderr)

# --- errors leave no output file, and an old file untouched ---
r = einc("eval", "i j, j k -> i k", P("a.npy"), P("a.npy"), "-o", P("e.npy"))
check(r.returncode == 2 and not os.path.exists(P("e.npy")),
      "shape mismatch: no file")
check("axis 'j'" in r.stderr and "^" in r.stderr, "caret message")
with open(P("old.npy"), "wb") as f:
    f.write(b"old")
write_npy(P("d.npy"), "<f8", (5, 2), rand_values(10))
r = einc("eval", "i j, j k -> i k", P("a.npy"), P("d.npy"), "-o", P("old.npy"))
# (an f32 and an f64 are promoted, as numpy does: the error is j's size)
check(r.returncode == 2 and open(P("old.npy"), "rb").read() == b"old",
      "old file kept on an error")
check("axis 'j'" in r.stderr, "the error is j's sizes: " + r.stderr)
write_npy(P("trunc.npy"), "<f4", (3, 4), A, truncate=5)
r = einc("eval", "i j -> j i", P("trunc.npy"), "-o", P("e.npy"))
check(r.returncode == 2 and "truncated" in r.stderr and
      not os.path.exists(P("e.npy")), "truncated input: " + r.stderr)
write_npy(P("big.npy"), ">f4", (3, 4), A)
r = einc("eval", "i j -> j i", P("big.npy"), "-o", P("e.npy"))
check(r.returncode == 2 and "not supported" in r.stderr, "big-endian")
write_npy(P("obj.npy"), "|O", (3,), [0, 0, 0],
          raw_header="{'descr': '|O', 'fortran_order': False, 'shape': (3,), }")
r = einc("eval", "i -> i", P("obj.npy"), "-o", P("e.npy"))
check(r.returncode == 2 and "not supported" in r.stderr, "object dtype")
with open(P("junk.npy"), "wb") as f:
    f.write(b"not a numpy file at all")
r = einc("eval", "i -> i", P("junk.npy"), "-o", P("e.npy"))
check(r.returncode == 2 and "not a .npy" in r.stderr, "bad magic")
r = einc("eval", "i -> i", P("missing.npy"), "-o", P("e.npy"))
check(r.returncode == 1 and "cannot open" in r.stderr,
      "missing input: an I/O failure")
r = einc("eval", "i j -> j i", P("a.npy"))
check(r.returncode == 2 and "-o" in r.stderr, "no -o")
r = einc("eval", "i j -> j i", P("a.npy"), "-o", P("e.npy"), "--backend",
         "cuda")
if has_gpu():
    ref = einc("eval", "i j -> j i", P("a.npy"), "-o", P("ref.npy"))
    check(r.returncode == 0 and ref.returncode == 0 and
          read_npy(P("e.npy")) == read_npy(P("ref.npy")),
          "cuda transpose equals cpu: " + r.stderr)
    for name in ("e.npy", "ref.npy"):
        os.remove(P(name))
else:
    check(r.returncode == 1 and "CUDA" in r.stderr and
          not os.path.exists(P("e.npy")), "cuda unavailable: " + r.stderr)
# The emulated device runs the CUDA path on every machine: the same
# results as the CPU (a transpose exactly; a contraction within f32's).
write_npy(P("a4.npy"), "<f4", (4, 3), [0.5 * i - 2 for i in range(12)])
for expr, files in (("i j -> j i", ["a.npy"]),
                    ("i j, j k -> i k", ["a.npy", "a4.npy"])):
    r = einc("eval", expr, *[P(f) for f in files], "-o", P("e.npy"),
             "--backend", "emu", "-v")
    ref = einc("eval", expr, *[P(f) for f in files], "-o", P("ref.npy"))
    (gshape, got), (wshape, want) = read_npy(P("e.npy")), read_npy(P("ref.npy"))
    near = gshape == wshape and len(got) == len(want) and all(
        abs(x - y) <= 1e-5 * (1 + abs(y)) for x, y in zip(got, want))
    check(r.returncode == 0 and ref.returncode == 0 and near and
          "kernel cache" in r.stdout, "emu %s equals cpu: %s" % (expr, r.stderr))
    for name in ("e.npy", "ref.npy"):
        os.remove(P(name))
# A reduction over a transposed plane of 8 terms or more folds them in a
# loop inside the transpose kernel's tile (issue 34 item 5), which only
# planes of 264 tiles or more take: past the random suite's sizes, so
# checked here, a mean and a max against the CPU.
write_npy(P("t.npy"), "<f4", (8, 544, 520), rand_values(8 * 544 * 520))
for red in ("mean", "max"):
    args = ("b j i -> i j", P("t.npy"), "--reduce", red)
    plan = einc("plan", *args, "--backend", "emu")
    r = einc("eval", *args, "-o", P("e.npy"), "--backend", "emu")
    ref = einc("eval", *args, "-o", P("ref.npy"))
    (gshape, got), (wshape, want) = read_npy(P("e.npy")), read_npy(P("ref.npy"))
    near = gshape == wshape == (520, 544) and all(
        abs(x - y) <= 1e-5 * (1 + abs(y)) for x, y in zip(got, want))
    check(r.returncode == 0 and ref.returncode == 0 and near and
          "kernel transpose" in plan.stdout,
          "emu tiled %s of b j i -> i j equals cpu: %s" % (red, r.stderr))
    for name in ("e.npy", "ref.npy"):
        os.remove(P(name))
os.remove(P("t.npy"))
# tn5 at 16^4 (issue 34 item 5): reduce_outer with a 16x16 factor staged in
# shared memory and the lanes moved off dst's contiguous axis
# (outer_layout.h), past the random suite's sizes: the emulated device
# against the CPU, within f32's tolerance of the reference's norm.
tn5 = ("e a, f b, a b c d, g c, h d -> e f g h",)
for i, shape in enumerate(((16, 16), (16, 16), (16, 16, 16, 16), (16, 16),
                           (16, 16))):
    n = 1
    for d in shape:
        n *= d
    write_npy(P("tn5_%d.npy" % i), "<f4", shape, rand_values(n))
    tn5 += (P("tn5_%d.npy" % i),)
plan = einc("plan", *tn5, "--backend", "emu")
r = einc("eval", *tn5, "-o", P("e.npy"), "--backend", "emu")
ref = einc("eval", *tn5, "-o", P("ref.npy"))
(gshape, got), (wshape, want) = read_npy(P("e.npy")), read_npy(P("ref.npy"))
err = sum((x - y) ** 2 for x, y in zip(got, want)) ** 0.5
norm = sum(y * y for y in want) ** 0.5
check(r.returncode == 0 and ref.returncode == 0 and gshape == wshape and
      len(got) == 16 ** 4 and err <= 1e-5 * norm and
      "staged in shared memory" in plan.stdout and
      "lanes off dst's contiguous axis" in plan.stdout,
      "emu tn5 16^4 equals cpu (error %g of norm %g): %s" % (err, norm,
                                                            r.stderr))
for name in ["e.npy", "ref.npy"] + ["tn5_%d.npy" % i for i in range(5)]:
    os.remove(P(name))
# --counters (docs/design.md, "GPU model inputs"): an elementwise product
# of two 64x256 f32 files is one map kernel whose warps load and store 128
# consecutive bytes, 4 sectors a request, and move exactly the compulsory
# bytes (two inputs read, one output written); any other backend refuses.
write_npy(P("c.npy"), "<f4", (64, 256), [i % 7 for i in range(64 * 256)])
r = einc("eval", "a b, a b -> a b", P("c.npy"), P("c.npy"), "-o",
         P("e.npy"), "--backend", "emu", "--counters")
check(r.returncode == 0 and "memory counters" in r.stdout and
      "4.00 a request (ideal  4.00)" in r.stdout and
      "step 1: moved 196608 B, compulsory 196608 B: 1.00 x" in r.stdout,
      "--counters on a coalesced map: " + r.stdout + r.stderr)
r = einc("eval", "a b, a b -> a b", P("c.npy"), P("c.npy"), "--print",
         "--backend", "emu", "--counters")
check(r.returncode == 0 and "memory counters" in r.stderr and
      "memory counters" not in r.stdout,
      "--counters with --print goes to stderr: " + r.stderr)
r = einc("eval", "a b -> b a", P("c.npy"), "-o", P("e.npy"), "--counters")
check(r.returncode == 2 and "--counters" in r.stderr and
      "--backend emu" in r.stderr, "--counters on the cpu: " + r.stderr)
os.remove(P("e.npy"))
# --resources: each kernel's registers and occupancy from NVRTC (skipped
# where NVRTC is missing: exit 1 naming it); the JSON has one entry per
# architecture for the transpose's one kernel.
r = einc("plan", "--backend", "cuda", "a b -> b a", "1000x3000",
         "--resources", "--json")
if r.returncode == 0:
    rows = json.loads(r.stdout)["kernel_resources"]
    archs = [row["arch"] for row in rows]
    check(archs[:3] == ["sm_80", "sm_89", "sm_90"] and
          all(row["registers"] > 0 and row["spill_store_bytes"] == 0 and
              row["static_smem_bytes"] == 32 * 33 * 4 and
              0 < row["occupancy"] <= 1 for row in rows),
          "--resources rows: %r" % rows)
else:
    check(r.returncode == 1 and ("NVRTC" in r.stderr or
                                 "no CUDA backend" in r.stderr),
          "--resources without NVRTC: " + r.stderr)
# --kernel-model: the transpose's one kernel priced beside the roofline;
# a perfectly coalesced transpose of whole sectors moves its compulsory
# bytes, so both agree within the model's occupancy derating.
r = einc("plan", "--backend", "emu", "a b -> b a", "256x512",
         "--kernel-model", "--json")
if r.returncode == 0:
    km = json.loads(r.stdout)["kernel_model"]
    check(len(km["launches"]) == 1 and
          km["launches"][0]["kind"] == "transpose" and
          km["launches"][0]["traffic_bytes"] == 2 * 256 * 512 * 4 and
          km["predicted_seconds"] > 0 and km["roofline_seconds"] > 0,
          "--kernel-model: %r" % km)
else:
    check(r.returncode == 1 and ("NVRTC" in r.stderr or
                                 "no CUDA backend" in r.stderr),
          "--kernel-model without NVRTC: " + r.stderr)
r = einc("plan", "a b -> b a", "10x30", "--resources")
check(r.returncode == 2 and "--backend cuda or emu" in r.stderr,
      "--resources on a cpu plan: " + r.stderr)
# `einc bench --backend emu --counters`: the emulated device's door, no
# timing; the same model as `einc plan --kernel-model` (its JSON member),
# with the counts behind it; other backends refuse --counters.
r = einc("bench", "--backend", "emu", "a b -> b a", "256x512", "--counters",
         "--json")
if r.returncode == 0:
    km = json.loads(r.stdout)["kernel_model"]
    l0 = km["launches"][0] if km["launches"] else {}
    check(len(km["launches"]) == 1 and l0["kind"] == "transpose" and
          l0["sectors"] == 4 * l0["requests"] and
          l0["warp_basic_blocks"] > l0["requests"] and
          km["predicted_seconds"] > 0 and km["roofline_seconds"] > 0,
          "bench --counters: %r" % km)
    t = einc("bench", "--backend", "emu", "a b -> b a", "256x512",
             "--counters")
    check(t.returncode == 0 and "sec/req" in t.stdout and
          "by the kernel model" in t.stdout, "bench --counters text: " +
          t.stdout + t.stderr)
else:
    check(r.returncode == 1 and ("NVRTC" in r.stderr or
                                 "no CUDA backend" in r.stderr),
          "bench --counters without NVRTC: " + r.stderr)
r = einc("bench", "--backend", "cpu", "a b -> b a", "10x30", "--counters")
check(r.returncode == 2 and "--backend emu" in r.stderr,
      "bench --counters on the cpu: " + r.stderr)
# -v's phases (src/util/trace.h): a fresh kernel cache compiles, the next
# process loads from disk, each phase under the run that caused it;
# EINC_TRACE=1 prints the phases without -v; none without either.
def phases(text):
    return [l for l in text.splitlines() if l.startswith("phase ")]
trace_env = dict(os.environ, EINC_CACHE_DIR=os.path.join(tmp, "trace-cache"))
runs = [subprocess.run([EINC, "eval", "b (g r) -> b g", P("a.npy"), "-D",
                        "r=2", "-o", P("e.npy"), "--backend", "emu"] + extra,
                       capture_output=True, text=True, env=dict(trace_env, **env))
        for extra, env in (([ "-v"], {}), (["-v"], {}), ([], {"EINC_TRACE": "1"}),
                           ([], {}))]
cold, warm, traced, quiet = [phases(r.stdout + r.stderr) for r in runs]
check(all(r.returncode == 0 for r in runs),
      "trace runs: %r" % [r.stderr for r in runs])
check(any("emu: compile kernels" in l for l in cold) and
      not any("disk cache" in l for l in cold), "cold phases: %r" % cold)
check(any("emu: kernels from the disk cache" in l for l in warm) and
      not any("emu: compile" in l for l in warm), "warm phases: %r" % warm)
# -v's kernel-cache counts agree with the phases: the cold run compiled,
# the warm one loaded from disk and compiled nothing.
def cache_counts(text):
    return [l for l in text.splitlines() if l.startswith("kernel cache: ")]
check(cache_counts(runs[0].stdout + runs[0].stderr) ==
      ["kernel cache: 1 compiled, 0 from disk, 0 from memory"] and
      cache_counts(runs[1].stdout + runs[1].stderr) ==
      ["kernel cache: 0 compiled, 1 from disk, 0 from memory"],
      "-v counts: %r" % [cache_counts(r.stdout + r.stderr) for r in runs[:2]])
check(any(l.split("ms  ")[1].startswith("  emu:") for l in warm) and
      any("run (queued" in l for l in warm) and
      any("plan (bind" in l for l in warm), "nesting and plan: %r" % warm)
check(len(traced) >= 4 and not any("kernel cache" in l for l in
      runs[2].stdout.splitlines()), "EINC_TRACE=1: %r" % traced)
check(quiet == [], "phases without -v or EINC_TRACE: %r" % quiet)
if os.path.exists(P("e.npy")):
    os.remove(P("e.npy"))
r = einc("eval", "i j -> j i", P("a.npy"), "-o",
         os.path.join(tmp, "no-such-dir", "e.npy"))
check(r.returncode == 1 and "cannot write" in r.stderr, "unwritable output")
check(not any(n.startswith("e.npy") or ".einc-tmp-" in n
              for n in os.listdir(tmp)), "no stray files")

# --- plan --json ---
r = einc("plan", "b h i d, b h j d -> b h i j", "2x4x64x32", "2x4x64x32",
         "--json")
check(r.returncode == 0, "plan json exit")
try:
    j = json.loads(r.stdout)
    check(j["output_shape"] == [2, 4, 64, 64], "json output_shape")
    check(j["naive_flops"] == j["flops"] == 2 * 2 * 4 * 64 * 64 * 32,
          "json flops")
    check(j["largest_intermediate"] == 0, "json largest_intermediate")
    check(len(j["steps"]) == 1 and j["steps"][0]["kind"] == "gemm" and
          j["steps"][0]["batch"]["size"] == 8 and
          j["steps"][0]["k"]["axes"] == ["d"], "json steps")
except (ValueError, KeyError) as e:
    check(False, "plan json: %s" % e)
r = einc("plan", "i j, j k, k l -> i l", "1000x10", "10x1000", "1000x10")
check(r.returncode == 0 and "speed-up" in r.stdout and "gemm" in r.stdout
      and "predicted" in r.stdout, "plan text")
# --- the CUDA backend's plans and generated source (no GPU needed) ---
r = einc("plan", "--backend", "cuda", "b h i d, b h j d -> b h i j",
         "2x4x128x64", "2x4x128x64", "--dtype", "bf16")
check(r.returncode == 0 and "cublasGemmStridedBatchedEx bf16,bf16->bf16 compute 32F TN" in r.stdout,
      "plan --backend cuda names the cuBLAS call: " + r.stdout + r.stderr)


def cuda_line(step):
    """The text plan's cuda: line of a JSON step, rebuilt from its fields."""
    c, dim3 = step["cuda"], lambda v: "(%d,%d,%d)" % tuple(v)
    if c["cublas"]:
        g = c["cublas"]
        line = ("cublasGemmStridedBatchedEx %s,%s->%s compute %s %s%s m=%d "
                "n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d" % (
                    g["a_dtype"], g["b_dtype"], g["c_dtype"], g["compute"],
                    "NT"[g["trans_a"]], "NT"[g["trans_b"]], g["m"], g["n"],
                    g["k"], g["lda"], g["ldb"], g["ldc"], g["batch"]))
        if g["loops_form"] != "none":
            line += " x %d (%s)" % (g["loops"], g["loops_form"])
        return line
    if c["empty"]:
        return "(nothing to do: empty)"
    k = c["kernels"]
    line = "kernel %s%s%s grid %s block %s" % (
        k[0]["kind"], " (direct contraction)" if c["direct_contraction"]
        else "", " pass 1" if len(k) > 1 else "", dim3(k[0]["grid"]),
        dim3(k[0]["block"]))
    if k[0]["staged_source"]:
        line += ", source %d staged in shared memory (%d bytes)" % (
            k[0]["staged_source"], k[0]["staged_bytes"])
    if k[0]["lanes_moved"]:
        line += ", lanes off dst's contiguous axis"
    if k[0]["vector_variant"]:
        line += ", %s variant grid %s" % (k[0]["vector_variant"]["form"],
                                          dim3(k[0]["vector_variant"]["grid"]))
    if len(k) > 1:
        line += " + pass 2 %s grid %s block %s, scratch %d bytes" % (
            k[1]["kind"], dim3(k[1]["grid"]), dim3(k[1]["block"]),
            c["scratch_bytes"])
    return line


# the JSON plan lists what the text plan lists: each step's cuBLAS call or
# kernels, rebuilt from the JSON, is the text's line for that step
for args in [("b h i d, b h j d -> b h i j", "2x4x128x64", "2x4x128x64",
              "--dtype", "bf16"),
             ("s d -> d", "1048576x4"),
             ("a b -> b a", "64x64", "--dtype", "f16"),
             ("b h i d, b h j d -> h i b j", "2x3x256x64", "2x3x256x64"),
             ("b i k, b k j -> b i j", "4x64x32", "4x32x16"),
             ("a b c, c d -> b a d", "64x32x128", "128x64"),
             ("x y, y z, z w -> x w", "64x64", "64x64", "64x64"),
             ("e a, f b, a b c d, g c, h d -> e f g h", "16x16", "16x16",
              "16x16x16x16", "16x16", "16x16")]:
    t = einc("plan", "--backend", "cuda", *args)
    j = einc("plan", "--backend", "cuda", "--json", *args)
    try:
        text = [ln.split("  ", 2)[2] for ln in
                t.stdout.split("cuda:\n", 1)[1].splitlines()]
        steps = json.loads(j.stdout)["steps"]
        check(text == [cuda_line(s) for s in steps],
              "JSON cuda steps match the text for %s:\n%s\n%s" % (
                  args, text, [cuda_line(s) for s in steps]))
    except (IndexError, KeyError, ValueError) as e:
        check(False, "plan --json --backend cuda %s: %r %s" % (args, e,
                                                               j.stderr))
r = einc("cuda-src", "b s d -> b s", "4x8x64", "--reduce", "max", "--dtype",
         "f16")
check(r.returncode == 0 and "__global__" in r.stdout and
      "reduce_inner" in r.stdout and "ein_main<<<" in r.stdout,
      "cuda-src prints the kernel: " + r.stderr)
r = einc("cuda-src", "a b -> b a", "3x4", "--dtype", "f99")
check(r.returncode == 2 and "unknown dtype" in r.stderr, "cuda-src bad dtype")
r = einc("cuda-src", "a b -> c", "3x4")
check(r.returncode == 2 and "^" in r.stderr, "cuda-src bad expression")
r = einc("plan", "i j -> j i", "3x4", "--dtype", "f99")
check(r.returncode == 2 and "unknown dtype" in r.stderr, "bad dtype option")

# --- an einops-dialect error that the numpy dialect accepts gets a hint ---
HINT = ("einc: hint: the expression is valid in the numpy dialect (one "
        "letter per axis): did you mean --numpy?")
write_npy(P("h1.npy"), "<f4", (3, 4), rand_values(12))
write_npy(P("h2.npy"), "<f4", (4, 5), rand_values(20))
r = einc("eval", "ij,jk->ik", P("h1.npy"), P("h2.npy"), "-o", P("h3.npy"))
check(r.returncode == 2 and r.stderr.endswith(HINT + "\n"),
      "eval hints --numpy: " + r.stderr)
r = einc("eval", "--numpy", "ij,jk->ik", P("h1.npy"), P("h2.npy"), "-o",
         P("h3.npy"))
check(r.returncode == 0 and read_npy(P("h3.npy"))[0] == (3, 5),
      "the hint is right: " + r.stderr)
r = einc("eval", "ij,kk->ik", P("h1.npy"), P("h2.npy"), "-o", P("h3.npy"))
check(r.returncode == 2 and "hint" not in r.stderr,
      "no hint when the numpy dialect fails too: " + r.stderr)

# --- bf16 as numpy saves ml_dtypes.bfloat16: a 2-byte void, '<V2' ---
def bf16_bits(x):  # exact for the values used here
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16


def bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


BA = [1.5, -2.0, 0.25, 3.0, 0.5, -1.0]      # 2x3
BB = [2.0, 1.0, -0.5, 4.0, 1.25, 0.75]      # 3x2
BC = [sum(BA[i * 3 + k] * BB[k * 2 + j] for k in range(3))
      for i in range(2) for j in range(2)]
write_npy(P("ba.npy"), "<V2", (2, 3), [bf16_bits(v) for v in BA])
write_npy(P("bb.npy"), "|V2", (3, 2), [bf16_bits(v) for v in BB])
r = einc("eval", "i k, k j -> i j", P("ba.npy"), P("bb.npy"), "-o",
         P("bc.npy"), "-v")
check(r.returncode == 0 and "bf16" in r.stdout, "eval reads <V2 and |V2 as "
      "bf16: " + r.stdout + r.stderr)
if r.returncode == 0:
    with open(P("bc.npy"), "rb") as f:
        head = f.read(128)
    check(b"'descr': '<V2'" in head, "a bf16 result is written as <V2")
    shape, bits = read_npy(P("bc.npy"))
    check(shape == (2, 2) and [bf16_value(b) for b in bits] == BC,
          "bf16 values round-trip: %s vs %s" % (bits, BC))
# --dtype reinterprets: bf16 bits saved as <u2; a <V2 file read as f16
write_npy(P("bu.npy"), "<u2", (2, 3), [bf16_bits(v) for v in BA])
r = einc("eval", "i k, k j -> i j", P("bu.npy"), P("bb.npy"), "-o",
         P("bd.npy"), "--dtype", "bf16")
check(r.returncode == 0 and
      [bf16_value(b) for b in read_npy(P("bd.npy"))[1]] == BC,
      "--dtype bf16 reads <u2 bits as bf16: " + r.stderr)
write_npy(P("hf.npy"), "<V2", (2,), list(struct.unpack("<2H", struct.pack(
    "<2e", 1.5, -2.0))))
r = einc("eval", "a -> a", P("hf.npy"), "-o", P("hg.npy"), "--dtype", "f16")
check(r.returncode == 0 and read_npy(P("hg.npy"))[1] == [1.5, -2.0],
      "--dtype f16 reads a <V2 file as f16: " + r.stderr)
r = einc("eval", "a -> a", P("hf.npy"), "-o", P("hg.npy"), "--dtype", "f32")
check(r.returncode == 2 and r.stderr == "einc: error: --dtype f32: %s holds "
      "bf16, whose elements are 2 bytes, not 4\n" % P("hf.npy"),
      "--dtype of another size is an error: " + r.stderr)
# eval's options take '--opt=value' as well as '--opt value'
r = einc("eval", "a -> a", P("hf.npy"), "--output=" + P("hq.npy"),
         "--dtype=f16", "--backend=cpu")
check(r.returncode == 0 and read_npy(P("hq.npy"))[1] == [1.5, -2.0],
      "--output=, --dtype=, --backend=: " + r.stderr)

# -o - writes the same .npy bytes to stdout; nothing else goes there
write_npy(P("pa.npy"), "<f4", (2, 3), [0, 1, 2, 3, 4, 5])
r = einc("eval", "a b -> a b", P("pa.npy"), "-o", P("pb.npy"))
rb = subprocess.run([EINC, "eval", "a b -> a b", P("pa.npy"), "-o", "-", "-v"],
                    capture_output=True)
check(r.returncode == 0 and rb.returncode == 0 and
      rb.stdout == open(P("pb.npy"), "rb").read() and
      rb.stderr.startswith(b"wrote -: 2x3 f32"),
      "-o - writes the .npy to stdout, -v to stderr: %r" % rb.stderr)
r = einc("eval", "a b -> a b", P("pa.npy"), "-o", "-", "--print")
check(r.returncode == 2 and "both write to stdout" in r.stderr,
      "--print with -o - is a usage error: " + r.stderr)
r = einc("eval", "a b -> a b", P("pa.npy"))
check(r.returncode == 2 and "-o OUT.npy or --print" in r.stderr,
      "eval needs -o or --print: " + r.stderr)

# --print: numpy's repr (texts written by hand from numpy 2.2's formatting
# rules: this machine has no numpy to produce them)
write_npy(P("p1.npy"), "<f8", (2,), [1.5, -2.0])
write_npy(P("p2.npy"), "<i4", (2, 2), [1, 20, 300, 4])
write_npy(P("p3.npy"), "|b1", (2,), [True, False])
write_npy(P("p4.npy"), "<f8", (3,), [1e-5, 1.5, float("nan")])
write_npy(P("p5.npy"), "<f4", (2, 2, 2), [0.1, 0.25, 3, 4, 5, 6, 7, 8])
write_npy(P("p6.npy"), "<f8", (12,), [i / 7 for i in range(12)])
write_npy(P("p7.npy"), "<f4", (0, 3), [])
write_npy(P("p8.npy"), "<f4", (2000, 3), [i * 0.5 for i in range(6000)])
write_npy(P("p9.npy"), "<i8", (1001,), list(range(1001)))
PRINTS = [
    ("a b -> a b", "pa", "array([[0., 1., 2.],\n       [3., 4., 5.]], "
     "dtype=float32)"),
    ("a b ->", "pa", "array(15., dtype=float32)"),
    ("a -> a", "p1", "array([ 1.5, -2. ])"),
    ("a b -> a b", "p2", "array([[  1,  20],\n       [300,   4]], "
     "dtype=int32)"),
    ("a -> a", "p3", "array([ True, False])"),
    ("a -> a", "p4", "array([1.0e-05, 1.5e+00,     nan])"),
    ("a b c -> a b c", "p5", "array([[[0.1 , 0.25],\n        [3.  , 4.  ]],"
     "\n\n       [[5.  , 6.  ],\n        [7.  , 8.  ]]], dtype=float32)"),
    ("a -> a", "p6", "array([0.        , 0.14285714, 0.28571429, 0.42857143, "
     "0.57142857,\n       0.71428571, 0.85714286, 1.        , 1.14285714, "
     "1.28571429,\n       1.42857143, 1.57142857])"),
    ("a b -> a b", "p7", "array([], shape=(0, 3), dtype=float32)"),
    ("a b -> a b", "p8", "array([[0.0000e+00, 5.0000e-01, 1.0000e+00],\n"
     "       [1.5000e+00, 2.0000e+00, 2.5000e+00],\n"
     "       [3.0000e+00, 3.5000e+00, 4.0000e+00],\n       ...,\n"
     "       [2.9955e+03, 2.9960e+03, 2.9965e+03],\n"
     "       [2.9970e+03, 2.9975e+03, 2.9980e+03],\n"
     "       [2.9985e+03, 2.9990e+03, 2.9995e+03]],\n"
     "      shape=(2000, 3), dtype=float32)"),
    ("a -> a", "p9", "array([   0,    1,    2, ...,  998,  999, 1000], "
     "shape=(1001,))"),
]
for expr, name, want in PRINTS:
    r = einc("eval", expr, P(name + ".npy"), "--print")
    check(r.returncode == 0 and r.stdout == want + "\n",
          "--print %s:\n%s\nwant:\n%s\n%s" % (name, r.stdout, want, r.stderr))


# --- complex: '<c8' and '<c16' files in, the same dtype out, on the CPU
# and the emulated device; numpy's repr of complex arrays ---
def write_complex(path, descr, shape, values):
    write_npy(path, descr, shape, [x for v in values for x in (v.real, v.imag)])


def rand_complex(n):
    return [complex(random.uniform(-1, 1), random.uniform(-1, 1))
            for _ in range(n)]


CA, CB = rand_complex(12), rand_complex(15)
CWANT = [sum(CA[i * 3 + j] * CB[j * 5 + k] for j in range(3))
         for i in range(4) for k in range(5)]
for descr, tol in (("<c8", 1e-5), ("<c16", 1e-12)):
    write_complex(P("ca.npy"), descr, (4, 3), CA)
    write_complex(P("cb.npy"), descr, (3, 5), CB)
    for backend in ("cpu", "emu"):
        r = einc("eval", "i j, j k -> i k", P("ca.npy"), P("cb.npy"), "-o",
                 P("cc.npy"), "--backend", backend)
        ok = r.returncode == 0
        if ok:
            with open(P("cc.npy"), "rb") as f:
                ok = ("'descr': '%s'" % descr).encode() in f.read(128)
            shape, got = read_npy(P("cc.npy"))
            ok = ok and shape == (4, 5)
        check(ok and close(got, CWANT, tol),
              "complex matmul %s on %s: %s" % (descr, backend, r.stderr))
    # a plain copy gives back the same values, bit for bit
    r = einc("eval", "i j -> i j", P("ca.npy"), "-o", P("cc.npy"))
    check(r.returncode == 0 and read_npy(P("cc.npy")) == read_npy(P("ca.npy")),
          "complex %s round trip: %s" % (descr, r.stderr))
r = einc("eval", "i j -> i", P("ca.npy"), "--reduce", "max", "--print")
check(r.returncode == 2 and "'max'" in r.stderr and "complex" in r.stderr,
      "max on complex is a dtype error naming it: " + r.stderr)
# an f8 file whose 8 bytes are the floats 1 and 2, read as one c64
write_npy(P("cd.npy"), "<f8", (1,),
          [struct.unpack("<d", struct.pack("<ff", 1.0, 2.0))[0]])
r = einc("eval", "i -> i", P("cd.npy"), "--dtype", "complex64", "--print")
check(r.returncode == 0 and r.stdout == "array([1.+2.j], dtype=complex64)\n",
      "--dtype complex64 reads f4 pairs as c64: " + r.stdout + r.stderr)

# --print of complex arrays (texts produced by numpy 2.4's repr)
write_complex(P("q1.npy"), "<c16", (2,), [1 + 2j, 3 - 4.5j])
write_complex(P("q2.npy"), "<c8", (2,), [0.1 + 0.2j, -1.5 + 0j])
write_complex(P("q3.npy"), "<c16", (2,), [complex(float("nan"), 1),
                                          complex(1, float("inf"))])
write_complex(P("q4.npy"), "<c8", (1, 2), [1e-5 + 1j, 2 + 3e6j])
write_npy(P("q5.npy"), "<f8", (2,), [float("-inf"), 1.0])
COMPLEX_PRINTS = [
    ("q1", "array([1.+2.j , 3.-4.5j])"),
    ("q2", "array([ 0.1+0.2j, -1.5+0.j ], dtype=complex64)"),
    ("q3", "array([nan +1.j,  1.+infj])"),
    ("q4", "array([[1.e-05+1.e+00j, 2.e+00+3.e+06j]], dtype=complex64)"),
    ("q5", "array([-inf,   1.])"),
]
for name, want in COMPLEX_PRINTS:
    expr = "a b -> a b" if name == "q4" else "a -> a"
    r = einc("eval", expr, P(name + ".npy"), "--print")
    check(r.returncode == 0 and r.stdout == want + "\n",
          "--print %s:\n%s\nwant:\n%s\n%s" % (name, r.stdout, want, r.stderr))

# plan, check, cuda-src and bench take .npy files in place of shapes: the
# header's shape (and, where no --dtype is given, its dtype). The data is
# not read, but its size is checked as eval checks it; a file that cannot
# be opened is an I/O failure (exit 1), a malformed one invalid input (2)
write_npy(P("s1.npy"), "<f8", (3, 4), [0.0] * 12)
write_npy(P("s2.npy"), "<f8", (4, 5), [0.0] * 20)
write_npy(P("s3.npy"), "<V2", (4, 5), [0] * 20)
r = einc("check", "i j, j k -> i k", P("s1.npy"), P("s2.npy"))
check(r.returncode == 0 and r.stdout == "3x5\n", "check on files: %r" % (r,))
r = einc("check", "i j, j k -> i k", "3x4", P("s2.npy"))
check(r.returncode == 0 and r.stdout == "3x5\n", "a shape and a file: %r" % (r,))
r = einc("plan", "i j, j k -> i k", P("s1.npy"), P("s2.npy"), "--json")
plan = json.loads(r.stdout) if r.returncode == 0 else {}
check(plan.get("dtype") == "f64" and plan.get("output_shape") == [3, 5],
      "plan takes shape and dtype from the files: %r" % (r,))
r = einc("plan", "i j -> j i", P("s3.npy"), "--json")
check(r.returncode == 0 and json.loads(r.stdout)["dtype"] == "bf16",
      "plan reads '<V2' as bf16: %r" % (r,))
r = einc("plan", "i j, j k -> i k", P("s1.npy"), P("s2.npy"), "--json",
         "--dtype", "f16")
check(r.returncode == 0 and json.loads(r.stdout)["dtype"] == "f16",
      "--dtype overrides the files' dtype: %r" % (r,))
r = einc("cuda-src", "i j -> j i", P("s1.npy"))
check(r.returncode == 0 and "(f64)" in r.stdout.splitlines()[0],
      "cuda-src takes a file: %r" % (r.stdout[:200],))
r = einc("check", "i j, k -> i k", P("s1.npy"), P("s2.npy"))
check(r.returncode == 2 and r.stderr.startswith(
    "einc: error: operand 2 names 1 dim but its tensor has 2 (shape 4x5)"),
      "an expression error on file shapes: %r" % (r,))
r = einc("plan", "i j -> i", P("missing.npy"))
check(r.returncode == 1 and "cannot open" in r.stderr,
      "a file that cannot be opened is exit 1: %r" % (r,))
write_npy(P("short.npy"), "<f8", (3, 4), [0.0] * 12, truncate=8)
r = einc("check", "i j -> i", P("short.npy"))
check(r.returncode == 2 and "truncated" in r.stderr,
      "a truncated file is exit 2: %r" % (r,))
with open(P("junk.npy"), "wb") as f:
    f.write(b"not numpy")
r = einc("plan", "i j -> i", P("junk.npy"))
check(r.returncode == 2 and "is not a .npy file" in r.stderr,
      "a file that is no .npy is exit 2: %r" % (r,))


# Mixed input dtypes are promoted as numpy promotes them (issue 27): the
# output's dtype is numpy.result_type's, its values the exact products.
def header_descr(path):
    with open(path, "rb") as f:
        raw = f.read()
    hlen = struct.unpack("<H", raw[8:10])[0]
    return eval(raw[10:10 + hlen].decode())["descr"]


PROMOTIONS = [("<c16", "<c8", "<c16"), ("<c8", "<f8", "<c16"),
              ("<f8", "<f4", "<f8"), ("<f4", "<i4", "<f8"),
              ("|u1", "|i1", "<i2"), ("<i2", "<f2", "<f4"),
              ("|i1", "<f4", "<f4"), ("|b1", "<i4", "<i4")]
for da, db, want_descr in PROMOTIONS:
    ints = lambda d: d[1] in "iub"
    va = ([complex(v) for v in rand_complex(12)] if da in COMPLEX else
          [abs(v) % 2 == 1 if da == "|b1" else abs(v) if da == "|u1" else v
           for v in rand_values(12, integer=ints(da))])
    vb = (rand_complex(15) if db in COMPLEX else
          [abs(v) if db == "|u1" else v
           for v in rand_values(15, integer=ints(db))])
    (write_complex if da in COMPLEX else write_npy)(P("pa.npy"), da, (4, 3), va)
    (write_complex if db in COMPLEX else write_npy)(P("pb.npy"), db, (3, 5), vb)
    # the inputs as stored (f2, f4 and c8 round their values)
    va, vb = read_npy(P("pa.npy"))[1], read_npy(P("pb.npy"))[1]
    r = einc("eval", "i j, j k -> i k", P("pa.npy"), P("pb.npy"), "-o",
             P("po.npy"))
    want = [sum(va[i * 3 + j] * vb[j * 5 + k] for j in range(3))
            for i in range(4) for k in range(5)]
    ok = r.returncode == 0 and header_descr(P("po.npy")) == want_descr
    tol = {"<f2": 2e-2, "<f4": 1e-5, "<c8": 1e-5}.get(want_descr, 1e-12)
    check(ok and close(read_npy(P("po.npy"))[1], want, tol),
          "%s and %s promote to %s: %r" % (da, db, want_descr, r))

# --- --memory-limit (issue 37): a chain whose every order needs an
# intermediate of 6x7 or 5x4 f64 (240 or 160 bytes) runs sliced within 96
# bytes and equals the direct sum; -v says how many slices ran. 'free'
# takes a share of the host's free memory (no slicing for this size).
CA, CB, CC = rand_values(30), rand_values(35), rand_values(28)
write_npy(P("ca.npy"), "<f8", (6, 5), CA)
write_npy(P("cb.npy"), "<f8", (5, 7), CB)
write_npy(P("cc.npy"), "<f8", (7, 4), CC)
want = [sum(CA[i * 5 + j] * CB[j * 7 + k] * CC[k * 4 + l]
            for j in range(5) for k in range(7))
        for i in range(6) for l in range(4)]
chain = ("i j, j k, k l -> i l", P("ca.npy"), P("cb.npy"), P("cc.npy"))
for limit, sliced in (("96", True), ("free", False), ("1G", False)):
    r = einc("eval", *chain, "-o", P("cm.npy"), "--memory-limit", limit, "-v")
    shape, got = read_npy(P("cm.npy")) if r.returncode == 0 else (None, [])
    check(r.returncode == 0 and shape == (6, 4) and close(got, want, 1e-12),
          "--memory-limit %s: values: %s" % (limit, r.stderr))
    said = [l for l in r.stdout.splitlines() if l.startswith("slices: ")]
    check(bool(said) == sliced and (not sliced or " ran, over " in said[0]),
          "--memory-limit %s: -v's slices line %r" % (limit, said))
    os.remove(P("cm.npy"))
for bad in ("-5", "3Q", "lots", ""):
    r = einc("eval", *chain, "-o", P("cm.npy"), "--memory-limit", bad)
    check(r.returncode == 2 and "--memory-limit" in r.stderr and
          not os.path.exists(P("cm.npy")), "--memory-limit %r: %s" % (bad, r.stderr))
r = einc("eval", *chain, "-o", P("cm.npy"), "--memory-limit", "8")
check(r.returncode == 2 and "a limit of" in r.stderr and
      not os.path.exists(P("cm.npy")), "a limit no slicing meets: " + r.stderr)

# --- the numpy dialect takes opt_einsum's symbols past its 52 letters
# (opt_einsum.get_symbol(52) is chr(192), 'À'), the implicit output in
# code point order ('Âb,bÀ' gives 'ÀÂ', as opt_einsum infers it) ---
SA, SB = rand_values(12), rand_values(20)
write_npy(P("sa.npy"), "<f8", (3, 4), SA)
write_npy(P("sb.npy"), "<f8", (4, 5), SB)
for expr, order in (("\u00c2b,b\u00c0->\u00c2\u00c0", "ki"),
                    ("\u00c2b,b\u00c0", "ik")):
    r = einc("eval", "--numpy", expr, P("sa.npy"), P("sb.npy"), "-o",
             P("so.npy"))
    shape, got = read_npy(P("so.npy")) if r.returncode == 0 else (None, [])
    prod = {(k, i): sum(SA[k * 4 + j] * SB[j * 5 + i] for j in range(4))
            for k in range(3) for i in range(5)}
    want = [prod[(k, i)] for k in range(3) for i in range(5)] \
        if order == "ki" else [prod[(k, i)] for i in range(5)
                               for k in range(3)]
    check(r.returncode == 0 and close(got, want, 1e-12),
          "numpy dialect symbols %r: %s" % (expr, r.stderr))

# --- operands as arguments: 100 pass (the bound was 64), past 1024 the
# error names `einc plan --input` and the library's bound ---
for n, ok in ((100, True), (1025, False)):
    chain = ", ".join("x%d x%d" % (i, i + 1) for i in range(n))
    r = einc("check", chain + " -> x0 x%d" % n, *["2x2"] * n)
    check((r.returncode == 0) == ok and
          (ok or ("plan --input" in r.stderr and "65536" in r.stderr)),
          "%d operands as arguments: %d %s" % (n, r.returncode, r.stderr))

print("ein-test-summary: eval_cli: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
