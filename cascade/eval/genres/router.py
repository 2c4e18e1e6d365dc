"""Count and scene questions: the resolution router should keep the cheap path for scenes and
look closer only when counting needs it."""

from __future__ import annotations

from typing import Any

from ..items import EvalItem
from ..photos import photo
from ..video import make_overlay_video
from .common import Ctx, save_png


def router(ctx: Ctx) -> list[EvalItem]:
    """The split's count questions (a still or a photo with a known number of a detector label)
    and scene questions (a pan over a photo, or a set of the split's photos), interleaved; the
    first `n`. Sources: 'still:<photo>' / 'pan:<photos>' videos, 'image:<photo>', 'images'."""
    spec = ctx.spec
    # (kind, source, question, answer, detector label or None)
    Row = tuple[str, str, str, str, str | None]
    counts: list[Row] = [("count", *c) for c in spec.counts]
    scenes: list[Row] = [("scene", source, q, a, None) for source, q, a in spec.scenes]
    order = [x for pair in zip(counts, scenes, strict=False) for x in pair]
    order += counts[len(scenes) :] + scenes[len(counts) :]
    items = []
    fields: dict[str, Any]
    for i, (kind, source, question, answer, label) in enumerate(order[: ctx.n]):
        if source == "images":
            media = tuple(
                save_png(photo(name), ctx.path(f"scene_{i}_{k}.png"))
                for k, name in enumerate(spec.photos[:5])
            )
            fields = dict(media_kind="images", media=media)
        elif source.startswith("image:"):
            path = save_png(photo(source.split(":", 1)[1]), ctx.path(f"photo_{i}.png"))
            fields = dict(media_kind="images", media=(path,), frames=(0,))
        else:
            video = make_overlay_video(ctx.path(f"plain_{i}.mp4"), source, 1280, 720, 6.0, [], 5.0)
            fields = dict(media_kind="video", media=(str(video),), times=(3.0,))
        items.append(
            ctx.item(
                i, question=question, answer=answer, kind=kind, target=kind, label=label, **fields
            )
        )
    return items
