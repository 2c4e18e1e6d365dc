"""Colocated vs PD vs EPD on Ray Serve under a mixed load, and a simulator of a bigger machine.

The load: short chats (one small image, a streamed answer) arriving at a steady pace, beside
long multi-image requests (four large images: a prefill tens of times longer). Each layout is the
same pipeline (images -> vlm_answer -> compose_answer) with its model's `serve.disaggregate` set:

- colocated: two VLM replicas, each encoding, prefilling and decoding;
- pd: one prefill replica, one decode replica;
- epd: one encode, one prefill, one decode replica.

Every request has its own images (no cache hit). Measured per layout: the short streams' time to
first token and time per output token (p50/p95), goodput under an SLO (both met), throughput,
and per request what moved (KV bytes, seconds). Every replica runs 1 torch thread; the model is
the random-weight tiny Qwen2-VL (`build_tiny_vlm`): its seconds are this CPU's, its tokens mean
nothing.

The simulator (`disagg_sim.py`) gets the per-role costs measured here in process (tower, prefix
prefill, question prefill, decode step vs batch; the transfer seconds from the Ray run) and
replays the same load on this machine's cores: its predictions stand beside the measurement.
Then it is fed costs from the cost model of Qwen2-VL-2B on a stated GPU (`--gpu-*`) to show where
each layout wins.

    python benchmarks/disagg.py --quick     # a few minutes on 2 cores
    python benchmarks/disagg.py
"""

from __future__ import annotations

import argparse
import base64
import functools
import io
import json
import os
import pickle
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_k, _v)

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from _net import free_port  # noqa: E402
from disagg_sim import Costs, Request, simulate, summarize  # noqa: E402

from cascade.provenance import write_results  # noqa: E402

LAYOUTS = {
    "colocated": {"decode": 2},
    "pd": {"prefill": 1, "decode": 1},
    "epd": {"encode": 1, "prefill": 1, "decode": 1},
}
PIPELINE = """\
name: disagg
description: Benchmark pipeline - each image to the VLM, its roles laid out by serve.disaggregate.
models:
  vlm:
    id: {model}
    max_pixels: 200704
    kv_cache_bytes: 268435456
    encoder_cache_bytes: 0
    serve: {{disaggregate: {layout}}}
inputs:
  images: {{type: images}}
  question: {{type: str}}
  max_new_tokens: {{type: int, default: null}}
stages:
  imgs: {{type: images, inputs: {{images: $images}}}}
  vlm:
    type: vlm_answer
    params: {{max_new_tokens: 16}}
    inputs: {{images: imgs.images, question: $question, max_new_tokens: $max_new_tokens}}
  answer: {{type: compose_answer, inputs: {{answer: vlm.answer, baseline_images: imgs.images}}}}
outputs:
  answer: answer.answer
"""
SHORT_PX, LONG_PX, LONG_IMAGES = 112, 336, 4
SHORT_TOKENS, LONG_TOKENS = 16, 4
# the VLM stage's trace counters of what moved between roles (cascade.serve.ray.roles)
MOVED = ("kv_shipped_bytes", "prefill_call_overhead_s", "encode_s", "embeds_bytes")


def _png(seed: int, side: int) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def _images(kind: str, seed: int) -> list[bytes]:
    if kind == "short":
        return [_png(seed, SHORT_PX)]
    return [_png(seed * 10 + i, LONG_PX) for i in range(LONG_IMAGES)]


def _body(kind: str, seed: int) -> dict:
    parts = [
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(b).decode()},
        }
        for b in _images(kind, seed)
    ]
    parts.append({"type": "text", "text": f"What is in picture {seed}?"})
    return {
        "model": "cascade/disagg",
        "messages": [{"role": "user", "content": parts}],
        "max_tokens": SHORT_TOKENS if kind == "short" else LONG_TOKENS,
        "stream": kind == "short",
    }


def _schedule(args) -> list[tuple[str, float]]:
    """(kind, arrival s) of the load, in arrival order."""
    short = [("short", args.short_gap * i) for i in range(args.shorts)]
    long = [("long", args.long_start + args.long_gap * i) for i in range(args.longs)]
    return sorted(short + long, key=lambda r: r[1])


