"""The typed data that flows between stages.

Every box is in the *source* image's pixel coordinates. An `Image` remembers where its pixels sit in
its source (`box`) and how large the source is (`source_size`), so a box found on a thumbnail or a
tile maps back onto the original without guesswork: `img.to_source(box)`. A tile is simply an
`Image` whose `box` is a sub-rectangle of its source; a `Frame` is an `Image` with a timestamp, and
every crop or resize of a frame is still that frame (derived views use `dataclasses.replace`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .bill import Bill
from .decoding import Completion
from .errors import InputError

__all__ = [
    "ImageEmbeds",
    "Box",
    "Image",
    "Frame",
    "OcrLine",
    "Detection",
    "LayoutRegion",
    "Route",
    "Evidence",
    "Answer",
]


@dataclass(frozen=True)
class Box:
    """Axis-aligned box (x0, y0) inclusive to (x1, y1) exclusive, in pixels."""

    x0: float
    y0: float
    x1: float
    y1: float

    def __post_init__(self):
        if not (self.x1 >= self.x0 and self.y1 >= self.y0):
            raise ValueError(f"Box needs x1 >= x0 and y1 >= y0, got {self}")

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def area(self) -> float:
        return self.width * self.height

    def iou(self, other: Box) -> float:
        """Intersection over union with `other` (0 when neither has area)."""
        ix = max(0.0, min(self.x1, other.x1) - max(self.x0, other.x0))
        iy = max(0.0, min(self.y1, other.y1) - max(self.y0, other.y0))
        inter = ix * iy
        union = self.area + other.area - inter
        return inter / union if union > 0 else 0.0

    def intersects(self, other: Box) -> bool:
        """Whether the two boxes overlap with positive area."""
        return min(self.x1, other.x1) > max(self.x0, other.x0) and min(self.y1, other.y1) > max(
            self.y0, other.y0
        )

    def union(self, other: Box) -> Box:
        """The smallest box holding both."""
        return Box(
            min(self.x0, other.x0),
            min(self.y0, other.y0),
            max(self.x1, other.x1),
            max(self.y1, other.y1),
        )

    def pad(self, pixels: float) -> Box:
        """The box grown by `pixels` on every side."""
        return Box(self.x0 - pixels, self.y0 - pixels, self.x1 + pixels, self.y1 + pixels)

    def clip(self, width: float, height: float) -> Box:
        """The box cut to a `width` x `height` image."""
        return Box(
            min(max(self.x0, 0), width),
            min(max(self.y0, 0), height),
            min(max(self.x1, 0), width),
            min(max(self.y1, 0), height),
        )

    def as_tuple(self) -> tuple[float, float, float, float]:
        """`(x0, y0, x1, y1)`."""
        return (self.x0, self.y0, self.x1, self.y1)

    def to_dict(self) -> dict[str, float]:
        """JSON-friendly form."""
        return {"x0": self.x0, "y0": self.y0, "x1": self.x1, "y1": self.y1}


# Frame timestamps are decoded PTS * time_base: equal frames agree far closer than this, and
# frames of any real video (<= 1000 fps) are further apart.
FRAME_TIME_TOLERANCE = 5e-4


def same_time(a: float | None, b: float | None) -> bool:
    """Two timestamps name the same video frame (None: not a video frame, matches anything)."""
    return a is None or b is None or abs(a - b) <= FRAME_TIME_TOLERANCE


def frame_key(media_index: int, timestamp: float | None) -> tuple[int, int | None]:
    """A hashable bucket for (media, frame time): timestamps that are `same_time` fall in the same
    bucket or a neighbouring one (`frame_key`'s second part +-1), so lookups over hours of frames
    need not scan them all."""
    return media_index, None if timestamp is None else round(timestamp / FRAME_TIME_TOLERANCE)


@dataclass(frozen=True, eq=False)
class Image:
    """RGB pixels (H x W x 3, uint8) plus where they came from.

    source: path or label of the original media; media_index: which input of a multi-image/video
    request; box: where these pixels sit in the source (None = the whole source, unscaled);
    source_size: (width, height) of the source image.
    """

    pixels: np.ndarray
    source: str = ""
    media_index: int = 0
    # None when constructed means the whole source, unscaled: `__post_init__` sets both, so on an
    # instance they are never None (typed so; None stays the constructor's default).
    box: Box = None  # type: ignore[assignment]
    source_size: tuple[int, int] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        px = self.pixels
        if (
            not isinstance(px, np.ndarray)
            or px.ndim != 3
            or px.shape[2] != 3
            or px.dtype != np.uint8
        ):
            desc = f"{type(px).__name__} {getattr(px, 'shape', '')} {getattr(px, 'dtype', '')}"
            raise InputError(f"Image pixels must be a uint8 array of shape (H, W, 3); got {desc}")
        if px.shape[0] == 0 or px.shape[1] == 0:
            raise InputError(f"Image from '{self.source}' is empty: shape {px.shape}")
        if self.box is None:
            object.__setattr__(self, "box", Box(0, 0, px.shape[1], px.shape[0]))
        if self.source_size is None:
            object.__setattr__(self, "source_size", (px.shape[1], px.shape[0]))

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, media_index: int = 0) -> Image:
        """Load an image file as RGB (`cascade.imagefile`); a missing or unreadable file raises
        `InputError`."""
        from .imagefile import decode_pixels

        p = Path(path)
        if not p.is_file():
            raise InputError(f"image {media_index}: image file not found: '{p}'")
        return cls(
            decode_pixels(p, f"image {media_index} '{p}'"), source=str(p), media_index=media_index
        )

    @classmethod
    def from_pil(cls, image: Any, source: str = "", media_index: int = 0) -> Image:
        """A PIL image of any mode as RGB (`cascade.imagefile.rgb_pixels`)."""
        from .imagefile import pil_pixels

        what = f"image {media_index}"
        return cls(pil_pixels(image, what), source=source or f"<{what}>", media_index=media_index)

    # -- geometry ----------------------------------------------------------------------------
    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def scale(self) -> tuple[float, float]:
        """Pixels of this image per source pixel, (sx, sy)."""
        return self.width / self.box.width, self.height / self.box.height

    def to_source(self, box: Box) -> Box:
        """Map a box in this image's pixels to source coordinates."""
        sx, sy = self.scale
        return Box(
            self.box.x0 + box.x0 / sx,
            self.box.y0 + box.y0 / sy,
            self.box.x0 + box.x1 / sx,
            self.box.y0 + box.y1 / sy,
        )

    def from_source(self, box: Box) -> Box:
        """Map a box in source coordinates to this image's pixels."""
        sx, sy = self.scale
        return Box(
            (box.x0 - self.box.x0) * sx,
            (box.y0 - self.box.y0) * sy,
            (box.x1 - self.box.x0) * sx,
            (box.y1 - self.box.y0) * sy,
        )

    # -- derived views (keep subclass fields such as a frame's timestamp) ----------------------
    def resized(self, width: int, height: int) -> Image:
        """The same region of the source at another resolution (bicubic)."""
        from PIL import Image as PILImage

        if (width, height) == (self.width, self.height):
            return self
        pil = PILImage.fromarray(self.pixels).resize(
            (int(width), int(height)), PILImage.Resampling.BICUBIC
        )
        return dataclasses.replace(self, pixels=np.asarray(pil))

    def crop(self, source_box: Box) -> Image:
        """Crop a box given in *source* coordinates (clipped to this image's extent)."""
        local = self.from_source(source_box).clip(self.width, self.height)
        x0, y0 = int(np.floor(local.x0)), int(np.floor(local.y0))
        x1, y1 = max(int(np.ceil(local.x1)), x0 + 1), max(int(np.ceil(local.y1)), y0 + 1)
        x1, y1 = min(x1, self.width), min(y1, self.height)
        x0, y0 = min(x0, x1 - 1), min(y0, y1 - 1)
        return dataclasses.replace(
            self,
            pixels=np.ascontiguousarray(self.pixels[y0:y1, x0:x1]),
            box=self.to_source(Box(x0, y0, x1, y1)),
        )

    def is_from(self, media_index: int, timestamp: float | None) -> bool:
        """True when something found at (media_index, timestamp) belongs to this image's source:
        the same media and, for video frames, the same frame (a timestamp of None matches any)."""
        return self.media_index == media_index and same_time(
            getattr(self, "timestamp", None), timestamp
        )

    def to_pil(self):
        """The pixels as a PIL image."""
        from PIL import Image as PILImage

        return PILImage.fromarray(self.pixels)

    # -- identity ----------------------------------------------------------------------------
    @cached_property
    def _hash(self) -> str:
        from .cache import content_hash

        return content_hash(self.pixels, key="pixels")

    def __content_hash__(self) -> str:
        """Hash of the pixels only: the same picture from another path is the same content."""
        return self._hash

    def describe(self) -> dict[str, Any]:
        """JSON-friendly summary (no pixels)."""
        return {
            "source": self.source,
            "media_index": self.media_index,
            "width": self.width,
            "height": self.height,
            "box": self.box.to_dict(),
            "source_size": list(self.source_size),
        }


@dataclass(frozen=True, eq=False)
class ImageEmbeds(Image):
    """Visual embeddings computed elsewhere (`cascade embed`), standing in for an image.

    embeds: the vision tower's output for the image, one row per visual token (a torch tensor
    [tokens, dim], as `cascade embed` writes it); grid: the image's patch grid (t, h, w), the
    processor's `image_grid_thw`. The VLM uses `embeds` as the tower's output, checked against
    the model (`cascade.vlm`); its caches key them by their content (`__content_hash__`), so the
    same embeddings sent again reuse the KV prefix as the same image does. `pixels` are a blank
    stand-in of the grid's size (`patch` pixels a cell: sizes and prices stay meaningful); a
    stage that would change them (resize, crop) refuses, since the embeddings would not follow.
    Build with `ImageEmbeds.of`.
    """

    embeds: Any = None
    grid: tuple[int, int, int] = (1, 1, 1)
    patch: int = 14

    @classmethod
    def of(
        cls, embeds: Any, grid: Any, source: str = "<image_embeds>", media_index: int = 0
    ) -> ImageEmbeds:
        """Embeddings [tokens, dim] and their grid (3 ints, or a [1, 3] tensor) as an image."""
        try:
            t, h, w = (int(v) for v in np.asarray(grid).reshape(-1))
        except (TypeError, ValueError):
            raise InputError(
                f"{source}: image_grid_thw must be 3 integers (t, h, w), got {grid!r:.60}"
            ) from None
        if min(t, h, w) < 1 or h * w > 1 << 20:
            raise InputError(f"{source}: image_grid_thw ({t}, {h}, {w}) is not a usable grid")
        stand_in = np.zeros((h * cls.patch, w * cls.patch, 3), np.uint8)
        return cls(stand_in, source, media_index, embeds=embeds, grid=(t, h, w))

    def resized(self, width: int, height: int) -> Image:
        if (width, height) == (self.width, self.height):
            return self
        raise self._no_pixels("resized")

    def crop(self, source_box: Box) -> Image:
        raise self._no_pixels("cropped")

    def _no_pixels(self, how: str) -> InputError:
        return InputError(
            f"{self.source}: image embeddings cannot be {how}: a stage before the VLM changes "
            "its images' pixels; send the image itself, or embeddings of the image at the size "
            "that stage makes"
        )

    @cached_property
    def _hash(self) -> str:
        from .cache import content_hash

        return content_hash({"embeds": self.embeds, "grid": list(self.grid)}, key="image_embeds")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "image_embeds": list(getattr(self.embeds, "shape", ()))}


