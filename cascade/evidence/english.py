"""English rules for `understand`: a question (any case) -> the fields of its `Query`.

Exact patterns over the lower-cased question (`lexicon`); what they cannot tell is left to the
intent scores. The time-order phrase is read first and taken out, so the anchor's words ("the
*big banner*") never describe the target.
"""

from __future__ import annotations

import re
from typing import Literal

from . import doc_lexicon as dlx
from . import lexicon as lx
from .intent import Intent, counted_label, label_in
from .numbering import roman_int
from .query import TimeOrder, singular
from .reader_model import Guess, take_guess

__all__ = ["read_english"]


def _words(text: str) -> list[str]:
    text = re.sub(r"['\u2019]s\b", "", text.lower())  # "what's", "the owner's": no 's cue
    return re.findall(r"[a-z0-9][a-z0-9.'-]*[a-z0-9]|[a-z0-9]", text)


_SECTION_WORD = r"(?:section|chapter|part|subsection|heading)"
_ORDINAL = "|".join(lx.ORDINALS)


def _en_section(q: str) -> tuple[str | None, str | None, str]:
    """(section number, section name, the question without that phrase)."""
    m = re.search(rf"\b{_SECTION_WORD}\s+(\d+(?:\.\d+)*|[ivx]+)\b", q) or re.search(
        rf"\b(\d+(?:\.\d+)*)\s+{_SECTION_WORD}\b", q
    )
    if m:
        num = m.group(1)
        return str(roman_int(num) or num), None, q[: m.start()] + q[m.end() :]
    # "the second section"; "the heading of the third recipe section", but not "what does the
    # first aid section say" (a word between names the section unless its heading is asked for)
    m = re.search(
        rf"\b({_ORDINAL}|\d+(?:st|nd|rd|th))\s+([a-z][\w-]*\s+)?(?:sub)?{_SECTION_WORD}\b", q
    )
    if m and (not m.group(2) or {"heading", "title", "called", "named"} & set(_words(q))):
        word = m.group(1)
        num = lx.ORDINALS.get(word) or int(re.sub(r"\D", "", word))
        return str(num), None, q[: m.start()] + q[m.end() :]
    # the section asked for by name ("the section about X", "the pricing section"), or by what it
    # treats ("which section covers X?", "the part that deals with X", "under which heading is X
    # discussed?"); the first whose topic is not a generic word
    which = (
        rf"\b(?:which|what)\s+{_SECTION_WORD}(?:\s+(?:heading|title))?"
        r"\s+(?:of\s+(?:the|this)\s+\w+\s+)?"
    )
    topic = r"(?:the\s+)?['\"]?([^?'\"]+?)['\"]?"
    # the topic ends the question, or a request about the section follows it ("... and tell me
    # its heading")
    end = r"\s*(?:\?|\.?\s*$|\s+and\s+(?:tell|give|show|say|read|what)\b)"
    for pattern in (
        rf"\b{_SECTION_WORD}\s+(?:about|on|called|named|titled|covering|for)\s+{topic}\s*"
        r"(?:\?|$|\bsay|\bis\b|\bsomewhere\b|[,;\u2013\u2014]|-\s)",
        rf"\bthe\s+['\"]?([a-z][\w' -]{{1,40}}?)['\"]?\s+(?:sub)?{_SECTION_WORD}\b",
        rf"{which}(?:{_TREATS})\s+{topic}{end}",
        rf"\b{_SECTION_WORD}(?:\s+(?:heading|title))?\s+(?:that|which)\s+(?:{_TREATS})\s+{topic}{end}",
        rf"(?:\b(?:under|in|within)\s+)?{which}(?:is|are|was|were)\s+{topic}\s+(?:{_TREATED})\b",
        rf"{which}(?:is|are|was|were)\s+{topic}\s+(?:under|in)\s*\??$",
        rf"{which}(?:do|does|can|could|would|should|will)\s+(?:i|we|you|one)\s+(?:find|see|"
        rf"read about|look for|look up|get)\s+{topic}{end}",
    ):
        m = re.search(pattern, q)
        if m and not set(_words(m.group(1))) <= lx.GENERIC | lx.TARGET_WORDS | set(lx.ORDINALS):
            # "X on this page": the medium, not the topic
            name = re.sub(
                rf"\s+(?:on|in|of|from)\s+(?:this|the)\s+(?:{dlx.DOCUMENT_NOUNS}|"
                r"screenshot|image|photo|picture|slide)$",
                "",
                m.group(1).strip(),
            )
            return None, name, q[: m.start()] + q[m.end() :]
    return None, None, q


