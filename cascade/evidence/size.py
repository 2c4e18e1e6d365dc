"""The size a question names ("the small sign", "the big banner", "小牌子"), measured on the text.

A block's *print size* is the font size of its smallest line (its width per character: an OCR
box's height is padded, more for small text) over its frame's shorter side (in pixels when a
frame's size is unknown), so a 16-px plate in a 1600-px photo is smaller than a
16-px caption in an 800-px one. "Small" fits the blocks printed within `STANDS_OUT` of the
smallest one seen, "big" those within it of the largest: each gets weight 1, and a block printed
`r` times off that size gets `(STANDS_OUT / r) ** 2` (2x the smallest: 0.49, 3x: 0.22; never
under 0.1). A text printed smaller than "small" (r < 1: faint glyphs in a photo's texture, left
out of the reference when their salience is low) fits too. Two texts
of a similar size both fit (recall first: both are sent); a clearly larger caption falls under the
half of the best's weight that `select_tiles` sends. Size ranks, it never removes: a caption the
question did not mean is still evidence when nothing else was read.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass

from .blocks import ByFrame, TextBlock
from .signness import sign_factors

__all__ = ["STANDS_OUT", "SizeFit", "print_size", "size_fit", "text_fit"]

# Print this much larger (or smaller) stands out; the same ratio picks "the big banner" anchor.
STANDS_OUT = 1.4


def _ems(text: str) -> float:
    """How many font sizes wide a line of `text` is: a Chinese character is about one, a Latin
    letter, digit or space about 0.6 (DejaVu, STIX and Computer Modern alike, within ~20 %)."""
    han = sum("\u4e00" <= ch <= "\u9fff" for ch in text)
    return max(han + 0.6 * (len(text.strip()) - han), 0.6)


def print_size(block: TextBlock, frame: tuple[int, int] | None) -> float:
    """The font size of the block's smallest line, from its width per character (an OCR box's
    height is padded: a 16-px plate and a 40-px caption read 34 and 45 px high), over its
    frame's shorter side (pixels when the frame's size is unknown)."""
    size = min(line.box.width / _ems(line.text) for line in block.lines)
    return size / (min(frame) if frame else 1.0)


@dataclass(frozen=True)
class SizeFit:
    """Per block, how well its print size fits the asked size (1 = fits), and why."""

    weights: dict[TextBlock, float]
    reason: str = ""
    sized: dict[TextBlock, float] | None = None  # the size part alone, when weights hold more

    def of(self, block: TextBlock) -> float:
        return self.weights.get(block, 1.0)

    @property
    def contrast(self) -> bool:
        """Some text fits the size and some clearly does not: the size singles texts out."""
        sized = self.weights if self.sized is None else self.sized
        return any(w >= 1.0 for w in sized.values()) and any(w < 0.5 for w in sized.values())


def size_fit(
    size: str | None,
    blocks: list[TextBlock] | tuple[TextBlock, ...],
    frames: ByFrame | None = None,
    strength: dict[TextBlock, float] | None = None,
    plates: MutableMapping[str, float] | None = None,
) -> SizeFit:
    """How each block fits `size` ('small' / 'big'; None: every block fits), relative to the
    others (see the module docstring). With `strength` (each block's salience), the smallest /
    largest is taken among the blocks at least half as strong as the strongest, so a couple of
    faint glyphs misread in a photo's texture do not set what "small" is."""
    if size is None or not blocks:
        return SizeFit({b: 1.0 for b in blocks})
    lookup = frames if frames is not None else ByFrame(None)
    known = {b: lookup.source_size(b.media_index, b.timestamp) for b in blocks}
    relative = all(known.values())  # one frame of unknown size: compare pixels, not shares
    sizes = {b: print_size(b, known[b] if relative else None) for b in blocks}
    top = max(strength.values(), default=0.0) if strength else 0.0
    real = [sizes[b] for b in blocks if not strength or strength.get(b, 0.0) >= 0.5 * top]
    ref = min(real) if size == "small" else max(real)
    weights = {}
    for b, s in sizes.items():
        r = s / ref if size == "small" else ref / max(s, 1e-9)
        weights[b] = 1.0 if r <= STANDS_OUT else max(0.1, (STANDS_OUT / r) ** 2)
    fits = [b for b in blocks if weights[b] >= 1.0]
    others = len({b.text for b in blocks} - {b.text for b in fits})
    shown = f"{100 * ref:.1f} % of the frame's side" if relative else f"{ref:.0f} px"
    word = "smallest" if size == "small" else "largest"
    reason = (
        f"size {size}: {len({b.text for b in fits})} text(s) printed {word} "
        f"('{fits[0].text}', font {shown})"
        + (
            f", first of {len({b.text for b in blocks})}; {others} other(s) ranked after"
            if others
            else ", none stands out by size"
        )
    )
    return SizeFit(weights, reason)


def text_fit(
    query,
    blocks: list[TextBlock] | tuple[TextBlock, ...],
    frames: ByFrame,
    strength: dict[TextBlock, float] | None = None,
    plates: MutableMapping[str, float] | None = None,
) -> SizeFit:
    """The one place the texts read are ranked for what a `Query` says about them, for
    `retrieve`, `find_evidence` and `select_tiles` alike: the size it names (`size_fit`; none
    for a document target, where "small" is a word, not a print size) times, for a question
    about a sign, how much each text stands on a plate of its own (`signness.sign_factors`), so
    a placard ranks above a brand on a vehicle, a shirt or a screen among clutter. `contrast`
    still means the size alone singles texts out. The reason names the text ranked first.
    plates: the measured plates, read and filled (`signness.sign_factors`)."""
    in_document = query is None or query.in_document
    fit = size_fit(None if in_document else query.size, blocks, frames, strength)
    if in_document or query.target != "sign" or len(blocks) < 2:
        return fit
    factors, measured = sign_factors(blocks, frames, plates)
    if max(measured.values()) - min(measured.values()) < 0.05:
        return fit  # all alike: sign-ness tells nothing
    weights = {b: fit.of(b) * factors[b] for b in blocks}
    top = max(blocks, key=lambda b: (weights[b] * (strength or {}).get(b, 1.0), measured[b]))
    plain = sum(1 for b in blocks if measured[b] < 0.5 * measured[top])
    why = (
        f"sign-ness: '{top.text}' stands on its own plate ({measured[top]:.2f}); {plain} "
        f"text(s) printed on something else or among other texts ranked lower"
    )
    return SizeFit(weights, "; ".join(filter(None, (fit.reason, why))), sized=fit.weights)
