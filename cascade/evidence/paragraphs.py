"""Paragraphs and sentences: the sentence of a page that holds a key phrase, with its lines' boxes.

Lines join into a paragraph when one sits right below another (a gap under ~1 line height, the
columns overlapping, about the same height) unless the layout model put them in two different
text regions; headings and cells of a layout table never join a paragraph. Line breaks are undone as
the script wants (a space between Latin words, nothing between CJK characters, a hyphenated word put
back together). Sentences end at . ! ? … and at the CJK 。！？; a '.' ends one only before a space
and a capital, a digit or a CJK character, and not after a known abbreviation or a single initial.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cascade.artifacts import LayoutRegion, OcrLine

from . import spans
from .headings import heading_lines
from .relevance import RelevanceModel
from .structure import Located, Page, is_cjk, pages, text_length
from .textmatch import phrase_score

__all__ = ["Paragraph", "paragraphs", "split_sentences", "sentence_with"]

MIN_PHRASE_SCORE = 0.5  # least share of the phrase's content words a sentence must hold
MEANT_SENTENCES = 4  # sentences sent by meaning alone, where the words find none
PROSE_WORDS = 6  # a sentence of running text has this many words (a Chinese word: 2 characters)
SENTENCE_MEANT = "sentence meant"  # a Located's kind: a lead, never a tool's answer
_ABBREVIATIONS = set(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "no",
        "nos",
        "vs",
        "etc",
        "eg",
        "ie",
        "fig",
        "figs",
        "approx",
        "dept",
        "inc",
        "ltd",
        "co",
        "jr",
        "sr",
        "vol",
        "pp",
        "p",
        "ca",
        "cf",
        "al",
        "est",
        "min",
        "max",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    ]
)
_CLOSERS = "\"'”’)]）】」』"


@dataclass(frozen=True)
class Paragraph:
    """Lines read as one text: `text` with the line breaks undone, `starts[i]` the offset in
    `text` where `lines[i]` begins (the lines as OCR gave them: boxes in source pixels)."""

    lines: tuple[OcrLine, ...]
    text: str
    starts: tuple[int, ...]
    media_index: int = 0
    timestamp: float | None = None

    def lines_between(self, start: int, end: int) -> list[OcrLine]:
        """The lines that hold text[start:end]."""
        ends = self.starts[1:] + (len(self.text) + 1,)
        return [
            ln
            for ln, s, e in zip(self.lines, self.starts, ends, strict=True)
            if s < end and e > start
        ]


def _join(parts: Sequence[str]) -> tuple[str, tuple[int, ...]]:
    text, starts = "", []
    for part in parts:
        part = part.strip()
        if text:
            if text.endswith("-") and part[:1].islower() and text[-2:-1].isalpha():
                text = text[:-1]  # a word hyphenated at the line break
            elif not (is_cjk(text[-1]) or is_cjk(part[:1] or " ")):
                text += " "
        starts.append(len(text))
        text += part
    return text, tuple(starts)


def _continues(above: OcrLine, line: OcrLine) -> bool:
    a, b = above.box, line.box
    gap = b.y0 - a.y1
    return (
        -0.3 * a.height <= gap <= 0.9 * a.height
        and 0.7 <= b.height / a.height <= 1.4
        and min(a.x1, b.x1) > max(a.x0, b.x0)
    )


def _other_paragraph(a: LayoutRegion | None, b: LayoutRegion | None) -> bool:
    """Lines in two different layout text regions belong to two paragraphs (paragraphs set
    closer than a line apart); a line the model put in no text region may join either."""
    return a is not None and b is not None and a != b


def _page_paragraphs(page: Page) -> list[Paragraph]:
    heads = heading_lines(page)
    blocks: list[list[OcrLine]] = []
    for line in page.lines:
        if id(line) in heads or page.region_of(line, ["table"]) is not None:
            blocks.append([line])  # a heading or a table cell stands alone
            continue
        region = page.region_of(line, ["text"])
        open_blocks = [
            b
            for b in blocks
            if id(b[-1]) not in heads
            and _continues(b[-1], line)
            and not _other_paragraph(region, page.region_of(b[-1], ["text"]))
        ]
        if open_blocks:
            max(open_blocks, key=lambda b: b[-1].box.y1).append(line)
        else:
            blocks.append([line])
    out = []
    for block in blocks:
        text, starts = _join([ln.text for ln in block])
        out.append(
            Paragraph(
                tuple(page.original(ln) for ln in block),
                text,
                starts,
                page.media_index,
                page.timestamp,
            )
        )
    return out


def paragraphs(lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = ()) -> list[Paragraph]:
    """Every paragraph (and every heading, as a paragraph of its own) on every page."""
    return [p for page in pages(lines, regions) for p in _page_paragraphs(page)]


def _ends_sentence(text: str, i: int) -> bool:
    """Does the '.' at text[i] end a sentence?"""
    rest = text[i + 1 :].lstrip(_CLOSERS)
    if rest and not rest[0].isspace():
        return False  # 3.5, e.g., www.site.com
    nxt = rest.lstrip()[:1]
    if nxt and not (nxt.isupper() or nxt.isdigit() or is_cjk(nxt) or nxt in "\"'“‘(["):
        return False
    word = re.search(r"([^\W\d_]+)\.?$", text[:i].replace(".", ""))
    prev = word.group(1).lower() if word else ""
    before = text[:i].split()[-1] if text[:i].split() else ""
    # not after Dr. Smith, J. Doe, U.S.
    return not (prev in _ABBREVIATIONS or re.fullmatch(r"(?:[A-Za-z]\.)*[A-Za-z]", before))


def split_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of each sentence of `text`, surrounding spaces left out."""
    spans, start, i = [], 0, 0
    while i < len(text):
        if text[i] in "!?。！？…" or text[i] == "." and _ends_sentence(text, i):
            end = i + 1
            while end < len(text) and text[end] in _CLOSERS + ".!?。！？…":
                end += 1
            spans.append((start, end))
            start = i = end
        else:
            i += 1
    spans.append((start, len(text)))
    out = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


