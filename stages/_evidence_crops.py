"""Evidence atoms and the crops around them: a margin in line heights, text enlarged to a
readable size."""

from __future__ import annotations

from dataclasses import dataclass, replace

from cascade.artifacts import Box, Image
from cascade.evidence.structure import union_box

__all__ = ["Atom", "pad", "enlarge", "pieces"]


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
    parts: tuple[Box, ...] = ()  # a row's boxes, left to right (sent apart when too wide)


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


def pieces(a: Atom) -> list[Atom]:
    """A row atom as its pieces: its parts grouped where less than 3 line heights apart (a
    receipt's item, then its price far right), each with a key of its own and the row's weight,
    a hundredth less per piece to the right (a row's key is at its left: when not all fit, the
    piece that names the row goes first), so all are sent; the row itself when it is one
    piece."""
    gap = 3 * (a.line_height or 0.0)
    groups: list[list[Box]] = []
    for b in a.parts:
        if groups and b.x0 - max(x.x1 for x in groups[-1]) <= gap:
            groups[-1].append(b)
        else:
            groups.append([b])
    if len(groups) < 2:
        return [a]
    return [
        replace(a, box=union_box(g), key=f"{a.key}#{i}", parts=(), weight=a.weight * (1 - i / 100))
        for i, g in enumerate(groups)
    ]
