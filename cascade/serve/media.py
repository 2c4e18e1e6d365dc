"""Media from chat requests: `data:` URLs and `file://` URLs under a media root, decoded with limits.

Only two URL schemes are accepted. Remote `http(s)` URLs are refused rather than fetched: a server
that downloads whatever a request names is an SSRF hole, and these machines are often offline.
Sizes are checked before work is done: a data URL's length before base64 decoding, an image's pixel
count from its header before decoding pixels, a video's frame count and frame size from its header.
Videos are written under the upload folder named by their content hash, so the same upload in a
later turn is the same file (and the same cache keys).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

import numpy as np

from .config import ServeConfig
from .errors import APIError

__all__ = ["Media", "load_media_url", "media_from_file", "save_image", "VIDEO_SUFFIXES"]

VIDEO_SUFFIXES = {".mp4", ".mkv", ".webm", ".mov", ".avi", ".m4v", ".mpg", ".mpeg", ".ts", ".gif"}
_MIME_SUFFIX = {"video/mp4": ".mp4", "video/webm": ".webm", "video/quicktime": ".mov",
                "video/x-matroska": ".mkv", "video/x-msvideo": ".avi", "video/mpeg": ".mpg"}


@dataclass(frozen=True)
class Media:
    """One decoded image or one probed video file, with the content digest that identifies it."""

    kind: Literal["image", "video"]
    digest: str
    label: str  # where it came from, for messages and evidence ("messages[0].content[1]", a path)
    pixels: np.ndarray | None = None  # images: RGB uint8
    path: Path | None = None  # videos (and images that came from a file)


def _too_large(what: str, got: int, limit: int, unit: str, code: str, param: str | None) -> APIError:
    return APIError(413, f"{what} is {got:,} {unit}, over this server's limit of {limit:,} {unit}",
                    code=code, param=param)


def _read_url(url: str, cfg: ServeConfig, param: str) -> tuple[bytes | None, Path | None, str]:
    """(bytes, None, mime) for a data URL, (None, path, "") for an allowed file URL."""
    if not isinstance(url, str) or not url:
        raise APIError(400, f"{param}: expected a non-empty URL string", code="invalid_url", param=param)
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "data":
        head, comma, payload = url[5:].partition(",")
        if not comma or not head.lower().endswith(";base64"):
            raise APIError(400, f"{param}: data URLs must be base64 ('data:<mime>;base64,<data>')",
                           code="invalid_url", param=param)
        approx = len(payload) * 3 // 4
        if approx > cfg.max_upload_bytes:
            raise _too_large(f"{param} upload", approx, cfg.max_upload_bytes, "bytes",
                             "upload_too_large", param)
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as e:
            raise APIError(400, f"{param}: data URL is not valid base64 ({e})", code="invalid_url",
                           param=param) from None
        return data, None, head[: -len(";base64")].lower()
    if scheme == "file":
        if cfg.media_root is None:
            raise APIError(400, f"{param}: file:// URLs are disabled on this server; send a data: URL "
                           "or start the server with --media-root DIR", code="file_url_not_allowed",
                           param=param)
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise APIError(400, f"{param}: file URL must name a local path, got host "
                           f"'{parsed.netloc}'", code="file_url_not_allowed", param=param)
        root = Path(cfg.media_root).resolve()
        path = Path(unquote(parsed.path)).resolve()  # resolves '..' and symlinks before the check
        if not path.is_relative_to(root):
            raise APIError(400, f"{param}: file URL is outside the media root '{root}'",
                           code="file_url_not_allowed", param=param)
        if not path.is_file():
            raise APIError(400, f"{param}: no such file under the media root: '{path}'",
                           code="file_not_found", param=param)
        size = path.stat().st_size
        if size > cfg.max_upload_bytes:
            raise _too_large(f"{param} file", size, cfg.max_upload_bytes, "bytes",
                             "upload_too_large", param)
        return None, path, ""
    if scheme in ("http", "https"):
        raise APIError(400, f"{param}: this server does not fetch remote URLs; send the media as a "
                       "data: URL (base64) or a file:// URL under --media-root", code="invalid_url",
                       param=param)
    raise APIError(400, f"{param}: unsupported URL scheme '{scheme or url[:16]}'; use data: or file://",
                   code="invalid_url", param=param)


def _decode_image(data: bytes | None, path: Path | None, cfg: ServeConfig, param: str) -> np.ndarray:
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data) if data is not None else path) as im:
            w, h = im.size  # from the header: refuse before decoding the pixels
            if w * h > cfg.max_pixels:
                raise _too_large(f"{param} image ({w}x{h})", w * h, cfg.max_pixels, "pixels",
                                 "image_too_large", param)
            rgb = np.asarray(im.convert("RGB"))
    except APIError:
        raise
    except Exception as e:  # PIL's own errors, and others once ultralytics has patched Image.open

        raise APIError(400, f"{param}: not a readable image ({type(e).__name__}: {e})",
                       code="invalid_image", param=param) from None
    if rgb.size == 0:
        raise APIError(400, f"{param}: the image is empty", code="invalid_image", param=param)
    return np.ascontiguousarray(rgb)


def _write_once(folder: Path, name: str, data: bytes) -> Path:
    """Write `data` to folder/name unless it is there already (atomic rename, safe across threads)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    if not target.is_file():
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".upload-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    return target


