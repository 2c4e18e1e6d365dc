"""The web demo's example media, made at first use, offline: a short video whose frames show a sign,
a receipt rendered as an image, and a real photo (ultralytics' `bus.jpg`).

Everything comes from files installed packages ship (scikit-image's sample photos, ultralytics'
assets, matplotlib's DejaVu fonts) and is written once into the examples folder; a file already
there is kept. The demo's own module: the server does not depend on the evaluation package.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["DemoMedia", "demo_media", "RECEIPT", "SIGN_TEXT"]

RECEIPT = "CORNER CAFE\nLatte        4.50\nBagel        3.25\nTOTAL        7.75"
SIGN_TEXT = "OPEN 24 HOURS"
SCENES = ("astronaut", "coffee", "chelsea", "bus")  # a person, a drink, a cat, a street
SIGN_FRAMES = range(44, 52)  # 0.8 s in the third scene (the cat), at 10 frames per second


@dataclass(frozen=True)
class DemoMedia:
    """The example files: the sign video, the receipt image, the photo."""

    video: Path
    receipt: Path
    photo: Path


def demo_media(folder: Path) -> DemoMedia:
    """The example files in `folder`, each made now if it is not there yet."""
    folder.mkdir(parents=True, exist_ok=True)
    video, receipt = folder / "sign_video.mp4", folder / "receipt.png"
    _make_once(video, _write_sign_video)
    _make_once(receipt, _write_receipt)
    return DemoMedia(video, receipt, _package_file("ultralytics", "assets", "bus.jpg"))


def _make_once(path: Path, write: Callable[[Path], None]) -> None:
    """Write `path` through a temporary name, so a half-written file is never taken as made."""
    if path.is_file():
        return
    tmp = path.with_name(f"{path.stem}.tmp{path.suffix}")
    write(tmp)
    os.replace(tmp, path)


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise FileNotFoundError(f"{package} is not installed; {'/'.join(parts)} ships inside it")
    return Path(spec.origin).parent.joinpath(*parts)


def _text_image(text: str, font_size: int, padding: int, bold: bool = False) -> np.ndarray:
    """Black text (lines split on '\\n') on white, the canvas fitted to it (uint8 HxWx3)."""
    from PIL import Image, ImageDraw, ImageFont

    name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
    font = ImageFont.truetype(
        str(_package_file("matplotlib", "mpl-data", "fonts", "ttf", name)), font_size
    )
    x0, y0, x1, y1 = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), text, font=font)
    # a TrueType font's box is in whole pixels already: int() only says so
    size = (int(x1 - x0) + 2 * padding, int(y1 - y0) + 2 * padding)
    canvas = Image.new("RGB", size, (255, 255, 255))
    ImageDraw.Draw(canvas).text((padding - x0, padding - y0), text, font=font, fill=(0, 0, 0))
    return np.asarray(canvas)


def _write_receipt(path: Path) -> None:
    from PIL import Image

    Image.fromarray(_text_image(RECEIPT, font_size=36, padding=40)).save(path, format="PNG")


def _scene(name: str) -> np.ndarray:
    """A real photo (uint8 RGB): scikit-image's bundled samples, or ultralytics' bus."""
    if name == "bus":
        from PIL import Image

        with Image.open(_package_file("ultralytics", "assets", "bus.jpg")) as im:
            return np.asarray(im.convert("RGB"))
    from skimage import data

    return np.ascontiguousarray(getattr(data, name)()[..., :3])


def _write_sign_video(
    path: Path, width: int = 640, height: int = 480, fps: int = 10, per_scene: int = 20
) -> None:
    """An H.264 MP4: each scene for `per_scene` frames with a slow pan, a keyframe every second,
    and a white sign reading `SIGN_TEXT` near the top of the frames in `SIGN_FRAMES`."""
    import av
    from PIL import Image

    sign = _text_image(SIGN_TEXT, font_size=44, padding=18, bold=True)
    sh, sw = sign.shape[:2]
    sx, sy = (width - sw) // 2, height // 8
    container = av.open(str(path), "w", format="mp4")
    try:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {
            "g": str(fps),
            "keyint_min": str(fps),
            "sc_threshold": "0",
            "bf": "0",
            "preset": "veryfast",
            "crf": "18",
        }
        n = 0
        for name in SCENES:
            big = Image.fromarray(_scene(name)).resize(
                (width + per_scene, height), Image.Resampling.BICUBIC
            )
            pixels = np.asarray(big)
            for k in range(per_scene):
                frame = np.ascontiguousarray(pixels[:, k : k + width])
                if n in SIGN_FRAMES:
                    frame = frame.copy()
                    frame[sy : sy + sh, sx : sx + sw] = sign
                for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    container.mux(packet)
                n += 1
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
