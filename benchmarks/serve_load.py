"""Server load benchmark: `cascade serve` under a closed-loop client at several concurrencies.

Starts `cascade serve --tiny` as a child process (random-weight tiny VLM and CLIP; real RapidOCR
and YOLO11n ONNX: timings are real for these models, VLM answers are noise), warms the pipeline,
then for each client concurrency C sends N chat requests with C in flight at a time and records:

- throughput (answered requests per second) and client latency p50 / p95;
- queue wait (arrival until the pipeline starts) from the server's own
  `cascade_queue_wait_seconds` histogram: mean, and p95 as the upper bound of its bucket;
- the server process's peak RSS while the level ran;
- statuses: every request must be answered (200); a 429 means the queue (--max-queue) was full.

Each request carries its own rendered page (distinct pixels, so no content cache answers it),
unless --same-image. With --stream the answer is streamed and the client records time to first
token (p50 / p95) too. `--batching both` runs two servers side by side, one with continuous
batching (the default) and one started with `--max-num-seqs 1` (one request decodes at a time),
and sends both the same requests. Levels run in `--rounds` interleaved rounds (level by level,
server by server) after every shape is warmed; per level the round with the best throughput is
kept and every round's throughput recorded. `--threads` pins the server's torch threads. Writes
<out>.json and <out>.png. Examples:

    python benchmarks/serve_load.py                          # 200 requests at C = 1, 8, 32
    python benchmarks/serve_load.py --quick --out /tmp/load  # a minute: proves it runs
    # VLM-bound: thumbnails only, every answer 32 tokens from the VLM, batched vs not
    python benchmarks/serve_load.py --model cascade/thumbnail_only --max-tokens 32 --stream \
        --requests 48 --batching both --threads 1 --out benchmarks/results/serve_batching_cpu
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import numpy as np
from _net import free_port

from cascade.provenance import write_results


def _page(i: int, same: bool) -> str:
    """A data URL of a small receipt-like page; request i gets its own numbers unless `same`."""
    from PIL import Image as PILImage

    from cascade.eval.render import render_text_image

    n = 0 if same else i
    text = f"ORDER {1000 + n}\nTea        {n % 7 + 2}.50\nTOTAL      {n % 90 + 10}.25"
    buf = io.BytesIO()
    PILImage.fromarray(render_text_image(text, font_size=28, padding=24)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _metrics(url: str, model: str) -> dict[str, float]:
    """The server's queue-wait histogram buckets, sum and count for `model`, and status counts."""
    text = httpx.get(url + "/metrics", timeout=30).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(
            r"cascade_queue_wait_seconds_(bucket|sum|count)"
            r'\{model="([^"]+)"(?:,le="([^"]+)")?\} (\S+)',
            line,
        )
        if m and m.group(2) == model:
            out[f"{m.group(1)}:{m.group(3) or ''}"] = float(m.group(4))
        m = re.match(r'cascade_requests_total\{model="([^"]+)",status="(\d+)"\} (\S+)', line)
        if m and m.group(1) == model:
            out[f"status:{m.group(2)}"] = float(m.group(3))
    return out


def _queue_wait(before: dict[str, float], after: dict[str, float]) -> dict[str, float | None]:
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    n = d.get("count:", 0.0)
    if not n:
        return {"mean_s": None, "p95_bucket_s": None}
    buckets = sorted(
        (float(k.split(":")[1].replace("+Inf", "inf")), v)
        for k, v in d.items()
        if k.startswith("bucket:")
    )
    p95 = next((le for le, c in buckets if c >= 0.95 * n), None)
    return {"mean_s": d["sum:"] / n, "p95_bucket_s": p95}


class _PeakRSS:
    """Samples a process's resident set size every `every` seconds; `.peak` in bytes."""

    def __init__(self, pid: int, every: float = 0.1):
        import psutil

        self.proc, self.every, self.peak = psutil.Process(pid), every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            self._stop.wait(self.every)

    def __enter__(self) -> _PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


async def _request(client: httpx.AsyncClient, body: dict) -> tuple[int, float, float | None, int]:
    """(status, latency, time to the first answer text or None, completion tokens) of one chat
    request."""
    t0 = time.perf_counter()
    if not body.get("stream"):
        r = await client.post("/v1/chat/completions", json=body)
        usage = r.json().get("usage") if r.status_code == 200 else None
        return (
            r.status_code,
            time.perf_counter() - t0,
            None,
            (usage or {}).get("completion_tokens", 0),
        )
    first, tokens = None, 0
    async with client.stream(
        "POST", "/v1/chat/completions", json={**body, "stream_options": {"include_usage": True}}
    ) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if first is None and any(
                c.get("delta", {}).get("content") for c in chunk.get("choices", [])
            ):
                first = time.perf_counter() - t0
            tokens = (chunk.get("usage") or {}).get("completion_tokens", tokens)
    return r.status_code, time.perf_counter() - t0, first, tokens


