"""Media from chat requests: `data:` URLs, `file://` URLs under a media root and, where the server
allows it, `http(s)` URLs (`fetch.MediaFetcher`), decoded with limits.

Remote URLs are refused unless the server is started with --allowed-media-domains: a server that
downloads whatever a request names is an SSRF hole; the fetcher checks every hop's address.
Fetched bytes are a part's bytes like a data URL's: the same content hashes, caches and uuids.
Sizes are checked before work is done: a data URL's length before base64 decoding, an image's pixel
count from its header before decoding pixels, a video's frame count and frame size from its header.
Images are decoded by `cascade.media.load_image` (every PIL mode, raster formats only). A video
sent as a data URL becomes a temporary file held by its request (`Uploads`) and deleted when no
request needs it, rejected or not; when the upload folder's disk is full the request gets 507 and
nothing half-written stays. Across a request's parts, `PixelBudget` caps the pixels the server
decodes (--max-total-pixels: each image's width x height, each video's frame size x frame count),
checked from each part's header before that part is decoded. A `file` part is a PDF
(`decode_part`): its page count is capped (--max-pdf-pages, 413 past it) and each page is
charged to the pixel budget from its size before it is rendered (`cascade.pdf`, --pdf-dpi).
Messages name the request field, never a server path.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import io
import json
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

import numpy as np

from ..artifacts import ImageEmbeds
from ..errors import InputError
from ..imagefile import ImageTooLarge, image_size
from ..media import load_image
from ..pdf import PdfTooLong, is_pdf, render_pdf
from .config import ServeConfig
from .errors import APIError
from .fetch import MediaFetcher
from .uploads import Uploads

__all__ = [
    "Media",
    "Payload",
    "PixelBudget",
    "read_part",
    "decode_part",
    "load_media_url",
    "media_from_file",
    "save_image",
    "scrub",
    "VIDEO_SUFFIXES",
]

VIDEO_SUFFIXES = {".mp4", ".mkv", ".webm", ".mov", ".avi", ".m4v", ".mpg", ".mpeg", ".ts", ".gif"}
_MIME_SUFFIX = {
    "video/mp4": ".mp4",
    "video/webm": ".webm",
    "video/quicktime": ".mov",
    "video/x-matroska": ".mkv",
    "video/x-msvideo": ".avi",
    "video/mpeg": ".mpg",
}


@dataclass(frozen=True)
class Media:
    """One decoded image or one probed video file, with the content digest that identifies it."""

    kind: Literal["image", "video"]
    digest: str
    label: str  # where it came from, for messages and evidence ("messages[0].content[1]")
    pixels: np.ndarray | None = None  # images: RGB uint8
    path: Path | None = None  # videos (and images that came from a file)
    embeds: ImageEmbeds | None = None  # an image sent as its embeddings (no pixels)


class PixelBudget:
    """The pixels one request may make the server decode, taken part by part before each part
    is decoded; the part that would pass the limit gets 413 naming it and the limit."""

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def take(self, pixels: int, what: str, param: str | None) -> None:
        if self.used + pixels > self.limit:
            raise APIError(
                413,
                f"{what} brings this request to {self.used + pixels:,} pixels to "
                f"decode (images, and video frames x frame size), over this server's "
                f"limit of {self.limit:,} per request (--max-total-pixels)",
                code="too_many_pixels",
                param=param,
            )
        self.used += pixels


_FULL_DISK = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _hold(uploads: Uploads, name: str, data: bytes, stack: ExitStack, param: str | None) -> Path:
    """`uploads.hold` on `stack`; a full disk is 507 (the partial file is already gone)."""
    try:
        return stack.enter_context(uploads.hold(name, data))
    except OSError as e:
        if e.errno not in _FULL_DISK:
            raise
        raise APIError(
            507,
            f"{param or 'the upload'}: no space left on this server to hold the "
            f"upload ({len(data):,} bytes); retry later or send a smaller file",
            code="insufficient_storage",
            param=param,
        ) from None


def scrub(message: str, labels: dict[Path, str]) -> str:
    """`message` with each server path replaced by what the client calls it."""
    for path, label in sorted(labels.items(), key=lambda kv: -len(str(kv[0]))):
        message = message.replace(str(path), label)
    return message


def _too_large(
    what: str, got: int, limit: int, unit: str, code: str, param: str | None
) -> APIError:
    return APIError(
        413,
        f"{what} is {got:,} {unit}, over this server's limit of {limit:,} {unit}",
        code=code,
        param=param,
    )


def _file_url(url: str, cfg: ServeConfig, param: str) -> Path:
    """The file a `file://` URL names, if it lies under the media root (symlinks resolved)."""

    def refuse(why: str, code: str = "file_url_not_allowed") -> APIError:
        return APIError(400, f"{param}: {why}", code=code, param=param)

    if cfg.media_root is None:
        raise refuse(
            "file:// URLs are disabled on this server; send a data: URL or start the "
            "server with --media-root DIR"
        )
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise refuse("file URL must name a local path, not a host")
    raw = unquote(parsed.path)
    if "\x00" in raw:
        raise refuse("file URL contains a NUL byte (%00)", "invalid_url")
    try:
        path = Path(raw).resolve()  # '..' and symlinks resolved before the check
        inside = path.is_relative_to(Path(cfg.media_root).resolve())
        found = inside and path.is_file()
    except (OSError, ValueError) as e:  # a name too long for the file system, and the like
        raise refuse(
            f"not a usable file path ({getattr(e, 'strerror', None) or type(e).__name__})",
            "invalid_url",
        ) from None
    if not inside:
        raise refuse("file URL is outside this server's media root (--media-root)")
    if not found:
        raise refuse("no such file under the media root", "file_not_found")
    return path


def _read_url(
    url: str, cfg: ServeConfig, param: str, kind: str, fetcher: MediaFetcher
) -> tuple[bytes, Path | None, str]:
    """(bytes, None, mime) for a data URL or a fetched http(s) URL, (bytes, path, "") for an
    allowed file URL."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "data":
        head, comma, payload = url[5:].partition(",")
        if not comma or not head.lower().endswith(";base64"):
            raise APIError(
                400,
                f"{param}: data URLs must be base64 ('data:<mime>;base64,<data>')",
                code="invalid_url",
                param=param,
            )
        approx = len(payload) * 3 // 4
        if approx > cfg.max_upload_bytes:
            raise _too_large(
                f"{param} upload", approx, cfg.max_upload_bytes, "bytes", "upload_too_large", param
            )
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise APIError(
                400, f"{param}: data URL is not valid base64", code="invalid_url", param=param
            ) from None
        return data, None, head[: -len(";base64")].lower()
    if scheme == "file":
        path = _file_url(url, cfg, param)
        size = path.stat().st_size
        if size > cfg.max_upload_bytes:
            raise _too_large(
                f"{param} file", size, cfg.max_upload_bytes, "bytes", "upload_too_large", param
            )
        return path.read_bytes(), path, ""
    if scheme in ("http", "https"):
        data, mime = fetcher.fetch(url, kind, param)
        return data, None, mime
    raise APIError(
        400,
        f"{param}: unsupported URL scheme {scheme[:16]!r}; use data:, file:// or http(s)://",
        code="invalid_url",
        param=param,
    )


