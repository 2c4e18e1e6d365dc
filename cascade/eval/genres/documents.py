"""Printed pages: multi-section documents (titles, headings), tables, notices with facts inside
paragraphs, and letters with ids among other numbers. Each page builder returns the pixels and
the gold spans with their boxes, so other genres (photographed pages, Chinese questions) reuse
it."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ...artifacts import Box
from ..fonts import load_font
from ..items import EvalItem
from ..page import Page, Run
from ..splits.spec import Section
from .common import Ctx, save_png

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
ROMAN = ("I", "II", "III", "IV", "V", "VI")


@dataclass
class PageTruth:
    """What a generated page holds: gold spans by name (e.g. 'title', 'section 3', a table cell)
    and their boxes in page pixels."""

    spans: dict[str, str] = field(default_factory=dict)
    boxes: dict[str, Box] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)

    def box(self, name: str) -> tuple[int, int, int, int] | None:
        b = self.boxes.get(name)
        return None if b is None else (int(b.x0), int(b.y0), int(b.x1), int(b.y1))


def _faces(ctx: Ctx) -> tuple[str, str]:
    k = ctx.rng.randrange(len(ctx.spec.fonts.body))
    return ctx.spec.fonts.body[k], ctx.spec.fonts.bold[k]


def heading_page(ctx: Ctx, sections: int | None = None) -> tuple[np.ndarray, PageTruth]:
    """A titled page of 4-6 numbered sections, each a bold heading over a paragraph, under a
    running header and over a page number."""
    rng, spec = ctx.rng, ctx.spec
    body, bold = _faces(ctx)
    size = rng.randint(17, 22)
    page = Page(rng.randint(1000, 1300), margin=rng.randint(44, 72))
    truth = PageTruth()
    # a running header above the title (a distractor for "the title"), a page number below
    page.text(
        f"{rng.choice(spec.companies)} | internal",
        body,
        size - 4,
        align="right",
        fill=(120, 120, 120),
    )
    page.gap(size * 0.5)
    title = rng.choice(spec.doc_titles)
    align = rng.choice(("left", "center"))
    truth.boxes["title"] = page.text(title, bold, int(size * rng.uniform(1.7, 2.1)), align=align)
    truth.spans["title"] = title
    page.text(
        f"Revision {rng.randint(2, 9)}.{rng.randint(0, 9)}, {rng.randint(2019, 2025)}",
        body,
        size - 2,
        align=align,
        fill=(110, 110, 110),
    )
    page.gap(size)
    style = rng.choice(spec.numbering)
    chosen = rng.sample(spec.sections, k=sections or rng.randint(4, 6))
    for n, section in enumerate(chosen, start=1):
        number = style.format(n=n, r=ROMAN[n - 1])
        hsize = int(size * 1.3)
        line = page.runs(
            [Run(f"{number} ", bold, hsize), Run(section.heading, bold, hsize)],
            marks=[section.heading],
        )
        truth.spans[f"section {n}"] = section.heading
        truth.boxes[f"section {n}"] = page.marks.get(section.heading, line)
        page.paragraph(section.body, body, size)
        page.gap(size * 0.6)
    page.text(f"Page {rng.randint(1, 3)}", body, size - 4, align="center", fill=(120, 120, 120))
    truth.extra["sections"] = chosen
    return page.render(), truth


def heading(ctx: Ctx) -> list[EvalItem]:
    """Two questions per page: the title, a section heading by number, or by topic."""
    rng, spec = ctx.rng, ctx.spec
    plans = (
        ("title", "number"),
        ("number", "topic"),
        ("topic", "title"),
        ("number", "topic"),
        ("title", "number"),
    )
    items = []
    for i in range(ctx.n):
        arr, truth = heading_page(ctx)
        path = save_png(arr, ctx.path(f"page_{i}.png"))
        # heading_page stores the sections it drew under "sections"
        sections = cast("list[Section]", truth.extra["sections"])
        numbers = rng.sample(range(1, len(sections) + 1), 2)
        for q, what in enumerate(plans[i % len(plans)]):
            n = numbers[q]
            if what == "title":
                question, key, target = spec.ask("title", rng), "title", "title"
            elif what == "number":
                question = spec.ask("heading_number", rng, n=n, ordinal=ORDINALS[n - 1])
                key, target = f"section {n}", "heading"
            else:
                question = spec.ask("heading_topic", rng, topic=sections[n - 1].topic)
                key, target = f"section {n}", "heading"
            others = tuple(v for k, v in truth.spans.items() if k != key)
            items.append(
                ctx.item(
                    2 * i + q,
                    media_kind="document",
                    media=(path,),
                    question=question,
                    answer=truth.spans[key],
                    kind="doc",
                    target=target,
                    frames=(0,),
                    box=truth.box(key),
                    distractors=others,
                )
            )
    return items


def _cells(table, rng: random.Random) -> list[list[str]]:
    rows, cols = len(table.rows), len(table.cols)
    if table.kind in ("timetable", "stop_timetable"):
        trips, stops = (rows, cols) if table.kind == "timetable" else (cols, rows)
        start = rng.randint(6 * 60, 9 * 60)
        grid = []
        for _ in range(trips):
            t, times = start, []
            for _ in range(stops):
                times.append(f"{t // 60:02d}:{t % 60:02d}")
                t += rng.randint(6, 19)
            grid.append(times)
            start += rng.randint(25, 70)
        return grid if table.kind == "timetable" else [list(r) for r in zip(*grid, strict=False)]
    if table.kind == "price":
        out = []
        for _ in range(rows):
            base = rng.uniform(2.0, 9.0)
            out.append([f"{table.unit}{base + c * rng.uniform(0.4, 1.6):.2f}" for c in range(cols)])
        return out
    recipes = [u.split(":") for u in table.units]
    return [
        [f"{rng.uniform(float(lo), float(hi)):.{int(d)}f} {unit}" for unit, lo, hi, d in recipes]
        for _ in range(rows)
    ]


def table_page(ctx: Ctx, table) -> tuple[np.ndarray, PageTruth, list[list[str]]]:
    rng = ctx.rng
    body, bold = _faces(ctx)
    size = rng.randint(16, 21)
    while True:  # every cell distinct, so a cell's text names one place
        cells = _cells(table, rng)
        flat = [c for row in cells for c in row]
        if len(set(flat)) == len(flat):
            break
    page = Page(rng.randint(900, 1200), margin=rng.randint(40, 64))
    truth = PageTruth()
    truth.boxes["title"] = page.text(table.title, bold, int(size * 1.6))
    truth.spans["title"] = table.title
    page.gap(size * 0.5)
    boxes = page.table(
        [table.corner, *table.cols],
        [[r, *row] for r, row in zip(table.rows, cells, strict=False)],
        body,
        bold,
        size,
        style=rng.choice(ctx.spec.table_styles),
    )
    for (r, c), b in boxes.items():
        if c > 0:
            truth.boxes[f"{r},{c - 1}"] = b
    page.paragraph(
        rng.choice(
            (
                "All prices and times may change without notice.",
                "Figures are as supplied by the maker.",
                "Printed copies are not updated; check online.",
            )
        ),
        body,
        size - 2,
    )
    return page.render(), truth, cells


def table(ctx: Ctx) -> list[EvalItem]:
    """Two cells per table (timetables, price lists, spec sheets in turn), by row and column key."""
    rng, spec = ctx.rng, ctx.spec
    items = []
    for i in range(ctx.n):
        tab = spec.tables[i % len(spec.tables)]
        arr, truth, cells = table_page(ctx, tab)
        path = save_png(arr, ctx.path(f"table_{i}.png"))
        picks = rng.sample([(r, c) for r in range(len(tab.rows)) for c in range(len(tab.cols))], 2)
        for q, (r, c) in enumerate(picks):
            col = (
                tab.cols[c] if tab.kind in ("timetable", "stop_timetable") else tab.cols[c].lower()
            )
            question = spec.ask(f"cell_{tab.kind}", rng, row=tab.rows[r], col=col)
            same_row = tuple(v for k, v in enumerate(cells[r]) if k != c)
            items.append(
                ctx.item(
                    2 * i + q,
                    media_kind="document",
                    media=(path,),
                    question=question,
                    answer=cells[r][c],
                    kind="doc",
                    target="cell",
                    frames=(0,),
                    box=truth.box(f"{r},{c}"),
                    distractors=same_row,
                )
            )
    return items


def notice_page(ctx: Ctx, asked: int = 2) -> tuple[np.ndarray, PageTruth, list, list[str]]:
    """A notice of 3 paragraphs holding up to 4 facts; for each asked fact, another fact of the
    same kind (another day, another room) sits elsewhere on the page. Returns the pixels, the
    spans, the asked (fact, value) pairs and the distractor values."""
    rng, spec = ctx.rng, ctx.spec
    body, bold = _faces(ctx)
    size = rng.randint(17, 22)
    facts = rng.sample(spec.facts, asked)
    for f in list(facts):
        same = [g for g in spec.facts if g.kind == f.kind and g not in facts]
        if same:
            facts.append(rng.choice(same))
    pool = {k: rng.sample(v, len(v)) for k, v in spec.fact_values.items()}
    values = [pool[f.kind].pop() for f in facts]
    sentences = [f.sentence.format(v=v) for f, v in zip(facts, values, strict=False)]
    order = list(range(len(sentences))) + [-1, -2]
    rng.shuffle(order)
    fillers = rng.sample(spec.fillers, 2)
    paragraphs: list[list[str]] = [[], [], []]
    for k, idx in enumerate(order):
        paragraphs[k % 3].append(sentences[idx] if idx >= 0 else fillers[-idx - 1])
    page = Page(rng.randint(900, 1200), margin=rng.randint(48, 72))
    truth = PageTruth()
    title = rng.choice(spec.notice_titles)
    truth.boxes["title"] = page.text(title, bold, int(size * 1.7))
    truth.spans["title"] = title
    page.gap(size * 0.6)
    for para in paragraphs:
        page.paragraph(" ".join(para), body, size, marks=values)
        page.gap(size * 0.8)
    for v in values:
        truth.spans[v], truth.boxes[v] = v, page.marks[v]
    return page.render(), truth, list(zip(facts, values, strict=False))[:asked], values[asked:]


def paragraph(ctx: Ctx) -> list[EvalItem]:
    """Two facts per notice: the answer is the span (the day, the time, the room, the name)."""
    items = []
    for i in range(ctx.n):
        arr, truth, pairs, distractors = notice_page(ctx)
        path = save_png(arr, ctx.path(f"notice_{i}.png"))
        for q, (fact, value) in enumerate(pairs):
            items.append(
                ctx.item(
                    2 * i + q,
                    media_kind="document",
                    media=(path,),
                    question=fact.question,
                    answer=value,
                    kind="doc",
                    target="fact",
                    frames=(0,),
                    box=truth.box(value),
                    distractors=tuple(distractors),
                )
            )
    return items


def _fill(pattern: str, rng: random.Random) -> str:
    return "".join(
        str(rng.randint(0, 9))
        if ch == "#"
        else rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ")
        if ch == "A"
        else ch
        for ch in pattern
    )


def id_letter(ctx: Ctx) -> tuple[np.ndarray, PageTruth]:
    """A letter head with phone, fax, address, date, amounts and account numbers around every id
    field of the split. Spans by the field label."""
    rng, spec = ctx.rng, ctx.spec
    body, bold = _faces(ctx)
    size = rng.randint(17, 21)
    page = Page(rng.randint(950, 1200), margin=rng.randint(48, 72))
    truth = PageTruth()
    company = rng.choice(spec.companies)
    page.text(company, bold, int(size * 1.6))
    page.text(
        f"{rng.randint(10, 299)} Harbour Road, Springfield {rng.randint(10000, 99999)}",
        body,
        size - 1,
        fill=(90, 90, 90),
    )
    page.text(
        f"Tel: +1 555 {rng.randint(100, 999)} {rng.randint(1000, 9999)}   "
        f"Fax: +1 555 {rng.randint(100, 999)} {rng.randint(1000, 9999)}",
        body,
        size - 1,
        fill=(90, 90, 90),
    )
    page.gap(size)
    y, m, d = rng.randint(2019, 2025), rng.randint(1, 12), rng.randint(1, 28)
    rows = [("Date", f"{d:02d}/{m:02d}/{y}")]
    for f in spec.id_fields:
        value = _fill(f.pattern, rng)
        truth.spans[f.label] = value
        rows.append((f.label, value))
    rows += [
        ("Account", " ".join(str(rng.randint(1000, 9999)) for _ in range(3))),
        ("Amount due", f"${rng.randint(100, 4999)}.{rng.randint(0, 99):02d}"),
    ]
    rng.shuffle(rows)
    label_w = max(page.draw.textlength(f"{k}:", font=load_font(bold, size)) for k, _ in rows)
    for label, value in rows:
        page.runs([Run(f"{label}:", bold, size)], line_height=0)
        box = page.runs([Run(value, body, size)], x=page.margin + label_w + size, marks=[value])
        if label in truth.spans:
            truth.boxes[label] = page.marks.get(value, box)
    page.gap(size)
    page.paragraph(
        "Please quote the references above in any message about this matter. Our "
        f"office is open on weekdays; call +1 555 {rng.randint(100, 999)} "
        f"{rng.randint(1000, 9999)} for help.",
        body,
        size,
    )
    return page.render(), truth


def ids(ctx: Ctx) -> list[EvalItem]:
    """Two id fields per letter; the other ids, the phone and fax numbers, the date, the account
    number and the amount are all in view."""
    rng, spec = ctx.rng, ctx.spec
    items = []
    for i in range(ctx.n):
        arr, truth = id_letter(ctx)
        path = save_png(arr, ctx.path(f"letter_{i}.png"))
        for q, f in enumerate(rng.sample(spec.id_fields, 2)):
            others = tuple(v for k, v in truth.spans.items() if k != f.label)
            items.append(
                ctx.item(
                    2 * i + q,
                    media_kind="document",
                    media=(path,),
                    question=f.question,
                    answer=truth.spans[f.label],
                    kind="doc",
                    target="identifier",
                    frames=(0,),
                    box=truth.box(f.label),
                    distractors=others,
                )
            )
    return items