def _pct(xs: list[float], q: int) -> float | None:
    return float(np.percentile(xs, q)) if xs else None


async def _level(
    url: str,
    model: str,
    pages: list[str],
    concurrency: int,
    max_tokens: int | None = None,
    stream: bool = False,
) -> dict:
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=3600, limits=limits) as client:

        async def one(page: str) -> tuple[int, float, float | None, int]:
            body = {
                "model": model,
                "stream": stream,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": page}},
                            {"type": "text", "text": "What is the total?"},
                        ],
                    }
                ],
            }
            if max_tokens is not None:
                body["max_tokens"] = max_tokens
            async with sem:
                return await _request(client, body)

        t0 = time.perf_counter()
        results = await asyncio.gather(*(one(p) for p in pages))
        wall = time.perf_counter() - t0
    ok = [s for code, s, _, _ in results if code == 200]
    ttft = [f for code, _, f, _ in results if code == 200 and f is not None]
    codes: dict[str, int] = {}
    for code, *_ in results:
        codes[str(code)] = codes.get(str(code), 0) + 1
    return {
        "concurrency": concurrency,
        "requests": len(pages),
        "statuses": codes,
        "wall_s": wall,
        "throughput_rps": len(ok) / wall,
        "latency_p50_s": _pct(ok, 50),
        "latency_p95_s": _pct(ok, 95),
        "ttft_p50_s": _pct(ttft, 50),
        "ttft_p95_s": _pct(ttft, 95),
        "completion_tokens_mean": float(np.mean([t for *_, t in results])),
    }


