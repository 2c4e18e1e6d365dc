"""Long-video QA: index once, then ask; indexing cost per video-minute, per-question cost by length.

Footage of 1, 10 and 60 minutes (`--quick`: 1 and 3) is made once into a cache folder from media
that install with packages: gradio's `world.mp4` (30 s, 480x270) and `a.mp4` (1080p, 7 s), and
skimage/ultralytics photos shown as slow pans. Every loop differs (mirrored on odd loops, its own
brightness, a caption "SEGMENT n" and a sign word), so no two stretches of footage are identical;
cuts between clips get keyframes, and long shots a keyframe every 5 s.

Each video is asked the same questions through the shipped `video_qa` pipeline with random-weight
CLIP and the tiny VLM (real costs, meaningless answers; OCR and YOLO are the real models), set up
for long footage: `video_frames` samples keyframes only and drops near-duplicates, and the
pipeline's `index: true` keeps the video's index next to it: the sampled frames, the CLIP vectors
and FAISS index `retrieve` builds, the frames' OCR lines and detections. Recorded:

- indexing: the first question on a video (models already loaded and warmed on a 10-s clip), per
  stage (decode + dedup, CLIP, OCR, detection, text embedding, index build) in seconds per
  video-minute;
- per question, once indexed: the other questions in the same process (the serving case: every
  per-frame result comes from the content-keyed caches), median and per stage;
- per question in a new process: a second Python process (models loaded and warmed on another
  clip) answers with only what is on disk (the saved frames, CLIP vectors and FAISS index, the
  frames' OCR lines and detections); only the answer side (the retrieved frames fetched at full
  resolution and read again) is computed.

Writes benchmarks/results/long_video_<device>.json and .png. CPU timings: torch threads pinned
(--threads, default 1) and recorded.

    python benchmarks/long_video.py --quick       # 1 and 3 minutes (~5 minutes on 2 cores)
    python benchmarks/long_video.py               # 1, 10 and 60 minutes (long: the lead's run)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
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

from cascade.provenance import write_results  # noqa: E402

FPS, WIDTH, HEIGHT = 25, 480, 270
FOOTAGE_VERSION = 2
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

    from cascade.eval.photos import scene_images

    path = folder / f"long_{minutes:g}min_v{FOOTAGE_VERSION}.mp4"
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    world, city = _clip_frames("world.mp4"), _clip_frames("a.mp4")
    photos = list(scene_images().values())
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


def run_video(qa, video: Path, minutes: float) -> dict:
    """Index (first question) then the other questions in this process."""
    first = ask(qa, video, QUESTIONS[0])
    rest = [ask(qa, video, q) for q in QUESTIONS[1:]]
    per_min = {k: round(v / minutes, 4) for k, v in first["stages"].items()}
    out = {
        "minutes": minutes,
        "indexing": first,
        "indexing_seconds_per_video_minute": per_min,
        "frames_indexed": first["counters"]["frames"]["frames_kept"],
        "frames_decoded": first["counters"]["frames"]["frames_decoded"],
        "questions_same_process": rest,
        "per_question_seconds_same_process": round(
            statistics.median(r["seconds"] for r in rest), 4
        ),
        "per_question_index_side_seconds_same_process": round(
            statistics.median(r["index_side_seconds"] for r in rest), 4
        ),
    }
    print(
        f"  {minutes:g} min: indexed {out['frames_indexed']} frames in {first['seconds']:.1f} s; "
        f"per question {out['per_question_seconds_same_process']:.2f} s",
        flush=True,
    )
    return out


def new_process(video: Path, warmup: Path, threads: int) -> list[dict]:
    """Ask every question in a fresh Python process (models loaded and warmed first) that finds
    only the saved index on disk."""
    code = (
        f"import json, sys, torch; torch.set_num_threads({threads}); "
        "sys.path.insert(0, sys.argv[1]); import long_video as lv; qa = lv.make_qa(sys.argv[3]); "
        "print('RESULT' + json.dumps([lv.ask(qa, sys.argv[2], q) for q in lv.QUESTIONS]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent), str(video), str(warmup)],
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(x for x in run.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def plot(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["videos"]
    minutes = [r["minutes"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    stages = [
        k for k in INDEX_STAGES if any(k in r["indexing_seconds_per_video_minute"] for r in rows)
    ]
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for st in stages:
        vals = np.array([r["indexing_seconds_per_video_minute"].get(st, 0.0) for r in rows])
        ax1.bar(x, vals, bottom=bottom, label=st)
        bottom += vals
    ax1.set_xticks(x, [f"{m:g} min" for m in minutes])
    ax1.set_ylabel("indexing seconds per video-minute")
    ax1.set_title("Indexing cost by stage (stages over all frames, first question)")
    ax1.legend(fontsize=8)
    ax2.plot(
        minutes,
        [r["per_question_seconds_same_process"] for r in rows],
        "o-",
        label="same process (indexed, warm)",
    )
    ax2.plot(
        minutes,
        [r["per_question_index_side_seconds_same_process"] for r in rows],
        "^:",
        label="same process: stages over all frames",
    )
    ax2.plot(
        minutes,
        [r["first_question_seconds_new_process"] for r in rows],
        "s--",
        label="new process, first question (index from disk)",
    )
    ax2.set_xscale("log")
    ax2.set_xticks(minutes, [f"{m:g}" for m in minutes])
    ax2.minorticks_off()
    ax2.set_xlabel("video minutes")
    ax2.set_ylabel("seconds per question (median)")
    ax2.set_ylim(bottom=0)
    ax2.set_title("Per-question cost once indexed")
    ax2.legend(fontsize=8)
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
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (recorded)")
    ap.add_argument(
        "--footage-dir",
        type=Path,
        default=Path(os.environ.get("VLM_CASCADE_CACHE") or Path.home() / ".cache" / "vlm-cascade")
        / "long_video",
        help="where the generated videos are kept between runs",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output stem (default benchmarks/results/long_video_<device>[_quick])",
    )
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    minutes = args.minutes or ([1, 3] if args.quick else [1, 10, 60])
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
        # a clean index folder: the first question really indexes
        index = Path(f"{video}.cascade-index")
        if index.exists():
            import shutil

            shutil.rmtree(index)
        row = run_video(qa, video, m)
        fresh = new_process(video, warmup, args.threads)
        row["questions_new_process"] = fresh
        row["first_question_seconds_new_process"] = fresh[0]["seconds"]
        row["per_question_seconds_new_process"] = round(
            statistics.median(r["seconds"] for r in fresh[1:]), 4
        )
        print(
            f"  {m:g} min: new process: first question {fresh[0]['seconds']:.2f} s, then "
            f"{row['per_question_seconds_new_process']:.2f} s per question",
            flush=True,
        )
        rows.append(row)
    same = [r["per_question_seconds_same_process"] for r in rows]
    index_side = [r["per_question_index_side_seconds_same_process"] for r in rows]
    result = {
        "device": device if device == "cpu" else torch.cuda.get_device_name(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "pipeline": "video_qa",
        "pipeline_overrides": {**LONG_VIDEO, **INDEX},
        "questions": list(QUESTIONS),
        "footage": {
            "fps": FPS,
            "size": [WIDTH, HEIGHT],
            "sources": [
                "gradio media_assets/videos/world.mp4",
                "gradio media_assets/videos/a.mp4",
                "skimage astronaut, coffee, chelsea; ultralytics bus.jpg",
            ],
        },
        "models": "CLIP ViT-B-32 random weights; tiny Qwen2-VL (random); RapidOCR PP-OCR "
        "ONNX and YOLO11n ONNX (real)",
        "videos": rows,
        # The part of a question's cost that depends on the video's length: the stages over
        # all frames (lookups in the index and caches). The rest depends on the route the
        # question takes (a tool answer, thumbnails, or a fine look at full resolution),
        # which follows the footage's content, not its length: see each question's routes.
        "index_side_growth_longest_vs_shortest_same_process": round(
            index_side[-1] / index_side[0], 3
        ),
        "per_question_growth_longest_vs_shortest_same_process": round(same[-1] / same[0], 3),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out.with_suffix(".json"), result)
    plot(result, out.with_suffix(".png"))
    print(
        f"wrote {out.with_suffix('.json')} and .png; per-question growth: index side "
        f"{result['index_side_growth_longest_vs_shortest_same_process']}x, total "
        f"{result['per_question_growth_longest_vs_shortest_same_process']}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
