"""How much a text looks like a sign of its own (a placard), not text printed on something else.

A sign is text isolated on its own plate: inside its box a uniform plate (the larger of two colour
clusters, the ink being the smaller) whose colour stops at the box's edge, so the ring of pixels
just around the box differs from the plate; and few other texts right beside it. Text printed on
a vehicle, a shirt, a screen or a poster among clutter fails one of these: the surface around
it has the plate's colour (the text's background goes on past its box), the "plate" is the
photo's texture (not uniform), or other texts crowd it. A caption drawn on footage without a
plate has the footage as its background, so it is no sign either.

`signness(image, block, others)` measures this in [0, 1] from the pixels; `sign_factors` turns it
into per-block weights for a question about a sign, relative to the most sign-like text read
(the best weighs 1, the least 1/3), so it ranks and never removes: texts all alike (all on flat
ground, or no pixels at hand) keep equal weights.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

import numpy as np

from cascade.artifacts import Box, Image

from .blocks import ByFrame, TextBlock

__all__ = ["signness", "sign_factors", "plate_contrast", "plate_key"]

# RGB distance beyond which a pixel is "not the plate's colour" (JPEG noise and shading stay
# well under it; a plate against its surroundings is far over it).
_OTHER = 48.0


def _pixels(image: Image, box: Box) -> np.ndarray:
    px = image.crop(box).pixels.reshape(-1, 3).astype(np.float32)
    if len(px) > 4096:  # a sample is as good as all of them
        px = px[np.linspace(0, len(px) - 1, 4096).astype(int)]
    return px


def _plate(px: np.ndarray) -> tuple[np.ndarray, float]:
    """(plate colour, spread of the plate's pixels): 2-means, the larger cluster is the plate."""
    luma = px @ np.array([0.299, 0.587, 0.114], np.float32)
    centres = np.stack([px[luma.argmin()], px[luma.argmax()]])
    assign = np.zeros(len(px), int)
    for _ in range(6):
        assign = ((px[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)
        centres = np.stack(
            [px[assign == k].mean(0) if (assign == k).any() else centres[k] for k in (0, 1)]
        )
    plate = int(np.bincount(assign, minlength=2).argmax())
    mine = px[assign == plate]
    spread = float(np.sqrt(((mine - centres[plate]) ** 2).sum(-1)).mean()) if len(mine) else 0.0
    return centres[plate], spread


def _ring(image: Image, box: Box, width: float) -> np.ndarray:
    """Pixels in a band `width` wide just outside `box` (clipped to the image)."""
    b = image.box
    outer = Box(
        max(b.x0, box.x0 - width),
        max(b.y0, box.y0 - width),
        min(b.x1, box.x1 + width),
        min(b.y1, box.y1 + width),
    )
    bands = [
        Box(outer.x0, outer.y0, outer.x1, box.y0),
        Box(outer.x0, box.y1, outer.x1, outer.y1),
        Box(outer.x0, box.y0, box.x0, box.y1),
        Box(box.x1, box.y0, outer.x1, box.y1),
    ]
    parts = [_pixels(image, band) for band in bands if band.width >= 1 and band.height >= 1]
    return np.concatenate(parts) if parts else np.zeros((0, 3), np.float32)


def plate_contrast(image: Image, block: TextBlock) -> float:
    """The pixels' part of `signness`: the share of the ring around the block's box that is
    *not* the plate's colour (the plate measured in the box's core, between the glyphs), times
    how uniform the plate is. Depends on the image and the block's box only."""
    inset = 0.25 * block.line_height  # an OCR box is padded past the glyphs (for a sign: past
    box = block.box  # its plate too): the plate is measured in the glyphs' core only
    roomy = box.width >= 2 * inset + 2 and box.height >= 2 * inset + 2  # else: the whole box
    core = Box(box.x0 + inset, box.y0 + inset, box.x1 - inset, box.y1 - inset) if roomy else box
    px = _pixels(image, core)
    if len(px) < 4:
        return 0.0
    colour, spread = _plate(px)
    ring = _ring(image, block.box, max(3.0, 0.5 * block.line_height))
    if not len(ring):  # the text fills the image: nothing around it to tell a plate from
        return 0.0
    apart = float((np.sqrt(((ring - colour) ** 2).sum(-1)) > _OTHER).mean())
    return apart * float(np.exp(-spread / 40.0))


def plate_key(image: Image, block: TextBlock) -> str:
    """What `plate_contrast` depends on, as a key: the image's content and the block's box."""
    b = block.box
    return f"{image.__content_hash__()}|{b.x0!r},{b.y0!r},{b.x1!r},{b.y1!r}|{block.line_height!r}"


def signness(
    image: Image,
    block: TextBlock,
    others: Sequence[TextBlock] = (),
    contrast: float | None = None,
) -> float:
    """In [0, 1]: how much `block` looks like a sign on its own plate in `image` (see the module
    docstring): `plate_contrast` (given as `contrast` when known) times 1 / (1 + texts within
    two line heights of it)."""
    if contrast is None:
        contrast = plate_contrast(image, block)
    reach = 2.0 * block.line_height
    near = Box(
        block.box.x0 - reach, block.box.y0 - reach, block.box.x1 + reach, block.box.y1 + reach
    )
    crowd = sum(
        1
        for o in others
        if o is not block
        and o.media_index == block.media_index
        and o.timestamp == block.timestamp
        and o.box.intersects(near)
        and not o.box.intersects(block.box)
    )
    return contrast / (1.0 + crowd)


def sign_factors(
    blocks: list[TextBlock] | tuple[TextBlock, ...],
    frames: ByFrame,
    plates: MutableMapping[str, float] | None = None,
) -> tuple[dict[TextBlock, float], dict[TextBlock, float]]:
    """(weight, signness) per block: weight (0.5 + s) / (0.5 + best s), so the most sign-like
    text read weighs 1 and the least 1/3; a block whose image is not at hand measures 0.
    plates: `plate_contrast` by `plate_key`, read and filled (a video's index keeps them, so a
    question does not measure every frame's texts again)."""
    per_frame: dict[tuple, list[TextBlock]] = {}
    for b in blocks:  # neighbours are looked up in the block's own frame only
        per_frame.setdefault((b.media_index, b.timestamp), []).append(b)
    measured = {}
    for b in blocks:
        owner = frames.owner(b.box, b.media_index, b.timestamp)
        if owner is None:
            measured[b] = 0.0
            continue
        image = frames.images[owner]
        contrast = None
        if plates is not None:
            key = plate_key(image, b)
            contrast = plates.get(key)
            if contrast is None:
                contrast = plates[key] = plate_contrast(image, b)
        measured[b] = signness(image, b, per_frame[(b.media_index, b.timestamp)], contrast)
    best = max(measured.values(), default=0.0)
    return {b: (0.5 + s) / (0.5 + best) for b, s in measured.items()}, measured
