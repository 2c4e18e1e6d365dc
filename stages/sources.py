"""Source stages: sample a video cheaply, fetch chosen frames at full resolution, load image
lists."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from cascade.artifacts import Frame, Image
from cascade.errors import InputError
from cascade.media import VideoSource, load_image
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record


def drop_near_duplicates(frames: list[Frame], threshold: float) -> list[Frame]:
    """Keep a frame only when some part of it differs from the last kept frame: the largest
    change of any cell of a 32x18 grid (mean grayscale of the cell, 0-255) is at least
    `threshold`. A static shot keeps its first frame; a cut, motion, or a small sign appearing
    in one corner (a change of a few cells the frame's mean would average away) keeps the frame.
    threshold 0 keeps every frame."""
    if threshold <= 0:
        return frames
    from PIL import Image as PILImage

    kept, last = [], None
    for f in frames:
        small = np.asarray(
            f.to_pil().convert("L").resize((32, 18), PILImage.Resampling.BOX), np.float32
        )
        if last is None or float(np.abs(small - last).max()) >= threshold:
            kept.append(f)
            last = small
    return kept


def thin(frames: list[Frame], max_frames: int | None) -> list[Frame]:
    """At most `max_frames`, spread evenly over the list (first and last kept)."""
    if not max_frames or len(frames) <= max_frames:
        return frames
    return [frames[i] for i in np.linspace(0, len(frames) - 1, max_frames).round().astype(int)]


@stage("video_frames")
class VideoFrames(Stage):
    """Decode sampled video frames at low resolution (PyAV): by fps, uniformly, or keyframes only.

    Frames keep their timestamp, frame number and a box covering the whole source frame, so
    `fetch_frames` can later return the same frames at full resolution and boxes found on the
    small ones map onto the large ones.

    For long videos: `dedup` drops near-duplicate frames (a static shot sampled many times) before
    any model sees them, and with the pipeline's `index:` on the sampled frames are saved in the
    video's index (`cascade.index`, where `retrieve` saves its CLIP index) so later questions, in
    this process or another, read them back instead of decoding the video again. The saved set is
    keyed by the video's size and modification time and by these params.
    """

    class Params(StageParams):
        mode: Literal["fps", "uniform", "keyframes", "all"] = Field(
            "fps",
            description="fps: every 1/fps s; uniform: max_frames spread evenly; "
            "keyframes: key frames only (cheapest); all: every frame",
        )
        fps: float = Field(1.0, gt=0, le=240, description="frames per second for mode=fps")
        max_frames: int | None = Field(
            32, gt=0, description="cap (uniform thinning); None = no cap"
        )
        size: int | None = Field(
            448, gt=0, le=8192, description="longest side of decoded frames; None = full size"
        )
        max_side: int = Field(8192, gt=0, description="refuse videos whose frames are larger")
        dedup: float = Field(
            0.0,
            ge=0,
            le=255,
            description="drop frames none of whose cells "
            "(32x18 grid, mean grayscale 0-255) changed by this much since the "
            "last kept frame; 0 keeps every sampled frame",
        )

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        frames: list[Frame]
        video: VideoSource

    def run(self, video: Path | VideoSource) -> Outputs:
        p = self.params
        src = video if isinstance(video, VideoSource) else VideoSource(video, p.max_side)
        settings = {
            "mode": p.mode,
            "fps": p.fps,
            "max_frames": p.max_frames,
            "size": p.size,
            "dedup": p.dedup,
        }
        store = self.video_index.frames(src.path, settings)
        if store is not None:
            frames = store.load()
            if frames is not None:
                record(frames_loaded=len(frames))
                return self.Outputs(frames, src)
        # dedup must see every sampled frame before thinning; uniform mode samples max_frames itself
        cap = p.max_frames if p.dedup == 0 or p.mode == "uniform" else None
        sampled = src.sample(p.mode, p.fps, cap, p.size)
        frames = thin(drop_near_duplicates(sampled, p.dedup), p.max_frames)
        record(frames_decoded=len(sampled), frames_kept=len(frames))
        if store is not None:
            store.save(frames)
            record(frames_saved=len(frames))
        return self.Outputs(frames, src)


@stage("fetch_frames")
class FetchFrames(Stage):
    """Fetch the given (low-resolution) frames again at full resolution, by timestamp.

    Seeks to the keyframe before each requested frame instead of decoding the whole video. Output
    frames keep the inputs' order, timestamps and frame numbers; their boxes cover the source.
    """

    class Params(StageParams):
        size: int | None = Field(
            None, gt=0, le=16384, description="cap on the longest side; None = native resolution"
        )
        max_side: int = Field(8192, gt=0, description="refuse videos whose frames are larger")
        seek_threshold: float = Field(
            1.0,
            ge=0,
            description="seek instead of decoding forward "
            "when the next frame is more than this many seconds ahead",
        )

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        frames: list[Frame]

    def run(self, video: Path | VideoSource, frames: list[Image]) -> Outputs:
        p = self.params
        src = video if isinstance(video, VideoSource) else VideoSource(video, p.max_side)
        timed: list[Frame] = []
        for i, f in enumerate(frames):
            if not isinstance(f, Frame):
                raise InputError(
                    f"frames[{i}] is a {type(f).__name__}, not a video Frame "
                    "(fetch_frames needs timestamps)"
                )
            timed.append(f)
        got = src.fetch([f.timestamp for f in timed], p.size, p.seek_threshold)
        out = [
            dataclasses.replace(got[float(f.timestamp)], media_index=f.media_index) for f in timed
        ]
        record(frames_fetched=len(out))
        return self.Outputs(out)


@stage("images")
class Images(Stage):
    """Multi-image input: paths, PIL images, arrays or Images -> Images numbered by position."""

    class Params(StageParams):
        max_images: int = Field(64, gt=0, description="refuse more images than this")
        max_side: int = Field(16384, gt=0, description="refuse images with a larger side")

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        images: list[Image]

    def run(self, images: list[Any]) -> Outputs:
        items = list(images) if isinstance(images, (list, tuple)) else [images]
        if not items:
            raise InputError("images: got an empty list")
        if len(items) > self.params.max_images:
            raise InputError(
                f"images: got {len(items)} images, more than max_images={self.params.max_images}"
            )
        return self.Outputs(
            [load_image(v, i, self.params.max_side, "images") for i, v in enumerate(items)]
        )
