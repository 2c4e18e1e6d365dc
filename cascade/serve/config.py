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
    request_timeout_s: float = 300.0
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