def _decode_image(
    source: bytes | Path, cfg: ServeConfig, param: str, budget: PixelBudget | None = None
) -> np.ndarray:
    if budget is not None:
        size = image_size(source if isinstance(source, bytes) else source.read_bytes())
        if size is not None and size[0] * size[1] <= cfg.max_pixels:  # else: its own 413 below
            budget.take(size[0] * size[1], f"{param} ({size[0]}x{size[1]})", param)
    try:
        return load_image(source, max_pixels=cfg.max_pixels, label=param).pixels
    except ImageTooLarge as e:
        raise APIError(413, str(e), code="image_too_large", param=param) from None
    except InputError as e:
        raise APIError(400, str(e), code="invalid_image", param=param) from None


def _probe_video(
    path: Path, cfg: ServeConfig, param: str, budget: PixelBudget | None = None
) -> None:
    from ..media import VideoSource

    try:
        info = VideoSource(path, max_side=1 << 20).info
    except Exception as e:  # noqa: BLE001  InputError, and PyAV's own types on odd files
        raise APIError(
            400,
            f"{param}: not a readable video ({scrub(str(e), {path: param})})",
            code="invalid_video",
            param=param,
        ) from None
    if info.width * info.height > cfg.max_pixels:
        raise _too_large(
            f"{param} video frame ({info.width}x{info.height})",
            info.width * info.height,
            cfg.max_pixels,
            "pixels",
            "video_too_large",
            param,
        )
    if info.frames > cfg.max_frames:
        raise _too_large(
            f"{param} video", info.frames, cfg.max_frames, "frames", "video_too_long", param
        )
    if budget is not None:
        budget.take(
            info.width * info.height * info.frames,
            f"{param} ({info.frames} frames of {info.width}x{info.height})",
            param,
        )


