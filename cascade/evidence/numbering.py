"""Section numbers: '3.', '3.2', '(3)', 'Section 3', 'Chapter III', 'Part Three', '第三章', '三、',
'（二）' ... read from the start of a heading, and section references read from a question.

A number is a tuple of ints: (3,) for '3.' / 'Section 3' / '第三章', (3, 2) for '3.2'. Chinese and
Roman numerals and English number words up to ninety-nine are read; anything else is not a number.
"""

from __future__ import annotations

import re
import unicodedata

from .lexicon import ZH_DIGITS

__all__ = [
    "SectionNumber",
    "split_numbering",
    "parse_number",
    "chinese_int",
    "roman_int",
    "english_int",
]

SectionNumber = tuple[int, ...]

# The Chinese digits of the question words, plus 〇 (a zero written in dates and numbering).
_CN_DIGITS = {"〇": 0, **ZH_DIGITS}
_CN = "〇零一二三四五六七八九十百两"
_EN_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_EN_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
}
_SECTION_WORDS = (
    r"section|sect\.|sec\.|chapter|ch\.|part|article|art\.|clause|appendix|unit|"
    r"lesson|§"
)
_EN_NUMBER = r"(?:[a-z]+-[a-z]+|[a-z]+)"  # three, twenty-one


def chinese_int(text: str) -> int | None:
    """'三' -> 3, '十二' -> 12, '二十' -> 20, '一百零五' -> 105; None if not a Chinese numeral."""
    if not text or any(ch not in _CN for ch in text):
        return None
    total, current = 0, 0
    for ch in text:
        if ch == "百":
            total += (current or 1) * 100
            current = 0
        elif ch == "十":
            total += (current or 1) * 10
            current = 0
        else:
            current = current * 10 + _CN_DIGITS[ch] if current else _CN_DIGITS[ch]
    return total + current


def roman_int(text: str) -> int | None:
    """'IV' -> 4, 'xii' -> 12 (canonical numerals up to 399 only); None otherwise."""
    t = text.upper()
    if not t or not re.fullmatch(r"C{0,3}(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})", t):
        return None
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
    total = 0
    for a, b in zip(t, t[1:] + " ", strict=True):
        v = values[a]
        total += -v if b != " " and values[b] > v else v
    return total


def english_int(text: str) -> int | None:
    """'three' -> 3, 'twenty-one' -> 21, 'third' -> 3; None otherwise."""
    t = text.lower().replace("-", " ").split()
    if len(t) == 1 and t[0] in _ORDINALS:
        return _ORDINALS[t[0]]
    if len(t) == 1 and t[0] in _EN_UNITS:
        return _EN_UNITS.index(t[0])
    if t and t[0] in _EN_TENS and (len(t) == 1 or len(t) == 2 and t[1] in _EN_UNITS[1:10]):
        return _EN_TENS[t[0]] + (_EN_UNITS.index(t[1]) if len(t) == 2 else 0)
    return None


def parse_number(text: str) -> SectionNumber | None:
    """A section number written on its own: '3', '3.2', 'III', 'three', '三', '3.2.1.'."""
    t = unicodedata.normalize("NFKC", text).strip().rstrip(".")
    if re.fullmatch(r"\d{1,3}(?:\.\d{1,3})*", t):
        return tuple(int(p) for p in t.split("."))
    for read in (chinese_int, roman_int, english_int):
        value = read(t)
        if value is not None:
            return (value,)
    return None


# (pattern, plain): group 1 the number, group 2 the rest. `plain` patterns are bare numbers, which
# sentences and values also start with: they need the checks in `split_numbering`.
_PATTERNS = [
    # 第三章 概述 / 第3节 / 第二部分
    (re.compile(rf"^第\s*([{_CN}\d]+)\s*[章节部篇条款卷编课回讲](?:分)?[\s:：、.]*(.*)$"), False),
    # Section 3: / Chapter III / Part Two - / § 4.1
    (
        re.compile(
            rf"^(?:{_SECTION_WORDS})\s*(\d{{1,3}}(?:\.\d{{1,3}})*|[IVXLC]+|{_EN_NUMBER})"
            rf"(?:[\s.:：)\-–—]+(.*))?$",
            re.I,
        ),
        False,
    ),
    # （二）客流 / (2) Results / (iv) Scope
    (re.compile(rf"^[(（]\s*([{_CN}]+|\d{{1,3}}|[ivxlcIVXLC]+)\s*[)）]\s*(.*)$"), False),
    # 三、概述 / 3、结果
    (re.compile(rf"^([{_CN}]+|\d{{1,3}})\s*、\s*(.*)$"), False),
    # IV. Methods
    (re.compile(r"^([IVXLC]+)[.)]\s+(\S.*)$"), False),
    # 3. Overview / 3.2 Results / 3) Results / 2 Methods
    (re.compile(r"^(\d{1,3}(?:\.\d{1,3})*)([.)：:]\s*|\s+)(\S.*)$"), True),
]


def split_numbering(text: str) -> tuple[SectionNumber, str] | None:
    """(section number, the rest) when `text` starts with a section numbering, else None.

    A bare number must be followed by a word, not by another number ('3 4 5' and '12.50 13.00'
    are values), and by a word that does not start lower case unless a '.', ')' or ':' comes
    first ('2 apples were sold' is a sentence, '2 Methods' and '2. methods' are headings)."""
    t = unicodedata.normalize("NFKC", text).strip()
    for rx, plain in _PATTERNS:
        m = rx.match(t)
        if not m:
            continue
        number = parse_number(m.group(1))
        if number is None:
            continue
        rest = (m.groups()[-1] or "").strip()
        if plain:
            separator = m.group(2).strip()
            if rest[:1].isdigit() or not separator and rest[:1].islower():
                continue
        return number, rest
    return None
