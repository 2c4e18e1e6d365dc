"""Which pipeline fits what was uploaded, and what to tell the user when the chosen one does not.

The demo picks the pipeline from the upload (the user may change it afterwards): a video goes to
video_qa; one page (a document-looking image) or a PDF to doc_qa; several images, or one photo,
to multi_image_qa. Where those exact pipelines are not served (a server with its own
`--pipeline`s), the first served one that takes that kind of media. Plain functions: the demo
calls them, the tests call them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .media import VIDEO_SUFFIXES

__all__ = ["media_kind", "looks_like_page", "choose_pipeline", "mismatch"]

_VIDEO_TYPES, _IMAGE_TYPES = {"video", "path"}, {"images", "image", "path"}


def media_kind(path: str | Path) -> str:
    """ "video", "pdf" or "image", from the file name."""
    suffix = Path(path).suffix.lower()
    return "video" if suffix in VIDEO_SUFFIXES else "pdf" if suffix == ".pdf" else "image"


def looks_like_page(path: str | Path) -> bool:
    """A page, a receipt, a form, a screenshot of text: mostly light, uncoloured background
    with some dark marks. Read from a 64 x 64 thumbnail (False for what is not an image)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im.draft("RGB", (64, 64))
            hsv = np.asarray(im.convert("RGB").resize((64, 64)).convert("HSV"), np.float32)
    except Exception:  # noqa: BLE001  the answer will say why the file cannot be read
        return False
    saturation, value = hsv[..., 1], hsv[..., 2]
    paper = np.mean((value > 190) & (saturation < 40))
    ink = np.mean(value < 110)
    return bool(paper >= 0.6 and ink >= 0.005)


def _first(models: dict[str, set[str]], preferred: str, wanted: set[str]) -> str | None:
    if preferred in models:
        return preferred
    return next((m for m, types in models.items() if types & wanted), None)


def choose_pipeline(paths: list[str | Path], models: dict[str, set[str]]) -> tuple[str | None, str]:
    """(model id or None, why in words) for these uploaded files. `models`: served model id ->
    the media input types it takes (video, images, image, path)."""
    if not paths:
        return None, ""
    kinds = [media_kind(p) for p in paths]
    if "video" in kinds:
        return _first(models, "cascade/video_qa", _VIDEO_TYPES), "a video"
    if len(paths) == 1 and (kinds[0] == "pdf" or looks_like_page(paths[0])):
        what = "a PDF" if kinds[0] == "pdf" else "a page or document"
        doc = _first(models, "cascade/doc_qa", set())
        return doc or _first(models, "cascade/multi_image_qa", _IMAGE_TYPES), what
    what = f"{len(paths)} images" if len(paths) > 1 else "a photo"
    many = _first(models, "cascade/multi_image_qa", {"images"})
    return many or _first(models, "cascade/multi_image_qa", _IMAGE_TYPES), what


def mismatch(
    paths: list[str | Path], model: str, types: set[str], models: dict[str, set[str]]
) -> str | None:
    """Why `model` cannot answer about these files, in plain words with what to do; None if it
    can. (The server's own checks say the same in API terms.)"""
    kinds = [media_kind(p) for p in paths]
    name = model.removeprefix("cascade/")
    fit, _ = choose_pipeline(paths, models)
    advice = f" Choose **{fit.removeprefix('cascade/')}** instead." if fit and fit != model else ""
    if "video" in kinds and len(paths) > 1:
        return "Upload one video on its own (not with other files), then ask."
    if "video" in kinds and not types & _VIDEO_TYPES:
        return f"The **{name}** pipeline reads images, and you uploaded a video.{advice}"
    if "video" not in kinds and not types & _IMAGE_TYPES:
        what = (
            "a PDF"
            if kinds == ["pdf"]
            else "an image"
            if len(paths) == 1
            else f"{len(paths)} files"
            if "pdf" in kinds
            else f"{len(paths)} images"
        )
        return f"The **{name}** pipeline answers about a video, and you uploaded {what}.{advice}"
    if len(paths) > 1 and "images" not in types:
        return (
            f"The **{name}** pipeline reads one image at a time, and you uploaded "
            f"{len(paths)}.{advice or ' Upload one, or choose a pipeline for several images.'}"
        )
    return None
