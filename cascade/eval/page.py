"""Printed pages laid out top to bottom (titles, headings, wrapped paragraphs, tables, code), that
remember where every marked span landed, so a question's gold answer comes with its box."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..artifacts import Box
from .fonts import load_font

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class Run:
    """A piece of one line of text in one font and colour (code tokens, bold keys)."""

    text: str
    font: str
    size: int
    fill: RGB = (20, 20, 20)


class Page:
    """A page of `width` px drawn onto a tall canvas and cut to its content by `render()`.
    `marks` maps each span asked to be marked to its box in page pixels."""

    def __init__(
        self,
        width: int,
        margin: int = 48,
        paper: RGB = (255, 255, 255),
        ink: RGB = (20, 20, 20),
        max_height: int = 5000,
    ):
        from PIL import Image as PILImage
        from PIL import ImageDraw

        self.width, self.margin, self.paper, self.ink = width, margin, paper, ink
        self.canvas = PILImage.new("RGB", (width, max_height), paper)
        self.draw = ImageDraw.Draw(self.canvas)
        self.y = margin
        self.marks: dict[str, Box] = {}

    @property
    def inner(self) -> int:
        return self.width - 2 * self.margin

    def gap(self, pixels: float) -> None:
        self.y += int(pixels)

    def _check_room(self, height: float) -> None:
        if self.y + height + self.margin > self.canvas.height:
            raise ValueError(f"page content is taller than {self.canvas.height} px")

    def _mark(self, runs: list[Run], x: float, y: float, marks) -> None:
        """Record the box of each span in `marks` that lies inside one run."""
        for span in marks:
            cx = x
            for run in runs:
                font = load_font(run.font, run.size)
                at = run.text.find(span)
                if at >= 0:
                    x0 = cx + self.draw.textlength(run.text[:at], font=font)
                    _, top, _, bottom = self.draw.textbbox((0, y), run.text, font=font)
                    x1 = x0 + self.draw.textlength(span, font=font)
                    self.marks[span] = Box(int(x0), top, int(x1) + 1, bottom)
                    break
                cx += self.draw.textlength(run.text, font=font)

    def runs(
        self,
        runs: list[Run],
        x: float | None = None,
        align: str = "left",
        line_height: float = 1.5,
        marks=(),
    ) -> Box:
        """One line made of `runs`, at `x` (default the left margin) or aligned in the margins."""
        size = max(r.size for r in runs)
        self._check_room(size * line_height)
        widths = [self.draw.textlength(r.text, font=load_font(r.font, r.size)) for r in runs]
        total = sum(widths)
        if x is None:
            x = {
                "left": self.margin,
                "center": (self.width - total) / 2,
                "right": self.width - self.margin - total,
            }[align]
        y = self.y  # runs share a top line
        cx = x
        for run, w in zip(runs, widths, strict=True):
            self.draw.text((cx, y), run.text, font=load_font(run.font, run.size), fill=run.fill)
            cx += w
        self._mark(runs, x, y, marks)
        box = Box(int(x), y, int(x + total) + 1, y + size)
        self.y += int(size * line_height)
        return box

    def text(
        self,
        text: str,
        font: str,
        size: int,
        align: str = "left",
        fill: RGB | None = None,
        line_height: float = 1.5,
        marks=(),
    ) -> Box:
        return self.runs(
            [Run(text, font, size, fill or self.ink)],
            align=align,
            line_height=line_height,
            marks=marks,
        )

    def paragraph(
        self,
        text: str,
        font: str,
        size: int,
        keep=(),
        marks=(),
        indent: int = 0,
        line_height: float = 1.45,
    ) -> None:
        """`text` wrapped to the page width at spaces; the spans in `keep` and `marks` are never
        broken across lines."""
        nbsp = "\u00a0"
        for span in set(keep) | set(marks):
            text = text.replace(span, span.replace(" ", nbsp))
        f = load_font(font, size)
        lines, line = [], ""
        for word in text.split(" "):
            trial = f"{line} {word}" if line else word
            if line and self.draw.textlength(trial, font=f) > self.inner - indent:
                lines.append(line)
                line = word
            else:
                line = trial
        lines.append(line)
        for line in lines:
            line = line.replace(nbsp, " ")
            self.runs(
                [Run(line, font, size, self.ink)],
                x=self.margin + indent,
                line_height=line_height,
                marks=[m for m in marks if m in line],
            )

    def rule(self, fill: RGB = (120, 120, 120), width: int = 2) -> None:
        self.draw.line(
            [(self.margin, self.y), (self.width - self.margin, self.y)], fill=fill, width=width
        )
        self.y += 3 * width

    def table(
        self,
        header: list[str],
        rows: list[list[str]],
        font: str,
        bold: str,
        size: int,
        style: str = "grid",
    ) -> dict[tuple[int, int], Box]:
        """A table with a bold header row; `style` 'grid' (every rule), 'lines' (rules between
        rows only) or 'zebra' (shaded alternate rows, no rules). Numbers are right-aligned.
        Returns the box of each body cell's text by (row, column)."""
        f, fb = load_font(font, size), load_font(bold, size)
        pad = size // 2 + 4
        cols = list(zip(header, *rows, strict=False))
        widths = [
            max(self.draw.textlength(c, font=fb if i == 0 else f) for i, c in enumerate(col))
            + 2 * pad
            for col in cols
        ]
        if sum(widths) > self.inner:
            raise ValueError(f"table is {sum(widths):.0f} px wide; the page has {self.inner}")
        row_h = int(size * 2.0)
        x0 = self.margin
        xs = [x0 + sum(widths[:k]) for k in range(len(widths) + 1)]
        self._check_room(row_h * (len(rows) + 1))
        cells: dict[tuple[int, int], Box] = {}
        grid = (90, 90, 90)
        for r, row in enumerate([header, *rows]):
            top = self.y + r * row_h
            if style == "zebra" and r % 2 == 0 and r > 0:
                self.draw.rectangle([xs[0], top, xs[-1], top + row_h], fill=(228, 232, 238))
            if style == "zebra" and r == 0:
                self.draw.rectangle([xs[0], top, xs[-1], top + row_h], fill=(60, 70, 90))
            for c, value in enumerate(row):
                fo = fb if r == 0 else f
                w = self.draw.textlength(value, font=fo)
                numeric = r > 0 and c > 0 and bool(re.match(r"^[\W\d]", value))
                x = xs[c + 1] - pad - w if numeric else xs[c] + pad
                y = top + (row_h - size) // 2
                fill = (255, 255, 255) if style == "zebra" and r == 0 else self.ink
                self.draw.text((x, y), value, font=fo, fill=fill)
                if r > 0:
                    _, t, _, b = self.draw.textbbox((x, y), value, font=fo)
                    cells[(r - 1, c)] = Box(int(x), t, int(x + w) + 1, b)
            if style in ("grid", "lines") and (r <= 1 or style == "grid"):
                self.draw.line([(xs[0], top), (xs[-1], top)], fill=grid, width=1 + (r <= 1))
        bottom = self.y + row_h * (len(rows) + 1)
        if style in ("grid", "lines"):
            self.draw.line([(xs[0], bottom), (xs[-1], bottom)], fill=grid, width=2)
        if style == "grid":
            for x in xs:
                self.draw.line([(x, self.y), (x, bottom)], fill=grid, width=1)
        self.y = bottom + size
        return cells

    def render(self) -> np.ndarray:
        """The page cut to its content plus the bottom margin (uint8 HxWx3)."""
        return np.asarray(self.canvas.crop((0, 0, self.width, self.y + self.margin)))