# what a section does with its topic, active ("covers") and passive ("is covered")
_TREATS = (
    r"covers?|discuss(?:es)?|describes?|explains?|mentions?|deals?\s+with|talks?\s+about|"
    r"is\s+about|treats?|address(?:es)?|concerns?|gives?|lists?|says?\s+something\s+about"
)
_TREATED = (
    r"covered|discussed|described|explained|mentioned|dealt\s+with|talked\s+about|treated|"
    r"addressed|found|listed|given"
)


_SUBJECT_PRONOUNS = frozenset({"i", "we", "you", "he", "she", "they"})


def _clean_key(text: str) -> str:
    text = re.sub(r"^(?:the|a|an|row|column|col\.?)\s+", "", text.strip(" '\"?.,"), flags=re.I)
    text = re.sub(r"\s+(?:row|column|entry|line)$", "", text, flags=re.I)
    return text.strip(" '\"?,")


# what a table is called when it is not called one ("the price list", "the spec sheet")
_TABLE_NAMES = (
    r"price\s+list|schedule|grade\s*book|spec(?:ification)?s?\s+sheet|score\s*board|"
    r"leader\s*board|standings|roster|timetable|spreadsheet"
)
_TABLE_NOUN = rf"(?:table|chart|list|grid|{_TABLE_NAMES})"
_TABLE_TAIL = rf"(?:\s+(?:in|on|from|of)\s+(?:the|this|that)\s+{_TABLE_NOUN})?"

