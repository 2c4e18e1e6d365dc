"""The built-in evaluation set: short videos and image sets made from real photos, with questions
whose answers are known because we put them there (rendered text of several sizes, the people on
ultralytics' bus, scene content).

Used by `cascade bench`, the demo's examples and the notebooks. Everything is generated offline
from what installs with the package, into a cache folder, and reused when already there.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from .media_gen import make_sign_video, render_text_image, scene_images

Kind = Literal["read", "count", "scene"]


@dataclass(frozen=True)
class EvalItem:
    """One question about one piece of media, with its gold answer."""

    id: str
    media_kind: Literal["video", "images"]
    media: tuple[str, ...]  # one video path, or image paths
    question: str
    answer: str
    kind: Kind
    text_size: int | None = None  # font size of the text to read, in source pixels
    frames: tuple[int, ...] = ()  # frames where the answer is visible (video)

    def media_arg(self) -> str | list[str]:
        return self.media[0] if self.media_kind == "video" else list(self.media)


# (sign text, font size, question): large text survives a thumbnail, small text does not.
# At 9-11 px the real OCR still reads a 640x480 frame but misreads its 224-px thumbnail.
VIDEO_SIGNS = (("OPEN 24 HOURS", 44, "What are the opening hours on the sign?"),
               ("GATE 12", 10, "Which gate number does the sign show?"),
               ("EXIT 7", 9, "What exit number is written on the sign?"),
               ("FRESH BREAD", 11, "What does the bakery sign say?"))


def _paste_text(photo: np.ndarray, text: str, font_size: int, at: tuple[int, int]) -> np.ndarray:
    sign = render_text_image(text, font_size=font_size, padding=max(4, font_size // 3), bold=True)
    out = photo.copy()
    y, x = at
    h, w = min(sign.shape[0], out.shape[0] - y), min(sign.shape[1], out.shape[1] - x)
    out[y:y + h, x:x + w] = sign[:h, :w]
    return out


def build_eval_set(folder: str | Path, n_videos: int = len(VIDEO_SIGNS)) -> list[EvalItem]:
    """Write (or reuse) the media under `folder`; return the questions."""
    from PIL import Image as PILImage

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    index = folder / "eval_set.json"
    if index.is_file():
        items = [EvalItem(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
                 for d in json.loads(index.read_text())]
        if all(Path(m).exists() for it in items for m in it.media) and \
                sum(it.media_kind == "video" for it in items) >= n_videos:
            return items
    items: list[EvalItem] = []
    for i, (text, size, question) in enumerate(VIDEO_SIGNS[:n_videos]):
        start = 6 + 9 * i  # the sign shows up at a different moment in every video
        truth = make_sign_video(folder / f"video_{i}.mp4", sign_text=text, sign_font_size=size,
                                sign_frames=range(start, start + 10), frames_per_scene=12, fps=4)
        media = (str(truth.path),)
        items.append(EvalItem(f"video_{i}_read", "video", media, question, text, "read", size,
                              truth.sign_frames))
        if i == 0:
            bus = tuple(k for k, s in enumerate(truth.scenes) if s == "bus")
            items.append(EvalItem(f"video_{i}_count", "video", media,
                                  "How many people are standing by the bus?", "4", "count",
                                  frames=bus))
            cat = tuple(k for k, s in enumerate(truth.scenes) if s == "chelsea")
            items.append(EvalItem(f"video_{i}_scene", "video", media,
                                  "What animal appears in the video?", "cat", "scene", frames=cat))
    photos = scene_images()
    paths = []
    for name in ("astronaut", "coffee", "chelsea"):
        photo = photos[name]
        if name == "coffee":  # a small price tag on the coffee photo
            photo = _paste_text(photo, "PRICE 3.50", 9, (330, 420))
        path = folder / f"image_{name}.png"
        PILImage.fromarray(photo).save(path)
        paths.append(str(path))
    items.append(EvalItem("images_read", "images", tuple(paths), "What price is written on the tag?",
                          "PRICE 3.50", "read", 9, (1,)))
    items.append(EvalItem("images_scene", "images", tuple(paths), "Which picture shows a cat?",
                          "cat", "scene", frames=(2,)))
    index.write_text(json.dumps([asdict(it) for it in items], indent=1))
    return items
