"""Document pages rendered with PIL for the structure tests, with where each part was drawn.

A report page (title, numbered section headings, paragraphs, a ruled table), in English (DejaVu)
or Chinese (WenQuanYi Micro Hei), and code listings in several languages (DejaVu Sans Mono).
Each renderer returns the pixels and the boxes (source pixels) of what the tests look for.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from cascade.artifacts import Box

CJK_FONT = "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"


def font_file(name: str) -> str:
    """A DejaVu font from matplotlib's bundled fonts (present wherever matplotlib is)."""
    import matplotlib

    return str(Path(matplotlib.__file__).parent / "mpl-data" / "fonts" / "ttf" / name)


def cjk_font() -> str:
    if not Path(CJK_FONT).is_file():
        pytest.skip(
            f"Chinese test pages need a CJK font at {CJK_FONT} "
            "(Debian: apt-get install fonts-wqy-microhei)"
        )
    return CJK_FONT


@dataclass
class Page:
    pixels: np.ndarray
    title: Box
    headings: dict[int, Box] = field(default_factory=dict)  # section number -> box
    cells: dict[tuple[str, str], Box] = field(default_factory=dict)  # (row, column) -> box
    table: Box | None = None
    lines: dict[str, Box] = field(default_factory=dict)  # a paragraph line's text -> box


EN = {
    "title": "Annual Report on Urban Transit",
    "sections": [
        (
            "1. Overview",
            [
                "This report summarises how the city transit network ran this year.",
                "Ridership grew steadily and punctuality improved on every line.",
                "Passenger satisfaction reached a record high in the autumn survey.",
            ],
        ),
        ("2. Ridership by Line", None),
        (
            "3. Service Changes",
            [
                "The east entrance will be closed on Tuesday for repairs.",
                "The west entrance remains open as usual. Night buses will",
                "run every fifteen minutes from the first of March.",
            ],
        ),
    ],
    "table": [
        ["Line", "January", "February", "March"],
        ["Red", "1200", "1350", "1410"],
        ["Blue", "980", "1010", "1100"],
        ["Green", "760", "800", "845"],
    ],
}
ZH = {
    "title": "城市交通年度报告",
    "sections": [
        (
            "一、概述",
            [
                "本报告总结了本年度城市公共交通的运营情况。全年客流量稳步增长。",
                "各线路的准点率均有提高，乘客满意度达到新高。",
            ],
        ),
        ("二、客流统计", None),
        (
            "三、服务变更",
            ["东入口将于周二关闭进行维修。西入口照常开放。", "夜间班车的发车间隔缩短为十五分钟。"],
        ),
    ],
    "table": [
        ["线路", "一月", "二月", "三月"],
        ["红线", "1200", "1350", "1410"],
        ["蓝线", "980", "1010", "1100"],
        ["绿线", "760", "800", "845"],
    ],
}


def render_report(
    content: dict, regular: str, bold: str, width: int = 1240, height: int = 1500
) -> Page:
    """A report page: centred title, numbered sections, paragraphs and a ruled table."""
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont

    page = PILImage.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(page)

    def text(xy, s, font):
        draw.text(xy, s, font=font, fill="black")
        return Box(*draw.textbbox(xy, s, font=font))

    big, head, body = (
        ImageFont.truetype(bold, 48),
        ImageFont.truetype(bold, 34),
        ImageFont.truetype(regular, 28),
    )
    title = content["title"]
    out = Page(np.zeros(1), text(((width - draw.textlength(title, font=big)) / 2, 100), title, big))
    y = 220
    for number, (heading, paragraph) in enumerate(content["sections"], start=1):
        out.headings[number] = text((100, y), heading, head)
        y += 70
        if paragraph is None:
            y = (
                _table(
                    draw,
                    content["table"],
                    ImageFont.truetype(regular, 28),
                    ImageFont.truetype(bold, 28),
                    140,
                    y,
                    out,
                )
                + 60
            )
            continue
        for line in paragraph:
            out.lines[line] = text((100, y), line, body)
            y += 44
        y += 40
    out.pixels = np.asarray(page)
    return out


