"""Which pipelines `cascade bench` runs on each kind of media, and the role each plays (the same
across kinds of media, so a genre that mixes videos, image sets and pages is reported per role)."""

from __future__ import annotations

# media kind -> label -> (pipeline, overrides). The `[hint]` variants never let a tool answer: the
# VLM always reads the selected crops, with the tools' findings in the prompt, so their tokens are
# the cost of the fine path itself and their evidence is what the fine path sends.
PIPELINES = {
    "video": {
        "video_qa": ("video_qa", {}),
        "video_qa[hint]": ("video_qa", {"tool.mode": "hint"}),
        "full_res": ("full_res", {}),
        "thumbnail_only": ("thumbnail_only", {}),
    },
    "images": {
        "multi_image_qa": ("multi_image_qa", {}),
        "multi_image_qa[hint]": ("multi_image_qa", {"tool.mode": "hint"}),
        "full_res": ("full_res", {}),
        "thumbnail_only": ("thumbnail_only", {}),
    },
    "document": {
        "doc_qa": ("doc_qa", {}),
        "doc_qa[hint]": ("doc_qa", {"tool.mode": "hint"}),
        "full_res": ("full_res", {}),
    },
}
CASCADES = {"video": "video_qa", "images": "multi_image_qa", "document": "doc_qa"}


def role_of(label: str) -> str:
    """A pipeline label's role, the same across kinds of media: cascade, cascade[hint], full_res,
    thumbnail_only (genres mix kinds of media, so per-genre figures are per role)."""
    if label.endswith("[hint]"):
        return "cascade[hint]"
    return "cascade" if label in CASCADES.values() else label