# (pattern, the order of its two groups, a group (or 0) that must not be only generic words):
# the first that matches wins
_CELL_PATTERNS: tuple[tuple[str, str, int], ...] = (
    (
        r"\brow\s+['\"]?(.+?)['\"]?\s*(?:,|and|under|in)\s*(?:the\s+)?column\s+['\"]?([^?'\",]+)",
        "row, column",
        0,
    ),
    (
        r"\bcolumn\s+['\"]?(.+?)['\"]?\s*(?:,|and|for|of|in)\s*(?:the\s+)?row\s+['\"]?([^?'\",]+)",
        "column, row",
        0,
    ),
    # the row said first, then the column: "for Unit 3B, what's in the Rent column?",
    # "Grilled salmon - what does the Calories column show?"
    (
        r"^(?:[^:]*:\s*)?(?:for\s+)?(?:the\s+)?([^,:?\u2013\u2014]+?)\s*(?:[,:\u2013\u2014]|\s-)\s*"
        r"(?:what|which)\b.*\bthe\s+['\"]?([^?'\"]+?)['\"]?\s+column\b",
        "row, column",
        0,
    ),
    (
        r"\bfor\s+(?:the\s+)?['\"]?([^?'\",]+?)['\"]?\s+under\s+(?:the\s+)?['\"]?([^?'\",]+?)['\"]?"
        r"(?:\s+column)?\s*\??$",
        "row, column",
        0,
    ),
    # a row named as a row: "for Q3 in the Revenue row", "in the Travel row under March"
    (
        r"\b(?:for|of)\s+(?:the\s+)?['\"]?([^?'\"]+?)['\"]?\s+(?:in|on)\s+the\s+['\"]?([^?'\"]+?)['\"]?\s+row\b",
        "column, row",
        0,
    ),
    (
        r"\b(?:in|on)\s+the\s+['\"]?([^?'\"]+?)['\"]?\s+row\s*,?\s+(?:under|for|in)\s+(?:the\s+)?"
        r"['\"]?([^?'\",]+?)['\"]?(?:\s+column)?\s*\??$",
        "row, column",
        0,
    ),
    # a column named as a column, or a header the value sits under, with its row after "for"
    (
        r"^(?:what|which)\s+(?:is|are|was|were)\s+(.{1,60}?)'s\s+.{0,30}?\b(?:in|under)\s+"
        r"(?:the\s+)?['\"]?(.+?)['\"]?\s+column\b",
        "row, column",
        0,
    ),
    (
        r"\bfor\s+(?:the\s+)?['\"]?(.+?)['\"]?\s+(?:in|under)\s+(?:the\s+)?['\"]?(.+?)['\"]?\s+column\b",
        "row, column",
        0,
    ),
    (
        r"\b(?:in|under)\s+(?:the\s+)?['\"]?([^?'\"]+?)['\"]?(?:\s+column)?\s+(?:for|of)\s+"
        r"(?:the\s+)?['\"]?([^?'\"]+?)['\"]?\s*\??$",
        "column, row",
        1,
    ),
    (
        r"\brow\s+(?:for|of)\s+(?:the\s+)?['\"]?(.+?)['\"]?\s*(?:[-\u2013\u2014,;:.]|$).*?"
        r"\b(?:its|the)\s+([^?]+?)\s*\??$",
        "row, column",
        0,
    ),
    (
        r"^how\s+(?:much|many)\s+(.{1,40}?)\s+(?:is|are|was|were|does|do|did|has|have|had)\s+"
        r"(?:in\s+|at\s+|on\s+)?(?:the\s+)?(.{1,60}?)(?:\s+(?:score|scored|get|got|have|"
        r"earn|earned|contain|win|won|make|made|need|take))?\s*\??$",
        "column, row",
        0,
    ),
    (
        r"^(?:what|which|how much|how many|when)\s+(?:is|are|was|were|'s|does|do)?\s*"
        r"(?:the\s+)?(.{1,40}?)\s+(?:of|for)\s+(?:the\s+)?(.{1,60}?)" + _TABLE_TAIL + r"\s*\??$",
        "column, row",
        1,
    ),
    # "what's Emma's score in Math?"
    (
        r"^(?:what|which)\s+(?:is|was)\s+(.{1,40}?)'s\s+(?:score|mark|grade|result|value|figure)s?\s+"
        r"(?:in|for|on)\s+(?:the\s+)?(.{1,40}?)\s*\??$",
        "row, column",
        0,
    ),
    (
        r"^(?:what|which)\s+(?:is|are|was|were)\s+(.{1,60}?)'s\s+(.{1,40}?)"
        + _TABLE_TAIL
        + r"\s*\??$",
        "row, column",
        0,
    ),
    # "what did Alice get in Math?"
    (
        r"^(?:what|how\s+much|how\s+many(?:\s+\w+)?)\s+did\s+(.{1,40}?)\s+(?:get|score|earn|receive|"
        r"make|have)\s+(?:in|on|for)\s+(?:the\s+)?(.{1,40}?)\s*\??$",
        "row, column",
        0,
    ),
)


