"""How a key or a phrase from a question is matched against text read on a page.

Keys (a table's row or column name, a heading's topic) match fuzzily, because OCR misreads a
letter now and then, but **exactly about digits**: "Line 2" never matches "Line 21" or "Line 3",
"2023" never matches "2024". Words match across scripts the same way: a Latin word is a run of
letters/digits, Chinese (any CJK) text is compared by character bigrams, since it has no spaces.
Traditional characters fold to simplified as capitals fold to lower case: a question asked in
simplified Chinese names '停課' on a Taiwanese calendar ('停课').
"""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher
from functools import cache

from .structure import is_cjk

__all__ = [
    "fold",
    "normalize",
    "words",
    "digit_runs",
    "key_match",
    "phrase_score",
    "cjk_coverage",
    "content_words",
    "named_in",
    "same_word",
    "EXACT",
    "CONTAINED",
    "COVERS",
    "ABBREVIATED",
    "FUZZY",
]

# key_match tiers, best first: a better tier always outranks a worse one.
EXACT = 1.0  # the normalised texts are equal
CONTAINED = 0.9  # every word of the key is a word of the text ('blue' in 'Blue line')
COVERS = 0.8  # every word of the text is a word of the key ('the blue line' names 'Blue')
ABBREVIATED = 0.75  # every key word starts a text word, >= 3 letters ('Feb' for 'February')
FUZZY = 0.6  # similar letters (difflib ratio >= FUZZY_MIN: OCR misread one): 0.6 to 0.7
FUZZY_MIN = 0.8

# Function words never carry what a phrase is about; a phrase made only of them matches nothing.
_STOP = set(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "and",
        "or",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "which",
        "what",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "there",
        "their",
        "they",
        "them",
        "he",
        "she",
        "his",
        "her",
        "we",
        "our",
        "you",
        "your",
        "not",
        "no",
        "into",
        "onto",
        "over",
        "under",
        "than",
        "then",
        "so",
        "such",
        "about",
        "after",
        "before",
        "during",
    ]
)
_WORD = re.compile(r"[^\W_]+")
_BRACKETED = re.compile(
    r"[(（\[][^)）\]]*[)）\]]"
)  # a unit in brackets: 'Weight (kg)', '二等座（元）'


@cache
def _simplified() -> dict[int, str]:
    """Traditional -> simplified, one character for one (OpenCC's t2s, character by character):
    a fold that keeps every character where it was."""
    import opencc

    cjk = [chr(c) for c in (*range(0x3400, 0x4DC0), *range(0x4E00, 0xA000))]
    out = opencc.OpenCC("t2s").convert("\n".join(cjk)).split("\n")
    return {ord(t): s for t, s in zip(cjk, out, strict=True) if len(s) == 1 and s != t}


def fold(text: str) -> str:
    """NFKC (full-width forms become ASCII), case-folded, traditional Chinese as simplified."""
    return unicodedata.normalize("NFKC", text).casefold().translate(_simplified())


def normalize(text: str) -> str:
    """`fold`ed, punctuation and spaces collapsed."""
    return " ".join(_WORD.findall(fold(text)))


def digit_runs(text: str) -> tuple[str, ...]:
    """The numbers in a text, leading zeros kept ('007' is not '7')."""
    return tuple(re.findall(r"\d+", unicodedata.normalize("NFKC", text)))


def words(text: str) -> list[str]:
    """Latin-like words (lower case) and CJK character bigrams (a lone CJK character alone)."""
    out: list[str] = []
    for token in _WORD.findall(fold(text)):
        run = ""
        for ch in token + " ":
            if is_cjk(ch):
                run += ch
                continue
            if run:
                out += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
                run = ""
        latin = "".join(" " if is_cjk(ch) else ch for ch in token).split()
        out += latin
    return out


def _same_word(a: str, b: str) -> bool:
    """Equal, or one word with another ending: a common start of >= 4 letters, then at most one
    letter on one side and three on the other (close / closed / closing, east / eastern; not
    weekday / weekend). Numbers only when equal."""
    if a == b:
        return True
    if a.isdigit() or b.isdigit():
        return False
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    rest = sorted((len(a) - common, len(b) - common))
    return common >= 4 and rest[0] <= 1 and rest[1] <= 3


