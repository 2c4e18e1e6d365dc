"""Printed pages photographed inside real photos (at an angle, lower contrast, JPEG): alone, for
doc_qa, or among ordinary photos, for multi_image_qa."""

from __future__ import annotations

from ..items import EvalItem
from ..photographed import photograph
from .common import Ctx, resized_photo, save_png
from .documents import heading_page, id_letter
from .receipts import receipt_page

_WHAT = ("title", "total", "number")


def photo_doc(ctx: Ctx) -> list[EvalItem]:
    """One question per photo: the page's title, a receipt's total, or a letter's first id field.
    Even units are the photo alone (a document), odd ones hide it among 2-4 other photos."""
    rng, spec = ctx.rng, ctx.spec
    items = []
    for i in range(ctx.n):
        what = _WHAT[i % len(_WHAT)]
        page_box = None
        if what == "title":
            page, truth = heading_page(ctx, sections=3)
            gold, page_box = truth.spans["title"], truth.boxes["title"]
            fraction = rng.uniform(0.45, 0.6)
        elif what == "total":
            page, values, _, _ = receipt_page(ctx, rng.choice(spec.receipt_layouts))
            gold, fraction = values["total"], rng.uniform(0.3, 0.42)
        else:
            page, truth = id_letter(ctx)
            label = spec.id_fields[0].label
            gold, page_box, fraction = (
                truth.spans[label],
                truth.boxes[label],
                rng.uniform(0.5, 0.65),
            )
        shot = photograph(
            page,
            rng.choice(spec.backgrounds),
            ctx.path(f"photo_{i}.jpg"),
            rng,
            photo_width=rng.randint(1600, 2200),
            page_fraction=fraction,
        )
        box = shot.box(page_box) if page_box is not None else None
        question = spec.ask(f"photo_{what}", rng)
        target = {"title": "title", "total": "key_value", "number": "identifier"}[what]
        fields = dict(question=question, answer=gold, kind="doc", target=target, box=box)
        if i % 2 == 0:
            items.append(
                ctx.item(i, media_kind="document", media=(str(shot.path),), frames=(0,), **fields)
            )
            continue
        others = [
            save_png(resized_photo(rng, name), ctx.path(f"photo_{i}_other_{k}.png"))
            for k, name in enumerate(rng.sample(spec.photos, rng.randint(2, 4)))
        ]
        at = rng.randrange(len(others) + 1)
        others.insert(at, str(shot.path))
        items.append(ctx.item(i, media_kind="images", media=tuple(others), frames=(at,), **fields))
    return items