def _en_cell(question: str) -> tuple[str | None, str | None]:
    """(row key, column key) for "the <column> of/for <row>", "row X, column Y", "X's Y",
    "the <column> column for <row>", "under <column> for <row>", "how many <column> did <row>
    score", "the row for <row> ... its <column>"."""
    q = re.sub(
        r"^(?:in|on|from|according to|looking at)\s+(?:the|this|that)\s+"
        rf"(?:[\w-]+\s+){{0,2}}?{_TABLE_NOUN}"
        r"(?:\s+(?:screenshot|image|photo|picture))?\s*,?\s*",
        "",
        question.strip().rstrip(".!"),
        flags=re.I,
    )
    q = re.sub(
        rf"\s*,?\s+(?:according to|in|on|from)\s+(?:the|this|that)\s+(?:[\w-]+\s+){{0,2}}?"
        rf"{_TABLE_NOUN}(?=\s*\??$)",
        "",
        q,
        flags=re.I,
    )
    m = re.search(
        r"\brow\s+(?:for|of)\s+(?:the\s+)?['\"]?(.+?)['\"]?\s*(?:,|\band\b).*?\b(?:in|under)\s+"
        r"the\s+['\"]?(.+?)['\"]?\s+column\b",
        q,
        re.I,
    )
    if m:  # "find the row for Q3 and tell me the number in the Revenue column"
        return _clean_key(m.group(1)), _clean_key(m.group(2))
    q = re.sub(r"^(what|which)'s\b", r"\1 is", q, flags=re.I)
    # "can you look at the table and tell me the X of Y?", "look up X's Y" ask "what is the X of Y?"
    q = re.sub(
        r"^(?:please\s+)?(?:(?:can|could|would)\s+you\s+(?:please\s+)?)?(?:.*?\band\s+)?"
        r"(?:(?:tell|give|show)\s+me|look\s+up|find|check)\s+",
        "what is ",
        q,
        flags=re.I,
    )
    # "what does the table list as / give for / show as the X of Y?" asks "what is the X of Y?"
    q = re.sub(
        rf"^(what|which)\s+(?:does|do)\s+(?:the|this)\s+{_TABLE_NOUN}\s+(?:list|show|give|say|"
        r"state|report)\w*(?:\s+(?:as|for))?\b",
        r"\1 is",
        q,
        flags=re.I,
    )
    for pattern, order, topic_group in _CELL_PATTERNS:
        m = re.search(pattern, q, re.I)
        if m and not (
            topic_group and set(_words(m.group(topic_group))) <= lx.GENERIC | lx.TARGET_WORDS
        ):
            row, column = (
                (m.group(1), m.group(2)) if order == "row, column" else (m.group(2), m.group(1))
            )
            row, column = _clean_key(row), _clean_key(column)
            # "how much change did I get back?": the asker, never a row or a column
            if not {(_words(k.lower()) or [""])[0] for k in (row, column)} & _SUBJECT_PRONOUNS:
                return row, column
    return None, None


def _en_time_order(q: str) -> tuple[TimeOrder | None, str]:
    """The time order and the question without the anchor phrase (its words describe the
    anchor, not the target)."""
    m = re.search(
        r"\b(after|before|(?:following|preceding|prior to|ahead of)(?=\s+(?:the|a|an)\b|\s*['\"]))"
        r"\s+(.*)$",
        q,
    )
    if m:
        relation: Literal["before", "after"] = (
            "before" if m.group(1) in ("before", "prior to", "preceding", "ahead of") else "after"
        )
        quoted = re.match(
            r"\s*(?:the\s+)?(?:words?|text|sign|title)?\s*['\"]([^'\"]+)['\"]", m.group(2)
        )
        anchor_words = []
        if quoted:
            anchor_words = _words(quoted.group(1))
        else:
            for w in _words(m.group(2)):
                if w in lx.EVENT_VERBS or len(anchor_words) >= 5:
                    break
                if w not in ("the", "a", "an", "this", "that"):
                    anchor_words.append(w)
        if anchor_words:
            rest = q[: m.start()]
            anchor = quoted.group(1) if quoted else " ".join(anchor_words)
            return TimeOrder(
                relation,
                anchor,
                tuple(sorted(_cues_en(anchor_words))),
                label_in(anchor_words),
                _size_en(anchor_words),
                _colour_en(anchor_words),
            ), rest
    # a clause that ends the anchor's time: "once the banner has gone, what ... next?" (after it),
    # "until the banner appears, what ...?" (before it)
    m = re.search(
        r"\b(?:once|when|after|as soon as)\s+(.+?)\s+(?:(?:has|have|had|is|was|were|"
        r"are)\s+)?(?:gone|disappeared|vanished|ended|finished|over|faded(?:\s+out)?|"
        r"removed|taken down)\b,?",
        q,
    ) or re.search(
        r"\b(?:until|till)\s+(.+?)\s+(?:appears?|appeared|shows?\s+up|showed\s+up|comes?|came)\b,?",
        q,
    )
    if m:
        quoted = re.search(r"['\"]([^'\"]+)['\"]", m.group(1))
        phrase = _words(m.group(1))
        anchor_words = [w for w in phrase if w not in ("the", "a", "an", "this", "that")][:5]
        relation = "before" if re.match(r"(?:until|till)\b", m.group(0)) else "after"
        if anchor_words:
            anchor = quoted.group(1) if quoted else " ".join(anchor_words)
            cue_words = _words(quoted.group(1)) if quoted else anchor_words
            return TimeOrder(
                relation,
                anchor,
                tuple(sorted(_cues_en(cue_words))),
                label_in(anchor_words),
                _size_en(anchor_words),
                _colour_en(anchor_words),
            ), q[: m.start()] + " " + q[m.end() :]
    if re.search(r"\b(?:first|earliest|initially|at the (?:start|beginning))\b", q):
        return TimeOrder("first"), q
    if re.search(r"\b(?:last|final|latest|finally|at the (?:very )?end)\b", q):
        return TimeOrder("last"), q
    return None, q


