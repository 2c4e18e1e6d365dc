"""Benchmark cascade.kernels and the host-side costs around them.

Sections of the JSON (benchmarks/results/kernels_<device>.json):

- kernels: per op, Triton vs torch reference (max difference always). On a GPU also the median
  CUDA-event time of Triton, torch eager and torch.compile, the bytes the op must move, achieved
  GB/s and that as a fraction of the device's copy bandwidth measured in the same run. Without a
  GPU, Triton runs under TRITON_INTERPRET=1 on small shapes for correctness only.
- decode_step: per decode step of the "bench" tiny VLM (Qwen2-VL architecture, random weights,
  12 layers): RMSNorm calls, Triton launches and kernel-dispatch calls (counted), per-call host
  costs (dispatch now, the triton lookup every op paid before, our patched RMSNorm forward vs the
  module's own) and the host time the patch adds per step. On a GPU also the step time with the
  Triton RMSNorm vs the model's own (interleaved best-of).
- kv_int8_storage: bytes of an int8 prefix-cache entry against the same KV in fp32 and bf16 (the
  runtime's own dtype: fp32 on CPU, bf16 on GPU), for the bench model and Qwen2-VL-2B shapes.
- reduction_cost: each pre-LLM reduction at 4,096 visual tokens (D = 1,024) against the bench
  model's prefill of the reduced prompt (keep 0.25: 1,024 visual + 50 text tokens).

CPU timings are taken with torch threads pinned (--threads, default 1) and recorded.

    python benchmarks/kernels_bench.py --quick          # smoke run (CPU: ~1-2 minutes)
    python benchmarks/kernels_bench.py --threads 1      # CPU record
    python benchmarks/kernels_bench.py --repeats 50     # on a GPU: timings with the device name

(Not `benchmarks/kernels.py`: a script of that name would shadow the Hugging Face `kernels`
package, which transformers imports, for every script run from this folder.)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.machinery
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before cascade.kernels imports triton
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import cascade.kernels as K  # noqa: E402
from cascade.kernels import impl as _impl  # noqa: E402
from cascade.kernels.kv_quant import reference as kv_ref  # noqa: E402
from cascade.kernels.preprocess import reference as pre_ref  # noqa: E402
from cascade.kernels.prune import reference as prune_ref  # noqa: E402
from cascade.kernels.rmsnorm import reference as rms_ref  # noqa: E402
from cascade.kernels.topk import reference as topk_ref  # noqa: E402
from cascade.provenance import write_results  # noqa: E402

MEAN, STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
OPS = ("kv_quant", "preprocess", "prune", "rmsnorm", "topk")
# Qwen2-VL-2B's language model: 28 layers, 2 KV heads of 128 (for shapes we cannot load here)
QWEN2_VL_2B = {"layers": 28, "kv_heads": 2, "head_dim": 128}


def _size(t) -> int:
    return t.numel() * t.element_size()


def cases(dev: str, gpu: bool):
    """(name, shape note, inputs, triton fn, torch fn, torch fn to compile, bytes moved, flops)."""
    bf16 = torch.bfloat16 if gpu else torch.float32
    h, w = (1344, 2016) if gpu else (56, 84)
    img = torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, device=dev)
    mean_t, std_t = pre_ref.fused_mean_std(MEAN, STD, 1 / 255, dev)
    n_patch = (h // 14) * (w // 14)
    yield (
        "patchify_normalize",
        f"{h}x{w}x3 uint8",
        (img,),
        lambda x: K.patchify_normalize(x, MEAN, STD, impl="triton")[0],
        lambda x: K.patchify_normalize(x, MEAN, STD, impl="torch")[0],
        lambda x: pre_ref.patchify_normalize(x, mean_t, std_t, 14, 2, 2),
        _size(img) + n_patch * 1176 * 4,
        0,
    )

    n, d = (2880, 1536) if gpu else (37, 200)
    keep = n // 4
    tokens = torch.randn(n, d, device=dev, dtype=bf16)
    es = tokens.element_size()
    for method, passes in (("dominant", 2), ("duplicate", 1)):
        yield (
            f"score_and_gather[{method}]",
            f"{n}x{d} {tokens.dtype}, keep {keep}",
            (tokens,),
            lambda x, m=method: K.score_and_gather(x, keep, m, impl="triton"),
            lambda x, m=method: K.score_and_gather(x, keep, m, impl="torch"),
            lambda x, m=method: prune_ref.gather(
                x, prune_ref.select(prune_ref.keep_scores(x, m), keep)
            ),
            passes * n * d * es + 4 * n + 2 * keep * d * es,
            0,
        )

    m_rows, d = (4096, 3584) if gpu else (8, 100)
    x = torch.randn(m_rows, d, device=dev, dtype=bf16)
    wt = torch.randn(d, device=dev, dtype=bf16)
    yield (
        "rms_norm",
        f"{m_rows}x{d} {x.dtype}",
        (x,),
        lambda a: K.rms_norm(a, wt, impl="triton"),
        lambda a: K.rms_norm(a, wt, impl="torch"),
        lambda a: rms_ref.rms_norm(a, wt, 1e-6),
        2 * _size(x) + _size(wt),
        0,
    )
    one = torch.randn(1, 1, d, device=dev, dtype=bf16)  # a decode step's norm: launch-bound
    yield (
        "rms_norm[decode 1 token]",
        f"1x{d} {one.dtype}",
        (one,),
        lambda a: K.rms_norm(a, wt, impl="triton"),
        lambda a: K.rms_norm(a, wt, impl="torch"),
        lambda a: rms_ref.rms_norm(a, wt, 1e-6),
        2 * _size(one) + _size(wt),
        0,
    )

    n_layers, shape = (QWEN2_VL_2B["layers"], (1, 2, 4096, 128)) if gpu else (3, (1, 2, 37, 24))
    ks = [torch.randn(shape, device=dev, dtype=bf16) for _ in range(n_layers)]
    vs = [torch.randn(shape, device=dev, dtype=bf16) for _ in range(n_layers)]
    b_, h_, s_, dh = shape
    numel = n_layers * ks[0].numel()
    scales = 4 * n_layers * b_ * h_ * (s_ + dh)
    note = f"{n_layers} layers x {shape} {bf16}"
    # keys are read twice (maxima, then quantization): 3 reads of k/v-sized input in all
    yield (
        "quantize_kv[all layers]",
        note,
        (ks, vs),
        lambda a, b: K.quantize_kv(a, b, impl="triton"),
        lambda a, b: K.quantize_kv(a, b, impl="torch"),
        kv_ref.quantize,
        3 * numel * es + 2 * numel + scales,
        0,
    )
    q = K.quantize_kv(ks, vs, impl="torch")
    yield (
        "dequantize_kv[all layers]",
        note,
        (q,),
        lambda a: K.dequantize_kv(a, impl="triton"),
        lambda a: K.dequantize_kv(a, impl="torch"),
        lambda a: kv_ref.dequantize(a.k, a.v, a.k_scale, a.v_scale, a.dtype),
        2 * numel + scales + 2 * numel * es,
        0,
    )

    nq, nk, d, topk = (8, 100_000, 512, 10) if gpu else (3, 100, 40, 5)
    qs, keys = (
        torch.randn(nq, d, device=dev, dtype=bf16),
        torch.randn(nk, d, device=dev, dtype=bf16),
    )
    yield (
        "similarity_topk",
        f"Q={nq} N={nk} D={d} k={topk} {qs.dtype}",
        (qs, keys),
        lambda a, b: K.similarity_topk(a, b, topk, impl="triton"),
        lambda a, b: K.similarity_topk(a, b, topk, impl="torch"),
        lambda a, b: topk_ref.similarity_topk(a, b, topk, True),
        _size(qs) + _size(keys),
        2 * nq * nk * d,
    )


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
    """Median CUDA-event milliseconds of fn(*args)."""
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


def kernel_rows(dev: str, gpu: bool, args) -> list[dict]:
    rows, copy_gbps = [], copy_bandwidth_gbps(args.warmup, args.repeats) if gpu else None
    for name, shape, inputs, tri, eager, ref, nbytes, flops in cases(dev, gpu):
        row = {
            "kernel": name,
            "shape": shape,
            "bytes_moved": nbytes,
            "max_abs_diff_triton_vs_torch": max_abs_diff(tri(*inputs), eager(*inputs)),
        }
        if gpu:
            row["triton_ms"] = time_ms(tri, inputs, args.warmup, args.repeats)
            row["torch_eager_ms"] = time_ms(eager, inputs, args.warmup, args.repeats)
            if not args.no_compile:
                try:
                    row["torch_compile_ms"] = time_ms(
                        torch.compile(ref), inputs, args.warmup, args.repeats
                    )
                except Exception as exc:  # record why, keep benchmarking the rest
                    row["torch_compile_error"] = f"{type(exc).__name__}: {exc}"[:300]
            row["triton_GBps"] = round(nbytes / row["triton_ms"] / 1e6, 1)
            row["copy_bandwidth_GBps"] = round(copy_gbps, 1)
            row["fraction_of_copy_bandwidth"] = round(row["triton_GBps"] / copy_gbps, 3)
            if flops:
                row["triton_TFLOPs"] = round(flops / row["triton_ms"] / 1e9, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


# -- host costs per decode step ----------------------------------------------------------------
@contextlib.contextmanager
def counting():
    """Counts Triton kernel launches (every @triton.jit kernel of cascade.kernels, compiled or
    interpreted) and kernel-dispatch decisions (`_impl.choose_impl`) while active."""
    counts = {"launches": 0, "dispatch_calls": 0}
    kernel_types = set()
    for op in OPS:
        mod = importlib.import_module(f"cascade.kernels.{op}.triton")
        kernel_types |= {
            type(v) for k, v in vars(mod).items() if k.startswith("_") and hasattr(v, "run")
        }
    saved = [(cls, cls.run) for cls in kernel_types]
    real_choose = _impl.choose_impl
    # every module that took `choose_impl` by name, and cascade.kernels.impl itself (late imports)
    users = [_impl] + [importlib.import_module(f"cascade.kernels.{op}") for op in OPS]

    def choose(*a, **k):
        counts["dispatch_calls"] += 1
        return real_choose(*a, **k)

    for cls, run in saved:

        def spy(self, *a, _run=run, **k):
            counts["launches"] += 1
            return _run(self, *a, **k)

        cls.run = spy
    for mod in users:
        mod.choose_impl = choose
    try:
        yield counts
    finally:
        for cls, run in saved:
            cls.run = run
        for mod in users:
            mod.choose_impl = real_choose


class DecodeStep:
    """One greedy decode step of a loaded VLM's language model after a short prefix."""

    def __init__(self, vlm, prefix_tokens: int = 64):
        self.fam = vlm.backend.runtime
        d = self.fam.text_config.hidden_size
        dtype = next(self.fam.model.parameters()).dtype
        with torch.inference_mode():
            self.cache = vlm.backend.engine.new_cache()
            emb = torch.randn(1, prefix_tokens, d, device=self.fam.device, dtype=dtype)
            self.fam.forward(emb, self.fam.text_positions(0, prefix_tokens), self.cache)
        self.pos = prefix_tokens
        self.token = torch.randn(1, 1, d, device=self.fam.device, dtype=dtype)

    def __call__(self) -> None:
        with torch.inference_mode():
            h = self.fam.forward(self.token, self.fam.text_positions(self.pos, 1), self.cache)
            int(self.fam.lm_head(h[:, -1]).argmax())
        self.pos += 1


