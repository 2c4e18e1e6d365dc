"""Order in time on lines as OCR gives them: the anchor is read a little differently on each
frame, and none of those reads is 'the text after it'."""
from __future__ import annotations

from cascade.artifacts import Box, OcrLine
from cascade.evidence.attributes import select
from cascade.evidence.blocks import text_blocks
from cascade.evidence.understanding import understand


def _line(text: str, t: float, x: float = 100, height: float = 60) -> OcrLine:
    return OcrLine(text, 0.95, Box(x, 100, x + 30 * len(text), 100 + height), 0, t)


def test_misread_and_partial_copies_of_the_anchor_are_not_after_it():
    lines = [_line("DOCK 7", 1.0, height=20), _line("GRAND OPENING", 3.0),
             _line("GRAMD OPENIN", 4.0), _line("OPENING", 5.0),
             _line("BAY 12", 6.0, x=600, height=20)]
    query = understand("What does the sign that appears after the GRAND OPENING banner say?")
    picked = select(query, text_blocks(lines))
    assert [b.text for b in picked.blocks] == ["BAY 12"] and picked.sure, picked.reasons


def test_a_text_resembling_the_anchor_is_kept():
    lines = [_line("GRAND OPENING", 3.0), _line("GRANDSTAND 4", 6.0, x=600, height=20)]
    query = understand("What does the sign that appears after the GRAND OPENING banner say?")
    assert [b.text for b in select(query, text_blocks(lines)).blocks] == ["GRANDSTAND 4"]
