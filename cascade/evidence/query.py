"""The typed question every later stage reads: `Query` (built once by
`cascade.evidence.understanding.understand`).

A `Query` says what the question asks for, so no stage re-derives it from the string:

- `intent`: read / count / detail / scene (how to look);
- `target`: what to find: a `sign` (or label), a document `title`, a section `heading` (by number
  or name), a `table_cell` (row key x column key), a `paragraph_fact`, a `code_identifier`, a
  `key_value` (total, date, invoice number ...), an `object_count`, an `object` (a detail of one),
  or the `scene`;
- `answer_type`: the span wanted: day, date, time, when (any of those three), amount, id,
  identifier, number, cell, count, text (a whole text block) or description;
- attributes of the target: `colour`, `position`, `size`, and `time_order` (first / last / before /
  after a named text or event, the `anchor`);
- `cues`: the question's own content words (exact words; Chinese as character bigrams, the
  standard way to match unsegmented CJK text), `language` ("en", "zh", "other").

`Query.describe()` is what the route reports: `table_cell row='Express 12' col='Dep.' answer=cell
lang=en`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal, get_args

from cascade.artifacts import Route

__all__ = [
    "Query",
    "TimeOrder",
    "TARGETS",
    "TEXT_TARGETS",
    "DOCUMENT_TARGETS",
    "ANSWER_TYPES",
    "cue_tokens",
    "has_cue",
    "singular",
    "language_of",
]

Target = Literal[
    "sign",
    "title",
    "heading",
    "table_cell",
    "paragraph_fact",
    "code_identifier",
    "key_value",
    "object_count",
    "object",
    "scene",
]
TARGETS: tuple[str, ...] = get_args(Target)
# Targets whose answer is text read off the media; of those, the ones that live in a document.
TEXT_TARGETS = frozenset(
    {"sign", "title", "heading", "table_cell", "paragraph_fact", "code_identifier", "key_value"}
)
DOCUMENT_TARGETS = frozenset(
    {"title", "heading", "table_cell", "paragraph_fact", "code_identifier", "key_value"}
)
AnswerType = Literal[
    "day",
    "date",
    "time",
    "when",
    "amount",
    "id",
    "identifier",
    "number",
    "cell",
    "count",
    "text",
    "description",
]
ANSWER_TYPES: tuple[str, ...] = get_args(AnswerType)

_HAN = re.compile(r"[\u4e00-\u9fff]")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_LETTERS_OR_DIGITS = re.compile(r"[^\W\d_]+|\d+")


@dataclass(frozen=True)
class TimeOrder:
    """Order in time (video, image sets in order) or in reading order (documents): `relation` to
    an `anchor` (the named text or event) for before / after; first / last need no anchor. The
    anchor is described like a target: its words, the object label, size and colour it names."""

    relation: Literal["first", "last", "before", "after"]
    anchor: str | None = None
    anchor_cues: tuple[str, ...] = ()
    anchor_label: str | None = None
    anchor_size: Literal["small", "big"] | None = None
    anchor_colour: str | None = None

    def describe(self) -> str:
        return self.relation + (f" '{self.anchor}'" if self.anchor else "")


@dataclass(frozen=True)
class Query:
    """What a question asks for (see the module docstring). Frozen and hashable; fields are only
    ever added, never renamed."""

    question: str
    language: str
    intent: str
    target: Target
    answer_type: AnswerType = "text"
    cues: tuple[str, ...] = ()
    colour: str | None = None
    position: str | None = None
    size: Literal["small", "big"] | None = None
    time_order: TimeOrder | None = None
    section_number: str | None = None  # heading by number: "3", "2.1"
    section_name: str | None = None  # heading by name: "pricing"
    row_key: str | None = None  # the entity a value belongs to (a table's row)
    column_key: str | None = None  # the attribute asked for (a table's column)
    key: str | None = None  # key-value key: total, subtotal, tax, date, number
    key_noun: str | None = None  # 'invoice' in "the invoice number"
    code_kind: str | None = None  # function, method, class, variable ...
    label: str | None = None  # the COCO label an object question names
    intent_scores: tuple[tuple[str, float], ...] = field(default=(), compare=False)
    matched: tuple[str, ...] = ()  # what the rules matched, for the route
    # the other reading of a document question, where the rules and the learned reader differ
    # (the rules' where the reader retyped it, the reader's where the words named the kind):
    # its candidates are leads (`documents.located_for`), never a tool's answer
    second_kind: Target | None = None

    @property
    def scores(self) -> dict[str, float]:
        return dict(self.intent_scores)

    @property
    def reads_text(self) -> bool:
        """The answer is text on the media (a sign, a title, a cell, a value ...)."""
        return self.target in TEXT_TARGETS

    @property
    def readings(self) -> frozenset[str]:
        """The kinds the question is read as: its target and its second reading, if any."""
        return frozenset(k for k in (self.target, self.second_kind) if k is not None)

    @property
    def in_document(self) -> bool:
        """The target lives in a document's structure (title, heading, table, paragraph, code,
        key-value), on a page or photographed inside a picture."""
        return self.target in DOCUMENT_TARGETS

    @property
    def needs_high_res(self) -> float:
        """How strongly the question asks for pixels a thumbnail loses, in [0, 1]: 1 for text and
        counted objects; else the intent scores (rules + zero-shot) of read, count and detail."""
        if self.reads_text or self.target == "object_count":
            return 1.0
        s = self.scores
        return max(s.get("read", 0.0), s.get("count", 0.0), s.get("detail", 0.0))

    def describe(self) -> str:
        """One line of what was understood: the target and its fields (the answer's first route)."""
        parts: list[str] = [self.target]
        for name, value in (
            ("row", self.row_key),
            ("col", self.column_key),
            ("section", self.section_number or self.section_name),
            ("key", " ".join(filter(None, (self.key_noun, self.key))) or None),
            ("code", self.code_kind),
            ("label", self.label),
            ("colour", self.colour),
            ("position", self.position),
            ("size", self.size),
        ):
            if value:
                parts.append(
                    f"{name}='{value}'" if name in ("row", "col", "section") else f"{name}={value}"
                )
        if self.time_order:
            parts.append(f"order={self.time_order.describe()}")
        parts.append(f"answer={self.answer_type}")
        if self.cues:
            parts.append(f"cues={','.join(self.cues)}")
        parts.append(f"lang={self.language}")
        return " ".join(parts)

    def route(self) -> Route:
        """What was understood, for the answer's evidence routes."""
        return Route(
            "understood",
            f"understood: {self.describe()}",
            {f"intent_{k}": v for k, v in self.intent_scores},
        )


def language_of(text: str) -> str:
    """'zh' when the text holds Chinese characters, 'en' when its letters are Latin, else
    'other'."""
    if _HAN.search(text):
        return "zh"
    letters = [ch for ch in text if ch.isalpha()]
    latin = sum("LATIN" in unicodedata.name(ch, "") for ch in letters)
    return "en" if not letters or latin >= 0.9 * len(letters) else "other"


def cue_tokens(text: str) -> set[str]:
    """The tokens a text is matched on: Latin words and numbers (lower case, plural 's'
    dropped), each also cut where letters meet digits (OCR drops the space of 'PEANUT 4PCS'),
    and every Chinese character bigram (a single character when alone)."""
    out = set()
    for w in _WORD.findall(text):
        han = "".join(ch if _HAN.match(ch) else " " for ch in w).split()
        rest = _HAN.sub(" ", w).split()
        rest += [part for r in rest for part in _LETTERS_OR_DIGITS.findall(r) if part != r]
        out |= {singular(r.lower()) for r in rest}
        for run in han:
            out |= {run[i : i + 2] for i in range(len(run) - 1)} if len(run) > 1 else {run}
    return out


def singular(word: str) -> str:
    """'gates' -> 'gate'; 'express', 'bus' and short words stay as they are."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def has_cue(text: str, cues: tuple[str, ...] | set[str]) -> bool:
    """The text holds one of the cues, matched exactly (`cue_tokens`), never by similarity."""
    return bool(set(cues) & cue_tokens(text))