def _wall_ms(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def decode_step_costs(vlm, gpu: bool, rounds: int, steps: int) -> dict:
    from cascade.kernels.rmsnorm import patch_rmsnorm

    model = vlm.backend.model
    cfg = vlm.backend.family.text_config
    step = DecodeStep(vlm)
    out = {
        "model": f"bench tiny Qwen2-VL, {cfg.num_hidden_layers} layers, hidden "
        f"{cfg.hidden_size} (random weights)",
        "rmsnorm_per_decode_step_qwen2_vl_2b": 2 * QWEN2_VL_2B["layers"] + 1,
    }
    impls = ["torch"] + (["triton"] if gpu or _impl.interpreter_enabled() else [])
    for impl in impls:  # what one decode step calls, launches and dispatches
        with patch_rmsnorm(model, impl=impl) as handle, counting() as c:
            calls = [0]
            hooks = [
                m.register_forward_pre_hook(
                    lambda *_, calls=calls: calls.__setitem__(0, calls[0] + 1)
                )
                for m in handle.patched
            ]
            step()
            for hk in hooks:
                hk.remove()
        out[f"patched_{impl}"] = {
            "rmsnorm_calls": calls[0],
            "triton_launches": c["launches"],
            "dispatch_calls": c["dispatch_calls"],
        }
    # per-call host costs: dispatch now, the triton lookup every op paid before (a process that
    # has not imported triton, as on CPU, walks sys.path each time), our patched forward vs the
    # module's own on a decode-step input (torch reference behind the wrapper: same math)
    norm = next(m for m in model.modules() if type(m).__name__.endswith("RMSNorm"))
    x = torch.randn(1, 1, norm.weight.shape[0], device=norm.weight.device, dtype=norm.weight.dtype)
    own_us = _per_call_us(lambda: norm(x), 5000)
    with patch_rmsnorm(norm, impl="torch"):
        patched_us = _per_call_us(lambda: norm(x), 5000)
    out["per_call_us"] = {
        "dispatch_choose_impl": _per_call_us(lambda: _impl.choose_impl("auto", x), 20000),
        "triton_lookup_before": _per_call_us(
            lambda: importlib.machinery.PathFinder.find_spec("triton"), 500
        ),
        "rmsnorm_module_forward": own_us,
        "rmsnorm_patched_forward": patched_us,
    }
    out["patch_host_overhead_us_per_step"] = round(
        (patched_us - own_us) * out["patched_torch"]["rmsnorm_calls"], 1
    )
    if gpu:  # the step with Triton norms vs the module's own, interleaved best-of
        variants = {"unpatched_torch": None, "patched_triton": "triton"}
        best = {k: float("inf") for k in variants}
        for _ in range(rounds):
            for name, impl in variants.items():
                with patch_rmsnorm(model, impl=impl) if impl else contextlib.nullcontext():
                    step()  # warm
                    best[name] = min(best[name], _wall_ms(step, steps))
        out["step_ms_best"] = {k: round(v, 3) for k, v in best.items()}
    print("decode step:", json.dumps(out), flush=True)
    return out


def _per_call_us(fn, n: int) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return round((time.perf_counter() - t) / n * 1e6, 2)


# -- int8 KV storage vs the runtime's own dtype ------------------------------------------------
def kv_int8_storage(dev: str, gpu: bool, tokens: int) -> dict:
    shapes = {
        "bench tiny Qwen2-VL": {"layers": 12, "kv_heads": 4, "head_dim": 64},
        "Qwen2-VL-2B": QWEN2_VL_2B,
    }
    out = {
        "runtime_kv_dtype": "bfloat16" if gpu else "float32",
        "prefix_tokens": tokens,
        "models": {},
    }
    for name, s in shapes.items():
        shape = (1, s["kv_heads"], tokens, s["head_dim"])
        ks = [torch.randn(shape, device=dev) for _ in range(s["layers"])]
        q = K.quantize_kv(ks, ks)
        fp32 = 2 * sum(_size(k) for k in ks)
        out["models"][name] = {
            "fp32_bytes": fp32,
            "bf16_bytes": fp32 // 2,
            "int8_bytes": q.nbytes,
            "smaller_than_fp32": round(fp32 / q.nbytes, 2),
            "smaller_than_bf16": round(fp32 / 2 / q.nbytes, 2),
        }
    print("int8 KV:", json.dumps(out), flush=True)
    return out


# -- reduction cost against the reduced prefill -------------------------------------------------
def reduction_cost(vlm, dev: str, rounds: int) -> dict:
    from cascade.vlm import ReductionConfig
    from cascade.vlm.reduction import keep_count, reduce_tokens, reduction_names

    fam = vlm.backend.runtime
    methods = reduction_names("after_tower")
    n, side, keep, text = 4096, 64, 0.25, 50
    dtype = next(fam.model.parameters()).dtype
    x = torch.randn(n, fam.text_config.hidden_size, device=dev, dtype=dtype)
    tokens = keep_count(n, keep) + text
    emb = torch.randn(1, tokens, x.shape[1], device=dev, dtype=dtype)
    pos = fam.text_positions(0, tokens)

    def prefill():
        with torch.inference_mode():
            h = fam.forward(emb, pos, vlm.backend.engine.new_cache())
            int(fam.lm_head(h[:, -1]).argmax())

    runs = {
        m: (lambda m=m: reduce_tokens(x, (1, side, side), ReductionConfig(m, keep)))
        for m in methods
    }
    runs["prefill"] = prefill
    best = {k: float("inf") for k in runs}
    for _ in range(rounds):  # interleaved best-of
        for k, fn in runs.items():
            best[k] = min(best[k], _wall_ms(fn, 1) / 1e3)
    out = {
        "visual_tokens": n,
        "keep_ratio": keep,
        "reduced_prompt_tokens": tokens,
        "reduced_prefill_s": round(best["prefill"], 4),
        "reduction_s": {m: round(best[m], 4) for m in methods},
        "reduction_percent_of_reduced_prefill": {
            m: round(100 * best[m] / best["prefill"], 2) for m in methods
        },
    }
    print("reduction cost:", json.dumps(out), flush=True)
    return out


def device_name(gpu: bool) -> str:
    if gpu:
        return torch.cuda.get_device_name()
    for line in (
        Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    ):
        if line.startswith("model name"):
            return f"CPU: {line.split(':', 1)[1].strip()}"
    return f"CPU: {platform.processor() or platform.machine()}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--out-dir",
        type=Path,
        default=Path(__file__).parent / "results",
        help="where kernels_<device>.json goes (default: benchmarks/results)",
    )
    ap.add_argument("--quick", action="store_true", help="fewer rounds: a smoke run")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (recorded)")
    ap.add_argument("--repeats", type=int, default=30, help="timed runs per GPU measurement")
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs first (GPU)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    import triton

    from cascade.vlm import VLM, build_tiny_vlm

    gpu = torch.cuda.is_available()
    dev = "cuda" if gpu else "cpu"
    name = device_name(gpu)
    result = {
        "device": name,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "quick": args.quick,
    }
    if not gpu:
        result["kernel_timings"] = (
            "skipped: no GPU. Triton ran under TRITON_INTERPRET=1 on small float32 shapes (the "
            "interpreter's bfloat16 rounding differs from a GPU's) to check correctness only."
        )
    result["kernels"] = kernel_rows(dev, gpu, args)
    vlm = VLM.load(
        str(build_tiny_vlm(size="bench")),
        device=dev,
        dtype="bfloat16" if gpu else "float32",
        kernels="torch",
    )
    result["decode_step"] = decode_step_costs(
        vlm, gpu, rounds=2 if args.quick else 5, steps=3 if args.quick else 10
    )
    result["kv_int8_storage"] = kv_int8_storage(dev, gpu, tokens=1074)
    result["reduction_cost"] = reduction_cost(vlm, dev, rounds=1 if args.quick else 3)
    slug = re.sub(r"[^a-z0-9]+", "_", ("cpu" if not gpu else name).lower()).strip("_")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"kernels_{slug}{'_quick' if args.quick else ''}.json"
    write_results(path, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