@dataclass(frozen=True)
class Payload:
    """A media part's bytes as sent, before decoding: what a media id (`uuid`) keeps."""

    kind: Literal["image", "video", "file", "image_embeds"]
    data: bytes  # image_embeds: the part's fields as JSON
    digest: str  # sha256 of `data`
    path: Path | None = None  # the file a file URL named (read in place, never copied)
    mime: str = ""  # a data URL's type
    filename: str | None = None  # a file part's name, for the evidence


def read_part(
    kind: Literal["image", "video", "file", "image_embeds"],
    url: str,
    cfg: ServeConfig,
    param: str,
    filename: str | None = None,
    fetcher: MediaFetcher | None = None,
) -> Payload:
    """The bytes of one media part (size checked, nothing decoded; raises `APIError`). A file
    part's `file_data` may also be bare base64, as some OpenAI clients send it. fetcher: the
    server's, for http(s) URLs (None: they are refused)."""
    if kind == "image_embeds":  # the fields, as JSON (`protocol`): decoded by `decode_part`
        data = url.encode()
        if len(data) > cfg.max_upload_bytes:
            raise _too_large(
                f"{param} embeddings",
                len(data),
                cfg.max_upload_bytes,
                "bytes",
                "upload_too_large",
                param,
            )
        return Payload(kind, data, hashlib.sha256(data).hexdigest())
    if kind == "file" and ":" not in url[:16]:  # no scheme: base64 has no colon
        url = "data:application/pdf;base64," + url
    data, path, mime = _read_url(url, cfg, param, kind, fetcher or MediaFetcher())
    return Payload(kind, data, hashlib.sha256(data).hexdigest(), path, mime, filename)


def decode_part(
    payload: Payload,
    cfg: ServeConfig,
    param: str,
    uploads: Uploads,
    stack: ExitStack,
    budget: PixelBudget | None = None,
) -> list[Media]:
    """Check and decode one part's bytes: an image, a video (its upload held on `stack` as a
    temporary file, gone when the request's stack closes), or a PDF's pages. `budget`: the
    request's pixel budget, shared by its parts."""
    if payload.kind == "image":
        return [
            Media(
                "image",
                payload.digest,
                param,
                path=payload.path,
                pixels=_decode_image(payload.data, cfg, param, budget),
            )
        ]
    if payload.kind == "file":
        return _document(payload, cfg, param, budget)
    if payload.kind == "image_embeds":
        return [_embedded(payload, cfg, param, budget)]
    path = payload.path or _hold(
        uploads, payload.digest + _MIME_SUFFIX.get(payload.mime, ".mp4"), payload.data, stack, param
    )
    _probe_video(path, cfg, param, budget)
    return [Media("video", payload.digest, param, path=path)]


def load_media_url(
    kind: Literal["image", "video"],
    url: str,
    cfg: ServeConfig,
    param: str,
    uploads: Uploads,
    stack: ExitStack,
    budget: PixelBudget | None = None,
) -> Media:
    """`read_part` then `decode_part` for one image or video part."""
    return decode_part(read_part(kind, url, cfg, param), cfg, param, uploads, stack, budget)[0]