def sentence_with(
    lines: Iterable[OcrLine],
    regions: Iterable[LayoutRegion] = (),
    *,
    phrase: str | Sequence[str],
    kinds: Sequence[str] = (),
) -> list[Located]:
    """The sentences holding the most of `phrase`'s content words (at least half), best first,
    each with the boxes of the lines it is written on. Several different texts mean several
    sentences fit equally well (a caller that must answer abstains); the same text several times
    is one sentence seen in several frames.

    `kinds`: span kinds the answer is (`spans.KINDS`: 'date', 'time' ...). When the best
    sentences hold none, the best of those that hold one come first, and the best by words
    still follow (recall first): "which day is the drive held?" names the drive in the sentence
    that announces it, and the day in the next one."""
    phrase = phrase if isinstance(phrase, str) else " ".join(phrase)
    found: list[Located] = []
    for para in paragraphs(lines, regions):
        for s, e in split_sentences(para.text):
            score = phrase_score(phrase, para.text[s:e])
            if score >= MIN_PHRASE_SCORE:
                boxes = tuple(ln.box for ln in para.lines_between(s, e))
                found.append(
                    Located(
                        para.text[s:e], "sentence", boxes, para.media_index, para.timestamp, score
                    )
                )
    best = max((f.score for f in found), default=0.0)
    top = [f for f in found if f.score >= best - 1e-9]
    typed = [f for f in found if any(spans.candidates(f.text, k) for k in kinds)]
    if typed and not set(map(id, typed)) & set(map(id, top)):
        typed_best = max(f.score for f in typed)
        top = [f for f in typed if f.score >= typed_best - 1e-9] + top
    return top


def sentences_meant(
    lines: Iterable[OcrLine],
    regions: Iterable[LayoutRegion] = (),
    *,
    question: str,
    relevance: RelevanceModel,
    top: int = MEANT_SENTENCES,
) -> list[Located]:
    """The `top` sentences of running text whose meaning is nearest the question's, nearest
    first, kind SENTENCE_MEANT: leads for a fact asked in other words than the page's ('How much
    did the clean-up raise?' for 'the harbour clean-up had raised 4,200 pounds'). Running text
    only (PROSE_WORDS, mostly letters): a receipt's or a ticket's short lines are its rows."""
    found = [
        (para, s, e)
        for para in paragraphs(lines, regions)
        for s, e in split_sentences(para.text)
        if _prose(para.text[s:e])
    ]
    if not found:
        return []
    cos = relevance.passages([para.text[s:e] for para, s, e in found]) @ relevance.query(question)
    nearest = sorted(range(len(found)), key=lambda i: -cos[i])[:top]
    return [
        Located(
            para.text[s:e],
            SENTENCE_MEANT,
            tuple(ln.box for ln in para.lines_between(s, e)),
            para.media_index,
            para.timestamp,
            float(cos[i]),
        )
        for i in nearest
        for para, s, e in [found[i]]
    ]


def _prose(text: str) -> bool:
    digits = sum(ch.isdigit() for ch in text)
    return text_length(text, cjk_weight=0.5) >= PROSE_WORDS and digits <= 0.3 * len(text)
