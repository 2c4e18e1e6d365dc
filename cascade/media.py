"""Media decoding shared by the source stages: still images and videos (PyAV), with clear errors.

Videos are read twice on purpose. The coarse path samples frames (by fps, uniformly, or keyframes
only) and converts them straight to a small size, which is cheap; the fine path later fetches just
the frames the cascade selected at full resolution by timestamp, seeking to the keyframe before each
one instead of decoding the whole video again. Both return `Frame`s whose `box` covers the whole
source frame, so boxes found at low resolution map onto the full-resolution frame.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .artifacts import Box, Frame, Image
from .errors import InputError
from .progress import progress

__all__ = ["VideoSource", "load_image", "SampleMode"]

SampleMode = Literal["fps", "uniform", "keyframes", "all"]


def _check_size(width: int, height: int, max_side: int, what: str) -> None:
    if max(width, height) > max_side:
        raise InputError(f"{what} is {width}x{height}, larger than max_side={max_side}; "
                         "raise max_side if this is intended")


def load_image(value: Any, index: int = 0, max_side: int = 16384, name: str = "image") -> Image:
    """A path, PIL image, uint8 HxWx3 array or `Image` -> `Image` with `media_index=index`.

    The size is checked from the file header before decoding, so an oversized file is refused
    without allocating its pixels.
    """
    import dataclasses

    if isinstance(value, Image):
        img = value if value.media_index == index else dataclasses.replace(value, media_index=index)
    elif isinstance(value, (str, Path)):
        from PIL import Image as PILImage

        p = Path(value)
        if not p.is_file():
            raise InputError(f"{name} {index}: image file not found: '{p}'")
        try:
            with PILImage.open(p) as im:
                _check_size(*im.size, max_side, f"{name} {index} '{p}'")
                rgb = np.asarray(im.convert("RGB"))
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001  (ultralytics patches Image.open: ModuleNotFoundError
            # for pi_heif on undecodable files once it is imported, besides PIL's own errors)
            raise InputError(f"{name} {index}: cannot decode image '{p}': "
                             f"{type(e).__name__}: {e}") from e
        img = Image(np.ascontiguousarray(rgb), source=str(p), media_index=index)
    elif isinstance(value, np.ndarray):
        arr = value
        if arr.ndim == 2:
            arr = np.repeat(arr[:, :, None], 3, axis=2)
        if arr.ndim == 3 and arr.shape[2] == 4:
            arr = arr[:, :, :3]
        img = Image(np.ascontiguousarray(arr), source=f"<{name} {index}>", media_index=index)
    elif hasattr(value, "convert") and hasattr(value, "size"):  # PIL
        _check_size(*value.size, max_side, f"{name} {index}")
        img = Image.from_pil(value, source=f"<{name} {index}>", media_index=index)
    else:
        raise InputError(f"{name} {index}: expected a path, PIL image, uint8 HxWx3 array or "
                         f"cascade Image, got {type(value).__name__}")
    _check_size(img.source_size[0], img.source_size[1], max_side, f"{name} {index} '{img.source}'")
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
            _check_size(width, height, self.max_side, f"video '{self.path}'")
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
    def sample(self, mode: SampleMode = "fps", fps: float = 1.0, max_frames: int | None = 32,
               size: int | None = 448) -> list[Frame]:
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
            next_t, count = None, -1
            for f in progress(container.decode(stream), total=info.frames, unit="frame",
                              desc=f"decode {self.path.name}", min_total=300):
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
        if max_frames and len(frames) > max_frames:
            keep = np.linspace(0, len(frames) - 1, max_frames).round().astype(int)
            frames = [frames[i] for i in keep]
        return frames

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
    def fetch(self, timestamps: list[float], size: int | None = None,
              seek_threshold: float = 1.0) -> dict[float, Frame]:
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
                    container.seek(max(0, int(target / stream.time_base)), stream=stream,
                                   backward=True, any_frame=False)
                    frames_iter = iter(container.decode(stream))
                for f in frames_iter:
                    last_t = float(f.time)
                    if last_t >= target - tol:
                        out[target] = self._to_frame(f, w, h, last_t, round(last_t * info.fps))
                        break
                else:
                    raise InputError(f"video '{self.path}' has no frame at {target:.3f} s "
                                     f"(duration {info.duration:.3f} s)")
        return out

    def _to_frame(self, f, w: int, h: int, t: float, index: int) -> Frame:
        from av.video.reformatter import Interpolation

        full = (w, h) == (self.info.width, self.info.height)
        px = f.to_ndarray(format="rgb24") if full else f.to_ndarray(
            width=w, height=h, format="rgb24", interpolation=Interpolation.AREA)
        return Frame(np.ascontiguousarray(px), source=str(self.path),
                     box=Box(0, 0, self.info.width, self.info.height),
                     source_size=(self.info.width, self.info.height), timestamp=t, index=index)

    def describe(self) -> dict[str, Any]:
        i = self.info
        return {"path": str(self.path), "width": i.width, "height": i.height, "fps": i.fps,
                "duration": i.duration, "frames": i.frames, "codec": i.codec}

    def __repr__(self) -> str:
        return f"VideoSource('{self.path}', {self.info.width}x{self.info.height}, " \
               f"{self.info.frames} frames @ {self.info.fps:.3g} fps)"