def _document(
    payload: Payload, cfg: ServeConfig, param: str, budget: PixelBudget | None
) -> list[Media]:
    """A PDF as one image `Media` per page, labelled "<param> (<filename>) page <n>" (the
    evidence's name for the page)."""
    if not is_pdf(payload.data):
        raise APIError(
            400,
            f"{param}: not a PDF document (no %PDF- header); file parts take "
            "PDFs, images go in image_url parts",
            code="invalid_file",
            param=param,
        )
    name = f"{param} ({payload.filename[:80]})" if payload.filename else param

    def charge(page: int, width: int, height: int) -> None:
        if budget is not None:
            budget.take(width * height, f"{param} page {page} ({width}x{height})", param)

    try:
        pages = render_pdf(
            payload.data,
            name=name,
            dpi=cfg.pdf_dpi,
            max_pages=cfg.max_pdf_pages,
            max_pixels=cfg.max_pixels,
            before_page=charge,
        )
    except PdfTooLong as e:
        raise APIError(
            413,
            f"{param}: the PDF has {e.pages:,} pages, over this server's limit "
            f"of {e.limit:,} pages per document (--max-pdf-pages); send the pages the "
            "question is about",
            code="too_many_pages",
            param=param,
        ) from None
    except ImageTooLarge as e:
        raise APIError(
            413, f"{e} (--max-pixels; or a lower --pdf-dpi)", code="image_too_large", param=param
        ) from None
    except InputError as e:
        raise APIError(400, str(e), code="invalid_file", param=param) from None
    return [
        Media("image", f"{payload.digest}-page{n}", page.source, pixels=page.pixels)
        for n, page in enumerate(pages, 1)
    ]


def _embedded(payload: Payload, cfg: ServeConfig, param: str, budget: PixelBudget | None) -> Media:
    """An image_embeds part as an image `Media` carrying its `ImageEmbeds` (read, never
    unpickled: `cascade.vlm.embeds`), charged to the pixel budget as the image its grid covers.
    Shape and dtype are checked against the served model when its VLM runs."""
    from ..vlm.embeds import load_embeds

    try:
        embeds = load_embeds(json.loads(payload.data), param, max_bytes=cfg.max_upload_bytes)
    except InputError as e:
        raise APIError(400, str(e), code="invalid_image_embeds", param=param) from None
    if budget is not None:
        budget.take(
            embeds.width * embeds.height, f"{param} ({embeds.width}x{embeds.height})", param
        )
    return Media("image", payload.digest, param, embeds=embeds)


def save_image(media: Media, uploads: Uploads, stack: ExitStack) -> Path:
    """A decoded image as a PNG file held on `stack` (for pipelines whose input is a path)."""
    from PIL import Image as PILImage

    buf = io.BytesIO()
    assert media.pixels is not None  # a decoded image (its caller refuses embeddings)
    PILImage.fromarray(media.pixels).save(buf, format="PNG")
    return _hold(uploads, media.digest + ".png", buf.getvalue(), stack, media.label)


def media_from_file(
    path: str | Path, cfg: ServeConfig, label: str, budget: PixelBudget | None = None
) -> list[Media]:
    """A local file the caller has vetted (demo uploads), by suffix: a video, a PDF's pages (each
    an image, capped and charged like a `file` part's), else an image."""
    p = Path(path)
    if p.stat().st_size > cfg.max_upload_bytes:
        raise _too_large(
            f"'{label}'", p.stat().st_size, cfg.max_upload_bytes, "bytes", "upload_too_large", None
        )
    data = p.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if p.suffix.lower() in VIDEO_SUFFIXES:
        _probe_video(p, cfg, label, budget)
        return [Media("video", digest, label, path=p)]
    if p.suffix.lower() == ".pdf":
        return _document(Payload("file", data, digest), cfg, label, budget)
    return [Media("image", digest, label, pixels=_decode_image(p, cfg, label, budget), path=p)]