def _size_en(words: list[str]) -> Literal["small", "big"] | None:
    return next((lx.SIZE_WORDS[w] for w in words if w in lx.SIZE_WORDS), None)


def _colour_en(words: list[str]) -> str | None:
    return next((lx.COLOURS[w] for w in words if w in lx.COLOURS), None)


def _position_en(q: str) -> str | None:
    m = re.search(
        r"\b(?:on|at|in|to|from)\s+the\s+(?:(top|bottom|upper|lower)[\s-]+)?(left|right)\b"
        r"|\b(top|bottom|upper|lower)[\s-]+(left|right)\b|\b(left|right)[\s-]*(?:hand|side|most)\b"
        r"|\b(leftmost|rightmost|topmost|bottommost)\b"
        r"|\b(?:on|at|in)\s+the\s+(top|bottom|middle|centre|center)\b",
        q,
    )
    if not m:
        return None
    words = [g for g in m.groups() if g]
    norm = {
        "upper": "top",
        "lower": "bottom",
        "leftmost": "left",
        "rightmost": "right",
        "topmost": "top",
        "bottommost": "bottom",
        "center": "centre",
        "middle": "centre",
    }
    return "-".join(norm.get(w, w) for w in words)


def _cues_en(words: list[str], keep_sizes: bool = False) -> set[str]:
    drop = lx.GENERIC | lx.TARGET_WORDS | set(lx.COLOURS) | set(lx.ORDINALS)
    drop |= set() if keep_sizes else set(lx.SIZE_WORDS)
    drop |= {
        "day",
        "date",
        "time",
        "when",
        "much",
        "many",
        "left",
        "right",
        "top",
        "bottom",
        "first",
        "last",
        "after",
        "before",
        "number",
        "no",
        "id",
        "code",
        "total",
        "subtotal",
        "tax",
        "price",
        "cost",
        "amount",
        "value",
        "next",
        "come",
        "comes",
        "then",
        "later",
    }
    return {singular(w.strip(".'")) for w in words if w not in drop and (len(w) > 1 or w.isdigit())}