def _table(draw, rows, font, header_font, x0: int, y0: int, out: Page) -> int:
    cw, rh = 220, 56
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            f = header_font if r == 0 else font
            box = Box(*draw.textbbox((x0 + c * cw + 12, y0 + r * rh + 12), cell, font=f))
            draw.text((x0 + c * cw + 12, y0 + r * rh + 12), cell, font=f, fill="black")
            out.cells[(rows[r][0], rows[0][c])] = box
    for r in range(len(rows) + 1):
        draw.line([(x0, y0 + r * rh), (x0 + len(rows[0]) * cw, y0 + r * rh)], fill="black", width=2)
    for c in range(len(rows[0]) + 1):
        draw.line([(x0 + c * cw, y0), (x0 + c * cw, y0 + len(rows) * rh)], fill="black", width=2)
    out.table = Box(x0, y0, x0 + len(rows[0]) * cw, y0 + len(rows) * rh)
    return y0 + len(rows) * rh


def english_report() -> Page:
    return render_report(EN, font_file("DejaVuSerif.ttf"), font_file("DejaVuSerif-Bold.ttf"))


def chinese_report() -> Page:
    font = cjk_font()
    return render_report(ZH, font, font)


CODE = {
    "python": [
        "import json",
        "",
        "class InvoiceParser(BaseParser):",
        "    def parse_header(self, line):",
        "        return line.split(';')",
        "",
        "def load_invoices(folder):",
        "    return [InvoiceParser(p) for p in folder]",
    ],
    "javascript": [
        "export async function fetchOrders(userId) {",
        "  const res = await fetch(`/api/orders/${userId}`);",
        "  return res.json();",
        "}",
    ],
    "go": [
        "package main",
        "",
        "type Server struct {",
        "    port int",
        "}",
        "",
        "func (s *Server) handleRequest(w http.ResponseWriter, r *http.Request) {",
        '    fmt.Fprintln(w, "ok")',
        "}",
    ],
    "c": [
        "#include <stdio.h>",
        "",
        "static int checksum_block(const uint8_t *data, size_t n)",
        "{",
        "    int sum = 0;",
        "    for (size_t i = 0; i < n; i++) sum += data[i];",
        "    return sum;",
        "}",
    ],
    "sql": [
        "CREATE TABLE IF NOT EXISTS shipments (",
        "    id SERIAL PRIMARY KEY,",
        "    sent_at TIMESTAMP",
        ");",
        "SELECT * FROM shipments WHERE id = 4;",
    ],
    "rust": [
        "pub fn parse_config(path: &Path) -> Result<Config, Error> {",
        "    let text = fs::read_to_string(path)?;",
        "    toml::from_str(&text)",
        "}",
    ],
}


def render_code(lines: list[str], size: int = 22) -> np.ndarray:
    """A code listing in DejaVu Sans Mono on an off-white editor background."""
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont

    font = ImageFont.truetype(font_file("DejaVuSansMono.ttf"), size)
    step = int(size * 1.55)
    page = PILImage.new("RGB", (1100, 40 + step * len(lines)), (250, 250, 248))
    draw = ImageDraw.Draw(page)
    for i, line in enumerate(lines):
        draw.text((30, 20 + step * i), line, font=font, fill=(30, 30, 30))
    return np.asarray(page)


def read(*pixels: np.ndarray) -> tuple[list, list]:
    """The real OCR (RapidOCR) and layout (PP-Layout CDLA) stages on the pages, one media index
    each: (OCR lines, layout regions)."""
    import cascade.stages  # noqa: F401
    from cascade.artifacts import Image
    from cascade.registry import get_stage_class

    images = [Image(px, media_index=i) for i, px in enumerate(pixels)]
    lines = get_stage_class("ocr")({})(images=images).lines
    regions = get_stage_class("layout")({})(images=images, ocr_lines=lines).regions
    return lines, regions


