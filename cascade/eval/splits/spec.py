"""The shape of a split: the seed, media sources, fonts, word banks, layouts and question phrasings
that its generators draw from (`cascade/eval/genres/`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fonts:
    sign: tuple[str, ...]
    caption: tuple[str, ...]
    body: tuple[str, ...]  # document text; `bold[i]` is the bold face of `body[i]`
    bold: tuple[str, ...]
    code: tuple[str, ...]
    cjk: str  # one CJK design per split


@dataclass(frozen=True)
class Section:
    """A section of a multi-section page: its heading, a topic phrase only its body mentions (for
    "the section about ..."), and the body."""

    heading: str
    topic: str
    body: str


@dataclass(frozen=True)
class Table:
    """A table: `kind` picks how cells are made ('timetable' times grow along a row,
    'stop_timetable' down a column, 'price' amounts with `unit` as the currency sign, 'spec' one
    'unit:lo:hi:decimals' recipe per column in `units`)."""

    kind: str
    title: str
    corner: str  # the header of the row-key column
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    unit: str = ""
    units: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fact:
    """A sentence holding one fact ({v}, of type `kind`: day, time, room, name, date) and the
    question whose answer is exactly that fact."""

    sentence: str
    question: str
    kind: str


@dataclass(frozen=True)
class IdField:
    """An id printed as 'label: value'; `pattern` makes values ('#' a digit, 'A' a capital
    letter, anything else kept)."""

    label: str
    pattern: str
    question: str


@dataclass(frozen=True)
class ZhReceipt:
    """A Chinese till receipt layout: shop names, goods, the labels it prints, its date style."""

    shops: tuple[str, ...]
    goods: tuple[str, ...]
    number_label: str  # 单号 / 流水号 ...
    date_label: str
    subtotal_label: str
    discount_label: str
    total_label: str  # 合计 / 总计 ...
    paid_label: str  # printed after the total with the same amount, or "" for none
    date_style: str  # 'iso' (2024-03-05) or 'zh' (2024年3月5日)
    currency: str  # '' or '¥'


@dataclass(frozen=True)
class SplitSpec:
    """Everything one split draws from. Nothing here is shared with the other split."""

    seed: int
    fonts: Fonts
    # media: (footage source, width, height); photos by `photos.photo` name
    footage: tuple[tuple[str, int, int], ...]
    long_footage: tuple[tuple[str, int, int], ...]
    long_fps: float
    photos: tuple[str, ...]
    backgrounds: tuple[str, ...]  # photos a printed page is photographed on
    counts: tuple[tuple[str, str, str, str], ...]  # (source, question, answer, detector label)
    scenes: tuple[tuple[str, str, str], ...]  # (source, question, answer)
    # words
    sign_words: tuple[str, ...]
    zh_sign_words: tuple[str, ...]
    distractor_words: tuple[str, ...]
    banners: tuple[str, ...]
    doc_titles: tuple[str, ...]
    sections: tuple[Section, ...]
    numbering: tuple[str, ...]  # heading numbers: '{n}' arabic, '{r}' roman
    tables: tuple[Table, ...]
    table_styles: tuple[str, ...]  # 'grid', 'lines', 'zebra'
    code_langs: tuple[str, ...]
    code_verbs: tuple[str, ...]
    code_nouns: tuple[str, ...]
    class_nouns: tuple[str, ...]
    code_themes: tuple[str, ...]  # 'light', 'dark'
    line_numbers: bool
    notice_titles: tuple[str, ...]
    facts: tuple[Fact, ...]
    fillers: tuple[str, ...]  # sentences with no fact, between the facts
    fact_values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    companies: tuple[str, ...] = ()
    id_fields: tuple[IdField, ...] = ()
    receipt_layouts: tuple[str, ...] = ()
    zh_receipt: ZhReceipt | None = None
    # question templates per slot; the two splits share none
    questions: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def ask(self, slot: str, rng, **values) -> str:
        """A question for `slot` in this split's phrasing, with `values` filled in."""
        if slot not in self.questions:
            raise KeyError(f"split has no question templates for '{slot}'")
        return rng.choice(self.questions[slot]).format(**values)
