"""Tiling and cropping in source coordinates: the pixels a fine look sends to a VLM or a tool."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from cascade.artifacts import Box, Detection, Image, OcrLine
from cascade.evidence.blocks import ByFrame
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record

from ._inputs import as_image_list
from .resize import fit_longest_side


def choose_grid(
    width: float, height: float, tile_size: int, min_tiles: int = 1, max_tiles: int = 12
) -> tuple[int, int]:
    """(cols, rows) whose aspect ratio is closest to the image's, among grids with
    min_tiles <= cols*rows <= max_tiles (InternVL's dynamic preprocessing rule: on a tie the larger
    grid wins only if the image has more than half the pixels the larger grid would hold)."""
    aspect = width / height
    grids = sorted(
        {
            (c, r)
            for c in range(1, max_tiles + 1)
            for r in range(1, max_tiles + 1)
            if min_tiles <= c * r <= max_tiles
        },
        key=lambda g: g[0] * g[1],
    )
    best, best_diff = (1, 1), float("inf")
    for c, r in grids:
        diff = abs(aspect - c / r)
        if diff < best_diff:
            best, best_diff = (c, r), diff
        elif diff == best_diff and width * height > 0.5 * tile_size * tile_size * c * r:
            best = (c, r)
    return best


def _starts(length: int, tile: int, overlap: int) -> list[int]:
    """Tile origins along one side: a grid, plus tiles straddling each cut when overlapping."""
    starts = list(range(0, length - tile + 1, tile))
    if overlap:
        starts += [s + tile // 2 for s in starts[:-1]]
    return sorted(starts)


def tile_image(
    image: Image,
    tile_size: int,
    min_tiles: int = 1,
    max_tiles: int = 12,
    upscale: bool = True,
    overlap: bool = False,
) -> tuple[list[Image], tuple[int, int]]:
    """Resize `image` to the chosen grid and cut it into tile_size x tile_size tiles; each tile's
    `box` is the rectangle of the source it shows. With `upscale=False` the grid holds at most
    ~1.25x the pixels the image has (a 640x480 frame is not blown up into six 448-px tiles).
    With `overlap`, extra tiles centred on every cut line are added, so anything up to half a tile
    in size that a cut goes through sits whole in one of them."""
    if not upscale:
        fits = int(1.25 * image.width * image.height / tile_size**2)
        max_tiles = max(min_tiles, min(max_tiles, fits))
    cols, rows = choose_grid(image.box.width, image.box.height, tile_size, min_tiles, max_tiles)
    big = image.resized(cols * tile_size, rows * tile_size)
    tiles = []
    for y in _starts(rows * tile_size, tile_size, overlap):
        for x in _starts(cols * tile_size, tile_size, overlap):
            local = Box(x, y, x + tile_size, y + tile_size)
            tiles.append(big.crop(big.to_source(local)))
    return tiles, (cols, rows)


@stage("tiles")
class Tiles(Stage):
    """AnyRes / InternVL-style dynamic tiling: a grid fitted to each image's aspect ratio.

    Outputs the tiles (each an Image whose box is its source rectangle), one global thumbnail per
    image (longest side `tile_size`, only when the image needs more than one tile), and `images`:
    per input image its tiles then its thumbnail, in order, ready for a VLM.
    """

    class Params(StageParams):
        tile_size: int = Field(448, gt=0, le=4096, description="side of each square tile, pixels")
        max_tiles: int = Field(12, gt=0, le=64, description="most tiles per image")
        min_tiles: int = Field(1, gt=0, le=64, description="fewest tiles per image")
        thumbnail: bool = Field(True, description="add a global thumbnail to multi-tile images")
        upscale: bool = Field(
            False,
            description="allow grids with more pixels than the image "
            "(InternVL does; it spends tokens on interpolated pixels)",
        )
        overlap: bool = Field(
            False,
            description="add tiles centred on every cut line, so text "
            "or an object a cut goes through is whole in one tile",
        )

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        tiles: list[Image]
        thumbnails: list[Image]
        images: list[Image]
        grids: list[tuple[int, int]]

    def run(self, images: list[Image] | Image) -> Outputs:
        p = self.params
        if p.min_tiles > p.max_tiles:
            raise ValueError(f"min_tiles={p.min_tiles} is larger than max_tiles={p.max_tiles}")
        all_tiles, thumbs, ordered, grids = [], [], [], []
        for im in as_image_list(images):
            tiles, grid = tile_image(
                im, p.tile_size, p.min_tiles, p.max_tiles, p.upscale, p.overlap
            )
            all_tiles += tiles
            ordered += tiles
            grids.append(grid)
            if p.thumbnail and len(tiles) > 1:
                thumb = fit_longest_side(im, p.tile_size, upscale=True)
                thumbs.append(thumb)
                ordered.append(thumb)
        record(tiles=len(all_tiles))
        return self.Outputs(all_tiles, thumbs, ordered, grids)


def merge_boxes(boxes: list[Box]) -> list[Box]:
    """Union every group of overlapping boxes until none overlap (order: top-left first)."""
    boxes = list(boxes)
    merged = True
    while merged:
        merged = False
        out: list[Box] = []
        for b in boxes:
            for i, o in enumerate(out):
                if b.intersects(o):
                    out[i] = o.union(b)
                    merged = True
                    break
            else:
                out.append(b)
        boxes = out
    return sorted(boxes, key=lambda b: (b.y0, b.x0))


def owner_of(
    images: list[Image] | ByFrame, box: Box, media_index: int, timestamp: float | None
) -> int | None:
    """Index of the image a box belongs to: same media (and frame time), largest overlap. Pass a
    `ByFrame` of the images when asking for many boxes."""
    lookup = images if isinstance(images, ByFrame) else ByFrame(images)
    return lookup.owner(box, media_index, timestamp)


@stage("crop_regions")
class CropRegions(Stage):
    """Crop the images around given boxes (OCR lines, detections, retrieved regions), padded and
    merged where they overlap; crops keep their boxes in source coordinates.

    A box goes to the image with the same media index (and, for video frames, the same
    timestamp) that it overlaps most, so boxes found on thumbnails crop the full-resolution frames.
    """

    class Params(StageParams):
        padding: float = Field(16, ge=0, description="pixels (source) added on every side")
        min_size: float = Field(32, ge=1, description="grow smaller crops to this side (source px)")
        merge: bool = Field(True, description="merge crops whose padded boxes overlap")
        max_regions: int = Field(
            32, gt=0, description="keep at most this many crops (largest first)"
        )
        min_confidence: float = Field(0.0, ge=0, le=1, description="ignore weaker OCR/detections")
        labels: list[str] | None = Field(None, description="only detections with these labels")

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        crops: list[Image]

    def run(
        self,
        images: list[Image] | Image,
        ocr_lines: list[OcrLine] | None = None,
        detections: list[Detection] | None = None,
        regions: list[Image] | None = None,
    ) -> Outputs:
        p = self.params
        imgs = as_image_list(images)
        found: list[tuple[Box, int, float | None]] = []
        for line in ocr_lines or []:
            if line.confidence >= p.min_confidence:
                found.append((line.box, line.media_index, line.timestamp))
        for det in detections or []:
            if det.confidence >= p.min_confidence and (p.labels is None or det.label in p.labels):
                found.append((det.box, det.media_index, det.timestamp))
        for reg in regions or []:
            found.append((reg.box, reg.media_index, getattr(reg, "timestamp", None)))
        per_image: dict[int, list[Box]] = {}
        for box, media_index, ts in found:
            owner = owner_of(imgs, box, media_index, ts)
            if owner is None:
                continue
            im = imgs[owner]
            grow_x = max(p.padding, (p.min_size - box.width) / 2)
            grow_y = max(p.padding, (p.min_size - box.height) / 2)
            padded = Box(box.x0 - grow_x, box.y0 - grow_y, box.x1 + grow_x, box.y1 + grow_y)
            clipped = Box(
                max(padded.x0, im.box.x0),
                max(padded.y0, im.box.y0),
                min(padded.x1, im.box.x1),
                min(padded.y1, im.box.y1),
            )
            per_image.setdefault(owner, []).append(clipped)
        crops: list[Image] = []
        for owner in sorted(per_image):
            boxes = merge_boxes(per_image[owner]) if p.merge else per_image[owner]
            crops += [imgs[owner].crop(b) for b in boxes]
        if len(crops) > p.max_regions:
            keep = sorted(range(len(crops)), key=lambda i: -crops[i].box.area)[: p.max_regions]
            crops = [crops[i] for i in sorted(keep)]
        record(crops=len(crops))
        return self.Outputs(crops)
