"""Key-value reading on documents: the value that belongs to the key the question names.

"What is the total amount?" names the key *total*: the answer is the amount on the line that
says TOTAL (after the key on the same OCR line, on the same row to its right, or on the line
below it), never the label itself, and never the SUBTOTAL or TAX amount. Each key kind says which
value pattern it expects (amounts, dates, ids). When the candidates disagree the reader says so
and the caller abstains.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from cascade.artifacts import OcrLine, same_time

__all__ = ["KeyQuery", "key_query", "KeyValue", "read_key_value", "lone_value"]

_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
PATTERNS = {
    "amount": re.compile(r"[$€£]?\s?\d{1,3}(?:[,\s]\d{3})*[.,]\d{2}(?!\d)|[$€£]?\s?\d+[.,]\d{2}(?!\d)"),
    "date": re.compile(rf"\b\d{{4}}-\d{{1,2}}-\d{{1,2}}\b|\b\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{2,4}}\b|"
                       rf"\b\d{{1,2}}\s+{_MONTHS}\s+\d{{4}}\b|\b{_MONTHS}\s+\d{{1,2}},?\s+\d{{4}}\b",
                       re.I),
    "id": re.compile(r"(?<![\w.])(?=[\w-]*\d)[A-Za-z]{0,6}-?\d[\w-]{2,}(?![\w.])"),
}


@dataclass(frozen=True)
class KeyQuery:
    """What to look for: key patterns a line must match, words it must not contain, the value."""

    name: str
    key: re.Pattern[str]
    exclude: re.Pattern[str] | None
    value: str  # a PATTERNS name
    noun: str | None = None  # 'invoice' in "What is the invoice number?": preferred in the key


_NOUNS = ("invoice", "receipt", "order", "claim", "policy", "account", "reference", "ticket",
          "booking", "customer", "transaction", "member", "case", "serial", "tracking")


def key_query(question: str) -> KeyQuery | None:
    """The key a question names (total / subtotal / tax / date / a number), or None."""
    q = question.lower()
    if re.search(r"\bsub[\s-]?total\b", q):
        return KeyQuery("subtotal", re.compile(r"\bsub[\s-]?total\b", re.I), None, "amount")
    if re.search(r"\b(tax|vat|gst)\b", q):
        return KeyQuery("tax", re.compile(r"\b(tax|vat|gst)\b", re.I), re.compile(r"total", re.I),
                        "amount")
    if re.search(r"\b(total|amount due|balance due|grand total)\b", q):
        return KeyQuery("total", re.compile(r"\b(total|amount\s+due|balance\s+due)\b", re.I),
                        re.compile(r"\bsub|sub[\s-]?total|\btax|\bvat\b|\bgst\b|before", re.I),
                        "amount")
    if re.search(r"\bdate\b|\bwhen\b", q):
        return KeyQuery("date", re.compile(r"\b(date|dated|issued)\b", re.I),
                        re.compile(r"\bdue\b", re.I) if "due" not in q else None, "date")
    if re.search(r"\b(number|no\.?|#|id|reference|ref)\b|#", q):
        noun = next((n for n in _NOUNS if re.search(rf"\b{n}\b", q)), None)
        return KeyQuery("number", re.compile(r"\b(number|no|num|id|ref|reference)\b\.?|#", re.I),
                        None, "id", noun)
    return None


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


def _value_for(key: OcrLine, match: re.Match, lines: list[OcrLine], kind: str):
    """The value after the key on its own line, else on its row to the right, else below it."""
    found = _values(key.text[match.end():], kind)
    if found:
        return found[0], key
    h = key.box.height
    right = [l for l in lines if l is not key and _same_place(l, key)
             and min(l.box.y1, key.box.y1) - max(l.box.y0, key.box.y0) >= 0.5 * min(h, l.box.height)
             and l.box.x0 >= key.box.x1 - 0.25 * h]
    for line in sorted(right, key=lambda l: l.box.x0):
        found = _values(line.text, kind)
        if found:
            return found[0], line
    below = [l for l in lines if l is not key and _same_place(l, key)
             and 0 <= l.box.y0 - key.box.y1 <= 1.5 * h
             and min(l.box.x1, key.box.x1) - max(l.box.x0, key.box.x0) > 0.3 * min(l.box.width, key.box.width)]
    for line in sorted(below, key=lambda l: l.box.y0):
        found = _values(line.text, kind)
        if found:
            return found[0], line
    return None


def read_key_value(lines: list[OcrLine], query: KeyQuery) -> tuple[list[KeyValue], list[OcrLine]]:
    """(values found for the key, the key lines that matched). Several different values mean the
    document is ambiguous for this question; none means the key or its value was not read."""
    keys = []
    for line in lines:
        m = query.key.search(line.text)
        if m and not (query.exclude and query.exclude.search(line.text)):
            keys.append((line, m))
    if query.noun and any(query.noun in l.text.lower() for l, _ in keys):
        keys = [(l, m) for l, m in keys if query.noun in l.text.lower()]
    found = []
    for line, m in keys:
        hit = _value_for(line, m, lines, query.value)
        if hit:
            found.append(KeyValue(hit[0], line, hit[1]))
    return found, [l for l, _ in keys]


def lone_value(lines: list[OcrLine], kind: str) -> tuple[str, OcrLine] | None:
    """The one value of a pattern on the page (and the line it is on), or None when there are
    none or several different ones."""
    found = {re.sub(r"\W", "", v).upper(): (v, line) for line in lines for v in _values(line.text, kind)}
    return next(iter(found.values())) if len(found) == 1 else None