def _upload_dir(cfg: ServeConfig) -> Path:
    return Path(cfg.upload_dir or Path(tempfile.gettempdir()) / "cascade-serve-uploads")


def save_image(media: Media, cfg: ServeConfig) -> Path:
    """Write a decoded image as PNG under the upload folder (for pipelines whose input is a path)."""
    from PIL import Image as PILImage

    buf = io.BytesIO()
    PILImage.fromarray(media.pixels).save(buf, format="PNG")
    return _write_once(_upload_dir(cfg), media.digest + ".png", buf.getvalue())


def _probe_video(path: Path, cfg: ServeConfig, param: str) -> None:
    from ..errors import CascadeError
    from ..media import VideoSource

    try:
        info = VideoSource(path, max_side=1 << 20).info
    except CascadeError as e:
        raise APIError(400, f"{param}: not a readable video ({e})", code="invalid_video",
                       param=param) from None
    except Exception as e:  # PyAV raises its own types on truncated or odd files
        raise APIError(400, f"{param}: not a readable video ({type(e).__name__}: {e})",
                       code="invalid_video", param=param) from None
    if info.width * info.height > cfg.max_pixels:
        raise _too_large(f"{param} video frame ({info.width}x{info.height})",
                         info.width * info.height, cfg.max_pixels, "pixels", "video_too_large", param)
    if info.frames > cfg.max_frames:
        raise _too_large(f"{param} video", info.frames, cfg.max_frames, "frames",
                         "video_too_long", param)


def load_media_url(kind: Literal["image", "video"], url: str, cfg: ServeConfig, param: str) -> Media:
    """Fetch, check and decode one media part of a chat request (raises `APIError`)."""
    data, path, mime = _read_url(url, cfg, param)
    raw = data if data is not None else path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if kind == "image":
        return Media("image", digest, str(path or param), pixels=_decode_image(data, path, cfg, param),
                     path=path)
    if path is None:
        path = _write_once(_upload_dir(cfg), digest + _MIME_SUFFIX.get(mime, ".mp4"), data)
    _probe_video(path, cfg, param)
    return Media("video", digest, str(path), path=path)


def media_from_file(path: str | Path, cfg: ServeConfig) -> Media:
    """A local file (demo uploads, examples): a video by suffix, else an image."""
    p = Path(path)
    if p.stat().st_size > cfg.max_upload_bytes:
        raise _too_large(f"'{p.name}'", p.stat().st_size, cfg.max_upload_bytes, "bytes",
                         "upload_too_large", None)
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    if p.suffix.lower() in VIDEO_SUFFIXES:
        _probe_video(p, cfg, p.name)
        return Media("video", digest, str(p), path=p)
    return Media("image", digest, str(p), pixels=_decode_image(None, p, cfg, p.name), path=p)
