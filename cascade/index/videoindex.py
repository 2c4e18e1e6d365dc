"""The pipeline's `index:` setting and where each video's index lives.

    index: true                        # in YAML: keep every video's index next to it
    index: {folder: /data/indexes}     # or under one folder (a subfolder per video)

A `VideoIndex` is handed to every stage of a pipeline (`Stage.video_index`), as the declared
models are; the stages that index a video (`video_frames`, `clip_embed`, `retrieve`, `ocr`,
`detect`, `text_embed`) ask it for their store, which is None when the pipeline keeps no index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..cache import content_hash
from .frames import FrameStore
from .keyed import KeyedVectors
from .results import SavedResults
from .scores import SavedScores
from .vectors import SavedVectors

__all__ = ["IndexSpec", "VideoIndex"]


class IndexSpec(BaseModel):
    """The pipeline's `index:` block (`index: true` is `index: {}`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    folder: str | None = Field(
        None,
        description="where the indexes go, one subfolder per video "
        "(default: next to each video, <video>.cascade-index/)",
    )


class VideoIndex:
    """The on-disk index of a pipeline's videos: sampled frames, CLIP vectors + FAISS index, OCR
    lines and detections per frame. spec None: the pipeline keeps none (every store is None)."""

    def __init__(self, spec: IndexSpec | None = None):
        self.spec = spec

    @classmethod
    def of(cls, value: VideoIndex | IndexSpec | bool | dict[str, Any] | None) -> VideoIndex:
        """A VideoIndex from what a stage used on its own may be given (`index=True`, a folder
        mapping, an IndexSpec) or the pipeline's own."""
        if isinstance(value, VideoIndex):
            return value
        if value is None or value is False:
            return cls(None)
        if value is True:
            return cls(IndexSpec())
        return cls(value if isinstance(value, IndexSpec) else IndexSpec(**value))

    @property
    def enabled(self) -> bool:
        return self.spec is not None

    def folder_for(self, video: Any) -> Path | None:
        """The index folder of `video` (a path or a `VideoSource`); None when there is no index
        or no video."""
        path = getattr(video, "path", video)
        if self.spec is None or path is None:
            return None
        path = Path(path)
        if self.spec.folder is None:
            return Path(f"{path}.cascade-index")
        # one subfolder per video: its name, and its full path's hash to tell same names apart
        return Path(self.spec.folder) / f"{path.name}-{content_hash(str(path.resolve()))[:12]}"

    def frames(self, video: Any, settings: dict[str, Any]) -> FrameStore | None:
        """The saved frame set of `video` sampled with `settings`."""
        folder = self.folder_for(video)
        return (
            None
            if folder is None
            else FrameStore(folder, Path(getattr(video, "path", video)), settings)
        )

    def vectors(self, video: Any) -> SavedVectors | None:
        """The saved CLIP vectors and index of `video`."""
        folder = self.folder_for(video)
        return None if folder is None else SavedVectors(folder)

    def results(self, video: Any, stage: str, config: str) -> SavedResults | None:
        """The saved per-frame results of one stage configuration (`config`) on `video`."""
        folder = self.folder_for(video)
        return None if folder is None else SavedResults(folder, stage, config)

    def keyed(self, video: Any, kind: str, model: str) -> KeyedVectors | None:
        """The saved vectors of one `kind` and `model` of `video`, by key: "texts" (`text_embed`,
        the frames' text) or "clip" (`clip_embed`, the frames)."""
        folder = self.folder_for(video)
        return None if folder is None else KeyedVectors(folder, kind, model)

    def scores(self, video: Any, name: str) -> SavedScores | None:
        """The saved values of one question-independent measure (`name`) of `video`'s frames."""
        folder = self.folder_for(video)
        return None if folder is None else SavedScores(folder, name)

    def __repr__(self) -> str:
        return f"VideoIndex({self.spec!r})"
