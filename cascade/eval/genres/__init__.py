"""One generator per genre. Each takes a `Ctx` (the split's spec, a seeded rng of its own, a folder
and how many units to make) and returns its questions; a unit (a video, a page, an image set) may
carry more than one question."""

from __future__ import annotations

from collections.abc import Callable

from ..items import EvalItem
from .attributes import colour, time_order
from .chinese import zh_question, zh_sign
from .code import code
from .common import Ctx
from .documents import heading, ids, paragraph, table
from .photo_docs import photo_doc
from .receipts import receipt, zh_receipt
from .router import router
from .signs import image_sign, long_video, video_sign

# genre -> (generator, units in the full split, units with --quick)
GENERATORS: dict[str, tuple[Callable[[Ctx], list[EvalItem]], int, int]] = {
    "video_sign": (video_sign, 10, 2),
    "image_sign": (image_sign, 10, 2),
    "receipt": (receipt, 4, 1),
    "router": (router, 8, 2),
    "heading": (heading, 5, 1),
    "table": (table, 5, 1),
    "code": (code, 10, 2),
    "paragraph": (paragraph, 5, 1),
    "ids": (ids, 5, 1),
    "zh_sign": (zh_sign, 10, 2),
    "zh_receipt": (zh_receipt, 4, 1),
    "zh_question": (zh_question, 10, 3),
    "colour": (colour, 10, 2),
    "time_order": (time_order, 10, 2),
    "photo_doc": (photo_doc, 10, 3),
    "long_video": (long_video, 10, 1),
}

__all__ = ["GENERATORS", "Ctx"]