@dataclass(frozen=True, eq=False)
class Frame(Image):
    """A video frame: an image plus its timestamp (seconds) and frame number in the video."""

    timestamp: float = 0.0
    index: int = 0

    def describe(self) -> dict[str, Any]:
        """JSON-friendly summary (no pixels), with the frame's time and index."""
        return {**super().describe(), "timestamp": self.timestamp, "index": self.index}


@dataclass(frozen=True)
class OcrLine:
    """A line of text read by OCR, its confidence, and its box in source coordinates (the upright
    box around it). `angle`: degrees the line's baseline is turned counter-clockwise (rising to
    the right > 0), as the OCR polygon says; 0 for level text (a photographed page at an angle
    has all its lines turned alike)."""

    text: str
    confidence: float
    box: Box
    media_index: int = 0
    timestamp: float | None = None
    angle: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "text": self.text,
            "confidence": self.confidence,
            "box": self.box.to_dict(),
            "media_index": self.media_index,
            "timestamp": self.timestamp,
            "angle": self.angle,
        }


@dataclass(frozen=True)
class Detection:
    """An object found by a detector, its confidence, and its box in source coordinates."""

    label: str
    confidence: float
    box: Box
    class_id: int = -1
    media_index: int = 0
    timestamp: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "label": self.label,
            "confidence": self.confidence,
            "box": self.box.to_dict(),
            "class_id": self.class_id,
            "media_index": self.media_index,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True)
