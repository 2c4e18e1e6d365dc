"""Code: the identifiers a block of code defines (functions, methods, classes, types, tables ...).

Read from OCR lines of a screenshot or a photographed listing, one line at a time, by the
definition syntax (functions, methods, types, variables) of the common languages: Python,
JavaScript / TypeScript, C / C++ / Java / C# / Kotlin / Swift / Go / Rust / PHP / Ruby / Lua /
shell function forms, and SQL `CREATE ...`. Only
definitions count: a call (`print(x)`), a control statement (`if (x) {`) or an assignment of a
plain value defines nothing. A function written indented under a class on the same page (before a
line as far left as the class's) is a method.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from cascade.artifacts import LayoutRegion, OcrLine

from .structure import Located, pages

__all__ = [
    "Definition",
    "definition_in",
    "definitions",
    "defined",
    "looks_like_code",
    "reads_like_code",
    "TYPE_KINDS",
    "KIND_GROUPS",
]

TYPE_KINDS = ("class", "struct", "interface", "enum", "trait", "type")
# What a question's word for a kind of code identifier covers, most specific first: "the
# function" is a plain function where there is one, else a method; "the class" any type.
KIND_GROUPS = {
    "function": (("function", "procedure"), ("method",)),
    "method": (("method",),),
    "class": (TYPE_KINDS,),
    "variable": (("variable",),),
    "table": (("table", "view", "materialized view"),),
}

_ID = r"[A-Za-z_$][\w$]*"
_MODIFIERS = (
    r"(?:(?:public|private|protected|internal|static|final|abstract|virtual|override|"
    r"inline|extern|const|constexpr|async|export|default|synchronized|native|unsafe|"
    r"open|suspend|pub(?:\([^)]*\))?|fileprivate|sealed|partial|readonly)\s+)*"
)
_NOT_NAMES = set(
    [
        "if",
        "for",
        "while",
        "switch",
        "catch",
        "return",
        "sizeof",
        "new",
        "delete",
        "else",
        "elif",
        "do",
        "try",
        "with",
        "function",
        "func",
        "def",
        "fn",
        "class",
        "struct",
        "enum",
        "interface",
        "trait",
        "type",
        "typeof",
        "await",
        "yield",
        "throw",
        "case",
        "assert",
        "print",
        "import",
        "from",
        "lambda",
        "and",
        "or",
        "not",
        "in",
        "is",
    ]
)

_NOT_TYPES = r"(?!(?:return|new|throw|else|delete|await|yield|case|goto|echo|print|not|and|or)\b)"
# A line that looks like code, not prose: braces or ';' at an end, arrows, '::', comparisons,
# calls, comments, imports.
_CODE_LINE = re.compile(
    r"[{};:]\s*$|^\s*[{}\])]|=>|->|::|[=!<>]=|\w\([^)]*\)|^\s*(?:#|//|/\*|--)|"
    r"^\s*(?:import|from|include|using|package|return)\b"
)

# (kind, pattern, flags, weak): group 'name' is the defined identifier; the first match wins. A
# `weak` pattern (a C-style signature, a method) could be prose ending in a parenthesis: it counts
# on a line ending in '{' or on a page that reads like code.
_DEFINITIONS = [
    # SQL: CREATE [OR REPLACE] [TEMP] TABLE|VIEW|FUNCTION|PROCEDURE ... [IF NOT EXISTS] name
    (
        "sql",
        r"^\s*create\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+)?(?:unique\s+)?"
        r"(?P<what>table|view|materialized\s+view|function|procedure|index|trigger|sequence|"
        r"schema|type|database)\s+(?:if\s+not\s+exists\s+)?[`\"\[]?(?P<name>[\w.]+)",
        re.I,
        False,
    ),
    # Python / Ruby: def name( ... ; async def
    ("function", rf"^\s*(?:async\s+)?def\s+(?:self\.)?(?P<name>{_ID}[?!]?)\s*(?:\(|$|:)", 0, False),
    # Go: func (r *T) name( is a method, func name( a function
    ("method", rf"^\s*func\s+\([^)]*\)\s*(?P<name>{_ID})\s*[\[(<]", 0, False),
    ("function", rf"^\s*func\s+(?P<name>{_ID})\s*[\[(<]", 0, False),
    # Rust: [pub] [async|const|unsafe] fn name
    ("function", rf"^\s*{_MODIFIERS}(?:extern\s+\"\w+\"\s+)?fn\s+(?P<name>{_ID})\s*[<(]", 0, False),
    # Kotlin / Swift: fun name( / func name(
    (
        "function",
        rf"^\s*{_MODIFIERS}(?:fun|func)\s+(?:<[^>]*>\s*)?(?:{_ID}\.)?(?P<name>{_ID})"
        rf"\s*[<(]",
        0,
        False,
    ),
    # JS / TS / PHP / Lua: function name( / function* name / local function a.b:name(
    (
        "function",
        rf"^\s*(?:local\s+)?{_MODIFIERS}function\s*\*?\s*(?:[\w.]+[.:])?"
        rf"(?P<name>{_ID})\s*[<(]",
        0,
        False,
    ),
    # JS / TS: const name = (...) => / = async x => / = function
    (
        "function",
        rf"^\s*{_MODIFIERS}(?:const|let|var)\s+(?P<name>{_ID})\s*(?::[^=]+)?=\s*"
        rf"(?:async\s+)?(?:function\b|\([^()]*\)\s*(?::\s*[^=]+)?=>|{_ID}\s*=>)",
        0,
        False,
    ),
    # shell: name() {
    ("function", rf"^\s*(?P<name>{_ID})\s*\(\)\s*\{{", 0, False),
    # class Name / struct Name / interface Name / enum Name / trait Name ...
    (
        "type",
        rf"^\s*{_MODIFIERS}(?:data\s+|case\s+|abstract\s+)?(?P<what>class|struct|"
        rf"interface|enum|trait|record|object|protocol|union)\s+(?P<name>{_ID})",
        0,
        False,
    ),
    # Go / TS type definitions: type Name struct / type Name = ...
    (
        "type",
        rf"^\s*{_MODIFIERS}type\s+(?P<name>{_ID})\s*(?:<[^>]*>\s*)?(?P<what>=|struct\b|"
        rf"interface\b|func\b|\[)",
        0,
        False,
    ),
    # C-family functions and methods: [modifiers] return-type name(params) [const] { | ; | end
    (
        "function",
        rf"^\s*{_NOT_TYPES}{_MODIFIERS}(?:[\w:<>,\[\]]+[\s*&]+)+(?:{_ID}::)?"
        rf"(?P<name>~?{_ID})\s*\([^;=]*\)\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?"
        rf"(?:throws\s+[\w.,\s]+)?(?:->\s*[\w:<>*&\s]+)?\s*(?:\{{\s*\}}?|:|;)?\s*$",
        0,
        True,
    ),
    # variables: const / let / var / val [mut] name = ...; Go name := ...; UPPER_CASE = ...
    (
        "variable",
        rf"^\s*{_MODIFIERS}(?:const|let|var|val)\s+(?:mut\s+)?(?P<name>{_ID})\s*"
        rf"(?::[^=]+)?=(?!=)",
        0,
        False,
    ),
    ("variable", rf"^\s*(?P<name>{_ID})\s*:=", 0, False),
    (
        "variable",
        r"^(?P<name>[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{2,})\s*(?::\s*[\w\[\], .]+)?"
        r"\s*=(?!=)",
        0,
        False,
    ),
    # C-family declarations: [modifiers] type name = value; (on a page that reads like code)
    (
        "variable",
        rf"^\s*{_NOT_TYPES}{_MODIFIERS}(?:[\w<>\[\],:]+\s+)+[*&]*(?P<name>{_ID})\s*"
        rf"(?:\[[^\]]*\])?\s*=(?!=)[^;]*;\s*$",
        0,
        True,
    ),
    # class-body methods (JS/TS/Java-like): name(params) { / async name(params): T {
    (
        "method",
        rf"^\s*{_MODIFIERS}(?:get\s+|set\s+|\*\s*)?(?P<name>{_ID})\s*(?:<[^>]*>\s*)?"
        rf"\([^;=]*\)\s*(?::\s*[^={{]+)?\{{\s*$",
        0,
        True,
    ),
]
_PATTERNS = [(kind, re.compile(rx, flags), weak) for kind, rx, flags, weak in _DEFINITIONS]
# a line number in an editor's margin: '5 def', '12. def', '7 | class', '40: fn'
_GUTTER = re.compile(r"\d{1,5}(?:\s*[:|│.]\s*|\s+)(?=[A-Za-z_@$])")


@dataclass(frozen=True)
class Definition(Located):
    """An identifier a line of code defines: `text` is the identifier, `what` what it is
    (function, method, class, struct, interface, enum, trait, type, variable, or the SQL object:
    table, view, procedure ...), `line` the code line it was read from; the boxes are the line's
    (OCR may read one line of code as several pieces)."""

    what: str = ""
    line: str = ""


def definition_in(code: str, in_code: bool = False) -> tuple[str, str] | None:
    """(identifier, what) a single line of code defines, or None. `in_code`: the line is known
    to be code (its page reads like code), so C-style signatures count without a '{'. An
    editor's line number read with the line ('5 def f(x):') is not part of it."""
    text = code.strip()
    found = _definition(text, in_code)
    numbered = _GUTTER.match(text)
    if found is None and numbered:
        found = _definition(text[numbered.end() :], in_code)
    return found


