"""Soak: the in-process server under mixed traffic for a long time; do memory, open files and
threads stay flat, and does anything answer 5xx?

Serves the shipped `multi_image_qa`, `video_qa` and `doc_qa` with `--tiny` (random-weight tiny
VLM and CLIP, real RapidOCR and YOLO11n ONNX) on uvicorn in this process, and runs `--clients`
client threads in a loop, each request one of:

- image: two photos to multi_image_qa;   - video: a short MP4 upload to video_qa;
- doc: a rendered receipt to doc_qa;      - streamed: one photo, `stream: true`, read to [DONE];
- cancelled: a stream closed after its first chunk, or a request given up after 0.3 s (499);
- bad: an image that does not decode (400).

Media rotate through fixed pools (so the content-keyed caches reach their working set during
warm-up and any growth after it is not a cache filling up by design). Every `--sample-every`
seconds this process's RSS, open file descriptors and threads are sampled; between the end of
warm-up (model loading, then the first `--warmup` fraction of the traffic) and the end of the
traffic each gets a least-squares slope per hour. The 5xx count is
the server's own (`cascade_requests_total`, streams included). Writes <out>.json and <out>.png.

    python benchmarks/soak.py                   # 30 minutes
    python benchmarks/soak.py --quick --out /tmp/soak   # 2 minutes: proves it runs
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import platform
import re
import socket
import tempfile
import threading
import time
from pathlib import Path

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "YOLO_OFFLINE": "1",
    "YOLO_AUTOINSTALL": "False",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_k, _v)  # before any model library is imported

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from cascade.provenance import write_results  # noqa: E402

KINDS = ("image", "video", "doc", "streamed", "cancelled", "bad")


def _data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _png(pixels: np.ndarray) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return _data_url(buf.getvalue(), "image/png")


def _pools(size: int, folder: Path) -> dict[str, list[str]]:
    """Data URLs: photos, receipts, videos (each pool `size` long, videos fewer)."""
    from cascade.eval.photos import scene_images
    from cascade.eval.render import render_text_image
    from cascade.eval.video import make_sign_video

    scenes = list(scene_images().values())
    rng = np.random.default_rng(0)
    photos = []
    for i in range(size):
        base = np.asarray(scenes[i % len(scenes)])
        h, w = base.shape[:2]
        y, x = rng.integers(0, h // 3), rng.integers(0, w // 3)
        photos.append(_png(np.ascontiguousarray(base[y : y + 2 * h // 3, x : x + 2 * w // 3])))
    pages = [
        _png(
            render_text_image(
                f"ORDER {1000 + i}\nTea   {i % 7 + 2}.50\nTOTAL {i + 10}.25",
                font_size=28,
                padding=24,
            )
        )
        for i in range(size)
    ]
    videos = []
    for i in range(max(2, size // 4)):
        path = folder / f"sign{i}.mp4"
        make_sign_video(
            path,
            width=320,
            height=240,
            frames_per_scene=8,
            sign_frames=range(8, 12),
            sign_font_size=22,
            sign_text=f"OPEN {8 + i} TO 6",
        )
        videos.append(_data_url(path.read_bytes(), "video/mp4"))
    return {"photos": photos, "pages": pages, "videos": videos}


def _body(model: str, question: str, urls: list[str], kind: str = "image_url", **extra) -> dict:
    parts = [{"type": kind, kind: {"url": u}} for u in urls]
    return {
        "model": model,
        "messages": [{"role": "user", "content": [*parts, {"type": "text", "text": question}]}],
        "max_tokens": 8,
        **extra,
    }


def _one(client: httpx.Client, kind: str, n: int, pools: dict[str, list[str]]) -> str:
    """Send request number n of `kind`; what happened, in a word."""
    photos, pages, videos = pools["photos"], pools["pages"], pools["videos"]
    url = "/v1/chat/completions"
    if kind == "image":
        pair = [photos[n % len(photos)], photos[(n + 1) % len(photos)]]
        return str(
            client.post(
                url, json=_body("cascade/multi_image_qa", "What is in them?", pair)
            ).status_code
        )
    if kind == "video":
        return str(
            client.post(
                url,
                json=_body(
                    "cascade/video_qa",
                    "What does the sign say?",
                    [videos[n % len(videos)]],
                    "video_url",
                ),
            ).status_code
        )
    if kind == "doc":
        return str(
            client.post(
                url, json=_body("cascade/doc_qa", "What is the total?", [pages[n % len(pages)]])
            ).status_code
        )
    if kind == "bad":
        broken = _data_url(b"\x89PNG\r\n\x1a\n not an image", "image/png")
        return str(
            client.post(url, json=_body("cascade/multi_image_qa", "What?", [broken])).status_code
        )
    stream = _body(
        "cascade/multi_image_qa",
        "Describe it.",
        [photos[n % len(photos)]],
        stream=True,
        max_tokens=24,
    )
    if kind == "cancelled" and n % 2:  # given up long before its answer: the client hangs up
        try:
            client.post(
                url,
                json=_body(
                    "cascade/multi_image_qa",
                    "Describe it.",
                    [photos[n % len(photos)]],
                    max_tokens=2000,
                ),
                timeout=0.3,
            )
            return "200"
        except httpx.TimeoutException:
            return "cancelled"
    with client.stream("POST", url, json=stream) as r:
        if r.status_code != 200:
            return str(r.status_code)
        for line in r.iter_lines():
            if kind == "cancelled" and line.startswith("data: "):
                return "cancelled"  # closes the stream after its first chunk
            if line.startswith('data: {"error"'):
                return "stream-error"
        return "200"


class _Sampler:
    """RSS, open file descriptors and threads of this process, every `every` seconds."""

    def __init__(self, every: float):
        import psutil

        self.proc, self.every, self.rows = psutil.Process(), every, []
        self._stop, self._t0 = threading.Event(), time.monotonic()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.rows.append(
                {
                    "t_s": round(time.monotonic() - self._t0, 2),
                    "rss_mib": self.proc.memory_info().rss / 2**20,
                    "open_files": self.proc.num_fds(),
                    "threads": self.proc.num_threads(),
                }
            )
            self._stop.wait(self.every)

    def start(self) -> _Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _slopes(rows: list[dict], warmup_s: float, end_s: float) -> dict[str, dict[str, float]]:
    after = [r for r in rows if warmup_s <= r["t_s"] <= end_s]
    t = np.array([r["t_s"] for r in after]) / 3600.0
    out = {}
    for key in ("rss_mib", "open_files", "threads"):
        y = np.array([r[key] for r in after], dtype=float)
        slope = float(np.polyfit(t, y, 1)[0]) if len(after) >= 3 else float("nan")
        out[key] = {
            "per_hour": slope,
            "first": float(y[0]),
            "last": float(y[-1]),
            "min": float(y.min()),
            "max": float(y.max()),
        }
    return out


def _server_statuses(url: str) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        m = re.match(r'cascade_requests_total\{model="[^"]+",status="(\d+)"\} (\S+)', line)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0.0) + float(m.group(2))
    return counts


def _plot(result: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    rows, warm = result["samples"], result["warmup_s"] / 60
    t = np.array([r["t_s"] for r in rows]) / 60
    fig = Figure(figsize=(12, 3.3), dpi=110)
    for i, (key, title) in enumerate(
        (("rss_mib", "RSS (MiB)"), ("open_files", "open files"), ("threads", "threads"))
    ):
        ax = fig.add_subplot(1, 3, i + 1)
        y = np.array([r[key] for r in rows], dtype=float)
        ax.plot(t, y, lw=1)
        ax.axvspan(0, warm, color="#eeeeee", label="warm-up")
        s = result["slopes"][key]["per_hour"]
        after = (t >= warm) & (t <= result["traffic_end_s"] / 60)
        if after.sum() >= 3:
            fit = np.polyfit(t[after] / 60, y[after], 1)
            ax.plot(t[after], np.polyval(fit, t[after] / 60), "r--", lw=1, label=f"fit: {s:+.2f}/h")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("minutes")
        ax.legend(fontsize=7)
    fig.suptitle(
        f"soak, in-process server (--tiny): {result['minutes']} min, "
        f"{result['requests']} requests, {result['server_5xx']} server 5xx "
        f"({result['device']})",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path)


def _serve(app) -> tuple[str, object, threading.Thread]:
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="soak-uvicorn", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 900
    while True:  # readiness: every pipeline's models loaded
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return url, server, thread
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the server did not become ready")
        time.sleep(0.5)


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--minutes", type=float, default=30.0, help="how long to run (default 30)")
    p.add_argument("--quick", action="store_true", help="2 minutes, small media pools")
    p.add_argument("--clients", type=int, default=3, help="client threads")
    p.add_argument(
        "--pool", type=int, default=16, help="distinct photos / pages (videos: a quarter)"
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=0.2,
        help="fraction of the traffic left out of the fit (--quick: 0.5)",
    )
    p.add_argument("--sample-every", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--threads", type=int, default=1, help="torch threads (recorded)")
    p.add_argument("--out", default="benchmarks/results/soak_cpu", help="output path stem")
    args = p.parse_args()
    if args.quick:
        args.minutes, args.pool, args.sample_every, args.warmup = 2.0, 4, 2.0, 0.5

    import torch

    from cascade.serve.app import create_app
    from cascade.serve.config import ServeConfig

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        pools = _pools(args.pool, Path(tmp))
        config = ServeConfig(
            tiny=True,
            shipped=False,
            pipelines={n: n for n in ("multi_image_qa", "video_qa", "doc_qa")},
            upload_dir=Path(tmp) / "uploads",
            max_concurrent=args.clients,
            workers=2,
            request_timeout_s=600,
        )
        app = create_app(config)
        sampler = _Sampler(args.sample_every).start()
        url, server, thread = _serve(app)
        ready_s = sampler.rows[-1]["t_s"] if sampler.rows else 0.0
        outcomes: dict[str, dict[str, int]] = {k: {} for k in KINDS}
        lock, stop_at = threading.Lock(), time.monotonic() + args.minutes * 60
        t_start = time.monotonic()

        def client(i: int) -> None:
            n = i
            with httpx.Client(base_url=url, timeout=600) as c:
                while time.monotonic() < stop_at:
                    kind = KINDS[n % len(KINDS)]
                    try:
                        what = _one(c, kind, n // len(KINDS), pools)
                    except httpx.HTTPError as e:
                        what = type(e).__name__
                    with lock:
                        outcomes[kind][what] = outcomes[kind].get(what, 0) + 1
                    n += 1

        clients = [
            threading.Thread(target=client, args=(i,), name=f"soak-client-{i}")
            for i in range(args.clients)
        ]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        end_s = time.monotonic() - t_start + ready_s  # the end of traffic, in sampler time
        time.sleep(2 * args.sample_every)  # what the last requests left behind, sampled
        statuses = _server_statuses(url)
        sampler.stop()
        server.should_exit = True
        thread.join(timeout=30)
    warmup_s = ready_s + args.warmup * (end_s - ready_s)
    result = {
        "benchmark": "soak",
        "command": "python benchmarks/soak.py"
        + (" --quick" if args.quick else f" --minutes {args.minutes:g}"),
        "minutes": round((end_s - ready_s) / 60, 2),
        "clients": args.clients,
        "torch_threads": args.threads,
        "pool": args.pool,
        "device": f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)",
        "load_average_end": os.getloadavg(),
        "ready_after_s": ready_s,
        "warmup_s": warmup_s,
        "traffic_end_s": end_s,
        "requests": sum(sum(v.values()) for v in outcomes.values()),
        "outcomes": outcomes,
        "server_statuses": statuses,
        "server_5xx": int(sum(v for k, v in statuses.items() if k.startswith("5"))),
        "slopes": _slopes(sampler.rows, warmup_s, end_s),
        "samples": sampler.rows,
        "note": "RSS, open files and threads of the whole process: server, models and the "
        "client threads (a fixed number). Slopes are least-squares fits after warm-up.",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out.with_suffix(".json"), result, bulky=("samples",))
    _plot(result, out.with_suffix(".png"))
    s = result["slopes"]
    print(
        f"{result['requests']} requests in {result['minutes']} min, server 5xx: "
        f"{result['server_5xx']}; per hour after warm-up: RSS {s['rss_mib']['per_hour']:+.1f} "
        f"MiB, open files {s['open_files']['per_hour']:+.1f}, threads "
        f"{s['threads']['per_hour']:+.1f} -> {out.with_suffix('.json')}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
