"""Index a video ahead of its questions, in chunks that survive a crash.

`index_video(pipeline, video)` runs the stages of a pipeline that look at every sampled frame
(those fed `<frames>.frames`: CLIP, OCR, detection, the text embedder) over the frames in chunks,
each stage saving what it computed in the video's index (`cascade.index`) chunk by chunk, and a
progress file (`progress-<key>.json`) naming the chunks done. The video is decoded once, by the
frames stage, and its sampled frames saved before any chunk runs. A rerun after a crash (or a
run stopped by `max_chunks`) loads the frames, skips the chunks done and continues; the index it
ends with is the one an uninterrupted run writes. A tqdm bar shows the chunks left and the ETA on
a terminal; the result says how many video-minutes were indexed per second.

    from cascade import Pipeline
    from cascade.indexing import index_video

    pipe = Pipeline.load("video_qa", overrides={"index": True}).setup()
    run = index_video(pipe, "lecture.mp4")   # or max_chunks=10: ten chunks now, the rest later
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cache import content_hash
from .errors import InputError
from .index import read_json, write_json
from .pipeline import Pipeline
from .progress import progress

__all__ = ["IndexRun", "index_video"]

FRAME_STAGES = ("clip_embed", "ocr", "detect", "text_embed")


@dataclass(frozen=True)
class IndexRun:
    """What one `index_video` call did: frames in the index, chunks in all / done before this
    call / done by it, whether the index is complete, the call's seconds, the video's minutes."""

    frames: int
    chunks: int
    chunks_before: int
    chunks_now: int
    complete: bool
    seconds: float
    video_minutes: float

    @property
    def minutes_per_second(self) -> float:
        """Video-minutes indexed per second of this call (the chunks it ran)."""
        share = self.chunks_now / self.chunks if self.chunks else 0.0
        return self.video_minutes * share / self.seconds if self.seconds > 0 else 0.0


def _consumers(pipeline: Pipeline, frames: str) -> list[str]:
    """The stages fed `<frames>.frames` that index every frame, in the pipeline's order."""
    out = []
    for name, spec in pipeline.spec.stages.items():
        if spec.inputs.get("images") == f"{frames}.frames":
            if spec.type not in FRAME_STAGES:
                continue  # e.g. a thumbnail pass: not part of the index
            out.append(name)
    return out


def _inputs(pipeline: Pipeline, name: str, frames: str, chunk: list, outs: dict) -> dict:
    """A consumer's inputs for one chunk: the chunk's frames, the video, earlier consumers'
    outputs on the same chunk; pipeline inputs (the question) are left out."""
    kwargs: dict[str, Any] = {}
    for port, ref in pipeline.spec.stages[name].inputs.items():
        if not isinstance(ref, str) or ref.startswith("$"):
            continue
        stage, _, field = ref.partition(".")
        if stage == frames:
            kwargs[port] = chunk if field == "frames" else outs[frames][field]
        elif stage in outs:
            kwargs[port] = getattr(outs[stage], field)
        else:
            raise InputError(
                f"index_video: stage '{name}' input '{port}' comes from '{ref}', which is not "
                f"computed per frame of '{frames}'"
            )
    return kwargs


def index_video(
    pipeline: Pipeline,
    video: str | Path,
    *,
    frames: str = "frames",
    chunk_frames: int = 64,
    max_chunks: int | None = None,
) -> IndexRun:
    """Index `video` with `pipeline`'s frame stages in chunks of `chunk_frames` sampled frames
    (module docstring). frames: the `video_frames` stage whose frames are indexed. max_chunks:
    run at most this many chunks now (None: all that are left)."""
    stage = pipeline.stages.get(frames)
    if stage is None or stage.type_name != "video_frames":
        raise InputError(f"index_video: '{frames}' is not a video_frames stage of the pipeline")
    if not stage.video_index.enabled:
        raise InputError(
            "index_video: the pipeline keeps no index; set `index: true` (overrides={'index': "
            "True})"
        )
    if chunk_frames < 1 or (max_chunks is not None and max_chunks < 0):
        raise InputError("index_video: chunk_frames must be >= 1 and max_chunks >= 0")
    names = _consumers(pipeline, frames)
    t0 = time.perf_counter()
    sampled = stage(video=Path(video))  # decoded once; saved, or loaded from the index
    items = sampled.frames
    folder = stage.video_index.folder_for(Path(video))
    assert folder is not None  # the index is on (checked above)
    key = content_hash([f.__content_hash__() for f in items] + [chunk_frames, names], key="chunks")
    progress_path = folder / f"progress-{key[:16]}.json"
    state = read_json(progress_path)
    done: set[int] = set(state["done"]) if isinstance(state, dict) else set()
    chunks = (len(items) + chunk_frames - 1) // chunk_frames
    before = len(done)
    todo = [k for k in range(chunks) if k not in done]
    if max_chunks is not None:
        todo = todo[:max_chunks]
    base = {frames: {"video": sampled.video}}
    for k in progress(todo, desc=f"index {Path(video).name}", unit="chunk", min_total=2):
        chunk = items[k * chunk_frames : (k + 1) * chunk_frames]
        outs: dict[str, Any] = dict(base)
        for name in names:
            outs[name] = pipeline.stages[name](**_inputs(pipeline, name, frames, chunk, outs))
        done.add(k)
        write_json(progress_path, {"chunks": chunks, "done": sorted(done)})
    info = sampled.video.info
    return IndexRun(
        frames=len(items),
        chunks=chunks,
        chunks_before=before,
        chunks_now=len(todo),
        complete=len(done) == chunks,
        seconds=time.perf_counter() - t0,
        video_minutes=info.duration / 60,
    )
