"""Chinese: signs with Chinese text (asked in Chinese or English), and questions asked in Chinese
about English signs and documents."""

from __future__ import annotations

from ..items import EvalItem
from .common import Ctx, save_png, sign_image_set, sign_text, sign_video
from .documents import heading_page, id_letter
from .receipts import receipt_page


def zh_sign(ctx: Ctx) -> list[EvalItem]:
    """A 16-28 px sign in Chinese (the split's CJK design) in a video or an image set, with an
    English caption and, in videos, often a second Chinese sign; 60 % asked in Chinese."""
    rng, spec = ctx.rng, ctx.spec
    fonts = (spec.fonts.cjk,)
    items = []
    for i in range(ctx.n):
        text = sign_text(rng, spec.zh_sign_words)
        size = rng.randint(16, 28)
        if i % 2 == 0:
            fields = sign_video(
                ctx,
                f"zh_video_{i}.mp4",
                text,
                fonts,
                size,
                spec.footage[(i // 2) % len(spec.footage)],
                other_words=spec.zh_sign_words,
            )
        else:
            fields = sign_image_set(ctx, f"zh_set_{i}", text, fonts, size)
        lang = "zh" if rng.random() < 0.6 else "en"
        items.append(
            ctx.item(
                i,
                question=spec.ask(f"zh_sign_{lang}", rng),
                answer=text,
                kind="read",
                target="sign",
                lang=lang,
                **fields,
            )
        )
    return items


_UNITS = ("video", "images", "total", "title", "number")


def zh_question(ctx: Ctx) -> list[EvalItem]:
    """Questions in Chinese about English text: a small sign in a video or an image set, a
    receipt's total, a page's title, a letter's first id field (one of each in turn)."""
    rng, spec = ctx.rng, ctx.spec
    items = []
    size: int | None  # the font size of the text to read, where one size is known
    for i in range(ctx.n):
        unit = _UNITS[i % len(_UNITS)]
        if unit in ("video", "images"):
            text = sign_text(rng, spec.sign_words)
            size = rng.randint(14, 24)
            fields = (
                sign_video(
                    ctx,
                    f"video_{i}.mp4",
                    text,
                    spec.fonts.sign,
                    size,
                    spec.footage[i % len(spec.footage)],
                )
                if unit == "video"
                else sign_image_set(ctx, f"set_{i}", text, spec.fonts.sign, size)
            )
            items.append(
                ctx.item(
                    i,
                    question=spec.ask(f"zh_{unit}", rng),
                    answer=text,
                    kind="read",
                    target="sign",
                    lang="zh",
                    **fields,
                )
            )
            continue
        if unit == "total":
            page, values, _, size = receipt_page(ctx, rng.choice(spec.receipt_layouts))
            gold, box, target = values["total"], None, "key_value"
        elif unit == "title":
            page, truth = heading_page(ctx)
            gold, box, target, size = truth.spans["title"], truth.box("title"), "title", None
        else:
            page, truth = id_letter(ctx)
            label = spec.id_fields[0].label
            gold, box, target, size = truth.spans[label], truth.box(label), "identifier", None
        path = save_png(page, ctx.path(f"doc_{i}.png"))
        items.append(
            ctx.item(
                i,
                media_kind="document",
                media=(path,),
                question=spec.ask(f"zh_doc_{unit}", rng),
                answer=gold,
                kind="doc",
                target=target,
                lang="zh",
                text_size=size,
                frames=(0,),
                box=box,
            )
        )
    return items
