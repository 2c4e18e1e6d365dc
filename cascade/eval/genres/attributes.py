"""Questions that single out one of two signs by an attribute: its colour, or its place in time
relative to a banner shown in the video."""

from __future__ import annotations

from ..items import EvalItem
from ..render import Overlay, render_sign
from ..video import make_overlay_video
from .common import (
    COLOURS,
    ZH_COLOURS,
    Ctx,
    box_of,
    caption_overlay,
    place,
    place_apart,
    resized_photo,
    save_png,
    shade,
    sign,
    sign_text,
    visible_times,
)


def _two_colours(ctx: Ctx) -> tuple[str, str]:
    first, second = ctx.rng.sample(sorted(COLOURS), 2)
    return first, second


def _coloured_sign(ctx: Ctx, colour: str, text: str, size: int):
    plate, ink = COLOURS[colour]
    return render_sign(text, ctx.rng.choice(ctx.spec.fonts.sign), size, shade(ctx.rng, plate), ink)


def _ask_colour(ctx: Ctx, colour: str) -> tuple[str, str]:
    if ctx.rng.random() < 0.25:
        return ctx.spec.ask("colour_zh", ctx.rng, colour=ZH_COLOURS[colour]), "zh"
    return ctx.spec.ask("colour", ctx.rng, colour=colour), "en"