def read_english(question: str, intent: Intent, guess: Guess | None = None) -> dict:
    """The `Query` fields of an English question; `guess` (the learned reader) may retype what
    the rules read (`reader_model.take_guess`)."""
    q = question.lower()
    found: dict = {}
    time_order, q_target = _en_time_order(q)
    number, name, q_rest = _en_section(q_target)
    answer_type = next((t for t, rx in dlx.ANSWER_TYPES if re.search(rx, q_rest)), "text")
    words = _words(q_rest)
    kept = re.sub(dlx.EXCLUDED, " ", q_rest)  # "the total before tax": the tax is no key
    key = next((k for k, rx in dlx.KEYS if re.search(rx, kept)), None)
    code = next((dlx.CODE_KINDS[w] for w in words if w in dlx.CODE_KINDS), None)
    code_context = re.search(
        r"\b(code|snippet|program|script|source|defin\w*|declar\w*|"
        r"implement\w*|call\w*|named|name of the)\b",
        q_rest,
    )
    table_words = (
        rf"\b(table|tables|row|rows|column|columns|cell|cells|col\.?|grid|chart|{_TABLE_NAMES})\b"
    )
    table = re.search(table_words, q_rest)
    structure = re.search(r"\b(?:rows?|columns?|cells?|col\.?)\b", q_rest)
    # the bare words "table" and "row" are also furniture and seating ("sitting at the table",
    # "the front row"): there the learned reader decides, when it is sure, whether a table is meant
    bare = {singular(w) for w in re.findall(table_words, q_rest)} <= {"table", "row"}
    if table and bare and guess is not None and guess() not in (None, "table_cell"):
        table = structure = None
    if table and not structure and "count" in intent.matched and counted_label(q_rest):
        table = None  # "how many cups are on the table": things counted, not a table read
    title = re.search(
        rf"\b(title|titled|headline|heading|header|name of (?:the|this) "
        rf"(?:{dlx.DOCUMENT_NOUNS}))\b|\b(?:{dlx.DOCUMENT_NOUNS})\b.*\b(?:called|"
        r"named|titled)\b",
        q_rest,
    )
    paragraph = re.search(
        r"\b(according to|paragraph|passage|notice|announcement|article|"
        r"the text|the letter|the memo|the email)\b",
        q_rest,
    )
    # a thing that carries text, named ("the sign"): the rules' reading stays; words about
    # text ("what is written") only suggest a sign, and the learned reader may retype them
    sign_named = re.search(
        r"\b(sign|signs|signboard|signpost|nameplate|label|plate|poster|banner|board|"
        r"placard|sticker|tag)\b",
        q_rest,
    )
    sign = sign_named or re.search(
        r"\b(written|writing|wording|lettering|inscription|says?|read|text|caption|logo)\b",
        q_rest,
    )
    if (
        paragraph
        and paragraph.group(1) == "the text"
        and re.search(
            r"\b(sign|signs|label|plate|poster|banner|board|placard|sticker|tag|caption|logo)\b",
            q_rest,
        )
    ):
        paragraph = None  # "the text on the sign" asks for a sign's text, not a passage's
    label = counted_label(q_rest) if "count" in intent.matched else label_in(words)
    if (
        key == "number"
        and label
        and "count" in intent.matched
        and re.search(r"\bnumber of\b", q_rest)
    ):
        key = None  # "the number of cars" is a count, not a number printed on something
    if (
        key == "total"
        and label
        and "count" in intent.matched
        and re.search(r"\bhow many\b", q_rest)
    ):
        key = None  # "how many bicycles are there in total?" is a count, not a bill's total
    # in the order the question names them: "the booking reference" is the booking's
    listed = sorted(
        [(n, m) for n in dlx.KEY_NOUNS if (m := re.search(dlx.key_noun_pattern(n), q_rest))],
        key=lambda nm: nm[1].start(),
    )
    # the noun right before the key word names the field: "the order number on this receipt" is
    # the order's; "the seat number on this ticket" a field the page labels 'Seat' (not a listed
    # key noun: kept apart, it names the key but does not make a question a key-value one)
    field = re.search(r"\b([a-z]+)\s+(?:number|no\b\.?|#)", q_rest) if key == "number" else None
    field_noun = None
    if field and field.group(1) not in lx.GENERIC | lx.TARGET_WORDS:
        before = [(n, m) for n, m in listed if m.start() <= field.start(1) < m.end()]
        listed, field_noun = (before, None) if before else (listed, singular(field.group(1)))
    noun, named = listed[0] if listed else (None, None)
    # the key noun says which field, not what the field says ('PO', 'purchase order'); nor does
    # the word that names its kind ('train ticket', 'parking receipt')
    content = (
        _cues_en(words, keep_sizes=True)
        - set(dlx.KEY_NOUNS)
        - (
            _cues_en(_words(q_rest[: named.start()])[-1:] + _words(named.group(0)))
            if named
            else set()
        )
    )
    if (
        key is None
        and answer_type == "amount"
        and re.search(dlx.AMOUNT_DUE, q_rest)
        and not {w for w in content if not re.fullmatch(dlx.AMOUNT_DUE, w)} - dlx.AMOUNT_DUE_FILLERS
    ):
        key = "total"  # "how much is due on the slip?": the bill's total, not a line of it
    document_date = (
        noun is not None
        and answer_type in ("date", "when")
        and key in (None, "date")
        and content <= dlx.DOCUMENT_DATE_VERBS
    )
    # "where can lost umbrellas be collected?": what a text says is done, not where a thing is
    told = re.search(
        r"\b(?:can|could|should|must|will|may|are|is)\s+(?:\w+\s+){0,3}?be\s+\w+(?:ed|en)\b", q_rest
    )
    fact_question = (
        re.match(
            r"\s*(?:(?:from|to|at|in|on|for|with|by|until|since)\s+)?"
            r"(?:where|who|whom|whose|what|which|when|how)\b",
            q_rest,
        )
        and len(content) >= 2
        and (not label or told)
    )
    if (
        number
        or name
        or re.search(
            r"\b(?:which|what)\s+(?:sub)?(?:section|chapter)\b|\bsub[\s-]?heading\b|"
            r"\b(?:heading|title|name)\b.*\bsection\b|"
            r"\bsection\b.*\b(?:heading|title|called|named|titled)\b",
            q_rest,
        )
    ):
        found.update(target="heading", section_number=number, section_name=name)
    elif code and (code_context or code in ("function", "method", "variable", "identifier")):
        found.update(target="code_identifier", code_kind=code, answer_type="identifier")
    elif table and not (title and not structure):  # "the title at the top of this timetable"
        found.update(target="table_cell", answer_type="cell", named=bool(structure) or not bare)
    elif title:
        found["target"] = "title"
    elif (
        document_date
        or key is not None
        and (key != "number" or not sign or noun)
        and not (key == "date" and (answer_type in ("day", "time") or content))
    ):
        # a date of a document ("the date on the receipt", "when was this invoice issued?"), not
        # of an event a text tells of
        key = "date" if document_date else key
        assert key is not None  # the condition above: a document's date, or a key
        found.update(
            target="key_value",
            key=key,
            key_noun=field_noun or noun,
            answer_type={"number": "id", "date": "date"}.get(key, "amount"),
        )
    elif "count" in intent.matched and (label or intent.matched != ("read",)):
        # "how many" counts things in the picture or asks for a figure a text states (points in
        # a league table, units sold): the learned reader tells which
        found.update(target="object_count", answer_type="count", label=label, unsure=True)
    elif paragraph:
        found["target"] = "paragraph_fact"
    elif (answer_type not in ("text", "id") or fact_question) and not sign:
        # a fact only because the answer is a date or an amount, or the question asks where /
        # who / what: a default, which the learned reader may retype
        found.update(target="paragraph_fact", unsure=True)
    elif sign or "read" in intent.matched:
        found.update(target="sign", named=bool(sign_named))
        if answer_type == "id" and not re.search(r"\b(?:id|code|reference|ref)\b", q_rest):
            found["answer_type"] = "number"  # "which gate number?" on a sign asks for the number
    elif "detail" in intent.matched or label:
        found.update(target="object", label=label, answer_type="description")
    else:  # nothing matched: the default, which the learned reader may retype
        found.update(target="scene", answer_type="description", unsure=True)
    found.setdefault("answer_type", answer_type)
    take_guess(found, guess, key, field_noun or noun, code, counted_label(q_rest))
    read_as = {found["target"], found.get("second_kind")}
    if read_as & {"table_cell", "paragraph_fact", "sign", "key_value"}:
        row, col = _en_cell(question)
        if row and col and (read_as & {"table_cell", "paragraph_fact"} or answer_type != "text"):
            found.update(row_key=row, column_key=col)
    if found["target"] in ("title", "heading") or found["target"] in ("object", "scene"):
        found["answer_type"] = {"title": "text", "heading": "text"}.get(
            found["target"], "description"
        )
    # a size is an attribute of a sign or object, but a word of a document ("a large latte")
    document = found["target"] in ("table_cell", "paragraph_fact", "key_value", "heading")
    found["cues"] = tuple(sorted(_cues_en(words, keep_sizes=document)))
    found.update(
        colour=_colour_en(words),
        position=_position_en(q_rest),
        size=_size_en(words),
        time_order=time_order if found["target"] not in ("title",) else None,
    )
    return found
