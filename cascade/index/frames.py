"""Sampled video frames saved in the video's index, so a long video is decoded once.

One set per (video file state, sampling params): `frames-<key>.npy` holds the pixels (uint8
[N, H, W, 3], memory-mapped on load, so only frames a stage actually reads leave the disk) and
`frames-<key>.json` their timestamps, frame numbers and content hashes. The hashes are what the
content-keyed caches (CLIP vectors, OCR and detection results) look frames up by; loading them
saves re-reading and re-hashing every frame on every question. The key covers the video's size and
modification time, so an edited video is sampled again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts import Box, Frame
from ..cache import content_hash
from .files import read_json, write_atomic, write_json

__all__ = ["FrameStore"]

FORMAT = 1


class FrameStore:
    """The saved frame set of `video` sampled with `settings`, in `folder`."""

    def __init__(self, folder: Path, video: Path, settings: dict[str, Any]):
        st = video.stat()
        self.video = video
        key = content_hash(
            {
                "format": FORMAT,
                "video": [str(video.resolve()), st.st_size, st.st_mtime_ns],
                "settings": {k: str(v) for k, v in sorted(settings.items())},
            },
            key="frame_store",
        )
        self.pixels_path = folder / f"frames-{key[:16]}.npy"
        self.meta_path = folder / f"frames-{key[:16]}.json"

    def load(self) -> list[Frame] | None:
        """The saved frames, or None when there are none (or they are damaged)."""
        meta = read_json(self.meta_path)
        try:
            pixels = np.load(self.pixels_path, mmap_mode="r")
        except (OSError, ValueError):
            return None
        if (
            not isinstance(meta, dict)
            or meta.get("format") != FORMAT
            or len(pixels) != len(meta["frames"])
        ):
            return None
        w, h = meta["source_size"]
        frames = []
        for px, f in zip(pixels, meta["frames"], strict=False):
            frame = Frame(
                px,
                source=str(self.video),
                box=Box(0, 0, w, h),
                source_size=(w, h),
                timestamp=f["timestamp"],
                index=f["index"],
            )
            # Image._hash is a cached property of the pixels: the hash saved with these very
            # pixels, so looking the frame up in content-keyed caches reads nothing from disk.
            frame.__dict__["_hash"] = f["hash"]
            frames.append(frame)
        return frames

    def save(self, frames: list[Frame]) -> None:
        """Write the set (pixels first, then the metadata that makes it count), each file
        atomically: a crash never leaves a set that looks complete."""
        meta = {
            "format": FORMAT,
            "source_size": list(frames[0].source_size),
            "frames": [
                {"timestamp": f.timestamp, "index": f.index, "hash": f.__content_hash__()}
                for f in frames
            ],
        }
        write_atomic(self.pixels_path, lambda fh: np.save(fh, np.stack([f.pixels for f in frames])))
        write_json(self.meta_path, meta)