def colour(ctx: Ctx) -> list[EvalItem]:
    """Two signs of two named colours, both small, both in view: in one video at the same or at
    different times, or in one image set (same photo or two photos). The question names one
    colour (in English or Chinese)."""
    rng, spec = ctx.rng, ctx.spec
    items = []
    for i in range(ctx.n):
        asked, other = _two_colours(ctx)
        texts = [sign_text(rng, spec.sign_words) for _ in range(2)]
        while texts[1].split()[0] == texts[0].split()[0]:
            texts[1] = sign_text(rng, spec.sign_words)
        size = rng.randint(14, 26)
        boards = [
            _coloured_sign(ctx, c, t, size) for c, t in zip((asked, other), texts, strict=False)
        ]
        question, lang = _ask_colour(ctx, asked)
        common = dict(
            question=question,
            answer=texts[0],
            kind="read",
            target="sign",
            lang=lang,
            text_size=size,
            distractors=(texts[1],),
        )
        if i % 2 == 0:  # a video
            source, width, height = spec.footage[(i // 2) % len(spec.footage)]
            seconds, fps = 10.0, 10.0
            t0 = round(rng.uniform(0.5, 4.0), 1)
            together = rng.random() < 0.5
            x, y = place(rng, width, height, boards[0].shape[1], boards[0].shape[0])
            first = Overlay(boards[0], x, y, t0, t0 + 2.5)
            ox, oy = place_apart(
                rng, width, height, [box_of(first)], boards[1].shape[1], boards[1].shape[0]
            )
            o0 = t0 if together else round(t0 + 3.5, 1)
            second = Overlay(boards[1], ox, oy, o0, o0 + 2.5)
            caption, _ = caption_overlay(ctx, width, height, clear_of=(first, second))
            overlays = [first, second, caption]
            path = make_overlay_video(
                ctx.path(f"colour_{i}.mp4"),
                source,
                width,
                height,
                seconds,
                overlays,
                fps,
                start=rng.uniform(0, 2),
            )
            items.append(
                ctx.item(
                    i,
                    media_kind="video",
                    media=(str(path),),
                    box=box_of(first),
                    times=visible_times(first.t0, first.t1, fps, seconds),
                    **common,
                )
            )
            continue
        names = rng.sample(spec.photos, k=min(len(spec.photos), rng.randint(3, 5)))
        holders = [rng.randrange(len(names))]
        holders.append(
            holders[0]
            if rng.random() < 0.5
            else rng.choice([k for k in range(len(names)) if k != holders[0]])
        )
        arrays = [resized_photo(rng, name) for name in names]
        placed: dict[int, list] = {}
        box = None
        for board, k in zip(boards, holders, strict=False):
            h, w = arrays[k].shape[:2]
            x, y = place_apart(rng, w, h, placed.get(k, []), board.shape[1], board.shape[0])
            ov = Overlay(board, x, y)
            ov.paste(arrays[k])
            placed.setdefault(k, []).append(box_of(ov))
            box = box or box_of(ov)
        paths = tuple(save_png(a, ctx.path(f"colour_{i}_{k}.png")) for k, a in enumerate(arrays))
        items.append(
            ctx.item(i, media_kind="images", media=paths, frames=(holders[0],), box=box, **common)
        )
    return items


_RELATIONS = ("after", "before", "first", "last")


def time_order(ctx: Ctx) -> list[EvalItem]:
    """A small sign, then a big banner, then another small sign like the first (same plate, same
    size range). The question asks for the sign after / before the banner, or the first / last
    small sign; the other sign is the distractor on the other side of the event."""
    rng, spec = ctx.rng, ctx.spec
    items = []
    for i in range(ctx.n):
        source, width, height = spec.footage[i % len(spec.footage)]
        fps = 10.0
        banner_text = rng.choice(spec.banners)
        banner_size = rng.randint(44, 64) * width // 1280
        plate = rng.choice(((180, 20, 30), (20, 40, 120), (240, 240, 240)))
        ink = (0, 0, 0) if sum(plate) > 500 else (255, 255, 255)
        banner = render_sign(
            banner_text,
            rng.choice(spec.fonts.sign),
            banner_size,
            plate,
            ink,
            border=4,
            pad=banner_size,
        )
        texts = [sign_text(rng, spec.sign_words) for _ in range(2)]
        while texts[1] == texts[0]:
            texts[1] = sign_text(rng, spec.sign_words)
        size = rng.randint(14, 24)
        colours = (
            ((255, 255, 255), (0, 0, 0)) if rng.random() < 0.5 else ((250, 210, 40), (0, 0, 0))
        )
        boards = [sign(rng, spec.fonts.sign, t, size, colours) for t in texts]
        a0 = round(rng.uniform(0.5, 2.5), 1)
        tb = round(a0 + 2.0 + rng.uniform(0.8, 2.5), 1)
        b0 = round(tb + 2.5 + rng.uniform(0.8, 2.5), 1)
        seconds = round(b0 + 2.0 + rng.uniform(1.0, 2.5))
        bx, by = (width - banner.shape[1]) // 2, rng.randint(height // 8, height // 3)
        banner_ov = Overlay(banner, bx, by, tb, tb + 2.5)
        before = Overlay(
            boards[0],
            *place(rng, width, height, boards[0].shape[1], boards[0].shape[0]),
            a0,
            a0 + 2.0,
        )
        after = Overlay(
            boards[1],
            *place(rng, width, height, boards[1].shape[1], boards[1].shape[0]),
            b0,
            b0 + 2.0,
        )
        path = make_overlay_video(
            ctx.path(f"order_{i}.mp4"),
            source,
            width,
            height,
            seconds,
            [before, banner_ov, after],
            fps,
            start=rng.uniform(0, 2),
        )
        relation = _RELATIONS[i % len(_RELATIONS)]
        lang = "zh" if relation in ("after", "before") and rng.random() < 0.3 else "en"
        slot = f"{relation}_zh" if lang == "zh" else relation
        question = spec.ask(slot, rng, banner=banner_text)
        gold = after if relation in ("after", "last") else before
        answer, distractor = (texts[1], texts[0]) if gold is after else (texts[0], texts[1])
        items.append(
            ctx.item(
                i,
                media_kind="video",
                media=(str(path),),
                question=question,
                answer=answer,
                kind="read",
                target="sign",
                lang=lang,
                text_size=size,
                box=box_of(gold),
                times=visible_times(gold.t0, gold.t1, fps, seconds),
                distractors=(distractor, banner_text),
            )
        )
    return items
