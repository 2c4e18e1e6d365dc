"""Benchmark cascade.kernels: Triton vs torch eager vs torch.compile, per op.

On a GPU: median time over CUDA-event-timed runs, bytes each op must move, achieved GB/s, and that
as a fraction of the device's copy bandwidth measured in the same run (a large y.copy_(x)).
Without a GPU: Triton runs under TRITON_INTERPRET=1 on small shapes for correctness only, and the
JSON says timings were skipped; no numbers are made up.

    python benchmarks/kernels.py                 # GPU if present, else CPU correctness
    python benchmarks/kernels.py --repeats 50 --out-dir benchmarks/results
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before cascade.kernels imports triton

import cascade.kernels as K  # noqa: E402
from cascade.kernels.kv_quant import reference as kv_ref  # noqa: E402
from cascade.kernels.preprocess import reference as pre_ref  # noqa: E402
from cascade.kernels.prune import reference as prune_ref  # noqa: E402
from cascade.kernels.rmsnorm import reference as rms_ref  # noqa: E402
from cascade.kernels.topk import reference as topk_ref  # noqa: E402

MEAN, STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


def _size(t) -> int:
    return t.numel() * t.element_size()


def cases(dev: str, gpu: bool):
    """(name, shape note, inputs, triton fn, torch fn, torch fn to compile, bytes moved, flops)."""
    bf16 = torch.bfloat16 if gpu else torch.float32
    h, w = (1344, 2016) if gpu else (56, 84)
    img = torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, device=dev)
    mean_t, std_t = pre_ref.fused_mean_std(MEAN, STD, 1 / 255, dev)
    n_patch = (h // 14) * (w // 14)
    yield ("patchify_normalize", f"{h}x{w}x3 uint8", (img,),
           lambda x: K.patchify_normalize(x, MEAN, STD, impl="triton")[0],
           lambda x: K.patchify_normalize(x, MEAN, STD, impl="torch")[0],
           lambda x: pre_ref.patchify_normalize(x, mean_t, std_t, 14, 2, 2),
           _size(img) + n_patch * 1176 * 4, 0)

    n, d = (2880, 1536) if gpu else (37, 200)
    keep = n // 4
    tokens = torch.randn(n, d, device=dev, dtype=bf16)
    es = tokens.element_size()
    for method, passes in (("dominant", 2), ("duplicate", 1)):
        yield (f"score_and_gather[{method}]", f"{n}x{d} {tokens.dtype}, keep {keep}", (tokens,),
               lambda x, m=method: K.score_and_gather(x, keep, m, impl="triton"),
               lambda x, m=method: K.score_and_gather(x, keep, m, impl="torch"),
               lambda x, m=method: prune_ref.gather(
                   x, prune_ref.select(prune_ref.keep_scores(x, m), keep)),
               passes * n * d * es + 4 * n + 2 * keep * d * es, 0)

    m_rows, d = (4096, 3584) if gpu else (8, 100)
    x = torch.randn(m_rows, d, device=dev, dtype=bf16)
    r, wt = torch.randn_like(x), torch.randn(d, device=dev, dtype=bf16)
    yield ("rms_norm", f"{m_rows}x{d} {x.dtype}", (x,),
           lambda a: K.rms_norm(a, wt, impl="triton"), lambda a: K.rms_norm(a, wt, impl="torch"),
           lambda a: rms_ref.rms_norm(a, wt, 1e-6), 2 * _size(x) + _size(wt), 0)
    yield ("rms_norm+residual", f"{m_rows}x{d} {x.dtype}", (x, r),
           lambda a, b: K.rms_norm(a, wt, residual=b, impl="triton"),
           lambda a, b: K.rms_norm(a, wt, residual=b, impl="torch"),
           lambda a, b: rms_ref.add_rms_norm(a, b, wt, 1e-6), 4 * _size(x) + _size(wt), 0)

    shape = (1, 8, 8192, 128) if gpu else (1, 2, 37, 24)
    k, v = torch.randn(shape, device=dev, dtype=bf16), torch.randn(shape, device=dev, dtype=bf16)
    b_, h_, s_, dh = shape
    scales = 4 * b_ * h_ * (s_ + dh)
    yield ("quantize_kv", f"{shape} {k.dtype}", (k, v),
           lambda a, b: K.quantize_kv(a, b, impl="triton"),
           lambda a, b: K.quantize_kv(a, b, impl="torch"), kv_ref.quantize,
           2 * _size(k) + 2 * k.numel() + scales, 0)
    q = K.quantize_kv(k, v, impl="torch")
    yield ("dequantize_kv", f"{shape} {k.dtype}", (q,),
           lambda a: K.dequantize_kv(a, impl="triton"), lambda a: K.dequantize_kv(a, impl="torch"),
           lambda a: kv_ref.dequantize(a.k, a.v, a.k_scale, a.v_scale, a.dtype),
           2 * k.numel() + scales + 2 * _size(k), 0)

    nq, nk, d, topk = (8, 100_000, 512, 10) if gpu else (3, 100, 40, 5)
    qs, ks = torch.randn(nq, d, device=dev, dtype=bf16), torch.randn(nk, d, device=dev, dtype=bf16)
    yield ("similarity_topk", f"Q={nq} N={nk} D={d} k={topk} {qs.dtype}", (qs, ks),
           lambda a, b: K.similarity_topk(a, b, topk, impl="triton"),
           lambda a, b: K.similarity_topk(a, b, topk, impl="torch"),
           lambda a, b: topk_ref.similarity_topk(a, b, topk, True),
           _size(qs) + _size(ks), 2 * nq * nk * d)


def _flat(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "__dataclass_fields__"):
        return [out.k, out.v, out.k_scale, out.v_scale]
    return [t for o in out for t in _flat(o)]


def max_abs_diff(a, b) -> float:
    worst = 0.0
    for x, y in zip(_flat(a), _flat(b), strict=True):
        worst = max(worst, (x.double() - y.double()).abs().max().item() if x.numel() else 0.0)
    return worst


def time_ms(fn, args, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth_gbps(warmup: int, repeats: int) -> float:
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB: far beyond L2
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), (), warmup, repeats)
    return 2 * x.numel() / ms / 1e6  # read + write


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results",
                    help="where kernels_<device>.json goes (default: benchmarks/results)")
    ap.add_argument("--repeats", type=int, default=30, help="timed runs per measurement (GPU)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs first (GPU)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    args = ap.parse_args(argv)

    gpu = torch.cuda.is_available()
    dev = "cuda" if gpu else "cpu"
    device_name = torch.cuda.get_device_name() if gpu else "cpu"
    import triton
    result = {"device": device_name, "torch": torch.__version__, "triton": triton.__version__,
              "python": platform.python_version()}
    if gpu:
        result["copy_bandwidth_GBps"] = round(copy_bandwidth_gbps(args.warmup, args.repeats), 1)
    else:
        result["timings"] = ("skipped: no GPU on this machine. Triton ran under TRITON_INTERPRET=1 "
                             "on small float32 shapes (the interpreter's bfloat16 rounding differs "
                             "from a GPU's) to check correctness only; no timings recorded.")
    result["kernels"] = []
    for name, shape, inputs, tri, eager, ref, nbytes, flops in cases(dev, gpu):
        row = {"kernel": name, "shape": shape, "bytes_moved": nbytes,
               "max_abs_diff_triton_vs_torch": max_abs_diff(tri(*inputs), eager(*inputs))}
        if gpu:
            row["triton_ms"] = time_ms(tri, inputs, args.warmup, args.repeats)
            row["torch_eager_ms"] = time_ms(eager, inputs, args.warmup, args.repeats)
            if not args.no_compile:
                try:
                    row["torch_compile_ms"] = time_ms(torch.compile(ref), inputs, args.warmup,
                                                      args.repeats)
                except Exception as exc:  # record why, keep benchmarking the rest
                    row["torch_compile_error"] = f"{type(exc).__name__}: {exc}"[:300]
            row["triton_GBps"] = round(nbytes / row["triton_ms"] / 1e6, 1)
            row["fraction_of_copy_bandwidth"] = round(
                row["triton_GBps"] / result["copy_bandwidth_GBps"], 3)
            if flops:
                row["triton_TFLOPs"] = round(flops / row["triton_ms"] / 1e9, 2)
        result["kernels"].append(row)
        print(json.dumps(row))
    slug = re.sub(r"[^a-z0-9]+", "_", device_name.lower()).strip("_")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"kernels_{slug}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
