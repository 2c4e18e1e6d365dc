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
           "bus_image_path", "FONTS", "font_file", "footage_path", "photo", "render_sign",
           "render_caption", "Overlay", "footage_frames", "make_overlay_video", "render_document"]


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


# -- media for the evaluation splits: real footage and photos that install with packages ---------

FONTS = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf",
         "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf")


def font_file(name: str) -> str:
    """A DejaVu font bundled with matplotlib, by file name (one of `FONTS`)."""
    import matplotlib

    path = Path(matplotlib.__file__).parent / "mpl-data" / "fonts" / "ttf" / name
    if not path.is_file():
        raise FileNotFoundError(f"font '{name}' is not in matplotlib's bundled fonts")
    return str(path)


def _package_file(package: str, *parts: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise FileNotFoundError(f"{package} is not installed; {'/'.join(parts)} ships inside it")
    return Path(spec.origin).parent.joinpath(*parts)


def footage_path(name: str) -> str:
    """A real video clip that ships with gradio: 'a.mp4' (1920x1080, 7 s, a caption animation),
    'world.mp4' (480x270, 30 s, a turning globe), 'b.mp4' (480x270, 5 s)."""
    path = _package_file("gradio", "media_assets", "videos", name)
    if not path.is_file():
        raise FileNotFoundError(f"gradio does not ship the video '{name}'")
    return str(path)


def photo(name: str) -> np.ndarray:
    """A real photo (uint8 RGB) by name: scikit-image's samples ('astronaut', 'coffee', 'rocket',
    'chelsea', 'stereo_motorcycle', 'immunohistochemistry', 'hubble_deep_field'), gradio's
    ('gradio:tower.jpg', 'gradio:groot.jpeg', 'gradio:cheetah.jpg', 'gradio:lion.jpg') and
    ultralytics' ('bus', 'zidane')."""
    from PIL import Image as PILImage

    if name in ("bus", "zidane"):
        path = _package_file("ultralytics", "assets", f"{name}.jpg")
    elif name.startswith("gradio:"):
        path = _package_file("gradio", "media_assets", "images", name.split(":", 1)[1])
    else:
        from skimage import data

        arr = getattr(data, name)()
        arr = arr[0] if isinstance(arr, tuple) else arr
        return np.ascontiguousarray(arr[..., :3] if arr.ndim == 3 else np.stack([arr] * 3, -1))
    with PILImage.open(path) as im:
        return np.asarray(im.convert("RGB"))


def render_sign(text: str, font: str, size: int, plate: tuple[int, int, int] = (255, 255, 255),
                ink: tuple[int, int, int] = (0, 0, 0), border: int = 2) -> np.ndarray:
    """A sign: `text` (lines split on '\\n') at `size` px in font file `font` on a plate with a
    border; the plate is only a little larger than the text, as on real signs."""
    from PIL import Image as PILImage, ImageDraw, ImageFont

    f = ImageFont.truetype(font_file(font), size)
    draw = ImageDraw.Draw(PILImage.new("RGB", (1, 1)))
    x0, y0, x1, y1 = draw.multiline_textbbox((0, 0), text, font=f, spacing=size // 4, align="center")
    pad = max(3, size // 3)
    w, h = x1 - x0 + 2 * pad + 2 * border, y1 - y0 + 2 * pad + 2 * border
    canvas = PILImage.new("RGB", (w, h), ink)
    d = ImageDraw.Draw(canvas)
    d.rectangle([border, border, w - 1 - border, h - 1 - border], fill=plate)
    d.multiline_text((pad + border - x0, pad + border - y0), text, font=f, fill=ink,
                     spacing=size // 4, align="center")
    return np.asarray(canvas)


def render_caption(text: str, font: str, size: int,
                   fill: tuple[int, int, int] = (255, 255, 255)) -> tuple[np.ndarray, np.ndarray]:
    """Overlay text with a dark outline and no plate (a watermark, a timestamp, a subtitle):
    (RGB pixels, alpha mask in [0, 1]) to blend onto footage."""
    from PIL import Image as PILImage, ImageDraw, ImageFont

    f = ImageFont.truetype(font_file(font), size)
    stroke = max(1, size // 10)
    x0, y0, x1, y1 = ImageDraw.Draw(PILImage.new("L", (1, 1))).textbbox(
        (0, 0), text, font=f, stroke_width=stroke)
    w, h = x1 - x0 + 4, y1 - y0 + 4
    rgb, mask = PILImage.new("RGB", (w, h), (0, 0, 0)), PILImage.new("L", (w, h), 0)
    for img, color, outline in ((rgb, fill, (0, 0, 0)), (mask, 255, 255)):
        ImageDraw.Draw(img).text((2 - x0, 2 - y0), text, font=f, fill=color,
                                 stroke_width=stroke, stroke_fill=outline)
    return np.asarray(rgb), np.asarray(mask, np.float32) / 255.0


@dataclass(frozen=True)
class Overlay:
    """Pixels pasted on frames of a video (or on an image) at (x, y), shown from t0 to t1 seconds;
    `alpha` (HxW in [0, 1]) blends them, None pastes them opaque."""

    pixels: np.ndarray
    x: int
    y: int
    t0: float = 0.0
    t1: float = float("inf")
    alpha: np.ndarray | None = None

    @property
    def box(self) -> Box:
        h, w = self.pixels.shape[:2]
        return Box(self.x, self.y, self.x + w, self.y + h)

    def paste(self, frame: np.ndarray) -> np.ndarray:
        h, w = self.pixels.shape[:2]
        region = frame[self.y:self.y + h, self.x:self.x + w]
        if self.alpha is None:
            region[:] = self.pixels
        else:
            a = self.alpha[..., None]
            region[:] = (a * self.pixels + (1 - a) * region).astype(np.uint8)
        return frame


def footage_frames(source: str, width: int, height: int, seconds: float, fps: float,
                   start: float = 0.0):
    """Frames (uint8 RGB, width x height) of real footage: 'clip:<gradio video>' decoded from
    `start` and looped, 'pan:<photo>,<photo>,...' (a slow pan across each photo in turn) or
    'still:<photo>' (one photo, aspect kept, on black)."""
    from PIL import Image as PILImage

    n = int(round(seconds * fps))
    kind, _, what = source.partition(":")
    if kind == "clip":
        import av

        with av.open(footage_path(what)) as container:
            stream = container.streams.video[0]
            decoded = [f.to_ndarray(width=width, height=height, format="rgb24")
                       for f in container.decode(stream)]
            src_fps = float(stream.average_rate or 30)
        first = int(start * src_fps)
        for i in range(n):
            yield decoded[(first + int(i * src_fps / fps)) % len(decoded)]
    elif kind == "pan":
        names = what.split(",")
        per = max(1, n // len(names))
        for k, name in enumerate(names):
            big = np.asarray(PILImage.fromarray(photo(name)).resize(
                (int(width * 1.15), height), PILImage.BICUBIC))
            count = per if k < len(names) - 1 else n - per * (len(names) - 1)
            for i in range(count):
                x = int((big.shape[1] - width) * i / max(1, count - 1))
                yield np.ascontiguousarray(big[:, x:x + width])
    elif kind == "still":  # a photo fitted into the frame (aspect kept), for counting / scenes
        pic = PILImage.fromarray(photo(what))
        pic.thumbnail((width, height), PILImage.BICUBIC)
        canvas = np.zeros((height, width, 3), np.uint8)
        y, x = (height - pic.height) // 2, (width - pic.width) // 2
        canvas[y:y + pic.height, x:x + pic.width] = np.asarray(pic)
        for _ in range(n):
            yield canvas
    else:
        raise ValueError(f"footage source '{source}': expected 'clip:<name>', 'pan:<photos>' "
                         "or 'still:<photo>'")


def make_overlay_video(path: str | Path, source: str, width: int, height: int, seconds: float,
                       overlays: list[Overlay], fps: float = 10.0, start: float = 0.0) -> Path:
    """Write an H.264 MP4 of real footage (`footage_frames`) with `overlays` pasted while shown."""
    import av

    path = Path(path)
    container = av.open(str(path), "w")
    try:
        stream = container.add_stream("libx264", rate=int(fps))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"g": str(int(fps)), "bf": "0", "preset": "veryfast", "crf": "20"}
        for i, arr in enumerate(footage_frames(source, width, height, seconds, fps, start)):
            t = i / fps
            arr = arr.copy()
            for ov in overlays:
                if ov.t0 <= t < ov.t1:
                    ov.paste(arr)
            for packet in stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
    return path


def render_document(rows: list[list[tuple[str, float, str]]], font: str, size: int, width: int,
                    margin: int = 40, spacing: float = 1.7,
                    paper: tuple[int, int, int] = (255, 255, 255)) -> np.ndarray:
    """A page (receipt, invoice, form) of text rows. Each row is a list of spans
    (text, x as a fraction of the text width, 'left' | 'right' | 'center'); a row of no spans is a
    blank line, a span of text '-' a rule across the page."""
    from PIL import Image as PILImage, ImageDraw, ImageFont

    f = ImageFont.truetype(font_file(font), size)
    step = int(size * spacing)
    page = PILImage.new("RGB", (width, 2 * margin + step * len(rows)), paper)
    draw = ImageDraw.Draw(page)
    inner = width - 2 * margin
    for r, row in enumerate(rows):
        y = margin + r * step
        for text, x, align in row:
            if text == "-":
                draw.line([(margin, y + size // 2), (width - margin, y + size // 2)],
                          fill=(90, 90, 90), width=max(1, size // 12))
                continue
            tw = draw.textlength(text, font=f)
            px = margin + x * inner - {"left": 0, "right": tw, "center": tw / 2}[align]
            draw.text((px, y), text, font=f, fill=(20, 20, 20))
    return np.asarray(page)
