"""Ray Serve scale-out on CPU: throughput and p95 at 1 vs 2 VLM replicas, and one stage hop's cost.

Starts a local Ray cluster (`ray.init(num_cpus=4)`: logical CPUs, for placement), then:

1. Scaling: the application of `cascade.serve.ray.app.build_app` over a small image pipeline
   (images -> thumbnails -> vlm_answer -> compose_answer) with the random-weight tiny Qwen2-VL
   (`build_tiny_vlm(size=...)`), at 1 and then 2 `vlm_answer` replicas. A closed-loop client keeps
   `--concurrency` chat requests in flight over HTTP until `--requests` are answered; every
   request has its own image (no KV-cache hit). Every replica and the ingress run 1 torch thread
   (`RayOptions.threads`). Records throughput, client latency p50/p95 and the batch sizes the
   VLM replicas formed (`@serve.batch`), after a warm-up round per layout.
2. Hop overhead: a trivial stage (`images`: a pass-through) run in-process vs through a Serve
   handle (`RemoteStages.run`: payload, handle call, result, counters), median of `--hops` calls
   each, with a small input (one 32x32 image) and with 6 video-sized frames (1.4 MB) sent as an
   ObjectRef put once and reused, vs put on every call. Target: <= 5 ms per hop.

On a machine with few cores the two replicas share them with the ingress and the proxy; the
speedup is what that machine allows (recorded with its core count). Writes <out>.json, <out>.png.

    python benchmarks/ray_scale.py --quick       # about two minutes on 2 cores
    python benchmarks/ray_scale.py               # more requests and hops
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "YOLO_OFFLINE": "1",
    "YOLO_AUTOINSTALL": "False",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_k, _v)

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from _net import free_port  # noqa: E402

from cascade.provenance import write_results  # noqa: E402

PIPELINE = """\
name: ray_bench
description: Benchmark pipeline - thumbnails of each image to the VLM.
models:
  vlm: {id: Qwen/Qwen2-VL-2B-Instruct, max_pixels: 50176}
inputs:
  images: {type: images}
  question: {type: str}
stages:
  imgs: {type: images, inputs: {images: $images}}
  thumbs: {type: thumbnails, params: {size: 224}, inputs: {images: imgs.images}}
  vlm:
    type: vlm_answer
    params: {max_new_tokens: 16}
    inputs: {images: thumbs.images, question: $question}
  answer: {type: compose_answer, inputs: {answer: vlm.answer, baseline_images: imgs.images}}
outputs:
  answer: answer.answer
