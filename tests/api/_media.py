"""Small generated media with known answers for the product-path tests (not the benchmark set,
which is larger and split dev/test: `cascade.eval`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np


def api_media(folder: Path) -> dict[str, SimpleNamespace]:
    from PIL import Image as PILImage

    from cascade.eval.photos import scene_images
    from cascade.eval.render import Overlay, render_sign
    from cascade.eval.video import make_sign_video

    v0 = make_sign_video(
        folder / "v0.mp4",
        sign_text="OPEN 24 HOURS",
        sign_font_size=44,
        sign_frames=range(6, 16),
        frames_per_scene=12,
        fps=4,
    )
    v1 = make_sign_video(
        folder / "v1.mp4",
        sign_text="GATE 12",
        sign_font_size=16,
        sign_frames=range(15, 25),
        frames_per_scene=12,
        fps=4,
    )

    def item(media, q, a, frames=()):
        return SimpleNamespace(media=media, question=q, answer=a, frames=frames)

    photos = scene_images()
    paths = []
    for name in ("astronaut", "coffee", "chelsea"):
        arr = np.array(photos[name])
        if name == "coffee":
            Overlay(render_sign("PRICE 3.50", "DejaVuSans-Bold.ttf", 12), 420, 330).paste(arr)
        path = folder / f"{name}.png"
        PILImage.fromarray(arr).save(path)
        paths.append(str(path))
    bus = tuple(k for k, s in enumerate(v0.scenes) if s == "bus")
    return {
        "video_1_read": item(
            (str(v1.path),), "Which gate number does the sign show?", "GATE 12", v1.sign_frames
        ),
        "video_0_count": item(
            (str(v0.path),), "How many people are standing by the bus?", "4", bus
        ),
        "video_0_scene": item((str(v0.path),), "What animal appears in the video?", "cat"),
        "images_read": item(tuple(paths), "What price is written on the tag?", "PRICE 3.50", (1,)),
        "images_scene": item(tuple(paths), "Which picture shows a cat?", "cat", (2,)),
    }
