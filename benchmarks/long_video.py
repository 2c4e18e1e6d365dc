"""Long-video QA: index once, then ask; indexing cost per video-minute, per-question cost by length.

Footage of 1, 10 and 60 minutes (`--quick`: 1 and 3) is made once into a cache folder from media
that install with packages: gradio's `world.mp4` (30 s, 480x270) and `a.mp4` (1080p, 7 s), and
gradio/ultralytics photos shown as slow pans (no scikit-image samples: those are held-out check
media). Every loop differs (mirrored on odd loops, its own
brightness, a caption "SEGMENT n" and a sign word), so no two stretches of footage are identical;
cuts between clips get keyframes, and long shots a keyframe every 5 s.

Each video is asked the same questions through the shipped `video_qa` pipeline with random-weight
CLIP and the tiny VLM (real costs, meaningless answers; OCR and YOLO are the real models), set up
for long footage: `video_frames` samples keyframes only and drops near-duplicates, and the
pipeline's `index: true` keeps the video's index next to it: the sampled frames, the CLIP vectors
and FAISS index `retrieve` builds, the frames' OCR lines, detections and the sentence vectors of
their text. Recorded:

- indexing: the first question on a video (models already loaded and warmed on a 10-s clip), per
  stage (decode + dedup, CLIP, OCR, detection, text embedding, index build) in seconds per
  video-minute;
- the whole question, cold: every content cache of the process emptied before each question
  (`clear_all_caches`: as a new process finds it, only the index on disk; models stay loaded),
  rounds interleaved over the videos; median seconds and a per-stage profile (median of each
  stage) per length. Of the stages, those over every frame (`INDEX_STAGES`) read the index;
  the rest work on the few frames retrieved for the question: their cost follows the footage's
  content (whether the search widens), not its length;
- per question, warm: the same questions asked again in this process (the serving case);
- temporal pruning (`_video_pruning.py`): `evs` at video_pruning_rate 0.5 on a sign held 2 s in
  moving footage (OCR on the kept pixels), and per length the baselines vLLM users run:
  `full_res` at Qwen2-VL's native video sampling (2 fps, at most 768 frames) and uniform 1 fps +
  `evs` 0.5, beside the cascade's visual tokens per question.

Writes benchmarks/results/long_video_<device>.json and .png. CPU timings: torch threads pinned
(--threads, default 1) and recorded.

    python benchmarks/long_video.py --quick       # 1 and 3 minutes
    python benchmarks/long_video.py               # 1, 10 and 60 minutes (long: the lead's run)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "False")
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="yolo-config-"))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import numpy as np  # noqa: E402

from cascade.cache import cache_dir  # noqa: E402
from cascade.provenance import write_results  # noqa: E402

FPS, WIDTH, HEIGHT = 25, 480, 270
FOOTAGE_VERSION = 3
# gradio's and ultralytics' photos (animals, people, a tower); scikit-image's samples are held-out
# check media and stay out of development footage
PHOTOS = ("gradio:cheetah.jpg", "zidane", "gradio:tower.jpg", "gradio:lion.jpg", "bus")
SIGNS = (
    "EXIT 3",
    "GATE B7",
    "OPEN 24 HOURS",
    "PLATFORM 9",
    "NO PARKING",
    "CAFE",
    "BUS STOP",
    "ROOM 204",
)
QUESTIONS = (
    "What does the sign say?",
    "How many people are in the scene?",
    "What animal appears in the video?",
    "What number is on the segment caption?",
)
# video_qa, set up for long footage (see module docstring)
LONG_VIDEO = {
    "video_frames": {"mode": "keyframes", "max_frames": None, "size": 448, "dedup": 4.0},
    # the offline default ranks by the text side only; weigh CLIP in so its index is
    # built and saved as with real weights (random CLIP: the cost is real, not the rank)
    "retrieve": {"clip_weight": 1.0},
}
# ... and the video's index kept on disk (frames, CLIP index, OCR, detections): a new process reads
# it
INDEX = {"index": True}


# -- footage --------------------------------------------------------------------------------------
def _clip_frames(name: str, seconds: float | None = None):
    """Frames of a gradio sample video at WIDTH x HEIGHT, FPS (re-timed by dropping/repeating)."""
    import av
    import gradio

    path = Path(gradio.__file__).parent / "media_assets" / "videos" / name
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        src_fps = float(s.average_rate)
        frames = [f.to_ndarray(width=WIDTH, height=HEIGHT, format="rgb24") for f in c.decode(s)]
    n = int(round(len(frames) / src_fps * FPS if seconds is None else seconds * FPS))
    return [frames[min(int(i * src_fps / FPS), len(frames) - 1)] for i in range(n)]


def _pan(photo: np.ndarray, seconds: float):
    """A slow pan across a photo, WIDTH x HEIGHT."""
    from PIL import Image as PILImage

    h = HEIGHT
    w = max(WIDTH + 80, int(photo.shape[1] * h / photo.shape[0]))
    big = np.asarray(PILImage.fromarray(photo).resize((w, h), PILImage.BICUBIC))
    n = int(seconds * FPS)
    return [big[:, int(i * (w - WIDTH) / max(n - 1, 1)) :][:, :WIDTH] for i in range(n)]


def _decorate(frame: np.ndarray, loop: int, sign: str | None) -> np.ndarray:
    """This loop's variant of a frame: mirrored on odd loops, its own brightness, a caption and
    (on photo segments) a sign."""
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont

    from cascade.eval.fonts import font_path

    x = frame[:, ::-1] if loop % 2 else frame
    x = np.clip(x.astype(np.float32) * (0.8 + 0.05 * (loop % 9)), 0, 255).astype(np.uint8)
    im = PILImage.fromarray(x)
    draw = ImageDraw.Draw(im)
    small = ImageFont.truetype(font_path(bold=True), 16)
    draw.rectangle((6, HEIGHT - 28, 150, HEIGHT - 6), fill=(255, 255, 255))
    draw.text((12, HEIGHT - 26), f"SEGMENT {loop}", font=small, fill=(0, 0, 0))
    if sign:
        big = ImageFont.truetype(font_path(bold=True), 30)
        box = draw.textbbox((0, 0), sign, font=big)
        x0 = 40 + (loop * 37) % max(1, WIDTH - (box[2] - box[0]) - 80)
        draw.rectangle(
            (x0 - 10, 20, x0 + box[2] - box[0] + 10, 30 + box[3] - box[1] + 10),
            fill=(255, 255, 255),
        )
        draw.text((x0, 22), sign, font=big, fill=(10, 10, 10))
    return np.asarray(im)


def make_footage(minutes: float, folder: Path) -> Path:
    """Write (once) `long_<minutes>min.mp4` in `folder`; returns its path."""
    import av

    from cascade.eval.photos import photo

    path = folder / f"long_{minutes:g}min_v{FOOTAGE_VERSION}.mp4"
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    world, city = _clip_frames("world.mp4"), _clip_frames("a.mp4")
    photos = [photo(name) for name in PHOTOS]
    total = int(minutes * 60 * FPS)
    tmp = path.with_suffix(".part.mp4")
    written = 0
    with av.open(str(tmp), "w") as out:
        stream = out.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        # a keyframe at least every 5 s; x264's scene-cut detection (off in its ultrafast
        # preset) adds one at every cut
        stream.options = {"g": str(5 * FPS), "preset": "veryfast", "crf": "26"}
        loop = 0
        while written < total:
            photo = photos[loop % len(photos)]
            segments = [(world, None), (_pan(photo, 8.0), SIGNS[loop % len(SIGNS)]), (city, None)]
            for frames, sign in segments:
                for px in frames:
                    if written >= total:
                        break
                    vf = av.VideoFrame.from_ndarray(_decorate(px, loop, sign), format="rgb24")
                    for packet in stream.encode(vf):
                        out.mux(packet)
                    written += 1
            loop += 1
        for packet in stream.encode():
            out.mux(packet)
    tmp.rename(path)
    return path


# -- measuring -------------------------------------------------------------------------------------
def make_qa(warmup: Path):
    """The long-video pipeline with every model loaded and run once (on `warmup`, whose index is
    then removed), so no timing below includes a model load or a first-call warm-up."""
    import shutil

    from cascade import VideoQA

    qa = VideoQA.offline(
        type_overrides={k: dict(v) for k, v in LONG_VIDEO.items()}, overrides=INDEX
    ).setup()
    qa.ask(str(warmup), QUESTIONS[0])
    shutil.rmtree(f"{warmup}.cascade-index", ignore_errors=True)
    return qa


# video_qa's stages that touch every sampled frame (the index side); the rest work on the top-k
# frames retrieved for the question, a fixed amount whatever the video's length
INDEX_STAGES = ("frames", "clip", "frame_text", "frame_objects", "text", "retrieve")


def stage_seconds(answer) -> dict[str, float]:
    return {
        r.name: round(r.seconds, 4) for r in answer.trace.stages if r.status in ("ran", "cached")
    }


def ask(qa, video: Path, question: str) -> dict:
    t = time.perf_counter()
    answer = qa.ask(str(video), question)
    wall = time.perf_counter() - t
    stages = stage_seconds(answer)
    index_side = sum(v for k, v in stages.items() if k in INDEX_STAGES)
    return {
        "question": question,
        "seconds": round(wall, 4),
        "stages": stages,
        "produced_by": answer.produced_by,
        "routes": [r.branch for r in answer.evidence.routes],
        "index_side_seconds": round(index_side, 4),
        "counters": {r.name: dict(r.counters) for r in answer.trace.stages if r.counters},
    }


def index_video(qa, video: Path, minutes: float) -> dict:
    """Index the video (its first question, from a clean index folder)."""
    import shutil

    shutil.rmtree(f"{video}.cascade-index", ignore_errors=True)
    first = ask(qa, video, QUESTIONS[0])
    return {
        "minutes": minutes,
        "indexing": first,
        "indexing_seconds_per_video_minute": {
            k: round(v / minutes, 4) for k, v in first["stages"].items()
        },
        "video_minutes_indexed_per_second": round(minutes / first["seconds"], 4),
        "frames_indexed": first["counters"]["frames"]["frames_kept"],
        "frames_decoded": first["counters"]["frames"]["frames_decoded"],
    }


def cold_rounds(qa, videos: dict[float, Path], rounds: int) -> dict[float, list[dict]]:
    """Every question on every video, each with every content cache emptied first; the videos
    interleaved, their order turned each round."""
    from cascade.cache import clear_all_caches

    rows: dict[float, list[dict]] = {m: [] for m in videos}
    order = list(videos)
    for r in range(rounds):
        for m in order[r % len(order) :] + order[: r % len(order)]:
            for q in QUESTIONS:
                clear_all_caches()
                rows[m].append(ask(qa, videos[m], q))
    return rows


def profile(rows: list[dict]) -> dict:
    """Median whole-question seconds and per-stage seconds (a stage that did not run: 0)."""
    stages = sorted({k for r in rows for k in r["stages"]})
    per_stage = {
        k: round(statistics.median(r["stages"].get(k, 0.0) for r in rows), 4) for k in stages
    }
    tokens = [
        c["visual_tokens"] for r in rows for c in r["counters"].values() if "visual_tokens" in c
    ]
    return {
        "whole_question_seconds": round(statistics.median(r["seconds"] for r in rows), 4),
        "index_side_seconds": round(statistics.median(r["index_side_seconds"] for r in rows), 4),
        "per_stage_seconds": per_stage,
        "routes": [r["routes"] for r in rows[: len(QUESTIONS)]],
        "vlm_visual_tokens_median": statistics.median(tokens) if tokens else None,
        "asked": len(rows),
    }


def plot(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["videos"]
    minutes = [r["minutes"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(rows))
    for ax, key, title in (
        (ax1, "indexing_seconds_per_video_minute", "Indexing seconds per video-minute by stage"),
        (ax2, None, "Whole question, cold (median), by stage"),
    ):
        values = [r[key] if key else r["cold"]["per_stage_seconds"] for r in rows]
        stages = sorted(
            {k for v in values for k in v}, key=lambda k: -max(v.get(k, 0) for v in values)
        )
        bottom = np.zeros(len(rows))
        for st in stages[:9]:
            vals = np.array([v.get(st, 0.0) for v in values])
            ax.bar(x, vals, bottom=bottom, label=st)
            bottom += vals
        ax.set_xticks(x, [f"{m:g} min" for m in minutes])
        ax.set_ylabel("seconds")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    for i, r in enumerate(rows):
        ax2.text(
            i,
            r["cold"]["whole_question_seconds"],
            f"{r['cold']['whole_question_seconds']:.2f} s",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    fig.suptitle(
        f"Long-video QA ({result['device']}, {result['threads']} thread(s); random CLIP, "
        "tiny VLM, real OCR/YOLO)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 and 3 minutes instead of 1, 10, 60")
    ap.add_argument("--minutes", type=float, nargs="+", help="footage lengths to run")
    ap.add_argument("--rounds", type=int, default=None, help="cold rounds (default 3; quick 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (recorded)")
    ap.add_argument(
        "--footage-dir",
        type=Path,
        default=cache_dir("long_video"),
        help="where the generated videos are kept between runs",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output stem (default benchmarks/results/long_video_<device>[_quick])",
    )
    args = ap.parse_args(argv)
    import _video_pruning as pruning
    import torch

    torch.set_num_threads(args.threads)
    minutes = args.minutes or ([1, 3] if args.quick else [1, 10, 60])
    rounds = args.rounds or (2 if args.quick else 3)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = (
        args.out
        or Path(__file__).parent
        / "results"
        / f"long_video_{device}{'_quick' if args.quick else ''}"
    )

    warmup = make_footage(1 / 6, args.footage_dir)  # 10 s
    videos = {}
    for m in minutes:
        t = time.perf_counter()
        videos[m] = make_footage(m, args.footage_dir)
        print(f"footage {m:g} min: {videos[m]} ({time.perf_counter() - t:.1f} s)", flush=True)
    qa = make_qa(warmup)
    rows = []
    for m, video in videos.items():
        rows.append(index_video(qa, video, m))
        print(
            f"  {m:g} min: indexed {rows[-1]['frames_indexed']} frames in "
            f"{rows[-1]['indexing']['seconds']:.1f} s",
            flush=True,
        )
    cold = cold_rounds(qa, videos, rounds)
    tiny = pruning.load_tiny()
    for row in rows:
        m = row["minutes"]
        row["cold"] = profile(cold[m])
        warm = [ask(qa, videos[m], q) for q in QUESTIONS]
        row["warm_per_question_seconds"] = round(statistics.median(r["seconds"] for r in warm), 4)
        row["baselines"] = pruning.baselines(
            tiny, videos[m], m, row["cold"]["vlm_visual_tokens_median"]
        )
        print(
            f"  {m:g} min: whole question cold {row['cold']['whole_question_seconds']:.2f} s "
            f"(index side {row['cold']['index_side_seconds']:.3f} s), warm "
            f"{row['warm_per_question_seconds']:.2f} s",
            flush=True,
        )
    sign = pruning.sign_check(tiny, args.footage_dir)
    print(
        f"  evs 0.5 sign check: tokens {sign['visual_tokens_unpruned']} -> "
        f"{sign['visual_tokens_kept']}, sign read in kept pixels: "
        f"{sign['sign_read_in_kept_pixels']}",
        flush=True,
    )
    whole = [r["cold"]["whole_question_seconds"] for r in rows]
    index_side = [r["cold"]["index_side_seconds"] for r in rows]
    result = {
        "device": device if device == "cpu" else torch.cuda.get_device_name(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "pipeline": "video_qa",
        "pipeline_overrides": {**LONG_VIDEO, **INDEX},
        "questions": list(QUESTIONS),
        "cold_rounds": rounds,
        "footage": {
            "fps": FPS,
            "size": [WIDTH, HEIGHT],
            "sources": [
                "gradio media_assets/videos/world.mp4",
                "gradio media_assets/videos/a.mp4",
                "gradio media_assets/images cheetah.jpg, tower.jpg, lion.jpg; ultralytics "
                "assets bus.jpg, zidane.jpg (no scikit-image samples: held-out check media)",
            ],
        },
        "models": "CLIP ViT-B-32 random weights; tiny Qwen2-VL (random); RapidOCR PP-OCR "
        "ONNX and YOLO11n ONNX (real)",
        "videos": rows,
        "whole_question_growth_longest_vs_shortest_cold": round(whole[-1] / whole[0], 3),
        "index_side_growth_longest_vs_shortest_cold": round(index_side[-1] / index_side[0], 3),
        "temporal_pruning_sign_check": sign,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out.with_suffix(".json"), result)
    plot(result, out.with_suffix(".png"))
    print(
        f"wrote {out.with_suffix('.json')} and .png; whole question (cold) growth "
        f"{result['whole_question_growth_longest_vs_shortest_cold']}x, index side "
        f"{result['index_side_growth_longest_vs_shortest_cold']}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