# -- measured in process: each role's cost on this CPU -------------------------------------------
def _best(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _load(tiny: str, kv_cache_bytes: int):
    from cascade.vlm import VLM

    return VLM.load(
        tiny, device="cpu", max_pixels=200704, kv_cache_bytes=kv_cache_bytes, encoder_cache_bytes=0
    )


def _decode_costs(dec, embeds: list, q: str, rounds: int) -> tuple[float, list[float]]:
    """The decode side of a short chat whose prefix it holds: question prefill + first token,
    and a decode step as a + b * batch (from batches of 1 and 4 concurrent streams)."""
    n = SHORT_TOKENS

    def ask(tokens: int) -> None:
        dec.generate(embeds, q, max_new_tokens=tokens)

    def four() -> None:
        threads = [threading.Thread(target=ask, args=(n + 1,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    ask(1), ask(n + 1), four()  # warm every shape
    first = _best(lambda: ask(1), rounds)
    step1 = (_best(lambda: ask(n + 1), rounds) - first) / n
    step4 = max(step1, (_best(four, rounds) - 4 * first) / n)  # the 4 question prefills in turn
    return first, [step1 - (step4 - step1) / 3, (step4 - step1) / 3]


def measure_costs(tiny: str, rounds: int) -> dict:
    """Tower, prefix prefill, question prefill + first token and decode step of the tiny model
    on one thread, in process, best of `rounds` with every shape warmed first."""
    from PIL import Image as PILImage

    from cascade.vlm.disagg import prefill, receive

    enc, pre, dec = _load(tiny, 0), _load(tiny, 256 << 20), _load(tiny, 256 << 20)
    q = "What is in picture 0?"
    out: dict = {"encode_s": {}, "prefix_s": {}, "shipped_bytes": {}, "ship_s": {}}
    out["embeds_ship_s"] = {}
    for kind in ("short", "long"):
        images = [PILImage.open(io.BytesIO(b)) for b in _images(kind, 999)]
        embeds = enc.backend.image_embeds(images)
        out["encode_s"][kind] = _best(functools.partial(enc.backend.image_embeds, images), rounds)

        def cold_prefill(embeds: list = embeds):
            pre.backend.kv_cache.clear()
            return prefill(pre.backend, embeds, q)

        cold_prefill()
        out["prefix_s"][kind] = _best(cold_prefill, rounds)
        shipment = cold_prefill()
        out["shipped_bytes"][kind] = shipment.nbytes
        # what Ray's object store does to a value on one node: pickled in, unpickled out (our own
        # objects, in this process: no untrusted bytes are unpickled)
        out["ship_s"][kind] = _best(lambda s=shipment: pickle.loads(pickle.dumps(s)), rounds)
        out["embeds_ship_s"][kind] = _best(lambda e=embeds: pickle.loads(pickle.dumps(e)), rounds)
        if kind == "short":
            receive(dec.backend, shipment)
            out["question_s"], out["step_s"] = _decode_costs(dec, embeds, q, rounds)
    return out


# -- on Ray ----------------------------------------------------------------------------------------
def _stream(client: httpx.Client, url: str, body: dict) -> tuple[list[float], dict]:
    """Token times (s after sending) of a streamed chat, and its last chunk's `cascade` field."""
    t0, times, extra = time.perf_counter(), [], {}
    with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                times.append(time.perf_counter() - t0)
            extra = chunk.get("cascade", extra)
    return times, extra


def _vlm_counters(body: dict) -> dict:
    stages = body.get("trace", {}).get("stages", [])
    return next((s["counters"] for s in stages if s["name"] == "vlm"), {})


def run_layout(url: str, args, seed0: int) -> dict:
    rows, lock = [], threading.Lock()
    start = time.perf_counter() + 0.5

    def one(kind: str, arrival: float, seed: int) -> None:
        time.sleep(max(0.0, start + arrival - time.perf_counter()))
        t = time.perf_counter()
        with httpx.Client(timeout=600) as client:
            if kind == "short":
                times, extra = _stream(client, url, _body(kind, seed))
                counters = _vlm_counters(extra)
            else:
                r = client.post(f"{url}/v1/chat/completions", json=_body(kind, seed))
                r.raise_for_status()
                times, counters = [time.perf_counter() - t], _vlm_counters(r.json()["cascade"])
        with lock:
            moved = {k: counters.get(k) for k in MOVED}
            rows.append({"kind": kind, "arrival": arrival, "tokens": times, **moved})

    threads = [
        threading.Thread(target=one, args=(kind, arrival, seed0 + i))
        for i, (kind, arrival) in enumerate(_schedule(args))
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    reqs = [
        Request(r["kind"], r["arrival"], len(r["tokens"]), [r["arrival"] + x for x in r["tokens"]])
        for r in rows
    ]
    for q in reqs:
        q.done = q.tokens[-1]
    moved = {
        kind: {
            k: round(statistics.mean(r[k] or 0.0 for r in rows if r["kind"] == kind), 5)
            for k in MOVED
        }
        for kind in ("short", "long")
    }
    return {"measured": summarize(reqs, args.slo_ttft, args.slo_gap), "moved_per_request": moved}


def run_ray(args, tiny: str, workdir: Path) -> dict:
    import ray
    from ray import serve

    from cascade.serve.config import ServeConfig
    from cascade.serve.ray.app import build_app
    from cascade.serve.ray.options import APP_NAME, RayOptions, app_args

    os.chdir(workdir)  # Ray puts the driver's folder on its workers' path: not the repo root
    ray.init(address="local", num_cpus=8, include_dashboard=False, log_to_driver=False)
    port, out = free_port(), {}
    url = f"http://127.0.0.1:{port}"
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        for n, (layout, replicas) in enumerate(LAYOUTS.items()):
            path = workdir / f"{layout}.yaml"
            path.write_text(
                PIPELINE.format(model=tiny, layout="none" if layout == "colocated" else layout)
            )
            config = ServeConfig(
                model=tiny, shipped=False, pipelines={"disagg": str(path)}, max_concurrent=32
            )
            options = RayOptions(
                replicas=replicas["decode"], threads=1, max_batch_size=1, health_check_period_s=2.0
            )
            serve.run(build_app(app_args(config, options)), name=APP_NAME, route_prefix="/")
            health = httpx.get(f"{url}/health", timeout=30).json()
            for kind, seed in (("short", 1), ("long", 2), ("short", 3)):  # warm every shape
                httpx.post(
                    f"{url}/v1/chat/completions",
                    json={**_body(kind, 10**6 + 1000 * n + seed), "stream": False},
                    timeout=600,
                ).raise_for_status()
            row = run_layout(url, args, seed0=10**5 * (n + 1))
            row["replicas"] = health["replicas"]
            out[layout] = row
            print(f"{layout}: {row['measured']}", file=sys.stderr)
            serve.delete(APP_NAME)
    finally:
        serve.shutdown()
        ray.shutdown()
    return out


# -- the simulator's inputs --------------------------------------------------------------------
def cpu_costs(measured: dict) -> Costs:
    """The measured per-role costs; a transfer is its pickle round trip (Ray's object store on
    one node: serialised into shared memory and out again)."""
    return Costs(
        encode_s=measured["encode_s"],
        prefix_s=measured["prefix_s"],
        question_s=measured["question_s"],
        step_s=tuple(measured["step_s"]),  # type: ignore[arg-type]
        transfer_s=measured["ship_s"],
        embeds_s=measured["embeds_ship_s"],
    )


def gpu_costs(args) -> tuple[Costs, dict]:
    """Qwen2-VL-2B's costs from the cost model on a stated GPU: tower and prefill FLOPs at
    `gpu_tflops` x `gpu_mfu`; a decode step reads the weights and the batch's KV at `gpu_hbm`;
    KV and embeddings cross a `link_gbps` link with 1 ms latency."""
    import torch

    from cascade.cost import prefill_flops
    from cascade.vlm.families import ImageLimits
    from cascade.vlm.families.reference import pricing_family
    from cascade.vlm.kv_cache import kv_token_bytes

    fam = pricing_family("Qwen/Qwen2-VL-2B-Instruct", ImageLimits())
    llm, flops_s = fam.shapes.llm, args.gpu_tflops * 1e12 * args.gpu_mfu
    kv_tok = kv_token_bytes(fam.text_config, torch.bfloat16)
    sizes = {"short": (SHORT_PX * 4, 1), "long": (1344, 8)}  # a 448-px image; eight 1344-px
    encode, prefix, transfer, embeds, tokens = {}, {}, {}, {}, {}
    for kind, (side, n) in sizes.items():
        cost = fam.image_cost(side, side)
        tokens[kind] = n * cost.tokens + 32
        encode[kind] = n * fam.vision_flops([cost]) / flops_s
        prefix[kind] = prefill_flops(llm, tokens[kind]) / flops_s
        transfer[kind] = 1e-3 + tokens[kind] * kv_tok / (args.link_gbps * 1e9)
        embeds[kind] = 1e-3 + n * cost.tokens * llm.hidden * 2 / (args.link_gbps * 1e9)
    hbm = args.gpu_hbm * 1e12
    step = (llm.params * 2 / hbm, statistics.mean(tokens.values()) * kv_tok / hbm)
    costs = Costs(encode, prefix, prefill_flops(llm, 24, tokens["short"]) / flops_s + step[0],
                  step, transfer, embeds)  # fmt: skip
    return costs, {"tokens": tokens, "kv_bytes_per_token": kv_tok}


def simulate_cpu(costs: Costs, args) -> dict:
    out = {}
    for layout, replicas in LAYOUTS.items():
        reqs = [
            Request(k, a, SHORT_TOKENS if k == "short" else LONG_TOKENS) for k, a in _schedule(args)
        ]
        done = simulate(layout, reqs, costs, replicas, os.cpu_count() or 1, overlap=True)
        out[layout] = summarize(done, args.slo_ttft, args.slo_gap)
    return out


def _allocations(layout: str, g: int) -> list[dict[str, int]]:
    """Every way to split `g` GPUs among `layout`'s roles (one or more each)."""
    if layout == "colocated":
        return [{"decode": g}]
    if layout == "pd":
        return [{"prefill": p, "decode": g - p} for p in range(1, g)]
    return [
        {"encode": e, "prefill": p, "decode": g - e - p}
        for e in range(1, g - 1)
        for p in range(1, g - e)
    ]


def simulate_gpu(costs: Costs, args) -> list[dict]:
    """`args.gpus` GPUs (one worker each) under a rising rate of long requests beside a steady
    stream of short chats (Poisson arrivals, seeded); per layout, the split of GPUs among its
    roles with the best goodput (then the lowest p95 TTFT), as a placement search would pick."""
    rows = []
    for rate in args.gpu_long_rates:
        rng = np.random.default_rng(0)
        shorts = np.cumsum(rng.exponential(1 / args.gpu_short_rate, args.gpu_shorts))
        longs = np.cumsum(rng.exponential(1 / rate, max(2, int(rate * shorts[-1]))))
        arrivals = [("short", float(t)) for t in shorts] + [("long", float(t)) for t in longs]
        row: dict = {"long_per_s": rate, "short_per_s": args.gpu_short_rate, "layouts": {}}
        for layout in LAYOUTS:
            best = None
            for replicas in _allocations(layout, args.gpus):
                reqs = [
                    Request(k, a, args.gpu_short_tokens if k == "short" else 16)
                    for k, a in arrivals
                ]
                done = simulate(layout, reqs, costs, replicas, processors=args.gpus)
                got = {"replicas": replicas, **summarize(done, args.gpu_slo_ttft, args.gpu_slo_gap)}
                if best is None or (got["goodput"], -got["ttft_p95_s"]) > (
                    best["goodput"],
                    -best["ttft_p95_s"],
                ):
                    best = got
            row["layouts"][layout] = best
        rows.append(row)
    return rows


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.9))
    layouts = list(LAYOUTS)
    x = np.arange(len(layouts))
    for ax, metric, title in (
        (axes[0], "ttft", "short streams: time to first token (p50 | p95)"),
        (axes[1], "worst_gap", "short streams: longest wait between tokens (p50 | p95)"),
    ):
        for dx, p, src, color in (
            (-0.3, "p50", "measured", "#27a"), (-0.1, "p95", "measured", "#8bd"),
            (0.1, "p50", "simulated", "#a72"), (0.3, "p95", "simulated", "#dc9"),
        ):  # fmt: skip
            vals = [
                (result["ray"][k]["measured"] if src == "measured" else result["simulated_cpu"][k])[
                    f"{metric}_{p}_s"
                ]
                for k in layouts
            ]
            ax.bar(x + dx, vals, 0.2, color=color, label=f"{src} {p}")
        ax.set_xticks(x, layouts)
        ax.set_ylabel("seconds")
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    rates = [r["long_per_s"] for r in result["simulated_gpu"]]
    for layout, color in zip(layouts, ("#888", "#27a", "#2a7"), strict=True):
        axes[2].plot(
            rates, [r["layouts"][layout]["goodput"] for r in result["simulated_gpu"]], "o-",
            color=color, label=layout,
        )  # fmt: skip
    axes[2].set_xlabel("long multi-image requests per second")
    axes[2].set_ylabel("goodput (short streams meeting the SLO)")
    axes[2].set_title(f"simulated: {result['gpu']['gpus']} GPUs, Qwen2-VL-2B", fontsize=9)
    axes[2].legend(fontsize=7)
    fig.suptitle("Encode / prefill / decode apart: CPU measured vs simulated; a GPU node simulated")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests, fewer rounds")
    ap.add_argument("--size", default="bench", help="tiny VLM size: test or bench")
    ap.add_argument("--shorts", type=int, default=16)
    ap.add_argument("--short-gap", type=float, default=0.5, help="seconds between short chats")
    ap.add_argument("--longs", type=int, default=4)
    ap.add_argument("--long-start", type=float, default=0.7)
    ap.add_argument("--long-gap", type=float, default=1.9)
    ap.add_argument("--slo-ttft", type=float, default=1.5, help="SLO: seconds to first token")
    ap.add_argument(
        "--slo-gap", type=float, default=0.5, help="SLO: longest wait between two tokens (s)"
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--gpu-tflops", type=float, default=989.0, help="bf16 dense peak (H100 SXM)")
    ap.add_argument("--gpu-mfu", type=float, default=0.4)
    ap.add_argument("--gpu-hbm", type=float, default=3.35, help="TB/s")
    ap.add_argument("--link-gbps", type=float, default=50.0, help="GB/s between GPUs")
    ap.add_argument("--gpu-short-rate", type=float, default=60.0, help="short chats per s")
    ap.add_argument("--gpu-shorts", type=int, default=600)
    ap.add_argument("--gpu-short-tokens", type=int, default=128)
    ap.add_argument("--gpu-long-rates", type=float, nargs="+", default=[0.5, 1, 2, 4, 6])
    ap.add_argument("--gpu-slo-ttft", type=float, default=0.5)
    ap.add_argument("--gpu-slo-gap", type=float, default=0.1)
    ap.add_argument("--out", type=Path, default=None, help="default: results/disagg[_quick]_cpu")
    args = ap.parse_args(argv)
    if args.quick:
        args.shorts, args.longs, args.rounds = 8, 2, 3
    if args.out is None:
        name = "disagg_quick_cpu" if args.quick else "disagg_cpu"
        args.out = Path(__file__).parent / "results" / name

    import torch

    from cascade.vlm import build_tiny_vlm

    torch.set_num_threads(1)
    out = args.out.resolve()
    tiny = str(build_tiny_vlm(size=args.size))
    measured = measure_costs(tiny, args.rounds)
    print(f"per-role costs: {measured}", file=sys.stderr)
    ray_rows = run_ray(args, tiny, Path(tempfile.mkdtemp(prefix="disagg-")))
    costs = cpu_costs(measured)
    simulated = simulate_cpu(costs, args)
    gpu, gpu_meta = gpu_costs(args)
    result = {
        "benchmark": "disagg",
        "command": "python benchmarks/disagg.py" + (" --quick" if args.quick else ""),
        "quick": args.quick,
        "model": f"random-weight tiny Qwen2-VL ('{args.size}'); 1 torch thread per replica",
        "cores": os.cpu_count(),
        "load": {
            "short": f"{args.shorts} streamed chats, one {SHORT_PX}-px image, {SHORT_TOKENS} "
            f"tokens, every {args.short_gap} s",
            "long": f"{args.longs} requests of {LONG_IMAGES} {LONG_PX}-px images, "
            f"{LONG_TOKENS} tokens, every {args.long_gap} s from {args.long_start} s",
            "slo": {"ttft_s": args.slo_ttft, "worst_gap_s": args.slo_gap},
        },
        "layouts": LAYOUTS,
        "per_role_costs_cpu": measured,
        "ray": ray_rows,
        "simulated_cpu": simulated,
        "simulated_vs_measured": {  # (simulated - measured) / measured, per layout
            layout: {
                k: round(simulated[layout][k] / ray_rows[layout]["measured"][k] - 1, 3)
                for k in ("ttft_p50_s", "worst_gap_p50_s", "throughput_rps")
            }
            for layout in LAYOUTS
        },
        "gpu": {
            "gpus": args.gpus,
            "assumptions": f"Qwen2-VL-2B (cost model); {args.gpu_tflops:g} TFLOP/s x MFU "
            f"{args.gpu_mfu:g} for the tower and prefills; decode steps read weights and KV at "
            f"{args.gpu_hbm:g} TB/s; {args.link_gbps:g} GB/s links + 1 ms; short chats: one "
            f"448-px image, {args.gpu_short_tokens} tokens, {args.gpu_short_rate:g}/s; long: "
            f"eight 1344-px images, 16 tokens; SLO {args.gpu_slo_ttft:g} s to first token and "
            f"no wait over {args.gpu_slo_gap:g} s between tokens; one worker per GPU, no "
            "chunked prefill",
            **gpu_meta,
            "costs": gpu.__dict__,
        },
        "simulated_gpu": simulate_gpu(gpu, args),
        "load_average_after": list(os.getloadavg()),
    }
    write_results(out.with_suffix(".json"), result)
    _plot(result, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