def _plot(result: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    runs = result["runs"]
    fig = Figure(figsize=(15, 3.2), dpi=110)

    def key(name: str):
        return lambda x: x[name]

    panels = [
        ("throughput (answers/s)", [("", key("throughput_rps"))]),
        ("client latency (s)", [("p50", key("latency_p50_s")), ("p95", key("latency_p95_s"))]),
        ("time to first token (s)", [("p50", key("ttft_p50_s")), ("p95", key("ttft_p95_s"))]),
        ("queue wait, mean (s)", [("", lambda x: x["queue_wait"]["mean_s"])]),
        ("server peak RSS (GiB)", [("", lambda x: x["server_peak_rss_bytes"] / 2**30)]),
    ]
    for i, (title, series) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for run in runs:
            lv = run["levels"]
            c = [x["concurrency"] for x in lv]
            for label, value in series:
                ys = [value(x) for x in lv]
                ax.plot(
                    c,
                    [np.nan if y is None else y for y in ys],
                    marker="o",
                    label=" ".join(t for t in (run["label"], label) if t),
                )
            ax.set_xscale("log", base=2)
            ax.set_xticks(c, [str(x) for x in c])
        ax.set_xlabel("client concurrency")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    s = result["server"]
    fig.suptitle(
        f"cascade serve --tiny, {result['model']}: {result['requests_per_level']} requests "
        f"per level, max_tokens {result['max_tokens']}, --max-concurrent "
        f"{s['max_concurrent']} --workers {s['workers']}, {s['threads']} torch thread(s) "
        f"({result['device']})",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path)


class _Server:
    """`cascade serve --tiny` in a child process (`max_num_seqs`: its --max-num-seqs), started and
    warmed on entry (every concurrency level's shape), stopped on exit."""

    def __init__(self, args: argparse.Namespace, max_num_seqs: int | None):
        self.args, self.max_num_seqs = args, max_num_seqs
        self.url = f"http://127.0.0.1:{free_port()}"

    def __enter__(self) -> _Server:
        a = self.args
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "YOLO_OFFLINE": "1",
            "YOLO_AUTOINSTALL": "False",
            "GRADIO_ANALYTICS_ENABLED": "False",
        }
        if a.threads:
            env.update(OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))
        cmd = [
            sys.executable,
            "-m",
            "cascade.cli",
            "serve",
            "--tiny",
            "--port",
            self.url.rsplit(":", 1)[1],
            "--max-concurrent",
            str(a.max_concurrent),
            "--max-queue",
            str(a.max_queue),
            "--workers",
            str(a.workers),
            "--timeout",
            "3600",
        ]
        if self.max_num_seqs is not None:
            cmd += ["--max-num-seqs", str(self.max_num_seqs)]
        # started outside the repository: `-m` puts the working folder on sys.path, where the
        # top-level kernels/ folder would shadow the `kernels` package transformers imports
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tempfile.gettempdir(),
        )
        for _ in range(1200):
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                httpx.get(self.url + "/health", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.25)
        # loads the models, then warms every batch shape the levels will run
        for c in [1, *a.concurrency]:
            w = self.level([_page(10**6 + c * 100 + i, False) for i in range(c)], c)
            if set(w["statuses"]) != {"200"}:
                self.__exit__()
                log = self.proc.stderr.read().decode(errors="replace")[-3000:]
                raise SystemExit(f"warm-up requests failed: {w['statuses']}; server log:\n{log}")
        return self

    def level(self, pages: list[str], concurrency: int) -> dict:
        a = self.args
        return asyncio.run(_level(self.url, a.model, pages, concurrency, a.max_tokens, a.stream))

    def measured(self, pages: list[str], concurrency: int) -> dict:
        """One level with the server's queue wait and peak RSS while it ran."""
        before = _metrics(self.url, self.args.model)
        with _PeakRSS(self.proc.pid) as rss:
            out = self.level(pages, concurrency)
        out["queue_wait"] = _queue_wait(before, _metrics(self.url, self.args.model))
        out["server_peak_rss_bytes"] = rss.peak
        return out

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def _measure(args: argparse.Namespace, settings: list[tuple[str, int | None]]) -> list[dict]:
    """Every server up at once; rounds interleave them level by level; per (server, level) the
    round with the best throughput is kept (its latency and TTFT with it), every round's
    throughput recorded."""
    with ExitStack() as stack:
        servers = [stack.enter_context(_Server(args, seqs)) for _, seqs in settings]
        rounds: dict[tuple[int, int], list[dict]] = {}
        for r in range(args.rounds):
            for c in args.concurrency:
                pages = [
                    _page(r * 10**6 + c * 10_000 + i, args.same_image) for i in range(args.requests)
                ]
                for k, server in enumerate(servers):
                    level = server.measured(pages, c)
                    rounds.setdefault((k, c), []).append(level)
                    print(json.dumps({"server": settings[k][0], "round": r, **level}), flush=True)
    runs = []
    for k, (label, seqs) in enumerate(settings):
        levels = []
        for c in args.concurrency:
            tried = rounds[(k, c)]
            best = max(tried, key=lambda lv: lv["throughput_rps"])
            levels.append({**best, "throughput_rps_rounds": [lv["throughput_rps"] for lv in tried]})
        runs.append({"label": label, "max_num_seqs": seqs, "levels": levels})
    return runs


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="cascade/doc_qa", help="served model id to load")
    p.add_argument("--requests", type=int, default=200, help="requests per concurrency level")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--max-concurrent", type=int, default=32)
    p.add_argument("--max-queue", type=int, default=256)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--threads", type=int, default=None, help="torch/OMP threads in the server")
    p.add_argument("--max-tokens", type=int, default=None, help="each request's max_tokens")
    p.add_argument(
        "--stream", action="store_true", help="stream answers; record time to first token"
    )
    p.add_argument(
        "--batching",
        choices=["on", "off", "both"],
        default="on",
        help="continuous batching (the server's default), off (--max-num-seqs 1), or both",
    )
    p.add_argument("--same-image", action="store_true", help="one image for all (cache hits)")
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="interleaved rounds, best kept (default 3, quick 1)",
    )
    p.add_argument(
        "--quick", action="store_true", help="8 requests at concurrency 1 and 4, 1 round"
    )
    p.add_argument("--out", default="benchmarks/results/serve_load_cpu", help="output path stem")
    args = p.parse_args()
    if args.quick:
        args.requests, args.concurrency = 8, [1, 4]
    args.rounds = args.rounds or (1 if args.quick else 3)

    settings = {
        "on": [("batched", None)],
        "off": [("one at a time", 1)],
        "both": [("batched", None), ("one at a time", 1)],
    }[args.batching]
    runs = _measure(args, settings)

    import torch

    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.machine(),
    )
    gains = {}
    for run in runs:
        by_c = {lv["concurrency"]: lv["throughput_rps"] for lv in run["levels"]}
        if 1 in by_c:
            gains[run["label"]] = {str(c): by_c[c] / by_c[1] for c in by_c if c != 1}
    result = {
        "benchmark": "serve_load",
        "model": args.model,
        "device": f"CPU: {cpu} ({os.cpu_count()} cores)",
        "torch": torch.__version__,
        "quick": args.quick,
        "requests_per_level": args.requests,
        "max_tokens": args.max_tokens,
        "stream": args.stream,
        "rounds": args.rounds,
        "distinct_images": not args.same_image,
        "server": {
            "max_concurrent": args.max_concurrent,
            "max_queue": args.max_queue,
            "workers": args.workers,
            "threads": args.threads,
        },
        "note": "random-weight tiny VLM and CLIP (VLM answers are noise); RapidOCR and YOLO11n "
        "ONNX are real. Timings are this machine's: per level the best of the interleaved rounds.",
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "throughput_vs_concurrency_1": gains,
        "runs": runs,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out.with_suffix(".json"), result)
    _plot(result, out.with_suffix(".png"))
    print(json.dumps(gains))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
    return 0 if all(set(lv["statuses"]) == {"200"} for r in runs for lv in r["levels"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
