"""Videos with known ground truth, written with PyAV: real footage (gradio's clips, slow pans over
real photos) with overlays shown at known times, and the small sign video the tests share."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..artifacts import Box
from .photos import footage_path, photo, scene_images
from .render import Overlay, render_text_image


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


def make_sign_video(
    path: str | Path,
    *,
    width: int = 640,
    height: int = 480,
    fps: int = 10,
    frames_per_scene: int = 20,
    sign_text: str = "OPEN 24 HOURS",
    sign_frames: tuple[int, ...] | range = range(44, 52),
    sign_font_size: int = 44,
    gop: int = 10,
    scenes: tuple[str, ...] = ("astronaut", "coffee", "chelsea", "bus"),
) -> SignVideoTruth:
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
        stream.options = {
            "g": str(gop),
            "keyint_min": str(gop),
            "sc_threshold": "0",
            "bf": "0",
            "preset": "veryfast",
            "crf": "18",
        }
        n = 0
        for name in scenes:
            big = np.asarray(
                PILImage.fromarray(photos[name]).resize(
                    (width + pan, height), PILImage.Resampling.BICUBIC
                )
            )
            for k in range(frames_per_scene):
                arr = np.ascontiguousarray(big[:, k : k + width])
                if n in sign_set:
                    arr = arr.copy()
                    arr[sy : sy + sh, sx : sx + sw] = sign
                for packet in stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                    container.mux(packet)
                frame_scenes.append(name)
                n += 1
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
    return SignVideoTruth(
        path,
        width,
        height,
        float(fps),
        n,
        gop,
        tuple(frame_scenes),
        sign_text,
        tuple(sorted(i for i in sign_set if i < n)),
        sign_box,
        tuple(range(0, n, gop)),
    )


def _clip_frames(path: str, n: int, fps: float, start: float):
    """`n` frames of the clip at `path` sampled at `fps` from `start`, looped, at the clip's own
    size. Only the frames used are kept (a long video loops a short clip: every output frame is
    one of its frames), so a 1080p clip costs the memory of the frames sampled, not of the clip."""
    import av

    with av.open(path) as container:
        stream = container.streams.video[0]
        src_fps = float(stream.average_rate or 30)
        total = sum(1 for packet in container.demux(stream) if packet.size)
    first = int(start * src_fps)
    order = [(first + int(i * src_fps / fps)) % total for i in range(n)]
    wanted = set(order)
    kept: dict[int, np.ndarray] = {}
    with av.open(path) as container:
        for k, frame in enumerate(container.decode(container.streams.video[0])):
            if k in wanted:
                kept[k] = frame.to_ndarray(format="rgb24")
    decoded = sorted(kept)  # a packet that decoded to no frame: use the frame before it
    for k in order:
        yield kept[decoded[max(0, bisect.bisect_right(decoded, k) - 1)]]


def footage_frames(
    source: str, width: int, height: int, seconds: float, fps: float, start: float = 0.0
):
    """Frames (uint8 RGB, width x height) of real footage: 'clip:<gradio video>' decoded from
    `start` and looped, 'pan:<photo>,<photo>,...' (a slow pan across each photo in turn) or
    'still:<photo>' (one photo, aspect kept, on black)."""
    from PIL import Image as PILImage

    n = int(round(seconds * fps))
    kind, _, what = source.partition(":")
    if kind == "clip":
        for arr in _clip_frames(footage_path(what), n, fps, start):
            if arr.shape[:2] != (height, width):
                arr = np.asarray(
                    PILImage.fromarray(arr).resize((width, height), PILImage.Resampling.BILINEAR)
                )
            yield arr
    elif kind == "pan":
        names = what.split(",")
        per = max(1, n // len(names))
        for k, name in enumerate(names):
            big = np.asarray(
                PILImage.fromarray(photo(name)).resize(
                    (int(width * 1.15), height), PILImage.Resampling.BICUBIC
                )
            )
            count = per if k < len(names) - 1 else n - per * (len(names) - 1)
            for i in range(count):
                x = int((big.shape[1] - width) * i / max(1, count - 1))
                yield np.ascontiguousarray(big[:, x : x + width])
    elif kind == "still":  # a photo fitted into the frame (aspect kept), for counting / scenes
        pic = PILImage.fromarray(photo(what))
        pic.thumbnail((width, height), PILImage.Resampling.BICUBIC)
        canvas = np.zeros((height, width, 3), np.uint8)
        y, x = (height - pic.height) // 2, (width - pic.width) // 2
        canvas[y : y + pic.height, x : x + pic.width] = np.asarray(pic)
        for _ in range(n):
            yield canvas
    else:
        raise ValueError(
            f"footage source '{source}': expected 'clip:<name>', 'pan:<photos>' or 'still:<photo>'"
        )


def make_overlay_video(
    path: str | Path,
    source: str,
    width: int,
    height: int,
    seconds: float,
    overlays: list[Overlay],
    fps: float = 10.0,
    start: float = 0.0,
    crf: int = 20,
    keyframe_s: float = 1.0,
) -> Path:
    """Write an H.264 MP4 of real footage (`footage_frames`) with `overlays` pasted while shown;
    a keyframe every `keyframe_s` seconds (long videos use sparse ones and a higher `crf`)."""
    import av

    path = Path(path)
    container = av.open(str(path), "w")
    try:
        stream = container.add_stream("libx264", rate=int(fps))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {
            "g": str(max(1, int(fps * keyframe_s))),
            "bf": "0",
            "preset": "veryfast",
            "crf": str(crf),
        }
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
