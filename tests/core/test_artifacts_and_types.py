"""Boxes map between thumbnails, tiles and sources; port types check like Python would."""

from pathlib import Path

import numpy as np
import pytest

from cascade import Box, Frame, Image, InputError
from cascade.types import is_assignable, type_name


def _img(w=400, h=200):
    return Image(np.zeros((h, w, 3), np.uint8), source="src.png")


def test_thumbnail_and_crop_boxes_map_to_source():
    full = _img()
    thumb = full.resized(100, 50)
    assert thumb.to_source(Box(10, 10, 20, 20)) == Box(40, 40, 80, 80)
    tile = full.crop(Box(200, 0, 400, 200))
    assert tile.box == Box(200, 0, 400, 200) and tile.width == 200
    small_tile = tile.resized(50, 50)
    assert small_tile.to_source(Box(0, 0, 25, 25)) == Box(200, 0, 300, 100)
    inner = small_tile.crop(Box(300, 100, 400, 200))
    assert inner.box == Box(300, 100, 400, 200) and inner.source_size == (400, 200)


def test_frame_fields_survive_derived_views():
    f = Frame(np.zeros((20, 40, 3), np.uint8), timestamp=1.5, index=45)
    g = f.resized(10, 5).crop(Box(0, 0, 20, 10))
    assert isinstance(g, Frame) and (g.timestamp, g.index) == (1.5, 45)


def test_bad_pixels_and_files(tmp_path):
    with pytest.raises(InputError, match=r"uint8 array of shape \(H, W, 3\)"):
        Image(np.zeros((4, 4), np.uint8))
    with pytest.raises(InputError, match="image file not found"):
        Image.open(tmp_path / "nope.png")
    (tmp_path / "bad.png").write_bytes(b"not a png")
    with pytest.raises(InputError, match="cannot decode image"):
        Image.open(tmp_path / "bad.png")


def test_box_geometry():
    a, b = Box(0, 0, 10, 10), Box(5, 5, 15, 15)
    assert a.iou(b) == pytest.approx(25 / 175)
    assert a.union(b) == Box(0, 0, 15, 15)
    assert a.pad(2).clip(11, 11) == Box(0, 0, 11, 11)
    with pytest.raises(ValueError):
        Box(5, 0, 1, 1)


@pytest.mark.parametrize(
    "src, dst, ok",
    [
        (Frame, Image, True),
        (Image, Frame, False),
        (list[Frame], list[Image], True),
        (list[Image], list[Frame], False),
        (int, float, True),
        (str, Path, True),
        (str, int, False),
        (Image, Image | None, True),
        (Image | None, Image, False),
        (list[Image], list, True),
        (tuple[Frame, ...], tuple[Image, ...], True),
        (dict[str, int], dict[str, float], True),
    ],
)
def test_is_assignable(src, dst, ok):
    assert is_assignable(src, dst) is ok


def test_type_names():
    assert type_name(list[Image]) == "list[Image]"
    assert type_name(Image | None) == "Image | None"


def test_history_inputs_are_pairs_of_strings_or_their_json():
    from cascade.inputs import coerce

    assert coerce("history", "history", [["q1", "a1"], ("q2", "")]) == [("q1", "a1"), ("q2", "")]
    assert coerce("history", "history", '[["q1", "a1"]]') == [("q1", "a1")]  # a command line
    for bad, said in [
        ("[[1, 2]]", r"history'\[0\]: expected a \(question, answer\) pair"),
        ("not json", "expected a JSON list"),
        (3, "got int"),
        ([["q", "a", "extra"]], "pair of strings"),
    ]:
        with pytest.raises(InputError, match=said):
            coerce("history", "history", bad)
