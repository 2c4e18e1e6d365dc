"""tiles / crop_regions: grids, source rectangles, padding and merging."""

from __future__ import annotations

import numpy as np
import pytest

from cascade.artifacts import Box, Detection, Frame, Image, OcrLine
from cascade.stages.tiles import choose_grid, merge_boxes


@pytest.mark.parametrize(
    "size,grid",
    [
        ((1920, 1080), (4, 2)),
        ((960, 540), (2, 1)),
        ((810, 1080), (3, 4)),
        ((448, 448), (1, 1)),
        ((4000, 500), (8, 1)),
        ((1344, 448), (3, 1)),
    ],
)
def test_grid_follows_aspect_ratio(size, grid):
    assert choose_grid(*size, tile_size=448, max_tiles=12) == grid


def test_tiles_cover_source_exactly(stage, bus_path):
    bus = Image.open(bus_path)
    out = stage("tiles", tile_size=224, max_tiles=6)(images=bus)
    cols, rows = out.grids[0]
    assert cols * rows == len(out.tiles) <= 6
    assert all(t.pixels.shape == (224, 224, 3) for t in out.tiles)
    assert sum(t.box.area for t in out.tiles) == pytest.approx(810 * 1080)
    assert (out.tiles[-1].box.x1, out.tiles[-1].box.y1) == pytest.approx((810, 1080))
    assert (
        len(out.thumbnails) == 1 and max(out.thumbnails[0].width, out.thumbnails[0].height) == 224
    )
    assert out.images == out.tiles + out.thumbnails
    # a tile is the source region it claims: compare with a direct crop+resize of the source
    t = out.tiles[1]
    ref = bus.crop(t.box).resized(224, 224)
    assert np.abs(ref.pixels.astype(int) - t.pixels.astype(int)).mean() < 6


def test_tiles_of_frames_keep_timestamps(stage):
    f = Frame(np.zeros((100, 400, 3), np.uint8), timestamp=3.5, index=35)
    out = stage("tiles", tile_size=100, max_tiles=4)(images=[f])
    assert out.grids == [(4, 1)] and all(t.timestamp == 3.5 for t in out.images)


def test_merge_boxes():
    merged = merge_boxes(
        [Box(0, 0, 10, 10), Box(5, 5, 20, 20), Box(50, 50, 60, 60), Box(19, 19, 30, 30)]
    )
    assert merged == [Box(0, 0, 30, 30), Box(50, 50, 60, 60)]


def test_crop_regions_pads_merges_and_maps_to_source(stage):
    full = Frame(
        np.arange(400 * 600 * 3, dtype=np.uint32).reshape(400, 600, 3).astype(np.uint8),
        timestamp=2.0,
        source="v.mp4",
    )
    other = Frame(np.zeros((400, 600, 3), np.uint8), timestamp=9.0, source="v.mp4")
    lines = [
        OcrLine("A", 0.9, Box(100, 100, 150, 120), timestamp=2.0),
        OcrLine("B", 0.9, Box(160, 100, 200, 120), timestamp=2.0),  # overlaps A once padded
        OcrLine("C", 0.9, Box(500, 300, 510, 305), timestamp=2.0),
        OcrLine("elsewhere", 0.9, Box(0, 0, 10, 10), timestamp=5.0),
    ]  # frame not given
    dets = [Detection("dog", 0.2, Box(300, 10, 320, 30), timestamp=9.0)]
    out = stage("crop_regions", padding=10, min_size=32, min_confidence=0.5)(
        images=[full, other], ocr_lines=lines, detections=dets
    )
    assert [c.box for c in out.crops] == [
        Box(90, 90, 210, 130),
        Box(489, 286, 521, 319),
    ]  # snapped to whole pixels
    c = out.crops[0]
    assert c.timestamp == 2.0 and c.source == "v.mp4"
    np.testing.assert_array_equal(c.pixels, full.pixels[90:130, 90:210])


def test_crop_regions_from_low_res_boxes_crop_full_res(stage):
    full = Frame(np.zeros((480, 640, 3), np.uint8), timestamp=1.0)
    small = full.resized(160, 120)
    box_on_small = small.to_source(Box(40, 30, 80, 60))  # -> source coordinates
    out = stage("crop_regions", padding=0)(images=[full], regions=[small.crop(box_on_small)])
    assert out.crops[0].box == Box(160, 120, 320, 240)
    assert out.crops[0].pixels.shape == (120, 160, 3)


@pytest.mark.parametrize("params", [{"tile_size": 0}, {"max_tiles": 100}, {"tilesize": 4}])
def test_tiles_bad_params(stage, params):
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        stage("tiles", **params)


def test_tiles_min_over_max_is_an_error(stage):
    with pytest.raises(ValueError, match="min_tiles=5 is larger than max_tiles=2"):
        stage("tiles", min_tiles=5, max_tiles=2)(images=Image(np.zeros((8, 8, 3), np.uint8)))


def test_overlapping_tiles_hold_every_box_a_cut_goes_through(stage):
    im = Image(np.zeros((448, 896, 3), np.uint8))
    plain = stage("tiles", tile_size=448, max_tiles=2)(images=im).tiles
    over = stage("tiles", tile_size=448, max_tiles=2, overlap=True)(images=im).tiles
    sign = Box(400, 200, 500, 230)  # across the cut at x=448
    inside = lambda t: t.box.x0 <= sign.x0 and t.box.x1 >= sign.x1  # noqa: E731
    assert not any(inside(t) for t in plain)
    assert len(over) == 3 and any(inside(t) for t in over)


def test_by_frame_finds_the_image_a_finding_belongs_to_like_a_scan_does():
    from cascade.artifacts import FRAME_TIME_TOLERANCE
    from cascade.evidence.blocks import ByFrame

    px = np.zeros((20, 40, 3), np.uint8)
    # many frames, a tile pair on one of them, timestamps that sit on a bucket edge
    frames = [Frame(px, timestamp=t * 0.5, index=t) for t in range(200)]
    edge = 7 * FRAME_TIME_TOLERANCE + FRAME_TIME_TOLERANCE / 2
    left = Frame(px, box=Box(0, 0, 20, 20), timestamp=edge, index=999)
    right = Frame(px, box=Box(20, 0, 40, 20), timestamp=edge, index=999)
    images = frames + [left, right, Image(px, media_index=1)]
    lookup = ByFrame(images)
    box = Box(25, 2, 39, 10)

    def scan(media, t):
        return [i for i, im in enumerate(images) if im.is_from(media, t)]

    for media, t in [
        (0, 3.0),
        (0, edge + FRAME_TIME_TOLERANCE * 0.9),
        (0, edge - 1e-5),
        (0, None),
        (1, 2.0),
        (1, None),
        (2, 1.0),
    ]:
        assert lookup.of(media, t) == scan(media, t)
    assert lookup.owner(box, 0, edge + 1e-5) == images.index(right)
    assert lookup.owner(box, 1, 123.0) == len(images) - 1  # an image (no time) owns any frame time
    assert lookup.source_size(0, 3.0) == (40, 20) and lookup.source_size(5, None) is None