def _definition(text: str, in_code: bool) -> tuple[str, str] | None:
    for kind, rx, weak in _PATTERNS:
        m = rx.match(text)
        if not m or weak and not (in_code or text.endswith("{")):
            continue
        name = m.group("name")
        if name.lower() in _NOT_NAMES or not re.search(r"[A-Za-z_]", name):
            continue
        before = text[: m.start("name")]
        if kind != "sql" and name.isupper() and re.search(r"\b[A-Z][A-Z0-9]*\s+$", before):
            return None  # 'const MAX SEATS = 20': OCR lost MAX_SEATS's underscore; not sure
        what = (m.groupdict().get("what") or "").lower()
        if kind == "sql":
            return name.split(".")[-1], " ".join(what.split())
        if kind == "type":
            what = {
                "record": "class",
                "object": "class",
                "protocol": "interface",
                "struct": "struct",
                "interface": "interface",
            }.get(what, what)
            return name, what if what in TYPE_KINDS else "type"
        return name, kind
    return None


def looks_like_code(text: str) -> bool:
    """A line with code punctuation: a call, braces or ';' at an end, an arrow, '::' ..."""
    return bool(_CODE_LINE.search(text))


def reads_like_code(lines: list[OcrLine]) -> bool:
    """At least 3 lines, or 40 % of them, look like code."""
    n = sum(looks_like_code(ln.text) for ln in lines)
    return n >= 3 or bool(lines) and n >= 0.4 * len(lines)