def photographed(
    pixels: np.ndarray, angle: float, own_words: tuple[tuple[str, int, int], ...] = ()
) -> np.ndarray:
    """The page shrunk, turned, at lower contrast, on a photo, saved as a JPEG; `own_words`
    (text, x, y) are the photo's own big texts (a shop sign, a number on a bus) beside the page."""
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageEnhance, ImageFont

    page = ImageEnhance.Contrast(PILImage.fromarray(pixels)).enhance(0.6)
    page = page.resize((page.width * 3 // 5, page.height * 3 // 5), PILImage.BICUBIC)
    mask = PILImage.new("L", page.size, 255).rotate(angle, expand=True)
    from skimage import data

    scene = PILImage.fromarray(data.coffee()).resize((1600, 1200)).convert("RGB")
    scene.paste(page.rotate(angle, expand=True, resample=PILImage.BICUBIC), (300, 60), mask)
    draw = ImageDraw.Draw(scene)
    for text, x, y in own_words:
        big = ImageFont.truetype(font_file("DejaVuSans-Bold.ttf"), 72)
        x0, y0, x1, y1 = draw.textbbox((x, y), text, font=big)
        draw.rectangle((x0 - 14, y0 - 14, x1 + 14, y1 + 14), fill=(235, 235, 235))
        draw.text((x, y), text, font=big, fill=(20, 20, 20))
    buf = io.BytesIO()
    scene.save(buf, "JPEG", quality=60)
    return np.asarray(PILImage.open(buf).convert("RGB"))


NEWS = [  # two columns: (heading, body lines) each
    [
        (
            "Ferry timetable changes",
            [
                "The morning ferry to Skye will leave",
                "at 07:40 from Pier 3 starting on",
                "Monday. Tickets cost 12.50 each.",
            ],
        ),
        (
            "Market reopens",
            ["The fish market reopens on Friday", "after a month of repairs to the roof."],
        ),
    ],
    [
        (
            "Council notice",
            [
                "Road works on Mill Street begin on",
                "Wednesday and last two weeks. Buses",
                "will divert via Quay Road.",
            ],
        ),
        ("Weather", ["Strong winds are expected over the", "weekend, with gusts up to 60 mph."]),
    ],
]


def render_two_columns() -> np.ndarray:
    """A newsletter page: a masthead over two columns of headed stories (no numbering)."""
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont

    page = PILImage.new("RGB", (1300, 900), "white")
    draw = ImageDraw.Draw(page)
    bold, body = font_file("DejaVuSerif-Bold.ttf"), font_file("DejaVuSerif.ttf")
    draw.text((300, 40), "The Harbour Gazette", font=ImageFont.truetype(bold, 44), fill="black")
    for stories, x in zip(NEWS, (60, 680), strict=True):
        y = 140
        for heading, lines in stories:
            draw.text((x, y), heading, font=ImageFont.truetype(bold, 30), fill="black")
            y += 48
            for line in lines:
                draw.text((x, y), line, font=ImageFont.truetype(body, 22), fill="black")
                y += 34
            y += 34
    return np.asarray(page)


RECEIPT = [
    ("品名", "数量", "金额"),
    ("拿铁咖啡", "2", "¥ 56.00"),
    ("牛角包", "1", "¥ 18.50"),
    ("矿泉水", "3", "¥ 9.00"),
    None,
    ("小计", "", "¥ 83.50"),
    ("合计", "", "¥ 83.50"),
]


def render_receipt() -> np.ndarray:
    """A Chinese till slip: the shop's name over item rows (amounts right-aligned) and totals."""
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont

    font = cjk_font()
    page = PILImage.new("RGB", (600, 440), "white")
    draw = ImageDraw.Draw(page)
    draw.text((200, 10), "星光咖啡馆", font=ImageFont.truetype(font, 34), fill="black")
    small = ImageFont.truetype(font, 26)
    for i, row in enumerate(RECEIPT):
        if row is not None:
            name, count, amount = row
            draw.text((40, 60 + 50 * i), name, font=small, fill="black")
            draw.text((300, 60 + 50 * i), count, font=small, fill="black")
            draw.text(
                (560 - draw.textlength(amount, font=small), 60 + 50 * i),
                amount,
                font=small,
                fill="black",
            )
    return np.asarray(page)
