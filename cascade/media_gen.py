"""Synthetic but real media with known ground truth: rendered text and a video with a sign.

Built only from what installs with the package (scikit-image's sample photos, ultralytics'
`bus.jpg`, matplotlib's DejaVu font), so tests, the benchmark eval set and the demos can all make
the same inputs offline and know the answer: which frames show the sign and what it says.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .artifacts import Box

__all__ = ["font_path", "render_text_image", "scene_images", "make_sign_video", "SignVideoTruth",
           "bus_image_path"]


def font_path(bold: bool = False) -> str:
    """DejaVu Sans from matplotlib's bundled fonts (a real TrueType font present everywhere)."""
    import matplotlib

    name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
    return str(Path(matplotlib.__file__).parent / "mpl-data" / "fonts" / "ttf" / name)


def bus_image_path() -> str:
    """Ultralytics' own `assets/bus.jpg` (1080x810: a bus and four people)."""
    import importlib.util

    spec = importlib.util.find_spec("ultralytics")
    if spec is None or not spec.origin:
        raise FileNotFoundError("ultralytics is not installed; bus.jpg ships inside it")
    return str(Path(spec.origin).parent / "assets" / "bus.jpg")


def render_text_image(text: str, font_size: int = 32, padding: int = 16,
                      size: tuple[int, int] | None = None, bold: bool = False,
                      background: tuple[int, int, int] = (255, 255, 255),
                      color: tuple[int, int, int] = (0, 0, 0)) -> np.ndarray:
    """Black text on white (uint8 HxWx3); `size=(w, h)` fixes the canvas, else it fits the text."""
    from PIL import Image as PILImage, ImageDraw, ImageFont

    font = ImageFont.truetype(font_path(bold), font_size)
    x0, y0, x1, y1 = ImageDraw.Draw(PILImage.new("RGB", (1, 1))).textbbox((0, 0), text, font=font)
    w, h = size or (x1 - x0 + 2 * padding, y1 - y0 + 2 * padding)
    canvas = PILImage.new("RGB", (w, h), background)
    ImageDraw.Draw(canvas).text((padding - x0, padding - y0), text, font=font, fill=color)
    return np.asarray(canvas)


def scene_images() -> dict[str, np.ndarray]:
    """Four real photos: astronaut, coffee, chelsea (a cat) and the ultralytics bus."""
    from PIL import Image as PILImage
    from skimage import data

    bus = np.asarray(PILImage.open(bus_image_path()).convert("RGB"))
    return {"astronaut": data.astronaut(), "coffee": data.coffee(), "chelsea": data.chelsea(),
            "bus": bus}


@dataclass(frozen=True)
class SignVideoTruth:
    """Ground truth of a video made by `make_sign_video`."""

    path: Path
    width: int
    height: int
    fps: float
    n_frames: int
    gop: int  # a keyframe every `gop` frames
    scenes: tuple[str, ...]  # scene name of each frame
    sign_text: str
    sign_frames: tuple[int, ...]
    sign_box: Box  # where the sign is, in frame pixels
    keyframes: tuple[int, ...] = field(default=())

    @property
    def sign_times(self) -> tuple[float, ...]:
        return tuple(i / self.fps for i in self.sign_frames)

    def time_of(self, index: int) -> float:
        return index / self.fps


def make_sign_video(path: str | Path, *, width: int = 640, height: int = 480, fps: int = 10,
                    frames_per_scene: int = 20, sign_text: str = "OPEN 24 HOURS",
                    sign_frames: tuple[int, ...] | range = range(44, 52), sign_font_size: int = 44,
                    gop: int = 10, scenes: tuple[str, ...] = ("astronaut", "coffee", "chelsea",
                                                              "bus")) -> SignVideoTruth:
    """Write an H.264 MP4: each scene photo for `frames_per_scene` frames with a slow pan, and a
    white sign reading `sign_text` pasted on the frames in `sign_frames`; keyframe every `gop`.
    Returns the ground truth (which frames show the sign, its box, the keyframes)."""
    import av
    from PIL import Image as PILImage

    photos = scene_images()
    sign = render_text_image(sign_text, font_size=sign_font_size, padding=18, bold=True)
    sh, sw = sign.shape[:2]
    sx, sy = (width - sw) // 2, height // 8
    sign_box = Box(sx, sy, sx + sw, sy + sh)
    sign_set = set(sign_frames)
    pan = frames_per_scene  # pixels of horizontal pan over one scene
    path = Path(path)
    frame_scenes: list[str] = []
    container = av.open(str(path), "w")
    try:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"g": str(gop), "keyint_min": str(gop), "sc_threshold": "0",
                          "bf": "0", "preset": "veryfast", "crf": "18"}
        n = 0
        for name in scenes:
            big = np.asarray(PILImage.fromarray(photos[name]).resize((width + pan, height),
                                                                     PILImage.BICUBIC))
            for k in range(frames_per_scene):
                arr = np.ascontiguousarray(big[:, k:k + width])
                if n in sign_set:
                    arr = arr.copy()
                    arr[sy:sy + sh, sx:sx + sw] = sign
                for packet in stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                    container.mux(packet)
                frame_scenes.append(name)
                n += 1
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
    return SignVideoTruth(path, width, height, float(fps), n, gop, tuple(frame_scenes), sign_text,
                          tuple(sorted(i for i in sign_set if i < n)), sign_box,
                          tuple(range(0, n, gop)))
