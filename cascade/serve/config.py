"""Server settings: which model and pipelines, and the limits that protect the process."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ServeConfig:
    """Everything `cascade serve` / `cascade demo` can be told.

    model: VLM for every `vlm_answer` stage (hub id or local folder); None keeps each pipeline's
    own. tiny: build the random-weight tiny Qwen2-VL and use it (offline demos; its answers are
    random text, while OCR/detector answers, evidence and the bill are real). pipelines: extra
    YAML pipelines served as `cascade/<name>`, next to the shipped ones. media_root: the only
    folder `file://` URLs may point into (None refuses file URLs). upload_dir: where uploaded
    videos live while a request uses them (named by content hash, deleted when no request holds
    them; None: a private temporary folder). max_concurrent requests run at once and up to
    max_queue more wait in arrival order; beyond that a request gets 429 with Retry-After.
    max_total_pixels: the pixels one request may make the server decode, every image's and every
    video frame's width x height summed (from headers, before decoding). upload_timeout_s: a
    request body that has not all arrived by then gets 408. send_timeout_s: a stream whose client
    does not take a chunk for that long is dropped and its decode cancelled.
    """

    model: str | None = None
    tiny: bool = False
    device: str | None = None
    pipelines: dict[str, str] = field(default_factory=dict)
    shipped: bool = True  # also serve every shipped pipeline that answers questions
    media_root: Path | None = None
    upload_dir: Path | None = None
    max_upload_bytes: int = 64 << 20
    max_frames: int = 3000  # frames in a video, or images in one request
    max_pixels: int = 4096 * 4096  # per image or video frame
    max_total_pixels: int = 1 << 31  # summed over a request's images and video frames
    request_timeout_s: float = 300.0
    upload_timeout_s: float = 60.0  # for the whole request body to arrive
    send_timeout_s: float = 30.0  # a streamed response's client must take each chunk within this
    max_concurrent: int = 4  # requests holding a slot (running, or waiting for their pipeline)
    max_queue: int = 64  # requests waiting for a slot; more get 429 + Retry-After
    workers: int = 2  # threads running pipelines

    def resolved_model(self) -> str | None:
        """The model id to put on vlm_answer stages (builds the tiny model when asked)."""
        if self.tiny or self.model == "tiny":
            from ..vlm.tiny import build_tiny_vlm

            return str(build_tiny_vlm(family="qwen2_vl", size="test"))
        return self.model

    @property
    def random_weights(self) -> bool:
        return self.tiny or self.model == "tiny"
