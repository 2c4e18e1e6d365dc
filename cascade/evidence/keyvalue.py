"""Key-value reading on documents: the value that belongs to the key the question names.

"What is the total amount?" names the key *total*: the answer is the amount on the line that
says TOTAL (after the key on the same OCR line, on the same row to its right, or on the line
below it), never the label itself, and never the SUBTOTAL or TAX amount. Each key kind says which
value pattern it expects (amounts, dates, ids). When the candidates disagree the reader says so
and the caller abstains. A question that names its key's noun ("the PO number": `P.O. No.`,
`PO #`, `Purchase Order`; "the invoice number") takes the keys that name it; on a page whose
number keys name other things (Invoice No., Account No.) and none names it, nothing is read:
the caller abstains rather than answer another number. A page photographed at an angle is read
level first (`structure.pages`): turned, a value sits a row higher than its key, and an upright
box around it overlaps the next key's row more than its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cascade.artifacts import OcrLine, same_time

from .doc_lexicon import KEY_NOUNS, ZH_KEY_NOUNS, key_noun_pattern
from .query import Query
from .structure import pages

__all__ = ["KeyQuery", "key_query", "KeyValue", "read_key_value", "other_keys", "lone_value"]

_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
PATTERNS = {
    "amount": re.compile(
        r"[$€£¥]?\s?\d{1,3}(?:[,\s]\d{3})*[.,]\d{2}(?!\d)|[$€£¥]?\s?\d+[.,]\d{2}(?!\d)"
    ),
    # digits are bounded by non-digits, not \b: a Chinese key runs straight into its value
    "date": re.compile(
        rf"(?<!\d)\d{{4}}-\d{{1,2}}-\d{{1,2}}(?!\d)|(?<!\d)\d{{1,2}}[/.]\d{{1,2}}[/.]"
        rf"\d{{2,4}}(?!\d)|(?<!\d)\d{{1,2}}\s+{_MONTHS}\s+\d{{4}}(?!\d)|"
        rf"\b{_MONTHS}\s+\d{{1,2}},?\s+\d{{4}}(?!\d)|\d{{4}}年\d{{1,2}}月\d{{1,2}}[日号]",
        re.I,
    ),
    # an id may be printed in groups ("2231 9920 1184", "+1 555 201 3344", an IBAN): the whole run
    # of groups is the id, or a tool would answer its first group
    "id": re.compile(
        r"(?<![A-Za-z0-9_.+])(?:\+\d{1,3}(?: \d{2,5})+"  # a phone number
        r"|[A-Z]{2}\d{2}(?: [A-Z0-9]{4}){2,}(?: [A-Z0-9]{1,3})?"  # an IBAN
        r"|(?=[A-Za-z0-9-]*\d)[A-Za-z]{0,6}-?\d[A-Za-z0-9-]{2,}(?: \d{3,5})*)"
        r"(?![A-Za-z0-9_.])"
    ),
}


@dataclass(frozen=True)
class KeyQuery:
    """What to look for: key patterns a line must match, words it must not contain, the value."""

    name: str
    key: re.Pattern[str]
    exclude: re.Pattern[str] | None
    value: str  # a PATTERNS name
    noun: re.Pattern[str] | None = None  # 'invoice' in "What is the invoice number?": preferred
    others: re.Pattern[str] | None = None  # the other key nouns: a key naming one is not ours
    named_field: bool = False  # the noun is a field's own name: a key must name it


# Each key in English and Chinese, whatever the question's language (a Chinese question about an
# English receipt is common): (key pattern, lines it must not be on, value pattern).
_KEYS = {
    "subtotal": (r"\bsub[\s-]?total\b|小计", None, "amount"),
    "tax": (r"\b(?:tax|vat|gst)\b|税额|税金|税", r"total|合计|总计|小计", "amount"),
    "total": (
        r"\b(?:total|amount\s+(?:due|payable)|balance(?:\s+due)?|to\s+pay)\b|合计|总计|总额|总金额|总价|应付|实付|应收|"
        r"实收|共计",
        r"\bsub|sub[\s-]?total|\btax|\bvat\b|\bgst\b|before|小计|税",
        "amount",
    ),
    "date": (r"\b(?:date|dated|issued)\b|日期", r"\bdue\b|到期", "date"),
    "number": (r"\b(?:number|no|num|id|ref|reference)\b\.?|#|号码|编号|单号|号", None, "id"),
}
_NOUN_WORDS = {
    noun: "|".join([key_noun_pattern(noun)] + [zh for zh, en in ZH_KEY_NOUNS.items() if en == noun])
    for noun in KEY_NOUNS
}


def key_query(query: Query) -> KeyQuery | None:
    """The key a `Query` names (total / subtotal / tax / date / a number), or None."""
    if query.key is None:
        return None
    key, exclude, value = _KEYS[query.key]
    if query.key == "date" and ("due" in query.cues or "到期" in query.question):
        exclude = None  # "the due date": the due key is the one asked for
    noun = others = None
    if query.key_noun and query.key_noun not in _NOUN_WORDS:
        # a field the page labels by its own name ('Seat', 'Gate', 'Phone'): only a key that
        # names it is ours (`_read_level`), never another number on the page
        noun = re.compile(key_noun_pattern(query.key_noun), re.I)
        return KeyQuery(
            query.key,
            re.compile(rf"{key}|{noun.pattern}", re.I),
            None,
            value,
            noun,
            re.compile("|".join(f"(?:{w})" for w in _NOUN_WORDS.values()), re.I),
            named_field=True,
        )
    if query.key_noun in _NOUN_WORDS:
        noun = re.compile(_NOUN_WORDS[query.key_noun], re.I)
        others = re.compile(
            "|".join(f"(?:{w})" for n, w in _NOUN_WORDS.items() if n != query.key_noun), re.I
        )
        if value == "id":  # "PO: 4500123", "Purchase Order: ...": the noun alone is the key
            key = rf"{key}|(?:{_NOUN_WORDS[query.key_noun]})(?=\s*[:#：])"
    return KeyQuery(
        query.key,
        re.compile(key, re.I),
        re.compile(exclude, re.I) if exclude else None,
        value,
        noun,
        others,
    )


@dataclass(frozen=True)
class KeyValue:
    """A value found for a key: the text, the key line and the line the value was read from."""

    value: str
    key_line: OcrLine
    value_line: OcrLine


def _values(text: str, kind: str) -> list[str]:
    if kind == "id":  # dates and amounts look like ids: take them out first
        for other in ("date", "amount"):
            text = PATTERNS[other].sub(" ", text)
    return [m.group(0).strip() for m in PATTERNS[kind].finditer(text)]


def _same_place(a: OcrLine, b: OcrLine) -> bool:
    return a.media_index == b.media_index and same_time(a.timestamp, b.timestamp)


def _slack(key: OcrLine, value: OcrLine) -> float:
    """How far the OCR box of a value printed just after its key may start inside the key's:
    each box is padded past its ink (a sixth of its height or so per side), and a tight label
    column leaves less than that between the ink of the two."""
    return 0.3 * (key.box.height + value.box.height)


def _value_for(key: OcrLine, match: re.Match, lines: list[OcrLine], kind: str):
    """The value after the key on its own line, else on its row to the right, else below it."""
    found = _values(key.text[match.end() :], kind)
    if found:
        return found[0], key
    h = key.box.height
    right = [
        ln
        for ln in lines
        if ln is not key
        and _same_place(ln, key)
        and min(ln.box.y1, key.box.y1) - max(ln.box.y0, key.box.y0) >= 0.5 * min(h, ln.box.height)
        and ln.box.x0 >= key.box.x1 - _slack(key, ln)
    ]
    for line in sorted(right, key=lambda ln: ln.box.x0):
        found = _values(line.text, kind)
        if found:
            return found[0], line
    for line in sorted(_right_under(key, lines), key=lambda ln: ln.box.y0):
        found = _values(line.text, kind)
        if found:
            # another value of the kind right under that one: the key heads a table's column,
            # whose row the question names; the first row's value is not the answer
            column = any(_values(ln.text, kind) for ln in _right_under(line, lines))
            return None if column else (found[0], line)
    return None


def _right_under(line: OcrLine, lines: list[OcrLine]) -> list[OcrLine]:
    """The lines right under `line` (within 1.5 of its heights), overlapping it across."""
    b = line.box
    return [
        ln
        for ln in lines
        if ln is not line
        and _same_place(ln, line)
        and 0 <= ln.box.y0 - b.y1 <= 1.5 * b.height
        and min(ln.box.x1, b.x1) - max(ln.box.x0, b.x0) > 0.3 * min(ln.box.width, b.width)
    ]


def read_key_value(lines: list[OcrLine], query: KeyQuery) -> tuple[list[KeyValue], list[OcrLine]]:
    """(values found for the key, the key lines that matched). Several different values mean the
    document is ambiguous for this question; none means the key or its value was not read."""
    level: list[OcrLine] = []
    source: dict[int, OcrLine] = {}
    for page in pages(lines):
        level += page.lines
        source.update({id(ln): page.original(ln) for ln in page.lines})
    found, keys = _read_level(level, query)
    return (
        [KeyValue(kv.value, source[id(kv.key_line)], source[id(kv.value_line)]) for kv in found],
        [source[id(ln)] for ln in keys],
    )


def _read_level(lines: list[OcrLine], query: KeyQuery) -> tuple[list[KeyValue], list[OcrLine]]:
    keys = []
    for line in lines:
        m = query.key.search(line.text)
        if m and not (query.exclude and query.exclude.search(line.text)):
            keys.append((line, m))
    if query.noun and any(query.noun.search(ln.text) for ln, _ in keys):
        keys = [(ln, m) for ln, m in keys if query.noun.search(ln.text)]
    elif query.named_field:
        return [], [ln for ln, _ in keys]  # 'Seat' asked, not on the page: no other number
    elif other_keys(keys_only := [ln for ln, _ in keys], query):
        return [], keys_only  # the page names its numbers and none is ours: never another's
    found = []
    for line, m in keys:
        hit = _value_for(line, m, lines, query.value)
        if hit:
            found.append(KeyValue(hit[0], line, hit[1]))
    return found, [ln for ln, _ in keys]


def other_keys(keys: list[OcrLine], query: KeyQuery) -> list[OcrLine]:
    """The key lines that name another key noun than the one the question names ('Invoice No'
    when the PO number was asked for), when none names the question's: the page tells its
    numbers apart by name and the one asked for is not among those read. Empty otherwise (no
    noun asked, or a key that names it, or keys that name nothing: a receipt's plain 'No.')."""
    if query.noun is None or query.others is None or any(query.noun.search(ln.text) for ln in keys):
        return []
    return [ln for ln in keys if query.others.search(ln.text)]


def lone_value(lines: list[OcrLine], kind: str) -> tuple[str, OcrLine] | None:
    """The one value of a pattern on the page (and the line it is on), or None when there are
    none or several different ones."""
    found = {
        re.sub(r"\W", "", v).upper(): (v, line) for line in lines for v in _values(line.text, kind)
    }
    return next(iter(found.values())) if len(found) == 1 else None
