"""Order in time on lines as OCR gives them: the anchor is read a little differently on each
frame, and none of those reads is 'the text after it'; a caption above a small plate is another
text, not the plate's first line."""

from __future__ import annotations

from cascade.artifacts import Box, OcrLine
from cascade.evidence.attributes import select
from cascade.evidence.blocks import text_blocks
from cascade.evidence.understanding import understand


def _line(text: str, t: float, x: float = 100, height: float = 60) -> OcrLine:
    return OcrLine(text, 0.95, Box(x, 100, x + 30 * len(text), 100 + height), 0, t)


def test_misread_and_partial_copies_of_the_anchor_are_not_after_it():
    lines = [
        _line("DOCK 7", 1.0, height=20),
        _line("GRAND OPENING", 3.0),
        _line("GRAMD OPENIN", 4.0),
        _line("OPENING", 5.0),
        _line("BAY 12", 6.0, x=600, height=20),
    ]
    query = understand("What does the sign that appears after the GRAND OPENING banner say?")
    picked = select(query, text_blocks(lines))
    assert [b.text for b in picked.blocks] == ["BAY 12"] and picked.sure, picked.reasons


def test_a_text_resembling_the_anchor_is_kept():
    lines = [_line("GRAND OPENING", 3.0), _line("GRANDSTAND 4", 6.0, x=600, height=20)]
    query = understand("What does the sign that appears after the GRAND OPENING banner say?")
    assert [b.text for b in select(query, text_blocks(lines)).blocks] == ["GRANDSTAND 4"]


def test_a_caption_above_a_small_plate_is_two_texts():
    caption = OcrLine("THANKS FOR WATCHING", 0.95, Box(300, 100, 900, 160), 0, 9.0)
    plate = OcrLine("PLATFORM 67", 0.95, Box(500, 170, 700, 196), 0, 9.0)
    assert sorted(b.text for b in text_blocks([caption, plate])) == [
        "PLATFORM 67",
        "THANKS FOR WATCHING",
    ]
    second = OcrLine("NO PARKING", 0.95, Box(500, 200, 690, 226), 0, 9.0)
    assert [b.text for b in text_blocks([plate, second])] == ["PLATFORM 67 NO PARKING"]