def key_match(key: str, text: str) -> float:
    """How well `key` names a cell or heading `text`: one of the tiers above (fuzzy scores grow
    with the similarity), or 0. The numbers must agree: the same numbers in the same order,
    except that for CONTAINED the key's numbers need only appear in the text in order."""
    k, t = normalize(key), normalize(text)
    if not k or not t:
        return 0.0
    if k == t:
        return EXACT
    kd, td = digit_runs(k), digit_runs(t)
    kw, tw = words(k), words(t)
    # CJK has no word breaks: a CJK key is contained when it is a substring
    cjk = any(is_cjk(ch) for ch in k + t)
    if (_contains(tw, kw) or cjk and k.replace(" ", "") in t.replace(" ", "")) and _in_order(
        kd, td
    ):
        return CONTAINED
    if kd != td:
        return 0.0
    # a header's unit in brackets is not its name: '二等座票价' covers '二等座（元）'
    bare = normalize(_BRACKETED.sub(" ", text)).replace(" ", "")
    if any(not w.isdigit() for w in tw) and (
        _contains(kw, tw) or cjk and bare and bare in k.replace(" ", "")
    ):
        return COVERS
    if all(any(h.startswith(w) for h in tw) for w in kw if not w.isdigit()) and all(
        len(w) >= 3 or w.isdigit() for w in kw
    ):
        return ABBREVIATED
    ratio = SequenceMatcher(None, k, t, autojunk=False).ratio()
    return FUZZY + 0.1 * (ratio - FUZZY_MIN) / (1 - FUZZY_MIN) if ratio >= FUZZY_MIN else 0.0


def same_word(a: str, b: str) -> bool:
    """Two words the same or one with another ending (`_same_word`)."""
    return _same_word(a, b)


def _contains(haystack: list[str], needles: list[str]) -> bool:
    return bool(needles) and all(any(_same_word(n, h) for h in haystack) for n in needles)


def _in_order(sub: tuple[str, ...], seq: tuple[str, ...]) -> bool:
    it = iter(seq)
    return all(any(s == x for x in it) for s in sub)


def named_in(key: str, text: str) -> int:
    """How many words of `key` a longer `text` (a question) names, when it names them all, else
    0: every content word of the key (a unit in brackets aside: 'Weight (kg)') is a word of the
    text, numbers exactly; a CJK key appears in the text as it is."""
    key = _BRACKETED.sub(" ", key)
    k, t = normalize(key).replace(" ", ""), normalize(text).replace(" ", "")
    if any(is_cjk(ch) for ch in k):
        return len(words(key)) if k and k in t else 0
    wanted = content_words(key) or words(key)
    have = words(text)
    return len(wanted) if wanted and _contains(have, wanted) else 0


def content_words(phrase: str) -> list[str]:
    """The phrase's words that say what it is about (function words dropped)."""
    return [w for w in dict.fromkeys(words(phrase)) if w not in _STOP]


def phrase_score(phrase: str, text: str) -> float:
    """The fraction of the phrase's content words found in the text (0..1); numbers must match
    exactly, other words by `_same_word`."""
    wanted = content_words(phrase)
    if not wanted:
        return 0.0
    have = words(text)
    found = sum(any(_same_word(w, h) for h in have) for w in wanted)
    return found / len(wanted)


def cjk_coverage(phrase: str, text: str) -> float:
    """The share of the phrase's Chinese characters that sit in a character pair the text also
    holds (0..1; 0 for a phrase without Chinese). Chinese has no spaces, so a phrase's character
    pairs include pairs across its words ("领取检查结果": 取检, 查结) that no text holds: counting
    characters, not pairs, lets "检查报告领取" cover 领取 and 检查 of it."""
    phrase = normalize(phrase)
    at = [i for i, ch in enumerate(phrase) if is_cjk(ch)]
    if not at:
        return 0.0
    pairs = set(words(text))
    covered = {
        j
        for i in at
        if i + 1 < len(phrase) and is_cjk(phrase[i + 1]) and phrase[i : i + 2] in pairs
        for j in (i, i + 1)
    }
    return len(covered) / len(at)