class LayoutRegion:
    """A region of a document page found by a layout model (label: text, title, table, figure ...),
    its confidence, and its box in source coordinates. A `table_cell` (the table-structure model)
    also says where it sits in its table: `cell` = (first row, last row, first column, last
    column), several rows or columns where it spans them."""

    label: str
    confidence: float
    box: Box
    media_index: int = 0
    timestamp: float | None = None
    cell: tuple[int, int, int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        out = {
            "label": self.label,
            "confidence": self.confidence,
            "box": self.box.to_dict(),
            "media_index": self.media_index,
            "timestamp": self.timestamp,
        }
        if self.cell is not None:
            out["cell"] = list(self.cell)
        return out


@dataclass(frozen=True)
class Route:
    """A router's decision: the branch taken, why, and the scores it was decided from."""

    branch: str
    reason: str = ""
    scores: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {"branch": self.branch, "reason": self.reason, "scores": dict(self.scores)}


@dataclass(frozen=True)
class Evidence:
    """What an answer was based on: the pixels the model saw and what the tools found."""

    images: tuple[Image, ...] = ()
    ocr_lines: tuple[OcrLine, ...] = ()
    detections: tuple[Detection, ...] = ()
    routes: tuple[Route, ...] = ()
    scores: tuple[float, ...] = ()  # retrieval scores aligned with `images`, when they exist

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "images": [im.describe() for im in self.images],
            "ocr_lines": [o.to_dict() for o in self.ocr_lines],
            "detections": [d.to_dict() for d in self.detections],
            "routes": [r.to_dict() for r in self.routes],
            "scores": list(self.scores),
        }


@dataclass(frozen=True)
class Answer:
    """The pipeline's reply: text, who produced it (the VLM or a tool), the evidence and the bill
    (`cascade.bill.Bill`: what it cost, next to the full-resolution baseline). completions: the
    VLM's completions (one, or the `n` its sampling settings asked for; `text` is the first's),
    each with its finish reason and, when asked, its logprobs; empty for a tool answer."""

    text: str
    produced_by: Literal["vlm", "tool"] = "vlm"
    evidence: Evidence = field(default_factory=Evidence)
    bill: Bill = field(default_factory=Bill)
    trace: Any = None  # the run's cascade.trace.Trace, attached by the Python API
    completions: tuple[Completion, ...] = ()

    @property
    def usage(self) -> dict[str, Any]:
        """The bill as a flat JSON-friendly dict (what `to_dict` and the server report)."""
        return {"produced_by": self.produced_by, **self.bill.to_dict()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        d = {
            "text": self.text,
            "produced_by": self.produced_by,
            "evidence": self.evidence.to_dict(),
            "usage": self.usage,
        }
        if self.trace is not None:
            d["trace"] = self.trace.to_dict()
        return d
