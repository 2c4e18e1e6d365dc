"""Media decoding shared by the whole package: still images and videos (PyAV), with clear errors.

`load_image` is the one place anything becomes an `Image` (paths, bytes, PIL images, arrays): the
pipeline inputs, the image stages, the VLM runtime and the server all call it; its pixels come
from `cascade.imagefile` (every PIL mode converted the same way, only raster formats opened, sizes
checked from the header before pixels are decoded).

Videos are read twice on purpose. The coarse path samples frames (by fps, uniformly, or keyframes
only) and converts them straight to a small size, which is cheap; the fine path later fetches just
the frames the cascade selected at full resolution by timestamp, seeking to the keyframe before each
one instead of decoding the whole video again. Both return `Frame`s whose `box` covers the whole
source frame, so boxes found at low resolution map onto the full-resolution frame. A video that
stops decoding early (truncated or damaged past some point) answers from the frames it has, with a
warning in the trace.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .artifacts import Box, Frame, Image
from .errors import InputError
from .imagefile import (
    IMAGE_FORMATS,
    ImageTooLarge,
    array_pixels,
    check_size,
    decode_pixels,
    pil_pixels,
    rgb_pixels,
)
from .progress import progress
from .trace import warn

__all__ = [
    "VideoSource",
    "load_image",
    "rgb_pixels",
    "ImageTooLarge",
    "IMAGE_FORMATS",
    "SampleMode",
]

SampleMode = Literal["fps", "uniform", "keyframes", "all"]


def load_image(
    value: Any,
    index: int = 0,
    max_side: int = 16384,
    name: str = "image",
    *,
    max_pixels: int | None = None,
    label: str | None = None,
) -> Image:
    """Anything users pass as an image -> `Image` with `media_index=index`.

    Accepts an `Image`, a path, encoded bytes (PNG, JPEG, ... see IMAGE_FORMATS), a PIL image or
    a uint8 HxW / HxWx3 / HxWx4 array. The size is checked from the file header before decoding
    (`ImageTooLarge`); anything else wrong raises `InputError` naming `label` (default: `name`,
    the index and the path), never a decoder's internals.
    """
    import dataclasses

    if isinstance(value, Image):
        img = value if value.media_index == index else dataclasses.replace(value, media_index=index)
        what = label or f"{name} {index}"
    elif isinstance(value, (str, Path)):
        p = Path(value)
        what = label or f"{name} {index} '{p}'"
        if not p.is_file():
            raise InputError(
                f"{name} {index}: image file not found: '{p}'"
                if label is None
                else f"{label}: image file not found"
            )
        img = Image(decode_pixels(p, what, max_side, max_pixels), source=str(p), media_index=index)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        what = label or f"{name} {index}"
        img = Image(
            decode_pixels(io.BytesIO(value), what, max_side, max_pixels),
            source=what,
            media_index=index,
        )
    elif isinstance(value, np.ndarray):
        what = label or f"{name} {index}"
        img = Image(array_pixels(value, what), source=f"<{what}>", media_index=index)
    elif type(value).__module__.startswith("PIL."):
        what = label or f"{name} {index}"
        px = pil_pixels(value, what, max_side, max_pixels)
        img = Image(px, source=f"<{what}>", media_index=index)
    else:
        raise InputError(
            f"{name} {index}: expected an Image, a path, image bytes, a PIL image or "
            f"a uint8 HxWx3 array, got {type(value).__name__}"
        )
    width, height = img.source_size
    check_size(width, height, max_side, what, max_pixels)
    return img


def _fit(width: int, height: int, size: int | None) -> tuple[int, int]:
    """(w, h) with the longest side at most `size` (even numbers are not needed for RGB)."""
    if not size or max(width, height) <= size:
        return width, height
    f = size / max(width, height)
    return max(1, round(width * f)), max(1, round(height * f))


@dataclass(frozen=True)
class VideoInfo:
    width: int
    height: int
    fps: float
    duration: float
    frames: int
    codec: str


class VideoSource:
    """A video file: probe it once, sample frames cheaply, fetch chosen frames at full resolution.

    Every error names the file. `max_side` refuses videos whose frames are larger than that.
    """

    def __init__(self, path: str | Path, max_side: int = 8192):
        self.path = Path(path)
        self.max_side = max_side
        self.info = self._probe()

    # -- opening ------------------------------------------------------------------------------
    def _open(self):
        import av

        if not self.path.is_file():
            raise InputError(f"video file not found: '{self.path}'")
        try:
            container = av.open(str(self.path))
        except (av.FFmpegError, OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot open video '{self.path}': not a readable video ({e})") from e
        if not container.streams.video:
            container.close()
            raise InputError(f"'{self.path}' has no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        return container, stream

    def _probe(self) -> VideoInfo:
        container, stream = self._open()
        try:
            cc = stream.codec_context
            width, height = int(cc.width or 0), int(cc.height or 0)
            if width <= 0 or height <= 0:
                raise InputError(f"video '{self.path}' has no frame size (corrupt stream?)")
            check_size(width, height, self.max_side, f"video '{self.path}'")
            rate = stream.average_rate or stream.guessed_rate
            fps = float(rate) if rate else 0.0
            if stream.duration and stream.time_base:
                duration = float(stream.duration * stream.time_base)
            elif container.duration:
                duration = container.duration / 1_000_000
            else:
                duration = 0.0
            frames = int(stream.frames or 0)
            if frames == 0:  # containers without a frame count: count packets (no decoding)
                frames = sum(1 for p in container.demux(stream) if p.size)
            if frames == 0:
                raise InputError(f"video '{self.path}' contains no frames")
            if fps <= 0:
                fps = frames / duration if duration > 0 else 1.0
            return VideoInfo(width, height, fps, duration or frames / fps, frames, cc.name or "")
        except InputError:
            raise
        except Exception as e:  # av errors while demuxing a damaged file
            raise InputError(f"cannot read video '{self.path}': {type(e).__name__}: {e}") from e
        finally:
            container.close()

    # -- coarse path ----------------------------------------------------------------------------
    def sample(
        self,
        mode: SampleMode = "fps",
        fps: float = 1.0,
        max_frames: int | None = 32,
        size: int | None = 448,
    ) -> list[Frame]:
        """Decode sampled frames converted to at most `size` pixels on the longest side.

        fps: one frame every 1/fps seconds. uniform: `max_frames` frames spread evenly over the
        whole video. keyframes: only key frames (non-key frames are skipped by the decoder, which
        is the cheapest way through a long video). all: every frame. Modes other than uniform are
        thinned uniformly to `max_frames` when they produce more.
        """
        info = self.info
        w, h = _fit(info.width, info.height, size)
        wanted: set[int] | None = None
        if mode == "uniform":
            n = min(max_frames or info.frames, info.frames)
            wanted = set(np.linspace(0, info.frames - 1, n).round().astype(int).tolist())
        frames: list[Frame] = []
        with self._decoding() as (container, stream):
            if mode == "keyframes":
                stream.codec_context.skip_frame = "NONKEY"
            stopped: list[str] = []
            next_t, count, t = None, -1, 0.0
            for f in progress(
                self._until_damaged(container, stream, stopped),
                total=info.frames,
                unit="frame",
                desc=f"decode {self.path.name}",
                min_total=300,
            ):
                count += 1
                t = float(f.time) if f.time is not None else count / info.fps
                if mode == "fps":
                    if next_t is not None and t < next_t - 1e-6:
                        continue
                    next_t = (t if next_t is None else next_t) + 1.0 / fps
                elif wanted is not None and count not in wanted:
                    continue
                index = round(t * info.fps) if mode == "keyframes" else count
                frames.append(self._to_frame(f, w, h, t, index))
        if not frames:
            raise InputError(f"video '{self.path}': no frames decoded (mode={mode})")
        # Key frames can be far apart, so only a full decode shows where the video really ends.
        if (
            not stopped
            and mode != "keyframes"
            and t + 1.0 / info.fps < info.duration - max(2.0 / info.fps, 0.5)
        ):
            stopped.append("the decodable frames end early")
        if stopped:
            warn(
                f"video truncated or damaged: {stopped[0]} at {t:.2f} s of {info.duration:.2f} s; "
                f"answered from the first {t:.2f} s"
            )
        if max_frames and len(frames) > max_frames:
            keep = np.linspace(0, len(frames) - 1, max_frames).round().astype(int)
            frames = [frames[i] for i in keep]
        return frames

    @staticmethod
    def _until_damaged(container, stream, stopped: list[str]):
        """Decoded frames, ending at a decoder error once some frames came out (the reason goes
        into `stopped`): a truncated or partly damaged file answers from the part that decodes."""
        import av

        frames, got = container.decode(stream), False
        while True:
            try:
                f = next(frames)
            except StopIteration:
                return
            except av.FFmpegError as e:
                if not got:
                    raise
                stopped.append(f"decoding stopped ({type(e).__name__})")
                return
            got = True
            yield f

    @contextlib.contextmanager
    def _decoding(self):
        """Open the video; any decoder failure inside becomes an InputError naming the file."""
        container, stream = self._open()
        try:
            yield container, stream
        except InputError:
            raise
        except Exception as e:  # PyAV raises its own types on truncated or odd streams
            raise InputError(f"cannot decode video '{self.path}': {type(e).__name__}: {e}") from e
        finally:
            container.close()

    # -- fine path --------------------------------------------------------------------------------
    def fetch(
        self, timestamps: list[float], size: int | None = None, seek_threshold: float = 1.0
    ) -> dict[float, Frame]:
        """Frames at `timestamps` (seconds), at full resolution or capped to `size`.

        Timestamps are visited in order; when the next one lies more than `seek_threshold` seconds
        past the last decoded frame the reader seeks to the keyframe before it, so only the
        frames between that keyframe and the target are decoded. Each timestamp gets the first
        frame at or after it (within half a frame period before, which absorbs float rounding).
        """
        info = self.info
        w, h = _fit(info.width, info.height, size)
        tol = 0.5 / info.fps
        targets = sorted(set(float(t) for t in timestamps))
        out: dict[float, Frame] = {}
        with self._decoding() as (container, stream):
            frames_iter, last_t = None, None
            for target in targets:
                if frames_iter is None or last_t is None or target - last_t > seek_threshold:
                    container.seek(
                        max(0, int(target / stream.time_base)),
                        stream=stream,
                        backward=True,
                        any_frame=False,
                    )
                    frames_iter = iter(container.decode(stream))
                for f in frames_iter:
                    last_t = float(f.time)
                    if last_t >= target - tol:
                        out[target] = self._to_frame(f, w, h, last_t, round(last_t * info.fps))
                        break
                else:
                    raise InputError(
                        f"video '{self.path}' has no frame at {target:.3f} s "
                        f"(duration {info.duration:.3f} s)"
                    )
        return out

    def _to_frame(self, f, w: int, h: int, t: float, index: int) -> Frame:
        from av.video.reformatter import Interpolation

        full = (w, h) == (self.info.width, self.info.height)
        px = (
            f.to_ndarray(format="rgb24")
            if full
            else f.to_ndarray(width=w, height=h, format="rgb24", interpolation=Interpolation.AREA)
        )
        return Frame(
            np.ascontiguousarray(px),
            source=str(self.path),
            box=Box(0, 0, self.info.width, self.info.height),
            source_size=(self.info.width, self.info.height),
            timestamp=t,
            index=index,
        )

    def describe(self) -> dict[str, Any]:
        i = self.info
        return {
            "path": str(self.path),
            "width": i.width,
            "height": i.height,
            "fps": i.fps,
            "duration": i.duration,
            "frames": i.frames,
            "codec": i.codec,
        }

    def __repr__(self) -> str:
        return (
            f"VideoSource('{self.path}', {self.info.width}x{self.info.height}, "
            f"{self.info.frames} frames @ {self.info.fps:.3g} fps)"
        )
