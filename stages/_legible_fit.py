"""Evidence crops fitted into a visual-token budget without their text going illegible: all the
equally plausible units shrunk by one factor, or the best unit alone with the budget raised."""

from __future__ import annotations

from cascade.artifacts import Image
from cascade.vlm.families.base import Family

from ._evidence_crops import Atom

__all__ = ["shrunk_to_fit", "legible_within"]


def _tokens(family: Family, image: Image) -> int:
    return family.visual_tokens(image.width, image.height)


def shrunk_to_fit(
    ranked: list[tuple[Image, list[Atom], float]],
    plausible: set[str],
    budget: int,
    family: Family,
    max_tiles: int,
    legible_px: int,
) -> tuple[list[tuple[Image, float]], int, float] | None:
    """The best crops that together hold every plausible unit, all shrunk by one factor to
    fit `budget` (each cut again to a size the processor keeps); None when they are more
    than `max_tiles` or their smallest text line would end under `legible_px`."""
    picks, covered = list[tuple[Image, list[Atom], float]](), set[str]()
    for crop, held, bonus in ranked:
        new = {a.key for a in held} & plausible - covered
        if new:
            picks.append((crop, held, bonus))
            covered |= new
    if covered != plausible or len(picks) > max_tiles:
        return None
    f = min(1.0, (budget / sum(_tokens(family, c) for c, _, _ in picks)) ** 0.5)
    while True:
        shrunk = [
            crop.resized(
                *family.native_size(max(1, round(crop.width * f)), max(1, round(crop.height * f)))
            )
            for crop, _, _ in picks
        ]
        spent = sum(_tokens(family, c) for c in shrunk)
        text = [
            a.line_height * c.scale[1]
            for c, (_, held, _) in zip(shrunk, picks, strict=False)
            for a in held
            if a.key in plausible and a.line_height
        ]
        if f < 0.25 or text and min(text) < legible_px:
            return None  # a quarter of the size: no longer the same evidence
        if spent <= budget:
            return (
                [
                    (c, sum(a.weight for a in held) + bonus)
                    for c, (_, held, bonus) in zip(shrunk, picks, strict=False)
                ],
                spent,
                f,
            )
        f *= 0.95


def legible_within(
    crop: Image, held: list[Atom], budget: int, family: Family, legible_px: int, budget_cap: int
) -> tuple[Image, str]:
    """The best crop, alone over the budget, made to fit it: shrunk no further than its
    smallest text line stays `legible_px` high, the budget raised for that up to
    `budget_cap`; only a unit over even the cap at a legible size is shrunk further (the
    route says so)."""
    heights = [a.line_height * crop.scale[1] for a in held if a.line_height]
    f = (budget / _tokens(family, crop)) ** 0.5
    note = ""
    if heights and min(heights) * f < legible_px:
        legible = min(1.0, legible_px / min(heights))
        scaled = crop.resized(
            max(1, round(crop.width * legible)), max(1, round(crop.height * legible))
        )
        if _tokens(family, scaled) <= max(budget_cap, budget):
            return scaled, (
                f"; the best unit kept legible: budget raised from {budget} to "
                f"{_tokens(family, scaled)} visual tokens (cap {budget_cap})"
            )
        note = f"; the best unit does not fit the cap ({budget_cap}) at a legible size"
    crop = crop.resized(max(1, int(crop.width * f)), max(1, int(crop.height * f)))
    while _tokens(family, crop) > budget and min(crop.width, crop.height) > 28:
        crop = crop.resized(int(crop.width * 0.9), int(crop.height * 0.9))
    return crop, note
