"""Tables: rows and columns from a table model or the alignment of OCR boxes, and the cell at row
key x column key.

A table is the lines inside a layout `table` region, or, where the layout model found none, a run
of rows of two or more aligned lines (a price list, a key-value form). Where the layout stage ran
the table model (`table_model`: SLANet-plus), its `table_cell` regions give the rows, columns and
cells (a cell's wrapped lines are one cell, a spanning header names every column under it) and
each OCR line goes into the cell holding it; when the model's cells disagree with the text
(`table_model.grid`'s rule) or there are none, the table is read by box alignment: rows are
lines whose vertical extents overlap; columns are the horizontal extents that the fullest rows'
cells share, every other cell joining the column it overlaps most. The header row is the top
row unless it reads like data (as numeric as the rows below); the key column is the leftmost
column that is mostly words, not numbers; a lone line over the cells is the table's caption,
not a row.
`Table.cells_for(row_key, column_key)` matches the keys fuzzily but exactly about digits
(`textmatch.key_match`), in either orientation; `Table.cell` answers only when exactly one cell
fits. `cells_named_in(question)` serves questions whose keys were not picked out: the cells whose
row and column keys the question names in full.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cascade.artifacts import Box, LayoutRegion, OcrLine

from . import spans
from .relevance import RelevanceModel, best_by_meaning
from .structure import Located, Page, pages, reading_order, union_box
from .table_model import CELL, HEADER_CELL, grid
from .textmatch import CONTAINED, digit_runs, key_match, named_in, same_word, words

__all__ = ["Table", "Cell", "tables", "table_cell", "cells_named_in", "with_cell_value"]

MIN_KEY_MATCH = 0.6  # least key_match score of a row or column key
MAX_MEANT = 3  # rows and columns sent when the question names them only by meaning
_NUMERIC = re.compile(r"^[\s$€£¥￥%+\-–−.,:/()\d]*\d[\s$€£¥￥%+\-–−.,:/()\d]*[A-Za-z元%]{0,3}$")


def _is_numeric(text: str) -> bool:
    return bool(_NUMERIC.match(text.strip()))


@dataclass(frozen=True)
class Cell(Located):
    """A table cell: `text` is the cell's own text, `boxes` the cell, its row key and its
    column key (those present), so a crop shows what the value belongs to."""

    row: int = 0
    column: int = 0
    row_key: str = ""
    column_key: str = ""


@dataclass(frozen=True)
class Table:
    """A grid of OCR lines: `grid[r][c]` the lines of row r, column c (none where the cell is
    empty), as OCR gave them: boxes in source pixels."""

    grid: tuple[tuple[tuple[OcrLine, ...], ...], ...]
    box: Box
    media_index: int = 0
    timestamp: float | None = None
    header_row: int | None = 0
    key_column: int = 0
    header_rows: int = 1  # rows from `header_row` on that name the columns (a spanning head)
    source: str = "alignment"  # or "model": who found the rows and columns

    @property
    def n_rows(self) -> int:
        return len(self.grid)

    @property
    def n_columns(self) -> int:
        return len(self.grid[0]) if self.grid else 0

    def text(self, row: int, column: int) -> str:
        return " ".join(ln.text.strip() for ln in self.grid[row][column])

    def cell_box(self, row: int, column: int) -> Box | None:
        cell = self.grid[row][column]
        return union_box(ln.box for ln in cell) if cell else None

    def in_header(self, row: int) -> bool:
        return self.header_row is not None and 0 <= row - self.header_row < self.header_rows

    def column_name(self, column: int) -> str:
        """The header's text over `column`: its header rows' texts top down, each once ('General
        Practitioners' spanning five columns, then 'agree')."""
        if self.header_row is None:
            return ""
        rows = range(self.header_row, self.header_row + self.header_rows)
        return " ".join(dict.fromkeys(t for r in rows if (t := self.text(r, column))))

    def column_box(self, column: int) -> Box | None:
        if self.header_row is None:
            return None
        rows = range(self.header_row, self.header_row + self.header_rows)
        boxes = [b for r in rows if (b := self.cell_box(r, column)) is not None]
        return union_box(boxes) if boxes else None

    def _keys(self, key: str, along: str) -> list[tuple[float, int]]:
        """(score, index) of the rows (along='row': cells of the key column) or columns
        (along='column': cells of the header row) that `key` names, best tier only."""
        if along == "row":
            texts = [
                (r, self.text(r, self.key_column))
                for r in range(self.n_rows)
                if not self.in_header(r) and not self.is_section(r)
            ]
        elif self.header_row is None:
            return []
        else:
            texts = [
                (c, self.column_name(c)) for c in range(self.n_columns) if c != self.key_column
            ]
        scored = [(max(key_match(key, t), _same_day(key, t)), i) for i, t in texts]
        best = max((s for s, _ in scored), default=0.0)
        if best < MIN_KEY_MATCH:
            return []
        tied = [(s, i) for s, i in scored if s >= best - 1e-9]
        if along == "row" and len(tied) > 1:  # 'RS model for income in urban areas'
            fit = {i: _context_fit(key, self.row_context(i)) for _, i in tied}
            tied = [(s, i) for s, i in tied if fit[i] >= max(fit.values())]
        return tied

    def is_section(self, row: int) -> bool:
        """A row of one text across a table of 3+ columns ('urban' over the urban rows): it
        names the rows under it, it holds no values."""
        texts = [t for c in range(self.n_columns) if (t := self.text(row, c))]
        one = len(set(texts)) == 1 and len(texts) in (1, self.n_columns)  # spanning: in each
        return self.n_columns >= 3 and one

    def row_context(self, row: int) -> str:
        """What names a row in full: the section row over it, the texts left of its key that it
        shares with the rows above (a group's name written once: 'income' over three models)
        and its own texts that are not figures ('urban', 'income', 'RS'), each once."""
        above = [r for r in range(row - 1, -1, -1) if not self.in_header(r)]
        sections = [r for r in above if self.is_section(r)]
        section = self.text(sections[0], 0) or self.text(sections[0], 1) if sections else ""
        inside = above[: above.index(sections[0])] if sections else above  # this section's
        group = [
            next((t for r in inside if (t := self.text(r, c))), "") if not self.text(row, c) else ""
            for c in range(self.key_column)
        ]
        own = [self.text(row, c) for c in range(self.n_columns)]
        texts = (section, *group, *own)
        return " ".join(dict.fromkeys(t for t in texts if t and not _is_numeric(t)))

    def cells_for(self, row_key: str, column_key: str | None = None) -> list[Cell]:
        """Every cell that fits: the row `row_key` names (in the key column) x the column
        `column_key` names (in the header row), or the same with the keys swapped. With no column
        key, the row's one value when the table has a single value column."""
        found: dict[tuple[int, int], Cell] = {}
        orientations = [(row_key, column_key)]
        if column_key is not None:
            orientations.append((column_key, row_key))
        for rk, ck in orientations:
            rows = self._keys(rk, "row")
            if ck is not None:
                columns = self._keys(ck, "column")
            else:
                values = [c for c in range(self.n_columns) if c != self.key_column]
                columns = [(1.0, values[0])] if len(values) == 1 else []
            for rs, r in rows:
                for cs, c in columns:
                    cell = self._cell(r, c, min(rs, cs))
                    if cell is not None:
                        found.setdefault((r, c), cell)
        best = max((c.score for c in found.values()), default=0.0)
        return [c for c in found.values() if c.score >= best - 1e-9]

    def cells_named_in(self, question: str) -> list[Cell]:
        """The cells whose row key and column key the question both names in full ('When does
        Train 107 leave Mill Lane?': row 'Train 107' x column 'Mill Lane'), for questions whose
        keys were not picked out; the most specific keys win, several cells may remain."""
        rows = [
            (_row_named(self.text(r, self.key_column), question), r)
            for r in range(self.n_rows)
            if not self.in_header(r) and not self.is_section(r)
        ]
        if self.header_row is not None:
            columns = [
                (named_in(self.column_name(c), question), c)
                for c in range(self.n_columns)
                if c != self.key_column
            ]
        else:
            values = [c for c in range(self.n_columns) if c != self.key_column]
            columns = [(1, values[0])] if len(values) == 1 else []
        rows, columns = _most_named(rows), _most_named(columns)
        return [
            cell
            for _, r in rows
            for _, c in columns
            if (cell := self._cell(r, c, CONTAINED)) is not None
        ]

    def cell(self, row_key: str, column_key: str | None = None) -> Cell | None:
        """The one cell at row_key x column_key; None when none or several fit (abstain)."""
        found = self.cells_for(row_key, column_key)
        return found[0] if len(found) == 1 else None

    def cells_by_meaning(self, question: str, relevance: RelevanceModel | None) -> list[Cell]:
        """The cells of the rows the question names in full (`named_in`) x the column whose
        header means what it asks ('How much does the Deluxe kettle cost?': 'Price'; 'How heavy
        ...': 'Weight'), for questions whose words name no column. Several columns as near
        the best: all of them (leads). [] without a model or a header row."""
        if relevance is None or self.header_row is None:
            return []
        rows = _most_named(
            [
                (_row_named(self.text(r, self.key_column), question), r)
                for r in range(self.n_rows)
                if not self.in_header(r) and not self.is_section(r)
            ]
        )
        values = [c for c in range(self.n_columns) if c != self.key_column]
        texts = [self.column_name(c) for c in values]
        if not rows or not any(texts):
            return []
        picked = best_by_meaning(question, texts, relevance)
        return [
            cell
            for _, r in rows
            for i in picked
            if (cell := self._cell(r, values[i], 0.5)) is not None
        ]

    def cells_meant(self, question: str, relevance: RelevanceModel | None) -> list[Located]:
        """The cells of the rows whose names mean what the question names, in other words ('R&D'
        for 'Research and development'; '主卫贴墙砖' for '墙砖铺贴 300×600' under '主卫') x the
        columns whose headers mean what it asks, at most MAX_MEANT of each (the rows whole, where
        no header means it): for questions that name neither key in the table's words. [] without
        a model or a header row."""
        if relevance is None or self.header_row is None:
            return []
        rows = [
            r
            for r in range(self.n_rows)
            if not self.in_header(r) and not self.is_section(r) and self.text(r, self.key_column)
        ]
        values = [c for c in range(self.n_columns) if c != self.key_column and self.column_name(c)]
        if not rows or not values:
            return []
        # a row by all that names it (its section, its texts): a key alone says too little
        meant_rows = best_by_meaning(question, [self.row_context(r) for r in rows], relevance)
        meant_columns = best_by_meaning(question, [self.column_name(c) for c in values], relevance)
        if not meant_columns:  # no header means what is asked: the rows meant, whole
            return [self._row(rows[i]) for i in meant_rows[:MAX_MEANT]]
        return [
            cell
            for i in meant_rows[:MAX_MEANT]
            for j in meant_columns[:MAX_MEANT]
            if (cell := self._cell(rows[i], values[j], 0.3)) is not None
        ]

    def _row(self, row: int) -> Located:
        cells = [c for c in range(self.n_columns) if self.grid[row][c]]
        box = union_box(b for c in cells if (b := self.cell_box(row, c)) is not None)
        text = " ".join(dict.fromkeys(self.text(row, c) for c in cells))
        return Located(text, "row", (box,), self.media_index, self.timestamp, 0.3)  # one unit

    def _cell(self, row: int, column: int, score: float) -> Cell | None:
        box = self.cell_box(row, column)
        if box is None:
            return None
        keys = [self.cell_box(row, self.key_column), self.column_box(column)]
        return Cell(
            self.text(row, column),
            "cell",
            (box, *[b for b in keys if b is not None]),
            self.media_index,
            self.timestamp,
            score,
            row,
            column,
            self.text(row, self.key_column),
            self.column_name(column),
        )


def _row_named(key: str, question: str) -> int:
    """How many words of a row's key the question names (`named_in`); 1 for a date key the
    question names in other words ('2026-12-03' for '12月3日')."""
    return named_in(key, question) or int(_same_day(question, key) > 0)


def _same_day(key: str, text: str) -> float:
    """CONTAINED when `text` is one date (a row's key) and `key` names that day: the same month
    and day, and the same year where both give one; else 0. Dates are matched by value, since
    a question writes them its own way."""
    days = [_ymd(s.value) for s in spans.candidates(text, "date")]
    if len(days) != 1 or days[0] is None:
        return 0.0
    year, day = days[0]
    named = [ymd for s in spans.candidates(key, "date") if (ymd := _ymd(s.value)) is not None]
    same = any(d == day and (not y or not year or y == year) for y, d in named)
    return CONTAINED if same else 0.0


def _ymd(value: str) -> tuple[str, str] | None:
    """(year or '', 'month-day') of a date span's value (`spans`); None for a month alone, or
    a day whose order is unsure ('?3-12-26')."""
    if value.startswith("?"):
        return None
    year, month, day = value.split("-")
    return (year, f"{month}-{day}") if month and day else None


def _context_fit(key: str, context: str) -> float:
    """How fully a row's context is what the key says: the key's words it holds, less half of
    its words the key does not say (ties among rows the key names alike are broken by it)."""
    kw, cw = words(key), words(context)
    held = sum(any(same_word(k, c) for c in cw) for k in kw)
    extra = sum(not any(same_word(c, k) for k in kw) for c in cw)
    return held - 0.5 * extra


def with_cell_value(found: Located, in_tables: Sequence[Table]) -> Located | None:
    """A label the sentence reader found in a cell of a table the model read ('Transport time
    用车时间' on a form): the whole cell, which may hold the value under its label, and the next
    filled cell on its row, where the value is when it is not in the label's cell. None when the
    label is in no such cell."""
    box = found.boxes[0]
    for t in in_tables:
        if t.source != "model" or (t.media_index, t.timestamp) != (
            found.media_index,
            found.timestamp,
        ):
            continue
        for r in range(t.n_rows):
            for c in range(t.n_columns):
                if not any(ln.box == box for ln in t.grid[r][c]):
                    continue
                own, cell_box = t.text(r, c), t.cell_box(r, c)
                after = [
                    (t.text(r, k), t.cell_box(r, k))
                    for k in range(c + 1, t.n_columns)
                    if t.text(r, k) and t.text(r, k) != own
                ]
                boxes = [b for b in (cell_box, *(b for _, b in after[:1])) if b is not None]
                text = " ".join([own, *(x for x, _ in after[:1])])
                return Located(
                    text, found.kind, tuple(boxes), found.media_index, found.timestamp, found.score
                )
    return None


def _most_named(scored: list[tuple[int, int]]) -> list[tuple[int, int]]:
    best = max((s for s, _ in scored), default=0)
    return [(s, i) for s, i in scored if s == best] if best else []


def _rows(lines: list[OcrLine]) -> list[list[OcrLine]]:
    rows: list[list[OcrLine]] = []
    for ln in reading_order(lines):
        if rows and _overlaps_row(rows[-1], ln):
            rows[-1].append(ln)
        else:
            rows.append([ln])
    return rows


def _overlaps_row(row: list[OcrLine], line: OcrLine) -> bool:
    y0 = statistics.median(ln.box.y0 for ln in row)
    y1 = statistics.median(ln.box.y1 for ln in row)
    overlap = min(y1, line.box.y1) - max(y0, line.box.y0)
    return overlap >= 0.5 * min(y1 - y0, line.box.height)


def _columns(rows: list[list[OcrLine]]) -> list[tuple[float, float]]:
    """Column extents: the union of overlapping cell extents of the rows with the most cells."""
    most = max(len(r) for r in rows)
    spans = sorted((ln.box.x0, ln.box.x1) for r in rows if len(r) == most for ln in r)
    columns: list[list[float]] = []
    for x0, x1 in spans:
        if columns and x0 < columns[-1][1]:
            columns[-1][1] = max(columns[-1][1], x1)
        else:
            columns.append([x0, x1])
    return [(a, b) for a, b in columns]


def _column_of(line: OcrLine, columns: list[tuple[float, float]]) -> int:
    def overlap(c):
        return min(line.box.x1, c[1]) - max(line.box.x0, c[0])

    best = max(range(len(columns)), key=lambda i: overlap(columns[i]))
    if overlap(columns[best]) > 0:
        return best
    centre = (line.box.x0 + line.box.x1) / 2
    return min(range(len(columns)), key=lambda i: abs(centre - sum(columns[i]) / 2))


def _build(rows: list[list[OcrLine]], page: Page) -> Table | None:
    # lines above the cells (a caption, a title, a line of who / when over a query's result
    # table) fill fewer than half the table's usual row
    usual = statistics.median(len(r) for r in rows)
    while len(rows) > 2 and len(rows[0]) < max(2.0, usual / 2) <= max(len(r) for r in rows):
        rows = rows[1:]
    columns = _columns(rows)
    if len(columns) < 2 or len(rows) < 2:
        return None
    grid: list[list[list[OcrLine]]] = [[[] for _ in columns] for _ in rows]
    for r, row in enumerate(rows):
        for ln in row:
            grid[r][_column_of(ln, columns)].append(ln)
    frozen = tuple(tuple(tuple(page.original(ln) for ln in cell) for cell in row) for row in grid)
    box = union_box(ln.box for row in frozen for cell in row for ln in cell)
    table = Table(frozen, box, page.media_index, page.timestamp)
    return Table(
        frozen, box, page.media_index, page.timestamp, _header_row(table), _key_column(table)
    )


def _numeric_share(texts: list[str]) -> float:
    texts = [t for t in texts if t]
    return sum(_is_numeric(t) for t in texts) / len(texts) if texts else 0.0


def _header_row(table: Table) -> int | None:
    top, second = ([table.text(r, c) for c in range(table.n_columns)] for r in (0, 1))
    body = [table.text(r, c) for r in range(1, table.n_rows) for c in range(table.n_columns)]
    if sum(bool(t) for t in top) < 2:
        return None
    # a band of labelled values over the column names (a fund's key figures: '近一年 +18.45%';
    # a form's fields: '客户：周先生'): every cell holds a value, the row under it none
    if (
        table.n_rows > 2
        and _values(top)
        and sum(bool(t) for t in second) >= 2
        and not any(_values([t]) for t in second if t)
    ):
        return 1
    top_share, body_share = _numeric_share(top), _numeric_share(body)
    return None if top_share >= body_share and top_share > 0 else 0


def _values(texts: list[str]) -> bool:
    """Every filled text holds a value: a figure, or a field after its label's colon."""
    filled = [t for t in texts if t]
    return bool(filled) and all(digit_runs(t) or ":" in t or "：" in t for t in filled)


def _key_column(table: Table) -> int:
    """The leftmost column of names: mostly filled, mostly not figures; a date names its row
    (a time series: '2026-12-03' over its values)."""
    first = 0 if table.header_row is None else table.header_row + table.header_rows
    for c in range(table.n_columns):
        texts = [table.text(r, c) for r in range(first, table.n_rows)]
        names = [t for t in texts if not _is_date(t)]
        if _numeric_share(names) < 0.5 and sum(bool(t) for t in texts) >= len(texts) / 2:
            return c
    return 0


def _is_date(text: str) -> bool:
    found = spans.candidates(text, "date")
    return len(found) == 1 and len(found[0].text) == len(text.strip())


def _aligned_runs(page: Page) -> list[list[list[OcrLine]]]:
    """Without a table region: runs of consecutive rows of >= 2 lines whose columns line up."""
    runs: list[list[list[OcrLine]]] = []
    for row in _rows(list(page.lines)):
        if len(row) < 2:
            if runs and runs[-1]:
                runs.append([])
            continue
        if (
            runs
            and runs[-1]
            and _lines_up(runs[-1], row)
            and row[0].box.y0 - runs[-1][-1][0].box.y1 <= 2.0 * row[0].box.height
        ):
            runs[-1].append(row)
        else:
            runs.append([row])
    return [run for run in runs if len(run) >= 2]


def _lines_up(run: list[list[OcrLine]], row: list[OcrLine]) -> bool:
    """Most cells of `row` overlap horizontally a cell of the run's previous row."""
    prev = run[-1]
    hits = sum(any(min(a.box.x1, b.box.x1) > max(a.box.x0, b.box.x0) for b in prev) for a in row)
    return hits >= max(2, len(row) - 1)


def _from_model(cells: list[LayoutRegion], lines: list[OcrLine], page: Page) -> Table | None:
    """The table the model's cells make of these lines; None where they disagree
    (`table_model.grid`)."""
    found = grid(cells, lines)
    if found is None:
        return None
    frozen = tuple(
        tuple(tuple(page.original(ln) for ln in cell) for cell in row) for row in found.cells
    )
    box = union_box(ln.box for row in frozen for cell in row for ln in cell)
    table = Table(frozen, box, page.media_index, page.timestamp, source="model")
    # the model's <thead> rows name the columns; unmarked, the top row does unless it is data
    head, n_head = (0, found.header_rows) if found.header_rows else (_header_row(table), 1)
    table = Table(frozen, box, page.media_index, page.timestamp, head, 0, n_head, "model")
    return Table(
        frozen, box, page.media_index, page.timestamp, head, _key_column(table), n_head, "model"
    )


def _inside(region: Box, cell: LayoutRegion) -> bool:
    mx, my = (cell.box.x0 + cell.box.x1) / 2, (cell.box.y0 + cell.box.y1) / 2
    return region.x0 <= mx <= region.x1 and region.y0 <= my <= region.y1


def _page_tables(page: Page) -> list[Table]:
    out = []
    regions = [r.box for r in page.regions if r.label == "table"]
    cells = [r for r in page.regions if r.label in (CELL, HEADER_CELL) and r.cell is not None]
    # cells outside every table region: the model read the whole page (no region was found)
    loose = [c for c in cells if not any(_inside(box, c) for box in regions)]
    used: set[int] = set()
    for box in regions:
        inside = [ln for ln in page.lines_in(box) if id(ln) not in used]
        used |= {id(ln) for ln in inside}
        own = [c for c in cells if _inside(box, c)]
        table = _from_model(own, inside, page) if own and inside else None
        if table is None:
            rows = _rows(inside)
            table = _build(rows, page) if rows else None
        if table is not None:
            out.append(table)
    if loose:  # taken only where the model's cells fit the text; else the lines stay free
        box = union_box(c.box for c in loose)
        inside = [ln for ln in page.lines_in(box) if id(ln) not in used]
        table = _from_model(loose, inside, page) if inside else None
        if table is not None:
            used |= {id(ln) for ln in inside}
            out.append(table)
    rest = Page(
        page.media_index, page.timestamp, tuple(ln for ln in page.lines if id(ln) not in used)
    )
    out += [t for run in _aligned_runs(rest) if (t := _build(run, page)) is not None]
    return out


def tables(lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = ()) -> list[Table]:
    """Every table on every page (layout table regions first, then aligned rows)."""
    return [t for page in pages(lines, regions) for t in _page_tables(page)]


def table_cell(
    lines: Iterable[OcrLine],
    regions: Iterable[LayoutRegion] = (),
    *,
    row_key: str,
    column_key: str | None = None,
) -> list[Cell]:
    """The cells at row_key x column_key in every table, best match first. One cell (or several
    with the same text: one table seen in several frames) means the reading is sure; several
    texts, that the keys fit more than one cell: abstain, and send them all."""
    found = [c for t in tables(lines, regions) for c in t.cells_for(row_key, column_key)]
    best = max((c.score for c in found), default=0.0)
    return sorted((c for c in found if c.score >= best - 1e-9), key=lambda c: -c.score)


def cells_named_in(
    lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = (), *, question: str
) -> list[Cell]:
    """The cells of every table whose row and column keys the question names in full
    (`Table.cells_named_in`); one text means sure, several abstain (send them all)."""
    return [c for t in tables(lines, regions) for c in t.cells_named_in(question)]
