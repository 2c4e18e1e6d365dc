"""Small signs: in 10 s videos, in image sets, and in videos of several minutes."""

from __future__ import annotations

from ..items import EvalItem
from ..render import Overlay
from ..video import make_overlay_video
from .common import (
    Ctx,
    box_of,
    caption_overlay,
    place,
    sign,
    sign_image_set,
    sign_text,
    sign_video,
    visible_times,
)


def video_sign(ctx: Ctx) -> list[EvalItem]:
    """A 12-24 px sign shown ~2 s at a random place in 720p / 1080p footage (half the time across a
    224/448-px grid line), a caption on the footage and often a second sign at another time."""
    items = []
    for i in range(ctx.n):
        text = sign_text(ctx.rng, ctx.spec.sign_words)
        fields = sign_video(
            ctx,
            f"video_{i}.mp4",
            text,
            ctx.spec.fonts.sign,
            ctx.rng.randint(12, 24),
            ctx.spec.footage[i % len(ctx.spec.footage)],
        )
        items.append(
            ctx.item(
                i,
                question=ctx.spec.ask("video_sign", ctx.rng),
                answer=text,
                kind="read",
                target="sign",
                **fields,
            )
        )
    return items


def image_sign(ctx: Ctx) -> list[EvalItem]:
    """A 12-24 px sign in one of 5-8 photos (800-1600 px), a caption in another."""
    items = []
    for i in range(ctx.n):
        text = sign_text(ctx.rng, ctx.spec.sign_words)
        fields = sign_image_set(ctx, f"set_{i}", text, ctx.spec.fonts.sign, ctx.rng.randint(12, 24))
        items.append(
            ctx.item(
                i,
                question=ctx.spec.ask("image_sign", ctx.rng),
                answer=text,
                kind="read",
                target="sign",
                **fields,
            )
        )
    return items


def long_video(ctx: Ctx) -> list[EvalItem]:
    """3-5 minutes of footage at low fps (640-1280 px) with one small sign visible for 1-2 s, a
    caption all along and the footage's own texts: the sign is on a few frames out of hundreds."""
    rng, spec = ctx.rng, ctx.spec
    items = []
    for i in range(ctx.n):
        source, width, height = spec.long_footage[i % len(spec.long_footage)]
        seconds = float(rng.randint(180, 300))
        shown_for = rng.choice((1.0, 1.5, 2.0))
        text = sign_text(rng, spec.sign_words)
        size = max(16, round(rng.uniform(0.03, 0.045) * height))
        board = sign(rng, spec.fonts.sign, text, size)
        t0 = round(rng.uniform(5.0, seconds - 10.0), 1)
        x, y = place(rng, width, height, board.shape[1], board.shape[0])
        target = Overlay(board, x, y, t0, t0 + shown_for)
        caption, caption_text = caption_overlay(ctx, width, height, clear_of=(target,))
        path = make_overlay_video(
            ctx.path(f"long_{i}.mp4"),
            source,
            width,
            height,
            seconds,
            [target, caption],
            spec.long_fps,
            start=rng.uniform(0, 2),
            crf=23,
            keyframe_s=10.0,
        )
        items.append(
            ctx.item(
                i,
                media_kind="video",
                media=(str(path),),
                question=spec.ask("long_video", rng),
                answer=text,
                kind="read",
                target="sign",
                text_size=size,
                box=box_of(target),
                times=visible_times(target.t0, target.t1, spec.long_fps, seconds),
                distractors=(caption_text,),
            )
        )
    return items
