"""Evidence atoms and the crops around them: a margin in line heights, text enlarged to a
readable size."""

from __future__ import annotations

from dataclasses import dataclass

from cascade.artifacts import Box, Image

__all__ = ["Atom", "pad", "enlarge"]


@dataclass(frozen=True)
class Atom:
    """One piece of evidence: where it is, how much it matters, what it is (for de-duplication)."""

    box: Box
    weight: float
    key: str
    media_index: int
    timestamp: float | None
    line_height: float | None = None  # text atoms: the smallest line's height
    candidate: bool = False  # a place the question's reader (structure, key-value) says may
    #                          hold the answer, not only text or an object that is there


def pad(a: Atom, image: Image, margin: float) -> Box:
    """`a`'s box with a margin: `margin` line heights around text, `margin` tenths of its size
    around a detection; at least one vision patch (28 px) each way, inside `image`."""
    if a.line_height is not None:
        grow_x = grow_y = margin * a.line_height
    else:
        grow_x, grow_y = 0.1 * margin * a.box.width, 0.1 * margin * a.box.height
    grow_x, grow_y = max(grow_x, (28 - a.box.width) / 2), max(grow_y, (28 - a.box.height) / 2)
    b = image.box
    return Box(
        max(b.x0, a.box.x0 - grow_x),
        max(b.y0, a.box.y0 - grow_y),
        min(b.x1, a.box.x1 + grow_x),
        min(b.y1, a.box.y1 + grow_y),
    )


def enlarge(crop: Image, atoms: list[Atom], min_text_px: int) -> Image:
    """`crop` enlarged (up to 3x) so that its smallest text line is `min_text_px` high (0 =
    never)."""
    heights = [a.line_height * crop.scale[1] for a in atoms if a.line_height]
    if not heights or not min_text_px or min(heights) >= min_text_px:
        return crop
    f = min(3.0, min_text_px / max(min(heights), 1.0))
    return crop.resized(round(crop.width * f), round(crop.height * f))
