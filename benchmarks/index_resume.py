"""A long video's index built in chunks, stopped part way and resumed, against an uninterrupted
build: the same files, byte for byte in content (`cascade.indexing.index_video`).

The footage is long_video.py's (60 minutes; `--quick`: 3), indexed with `video_qa`'s frame
stages set up as long_video.py sets them (key frames, near-duplicates dropped; random-weight
CLIP, real RapidOCR and YOLO, the bundled sentence embedder). One build runs uninterrupted; the
other is stopped after half its chunks (`max_chunks`), every in-memory cache is emptied (what a
crash leaves: only the files) and it is run again to the end. Recorded: frames, chunks, seconds,
video-minutes indexed per second, and whether every index file is the same.

    python benchmarks/index_resume.py --quick     # 3 minutes of footage
    python benchmarks/index_resume.py             # 60 minutes
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import long_video as lv
import numpy as np

from cascade.cache import cache_dir
from cascade.provenance import write_results


def pipeline(folder: Path):
    from cascade import VideoQA

    qa = VideoQA.offline(
        type_overrides={k: dict(v) for k, v in lv.LONG_VIDEO.items()},
        overrides={"index.folder": str(folder)},
    )
    return qa.pipeline.setup()


def contents(folder: Path) -> dict[str, object]:
    (sub,) = folder.iterdir()  # one video: one index folder
    return {
        f.name: np.load(f) if f.suffix == ".npy" else json.loads(f.read_text())
        for f in sorted(sub.iterdir())
    }


def same(a: dict[str, object], b: dict[str, object]) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k] for k in a
    )


def run_row(run) -> dict:
    return {
        "frames": run.frames,
        "chunks": run.chunks,
        "chunks_before": run.chunks_before,
        "chunks_now": run.chunks_now,
        "complete": run.complete,
        "seconds": round(run.seconds, 2),
        "video_minutes_indexed_per_second": round(run.minutes_per_second, 4),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 minutes of footage instead of 60")
    ap.add_argument(
        "--chunk-frames", type=int, default=None, help="sampled frames per chunk (64; quick 8)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (recorded)")
    ap.add_argument(
        "--footage-dir",
        type=Path,
        default=cache_dir("long_video"),
        help="where long_video.py keeps its generated videos",
    )
    ap.add_argument("--out", type=Path, default=None, help="output stem")
    args = ap.parse_args(argv)
    import torch

    from cascade.cache import clear_all_caches
    from cascade.indexing import index_video

    torch.set_num_threads(args.threads)
    minutes = 3 if args.quick else 60
    chunk = args.chunk_frames or (8 if args.quick else 64)
    video = lv.make_footage(minutes, args.footage_dir)
    out = args.out or Path(__file__).parent / "results" / (
        f"index_resume{'_quick' if args.quick else ''}_cpu"
    )
    with tempfile.TemporaryDirectory(prefix="index-resume-") as tmp:
        whole_dir, parts_dir = Path(tmp) / "whole", Path(tmp) / "parts"
        whole = index_video(pipeline(whole_dir), video, chunk_frames=chunk)
        print(f"uninterrupted: {whole.frames} frames, {whole.chunks} chunks, {whole.seconds:.0f} s")
        clear_all_caches()
        parts = pipeline(parts_dir)
        stop = max(1, whole.chunks // 2)
        first = index_video(parts, video, chunk_frames=chunk, max_chunks=stop)
        clear_all_caches()  # the crash: only the files are left
        rest = index_video(parts, video, chunk_frames=chunk)
        identical = same(contents(whole_dir), contents(parts_dir))
        files = sorted(contents(whole_dir))
    print(f"stopped after {first.chunks_now} chunks, resumed {rest.chunks_now}: same: {identical}")
    result = {
        "minutes": minutes,
        "threads": torch.get_num_threads(),
        "pipeline": "video_qa frame stages",
        "pipeline_overrides": lv.LONG_VIDEO,
        "chunk_frames": chunk,
        "uninterrupted": run_row(whole),
        "stopped": run_row(first),
        "resumed": run_row(rest),
        "index_files": files,
        "same_index": identical,
    }
    write_results(out.with_suffix(".json"), result)
    print(f"wrote {out.with_suffix('.json')}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
