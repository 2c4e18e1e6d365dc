"""Exact answer spans: the day, date, time, amount, id, identifier, number ... inside a text.

A tool answer is the answer, not the line it is on: `exact_span("The east entrance will be closed
on Tuesday for repairs.", "weekday")` is 'Tuesday'. Precision first: `exact_span` returns the one
span of the kind asked for, or None when there is none **or several different ones** ('Monday to
Friday' has no single day). The same value written twice ('Tue' and 'Tuesday') is one value.

Kinds (`KINDS`): weekday (alias day), date, time, when (a date, time or day; written together,
one span), amount, percent, id, identifier, number, name, place (Room 330, Gate 12B, 3号楼),
email, url; text and cell (the whole text, trimmed). English and Chinese forms are read: 星期二 /
周二 / 礼拜二, 2024年3月5日, 三月五日, 下午3点 / 15:30, ¥ 12.50 / 12.50元, 百分之五 / 5%, 十五分钟
(a number with its measure word).
A kind never claims text a more specific kind holds: in '5 March 2024, 14:30, $12.50' there is no
`number`, in 'Order A-10293, total $45.00' one `id`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from .codeblocks import definition_in, looks_like_code
from .numbering import chinese_int

__all__ = ["Span", "KINDS", "candidates", "exact_span"]

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CN_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
# A month's name, or its abbreviation with its dot ('Mar.'): a full name's '.' ends the sentence.
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|(?:jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?)"
)
_CAP_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|"
    r"November|December|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?)"
)
_ORD = r"(?:st|nd|rd|th)?"
_CN_NUM = "〇零一二三四五六七八九十百千万两"
_CURRENCY = r"[$€£¥￥₹₩]|(?:US|HK|S|A|C|NZ)\$|\b(?:USD|EUR|GBP|CNY|RMB|JPY|HKD|CHF|CAD|AUD|INR)\b"
_CN_MEASURES = "个位名人次件张台辆条家本只天周年月号日小时分钟秒米公里千米克公斤元块角层楼号线路站"


@dataclass(frozen=True)
class Span:
    """A span of `kind` in a text: `text` exactly as written (text[start:end]); `value` what it
    means, normalised, so two spellings of one value compare equal."""

    text: str
    start: int
    end: int
    kind: str
    value: str


Found = list[tuple[int, int, str]]  # (start, end, value) per candidate


def _all(rx: re.Pattern[str], text: str, value: Callable[[re.Match], str | None]) -> Found:
    out = []
    for m in rx.finditer(text):
        v = value(m)
        if v is not None:
            out.append((m.start(), m.end(), v))
    return out


# -- weekday --------------------------------------------------------------------------------
_WEEKDAY_FULL = re.compile(r"\b(mon|tues|wednes|thurs|fri|satur|sun)day\b", re.I)
_WEEKDAY_ABBR = re.compile(
    r"\b(Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun|MON|TUE|TUES|WED|"
    r"THU|THUR|THURS|FRI|SAT|SUN)\b\.?(?!\w)"
)
_WEEKDAY_CN = re.compile(
    r"(星期|礼拜|周)([一二三四五六日天])(?![次遍回个])"
)  # 每周一次: once a week


def _weekdays(text: str) -> Found:
    out = _all(
        _WEEKDAY_FULL, text, lambda m: str([d[:3] for d in _WEEKDAYS].index(m.group(1).lower()[:3]))
    )
    out += _all(
        _WEEKDAY_ABBR, text, lambda m: str([d[:3] for d in _WEEKDAYS].index(m.group(1).lower()[:3]))
    )
    # 周 after a numeral counts weeks (一周一次: once a week), it does not name a day
    out += _all(
        _WEEKDAY_CN,
        text,
        lambda m: (
            None
            if m.group(1) == "周" and m.start() > 0 and text[m.start() - 1] in _CN_NUM
            else str(_CN_WEEKDAY[m.group(2)])
        ),
    )
    return out


# -- date -----------------------------------------------------------------------------------
def _month_number(name: str) -> int:
    return next(i + 1 for i, m in enumerate(_MONTHS) if m.startswith(name.lower().rstrip(".")[:3]))


_DATE_PATTERNS: list[tuple[re.Pattern[str], Callable[[re.Match], str]]] = [
    (
        re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"),
        lambda m: f"{int(m[1])}-{int(m[2])}-{int(m[3])}",
    ),
    (
        re.compile(r"(?<![\d.])(\d{1,2})[-/.](\d{1,2})[-/.](\d{4}|\d{2})(?![\d.]\d|\d)"),
        lambda m: f"?{int(m[1])}-{int(m[2])}-{m[3]}",
    ),
    (
        re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH}),?\s+(\d{{4}})\b", re.I),
        lambda m: f"{int(m[3])}-{_month_number(m[2])}-{int(m[1])}",
    ),
    (
        re.compile(rf"\b({_MONTH})\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})\b", re.I),
        lambda m: f"{int(m[3])}-{_month_number(m[1])}-{int(m[2])}",
    ),
    (
        re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_CAP_MONTH})(?![\w])"),
        lambda m: f"-{_month_number(m[2])}-{int(m[1])}",
    ),
    (
        re.compile(rf"\b({_CAP_MONTH})\s+(\d{{1,2}}){_ORD}\b(?![.:]\d)"),
        lambda m: f"-{_month_number(m[1])}-{int(m[2])}",
    ),
    (
        re.compile(
            rf"(?:([\d{_CN_NUM}]{{2,4}})\s*年\s*)?([\d{_CN_NUM}]{{1,3}})\s*月\s*"
            rf"([\d{_CN_NUM}]{{1,3}})\s*[日号]"
        ),
        lambda m: f"{_cn_or_int(m[1]) if m[1] else ''}-{_cn_or_int(m[2])}-{_cn_or_int(m[3])}",
    ),
    (
        re.compile(rf"([\d{_CN_NUM}]{{4}})\s*年\s*([\d{_CN_NUM}]{{1,2}})\s*月(?!\s*[\d{_CN_NUM}])"),
        lambda m: f"{_cn_or_int(m[1])}-{_cn_or_int(m[2])}-",
    ),
]


def _cn_or_int(text: str) -> int | str:
    if text.isdigit():
        return int(text)
    if all(ch in _CN_NUM for ch in text) and len(text) == 4:  # 二〇二四: digit by digit
        return int(
            "".join(str("〇一二三四五六七八九".index(ch.replace("零", "〇"))) for ch in text)
        )
    number = chinese_int(text)
    return number if number is not None else text


def _dates(text: str) -> Found:
    out: Found = []
    for rx, value in _DATE_PATTERNS:
        for m in rx.finditer(text):
            if not any(s < m.end() and m.start() < e for s, e, _ in out):
                out.append((m.start(), m.end(), value(m)))
    return out


# -- time -----------------------------------------------------------------------------------
_TIME = re.compile(
    r"(?<![\d:.])([01]?\d|2[0-4])[:：]([0-5]\d)(?:[:：][0-5]\d)?"
    r"(?:\s*([ap])\.?\s?m\b\.?)?(?![\d:])",
    re.I,
)
_TIME_AMPM = re.compile(r"(?<![\d:.])(1[0-2]|0?[1-9])(?:[.:]([0-5]\d))?\s*([ap])\.?\s?m\b\.?", re.I)
_TIME_WORDS = re.compile(r"\b(noon|midday|midnight)\b", re.I)
_TIME_CN = re.compile(
    rf"(上午|下午|晚上|早上|中午|凌晨|傍晚)?\s*([\d{_CN_NUM}]{{1,3}})\s*[点時时]"
    rf"(?:\s*([\d{_CN_NUM}]{{1,3}})\s*分|(半)|整)?"
)
_PM_CN = ("下午", "晚上", "傍晚")


def _clock(hour: int, minute: int, half: str | None) -> str:
    if half and half.lower() == "p" and hour < 12:
        hour += 12
    if half and half.lower() == "a" and hour == 12:
        hour = 0
    return f"{hour}:{minute:02d}"


def _times(text: str) -> Found:
    out = _all(_TIME, text, lambda m: _clock(int(m[1]), int(m[2]), m[3]))
    out += [
        f
        for f in _all(_TIME_AMPM, text, lambda m: _clock(int(m[1]), int(m[2] or 0), m[3]))
        if not any(s <= f[0] < e for s, e, _ in out)
    ]
    out += _all(_TIME_WORDS, text, lambda m: "0:00" if m[1].lower() == "midnight" else "12:00")

    def cn(m: re.Match) -> str | None:
        hour, minute = _cn_or_int(m[2]), _cn_or_int(m[3]) if m[3] else (30 if m[4] else 0)
        if not isinstance(hour, int) or not isinstance(minute, int) or hour > 24:
            return None
        return _clock(hour, minute, "p" if m[1] in _PM_CN else None)

    return out + _all(_TIME_CN, text, cn)


# -- amount, percent, number ----------------------------------------------------------------
# a decimal comma (24,98; 1.234,56: receipts across Europe) first, then a decimal point
_COMMA_DECIMAL = r"\d{1,3}(?:\.\d{3})+,\d{2}|\d+,\d{2}(?!\d)"
_NUM = rf"{_COMMA_DECIMAL}|\d{{1,3}}(?:[,\s]\d{{3}})+(?:\.\d{{1,2}})?|\d+(?:\.\d{{1,2}})?"
_AMOUNT = re.compile(
    rf"(?:{_CURRENCY})\s?-?(?:{_NUM})(?![\d.,]?\d)|(?<![\w.])-?(?:{_NUM})\s?"
    rf"(?:元|块|圆|美元|欧元|英镑|日元|(?:{_CURRENCY})|dollars?|euros?|pounds?)"
    rf"|(?<![\w.,])(?:\d{{1,3}}(?:,\d{{3}})*\.\d{{2}}|{_COMMA_DECIMAL})(?![\d.,]?\d)",
    re.I,
)
_PERCENT = re.compile(rf"(?<![\w.])\d+(?:\.\d+)?\s?[%％]|百分之[\d{_CN_NUM}.点]+")
_NUMBER = re.compile(r"(?<![\w.,])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w]|[.,]\d)")
_NUMBER_CN = re.compile(rf"[{_CN_NUM}]+(?=[{_CN_MEASURES}])")


def _decimal(text: str) -> str:
    digits = re.sub(r"[^\d.,\-]", "", text.replace("−", "-"))
    if digits[-3:-2] == "," and digits[-2:].isdigit():  # a decimal comma: 1.234,56
        digits = digits.replace(".", "").replace(",", ".")
    digits = digits.replace(",", "")
    try:
        return f"{float(digits):.2f}"
    except ValueError:
        return digits


def _amounts(text: str) -> Found:
    return _all(_AMOUNT, text, lambda m: _decimal(m.group(0)))


def _percents(text: str) -> Found:
    def value(m: re.Match) -> str | None:
        body = m.group(0).removeprefix("百分之")
        n = _cn_or_int(body) if not re.search(r"\d", body) else _decimal(body)
        return None if isinstance(n, str) and not re.search(r"\d", n) else str(n)

    return _all(_PERCENT, text, value)


def _numbers(text: str) -> Found:
    out = _all(
        _NUMBER,
        text,
        lambda m: (
            _decimal(m.group(0)).removesuffix(".00")
            if "." not in m.group(0)
            else _decimal(m.group(0))
        ),
    )
    return out + _all(
        _NUMBER_CN,
        text,
        lambda m: None if chinese_int(m.group(0)) is None else str(chinese_int(m.group(0))),
    )


# -- ids, identifiers, names, addresses -----------------------------------------------------
_ID = re.compile(
    r"(?<![A-Za-z0-9.@/#-])[A-Za-z0-9](?:[A-Za-z0-9/#-]*[A-Za-z0-9])?"
    r"(?![A-Za-z0-9@]|\.\d)"
)
_UNIT_OR_ORDINAL = re.compile(r"\d+(?:[.,]\d+)?[A-Za-z]{1,3}")  # 100ml, 15kg, 3rd: not ids
_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?P<call>\(\))?")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"'，。]+[^\s<>\"'，。.,;:!?)]")
_NAME = re.compile(
    r"\b[A-Z][a-z]+(?:[\s'-](?:[A-Z][a-z]+|[A-Z]\.|van|von|de|da|del|di|le|la))*"
    r"(?:\s[A-Z][a-z]+)?"
)
_NOT_NAMES = (
    set(_WEEKDAYS)
    | set(_MONTHS)
    | set(
        [
            "the",
            "a",
            "an",
            "this",
            "that",
            "these",
            "those",
            "it",
            "its",
            "he",
            "she",
            "they",
            "we",
            "you",
            "i",
            "on",
            "in",
            "at",
            "to",
            "for",
            "from",
            "by",
            "with",
            "and",
            "or",
            "but",
            "if",
            "when",
            "where",
            "what",
            "which",
            "who",
            "how",
            "why",
            "please",
            "note",
            "closed",
            "open",
            "dear",
        ]
    )
)
_TITLES = {"mr", "mrs", "ms", "dr", "prof", "sir", "madam"}  # the word after one is a name


_PLACE = re.compile(
    r"\b(?P<label>[A-Z][a-z]+|[A-Z]{2,})\s?(?:No\.?\s?|#)?"
    r"(?:\d+[A-Z]?|[A-Z]\d{0,3})\b"
)
_PLACE_CN = re.compile(
    r"(?:会议室|教室|办公室|房间|展厅|候车室)\s?[A-Z\d]+|[A-Z\d]+\s?(?:号楼|号门|号厅|"
    r"号线|号|楼|室|层|厅|门|区|站台|口)"
)


def _places(text: str) -> Found:
    """A named place and its number or letter: Room 330, Gate 12B, Building C, 3号楼, B区."""

    def value(m: re.Match) -> str | None:
        label = m.group("label").lower()
        if (
            label in _NOT_NAMES
            or _WEEKDAY_FULL.fullmatch(label)
            or label.startswith(tuple(mo[:3] for mo in _MONTHS))
            and len(label) <= 9
        ):
            return None  # 'March 5', 'Monday 3', 'The 2' are not places
        return re.sub(r"\s+", "", m.group(0)).casefold()

    return _all(_PLACE, text, value) + _all(
        _PLACE_CN, text, lambda m: re.sub(r"\s+", "", m.group(0))
    )


def _ids(text: str) -> Found:
    """Codes with a digit and >= 3 letters/digits: INV-2024-0042, A-10293, B12, 04419873."""

    def value(m: re.Match) -> str | None:
        token = m.group(0)
        core = re.sub(r"[^A-Za-z0-9]", "", token)
        if len(core) < 3 or not re.search(r"\d", core) or _UNIT_OR_ORDINAL.fullmatch(token):
            return None
        return core.upper()

    return _all(_ID, text, value)


def _looks_like_identifier(m: re.Match) -> bool:
    """snake_case, camelCase, dotted.path, __dunder__ or written as a call: name()."""
    core = m.group(0).removesuffix("()")
    return (
        "_" in core.strip("_")
        or "." in core
        or bool(m.group("call"))
        or bool(re.search(r"[a-z][A-Z]", core))
        or core.startswith("__")
    )


def _identifiers(text: str) -> Found:
    defined = definition_in(text, in_code=looks_like_code(text))
    if defined is not None:
        i = re.search(rf"(?<![\w$]){re.escape(defined[0])}(?![\w$])", text)
        if i:
            return [(i.start(), i.end(), defined[0])]
    return [
        (s, e - 2 if text[s:e].endswith("()") else e, v)
        for s, e, v in _all(
            _IDENTIFIER,
            text,
            lambda m: m.group(0).removesuffix("()") if _looks_like_identifier(m) else None,
        )
    ]


def _names(text: str) -> Found:
    stripped = text.strip(" \t.,;:!?。，；：！？")
    letters = [ch for ch in stripped if ch.isalpha()]
    if (
        letters
        and all(ch.isalpha() or ch in " '-·." for ch in stripped)
        and (
            len(stripped.split()) <= 4
            and (stripped.istitle() or stripped.isupper())
            or all(not ch.isascii() for ch in letters)
            and len(stripped) <= 6
        )
    ):
        start = text.index(stripped)  # the whole text is a short name (a sign, a label)
        return [(start, start + len(stripped), stripped.casefold())]
    out = []
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        previous = text[: m.start()].split()[-1:] or [""]
        titled = any(w.lower().strip(".") in _TITLES for w in (words[0], previous[0]))
        kept = [w for w in words if w.lower().strip(".") not in _NOT_NAMES | _TITLES]
        if not kept:
            continue
        s = m.start() + m.group(0).index(kept[0])
        e = m.start() + m.group(0).rindex(kept[-1]) + len(kept[-1])
        if re.match(r"\s*\d", text[e:]) and len(kept) == 1:
            continue  # a label and its number ('Room 330', 'Gate 12') is a place, not a name
        if titled and previous[0].lower().strip(".") in _TITLES:
            s = text.rindex(previous[0], 0, m.start())  # the name as written: 'Ms. Alvarez'
        before = text[: m.start()].rstrip()
        if not titled and (not before or before[-1] in ".!?:。！？"):
            # a capital at a sentence's start says nothing: 'Contact Maria Lopez' may be a
            # verb and a name, 'Maria Lopez' a name; both are candidates, so a caller abstains
            if len(kept) < 2:
                continue
            rest = s + text[s:e].index(kept[1])
            out.append((rest, e, text[rest:e].casefold()))
        out.append((s, e, " ".join(kept).casefold()))
    return out


# Most specific first: a kind drops candidates that overlap those of the kinds before it.
_FINDERS: dict[str, Callable[[str], Found]] = {
    "email": lambda t: _all(_EMAIL, t, lambda m: m.group(0).lower()),
    "url": lambda t: _all(_URL, t, lambda m: m.group(0)),
    "date": _dates,
    "time": _times,
    "weekday": _weekdays,
    "amount": _amounts,
    "percent": _percents,
    "id": _ids,
    "number": _numbers,
    "identifier": _identifiers,
    "name": _names,
    "place": _places,
}
# 'when': a date, a time or a day, those written together ('Tuesday, 5 March at 14:30') one span;
# 'text' / 'cell': the whole text, trimmed (a table cell or a text block is its own answer).
KINDS = (*_FINDERS, "when", "text", "cell")
_ALIASES = {"day": "weekday", "day_of_week": "weekday"}
# Kinds whose candidates never yield to the earlier ones (a name may hold a weekday's letters).
_INDEPENDENT = {"weekday", "identifier", "name", "place"}
_WHEN_JOINERS = re.compile(r"[\s,，、]*(?:at|on|the|@|from)?[\s,，、]*", re.I)


def _when(text: str) -> list[Span]:
    parts = sorted(
        candidates(text, "date") + candidates(text, "time") + candidates(text, "weekday"),
        key=lambda p: p.start,
    )
    merged: list[Span] = []
    for p in parts:
        last = merged[-1] if merged else None
        if last is not None and p.start < last.end:
            continue
        if last is not None and _WHEN_JOINERS.fullmatch(text[last.end : p.start]):
            merged[-1] = Span(
                text[last.start : p.end],
                last.start,
                p.end,
                "when",
                f"{last.value} {p.kind}:{p.value}",
            )
        else:
            merged.append(Span(p.text, p.start, p.end, "when", f"{p.kind}:{p.value}"))
    return merged


def candidates(text: str, kind: str) -> list[Span]:
    """Every span of `kind` in `text`, in order (the same value may appear more than once)."""
    kind = _ALIASES.get(kind, kind)
    if kind not in KINDS:
        raise ValueError(f"unknown span kind '{kind}'; kinds: {', '.join(KINDS)} (or 'day')")
    text = unicodedata.normalize("NFC", text)
    if kind == "when":
        return _when(text)
    if kind in ("text", "cell"):
        trimmed = text.strip()
        start = text.index(trimmed) if trimmed else 0
        return (
            [Span(trimmed, start, start + len(trimmed), kind, " ".join(trimmed.split()))]
            if trimmed
            else []
        )
    taken: list[tuple[int, int]] = []
    if kind not in _INDEPENDENT:
        for other, find in _FINDERS.items():
            if other == kind:
                break
            if other not in _INDEPENDENT:  # a plain number is a number, even if it could be an id
                taken += [
                    (s, e)
                    for s, e, _ in find(text)
                    if not (kind == "number" and other == "id" and text[s:e].isdigit())
                ]
    spans = []
    for s, e, value in sorted(_FINDERS[kind](text)):
        raw = text[s:e]
        s, e = s + len(raw) - len(raw.lstrip()), e - len(raw) + len(raw.rstrip())
        if not any(a < e and s < b for a, b in taken):
            spans.append(Span(text[s:e], s, e, kind, value))
    return spans


def exact_span(text: str, kind: str) -> Span | None:
    """The one span of `kind` in `text` (its first spelling if written twice), or None when there
    is none or several different values: abstain rather than guess."""
    found = candidates(text, kind)
    return found[0] if found and len({f.value for f in found}) == 1 else None