"""


def _image_url(i: int) -> str:
    from PIL import Image

    rng = np.random.default_rng(i)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (160, 200, 3), dtype=np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _body(i: int) -> dict:
    return {
        "model": "cascade/ray_bench",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": _image_url(i)}},
                    {"type": "text", "text": f"What is in picture {i}?"},
                ],
            }
        ],
    }


def _closed_loop(url: str, bodies: list[dict], concurrency: int) -> dict:
    """Send `bodies` with `concurrency` in flight; latencies, statuses, VLM batch sizes."""
    lat, statuses, batch_sizes, lock = [], [], [], threading.Lock()
    it = iter(bodies)

    def worker() -> None:
        with httpx.Client(timeout=300) as client:
            while True:
                with lock:
                    body = next(it, None)
                if body is None:
                    return
                t = time.perf_counter()
                r = client.post(f"{url}/v1/chat/completions", json=body)
                dt = time.perf_counter() - t
                bs = 1
                if r.status_code == 200:
                    st = {s["name"]: s for s in r.json()["cascade"]["trace"]["stages"]}
                    bs = int(st["vlm"]["counters"].get("vlm_batch_size", 1))
                with lock:
                    lat.append(dt)
                    statuses.append(r.status_code)
                    batch_sizes.append(bs)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat.sort()
    return {
        "requests": len(bodies),
        "concurrency": concurrency,
        "seconds": round(wall, 3),
        "throughput_rps": round(len(bodies) / wall, 3),
        "p50_s": round(lat[len(lat) // 2], 4),
        "p95_s": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 4),
        "ok": statuses.count(200),
        "statuses": sorted(set(statuses)),
        "mean_vlm_batch_size": round(float(np.mean(batch_sizes)), 3),
        "max_vlm_batch_size": int(max(batch_sizes)),
    }


def _scaling(args, ray, serve, port: int, tiny: str, yaml_path: str) -> list[dict]:
    from cascade.serve.config import ServeConfig
    from cascade.serve.ray.app import build_app
    from cascade.serve.ray.options import APP_NAME, RayOptions, app_args

    url, rows = f"http://127.0.0.1:{port}", []
    config = ServeConfig(
        model=tiny,
        shipped=False,
        pipelines={"ray_bench": yaml_path},
        max_concurrent=max(8, args.concurrency),
        max_queue=256,
    )
    for replicas in (1, 2):
        options = RayOptions(
            replicas=replicas,
            threads=1,
            max_batch_size=args.max_batch_size,
            batch_wait_timeout_s=args.batch_wait_ms / 1000,
            num_cpus={"vlm_answer": 1.0, "ingress": 1.0},
        )
        t0 = time.perf_counter()
        serve.run(build_app(app_args(config, options)), name=APP_NAME, route_prefix="/")
        started = time.perf_counter() - t0
        health = httpx.get(f"{url}/health").json()
        _closed_loop(
            url,
            [_body(10_000 + replicas * 1000 + i) for i in range(2 * args.concurrency)],
            args.concurrency,
        )  # warm every replica and shape
        row = _closed_loop(
            url, [_body(replicas * 100_000 + i) for i in range(args.requests)], args.concurrency
        )
        row.update(
            replicas=replicas,
            replicas_running=health["replicas"].get("vlm_answer"),
            start_seconds=round(started, 2),
        )
        print(
            f"{replicas} replica(s): {row['throughput_rps']} req/s, p50 {row['p50_s']} s, "
            f"p95 {row['p95_s']} s, mean batch {row['mean_vlm_batch_size']}",
            file=sys.stderr,
        )
        rows.append(row)
        serve.delete(APP_NAME)
    return rows


def _median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1000, 4)


def _hops(args, ray, serve) -> dict:
    from cascade.artifacts import Image
    from cascade.registry import get_stage_class
    from cascade.serve.ray.configs import stage_config, stage_key
    from cascade.serve.ray.executor import RemoteStages
    from cascade.serve.ray.replica import StageReplica
    from cascade.trace import StageRecord, stage_scope

    stage = get_stage_class("images")({}, name="hop")
    cfg = stage_config(stage)
    dep = serve.deployment(StageReplica).options(
        name="images", num_replicas=1, ray_actor_options={"num_cpus": 1.0}
    )
    handle = serve.run(
        dep.bind("images", {stage_key(cfg): cfg}, {"threads": 1}), name="hop", route_prefix=None
    )
    remote = RemoteStages({"images": handle}, ("images",))
    small = [Image(np.zeros((32, 32, 3), np.uint8))]
    frames = [Image(np.full((240, 320, 3), i, np.uint8)) for i in range(6)]  # 1.4 MB

    def hop(images):
        with stage_scope(StageRecord("hop", "images")):
            return remote.run(stage, {"images": images})

    def fresh_put():  # a new list object each call: no reuse, one ray.put per call
        return hop(list(frames))

    for _ in range(20):  # warm the handle, the router and the replica
        hop(small)
        hop(frames)
        fresh_put()
    out = {
        "calls": args.hops,
        "in_process_ms": _median_ms(lambda: stage.run(images=small), args.hops),
        "handle_small_ms": _median_ms(lambda: hop(small), args.hops),
        "in_process_frames_ms": _median_ms(lambda: stage.run(images=frames), args.hops),
        "handle_frames_ref_reused_ms": _median_ms(lambda: hop(frames), args.hops),
        "handle_frames_put_each_call_ms": _median_ms(fresh_put, args.hops),
        "frames_bytes": int(sum(f.pixels.nbytes for f in frames)),
        "target_ms": 5.0,
    }
    out["hop_overhead_ms"] = round(out["handle_small_ms"] - out["in_process_ms"], 4)
    print(
        f"hop: in-process {out['in_process_ms']} ms, through a handle {out['handle_small_ms']} ms; "
        f"1.4 MB frames: ref reused {out['handle_frames_ref_reused_ms']} ms, put each call "
        f"{out['handle_frames_put_each_call_ms']} ms",
        file=sys.stderr,
    )
    serve.delete("hop")
    return out


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, hops = result["scaling"], result["hop"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    labels = [f"{r['replicas']} replica{'s' if r['replicas'] > 1 else ''}" for r in rows]
    axes[0].bar(labels, [r["throughput_rps"] for r in rows], color=["#888", "#2a7"])
    axes[0].set_ylabel("requests / s")
    axes[0].set_title(f"throughput (C={rows[0]['concurrency']}, {result['cpu_count']} cores)")
    x = np.arange(len(rows))
    axes[1].bar(x - 0.2, [r["p50_s"] for r in rows], 0.4, label="p50")
    axes[1].bar(x + 0.2, [r["p95_s"] for r in rows], 0.4, label="p95")
    axes[1].set_xticks(x, labels)
    axes[1].set_ylabel("seconds")
    axes[1].set_title("client latency")
    axes[1].legend()
    names = ["in-process", "handle", "frames\nref reused", "frames\nput each call"]
    vals = [
        hops["in_process_ms"],
        hops["handle_small_ms"],
        hops["handle_frames_ref_reused_ms"],
        hops["handle_frames_put_each_call_ms"],
    ]
    axes[2].bar(names, vals, color=["#888", "#27a", "#27a", "#a72"])
    axes[2].axhline(hops["target_ms"], color="r", ls="--", lw=1, label="5 ms target")
    axes[2].set_ylabel("ms (median)")
    axes[2].set_title("one stage hop")
    axes[2].legend()
    fig.suptitle("vlm-cascade on Ray Serve, CPU, tiny Qwen2-VL, 1 torch thread per replica")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests and hops")
    ap.add_argument("--requests", type=int, default=96)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--hops", type=int, default=500)
    ap.add_argument("--size", default="bench", help="tiny VLM size: test or bench")
    ap.add_argument("--max-batch-size", type=int, default=4)
    ap.add_argument("--batch-wait-ms", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ray_scale_cpu")
    args = ap.parse_args(argv)
    if args.quick:
        args.requests, args.hops = 32, 200

    import ray
    import torch
    from ray import serve

    from cascade.vlm import build_tiny_vlm

    torch.set_num_threads(1)
    tiny = str(build_tiny_vlm(size=args.size))
    yaml_path = Path(tempfile.mkdtemp(prefix="ray-bench-")) / "ray_bench.yaml"
    yaml_path.write_text(PIPELINE)
    load_before = os.getloadavg()
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    port = free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        scaling = _scaling(args, ray, serve, port, tiny, str(yaml_path))
        hop = _hops(args, ray, serve)
    finally:
        serve.shutdown()
        ray.shutdown()
    result = {
        "benchmark": "ray_scale",
        "command": "python benchmarks/ray_scale.py" + (" --quick" if args.quick else ""),
        "device": "cpu",
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "ray": ray.__version__,
        "torch": torch.__version__,
        "torch_threads_per_replica": 1,
        "ray_logical_cpus": 4,
        "tiny_vlm_size": args.size,
        "max_new_tokens": 16,
        "max_batch_size": args.max_batch_size,
        "batch_wait_ms": args.batch_wait_ms,
        "load_average_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "scaling": scaling,
        "hop": hop,
        "speedup_2_vs_1": round(scaling[1]["throughput_rps"] / scaling[0]["throughput_rps"], 3),
        "note": "every request has its own image (no KV-cache hit); the ingress, the proxy "
        "and the replicas share the machine's cores (and here other jobs: see the "
        "load average); the frames hops return the frames by value (the stage's "
        "output), which is most of their time",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_results(args.out.with_suffix(".json"), result)
    _plot(result, args.out.with_suffix(".png"))
    print(f"wrote {args.out.with_suffix('.json')} and .png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