def definitions(lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = ()) -> list[Definition]:
    """Every definition on every page, in reading order."""
    out: list[Definition] = []
    for page in pages(lines, regions):
        classes: list[OcrLine] = []  # the first pieces of the classes whose body we are in
        in_code = reads_like_code(list(page.lines))
        for pieces in _code_lines(page.lines):
            first = pieces[0]
            # a line as far left as a class's own line ends that class's body
            classes = [c for c in classes if first.box.x0 > c.box.x0 + 0.5 * first.box.height]
            text = " ".join(p.text.strip() for p in pieces)
            found = definition_in(text, in_code)
            if found is None:
                split = _split_constant(text)
                if split is not None:  # 'const MAX RETRY COUNT = 3': sure only when the page
                    # writes MAX_RETRY_COUNT elsewhere; a lead for the VLM either way
                    sure = any(split in ln.text for ln in page.lines)
                    out.append(
                        Definition(
                            split,
                            "definition" if sure else "unsure definition",
                            page.source_boxes(pieces),
                            page.media_index,
                            page.timestamp,
                            1.0,
                            "variable",
                            text,
                        )
                    )
                continue
            name, what = found
            if what == "function" and classes:
                what = "method"
            out.append(
                Definition(
                    name,
                    "definition",
                    page.source_boxes(pieces),
                    page.media_index,
                    page.timestamp,
                    1.0,
                    what,
                    text,
                )
            )
            if what in TYPE_KINDS:
                classes.append(first)
    return out


def _split_constant(text: str) -> str | None:
    """MAX_RETRY_COUNT from 'const MAX RETRY COUNT = 3;' (an upper-case constant whose
    underscores the OCR read as spaces), or None."""
    m = re.match(
        r"^\s*(?:[a-z]+\s+)*([A-Z][A-Z0-9]*(?:\s+[A-Z][A-Z0-9]*)+)\s*(?::[^=]+)?=(?!=)", text
    )
    return "_".join(m.group(1).split()) if m else None


def _code_lines(lines: Iterable[OcrLine]) -> list[list[OcrLine]]:
    """OCR pieces joined into code lines: pieces of one row less than two line heights apart
    ('def' and 'load(path):' read as two boxes) are one line of code; an editor's line number
    read alone stays apart."""
    rows: list[list[OcrLine]] = []
    for ln in lines:  # reading order: a row's pieces come together, left to right
        last = rows[-1][-1] if rows else None
        if (
            last is not None
            and not last.text.strip().isdigit()
            and min(last.box.y1, ln.box.y1) - max(last.box.y0, ln.box.y0)
            >= 0.5 * min(last.box.height, ln.box.height)
            and -0.5 * ln.box.height <= ln.box.x0 - last.box.x1 < 2 * ln.box.height
        ):
            rows[-1].append(ln)
        else:
            rows.append([ln])
    return rows


def defined(
    lines: Iterable[OcrLine], regions: Iterable[LayoutRegion] = (), kind: str | None = None
) -> list[Definition]:
    """The definitions of a kind of identifier a question names (`KIND_GROUPS`: function,
    method, class, variable, table; None or another word: every definition). One distinct
    name means the answer is sure."""
    found = definitions(lines, regions)
    for group in KIND_GROUPS.get(kind or "", ()):
        picked = [d for d in found if d.what in group]
        if picked:
            return picked
    return found if kind not in KIND_GROUPS else []
