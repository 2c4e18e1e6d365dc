"""Code screenshots: one function (or class) defined, other identifiers called or imported around
it, syntax-coloured in a light or dark editor theme."""

from __future__ import annotations

import random
import re

import numpy as np

from ..fonts import load_font
from ..items import EvalItem
from ..page import Page, Run
from .common import Ctx, save_png

KEYWORDS = {
    "python": {
        "import",
        "from",
        "def",
        "return",
        "if",
        "is",
        "None",
        "for",
        "in",
        "class",
        "self",
        "not",
        "else",
    },
    "c": {"include", "static", "int", "const", "char", "if", "return", "void", "for", "size_t"},
    "javascript": {
        "import",
        "from",
        "export",
        "async",
        "function",
        "const",
        "await",
        "return",
        "class",
        "constructor",
        "this",
        "if",
        "new",
    },
    "go": {
        "package",
        "import",
        "func",
        "return",
        "if",
        "nil",
        "err",
        "string",
        "int",
        "error",
        "for",
        "range",
    },
    "rust": {"use", "pub", "fn", "let", "mut", "Ok", "Result", "return", "if", "impl", "for", "in"},
}
THEMES = {  # background, text, keyword, string, defined name, line numbers
    "light": (
        (255, 255, 255),
        (30, 30, 30),
        (0, 0, 190),
        (20, 120, 40),
        (140, 60, 0),
        (150, 150, 150),
    ),
    "dark": (
        (30, 31, 36),
        (220, 220, 220),
        (198, 120, 221),
        (152, 195, 121),
        (97, 175, 239),
        (100, 100, 110),
    ),
}


def _name(verb: str, noun: str, style: str) -> str:
    return f"{verb}_{noun}" if style == "snake" else f"{verb}{noun[:1].upper()}{noun[1:]}"


def _function(lang: str, fn: str, helpers: list[str], rng: random.Random) -> list[str]:
    a, b = rng.sample(("path", "items", "limit", "data", "source", "key", "count", "name"), 2)
    h1, h2, h3 = helpers
    if lang == "python":
        return [
            "import os",
            "from pathlib import Path",
            "",
            "",
            f"def {fn}({a}, {b}=None):",
            f'    """Return the {a} after {h1}."""',
            f"    result = {h1}(Path({a}))",
            f"    if {b} is None:",
            f"        {b} = {h2}(result)",
            f"    return [{h3}(x, {b}) for x in result]",
        ]
    if lang == "c":
        return [
            "#include <stdio.h>",
            '#include "util.h"',
            "",
            f"static int {fn}(const char *{a}, int {b})",
            "{",
            f"    int total = {h1}({a});",
            f"    if ({b} > 0)",
            f"        total += {h2}({b});",
            f"    return {h3}(total);",
            "}",
        ]
    if lang == "javascript":
        return [
            f'import {{ {h1}, {h2} }} from "./lib.js";',
            "",
            f"export async function {fn}({a}, {b} = {{}}) {{",
            f"  const res = await {h1}({a});",
            f"  if (!res.ok) return {h3}(res);",
            f"  return {h2}(res, {b});",
            "}",
        ]
    if lang == "go":
        return [
            "package main",
            "",
            'import "fmt"',
            "",
            f"func {fn}({a} string, {b} int) (int, error) {{",
            f"    v, err := {h1}({a})",
            "    if err != nil {",
            f'        return 0, fmt.Errorf("{h1}: %w", err)',
            "    }",
            f"    return {h2}(v, {b}) + {h3}(v), nil",
            "}",
        ]
    return [
        "use std::collections::HashMap;",
        "",  # rust
        f"pub fn {fn}({a}: &str, {b}: usize) -> Result<Vec<u8>, Error> {{",
        "    let mut seen = HashMap::new();",
        f"    let data = {h1}({a})?;",
        f"    seen.insert({a}, {h2}(&data));",
        f"    Ok({h3}(data, {b}))",
        "}",
    ]


def _class(lang: str, cls: str, method: str, helpers: list[str]) -> list[str]:
    h1, h2, _ = helpers
    if lang == "python":
        return [
            "from dataclasses import dataclass",
            "",
            "",
            f"class {cls}:",
            "    def __init__(self, source):",
            "        self.source = source",
            "        self.items = []",
            "",
            f"    def {method}(self):",
            f"        self.items = {h1}(self.source)",
            f"        return {h2}(self.items)",
        ]
    return [
        'import { EventEmitter } from "events";',
        "",  # javascript
        f"export class {cls} extends EventEmitter {{",
        "  constructor(source) {",
        "    super();",
        "    this.source = source;",
        "  }",
        "",
        f"  async {method}() {{",
        f"    const rows = await {h1}(this.source);",
        f"    return {h2}(rows);",
        "  }",
        "}",
    ]


_TOKEN = re.compile(r'("[^"]*"|\'[^\']*\'|[A-Za-z_][A-Za-z_0-9]*|\s+|.)')


def _runs(line: str, lang: str, font: str, size: int, theme, defined: str) -> list[Run]:
    _, text, kw, string, name, _ = theme
    runs: list[Run] = []
    for tok in _TOKEN.findall(line) or [""]:
        fill = (
            kw
            if tok in KEYWORDS[lang]
            else string
            if tok[:1] in "\"'"
            else name
            if tok == defined
            else text
        )
        if runs and runs[-1].fill == fill:
            runs[-1] = Run(runs[-1].text + tok, font, size, fill)
        else:
            runs.append(Run(tok, font, size, fill))
    return runs


def code_screenshot(
    ctx: Ctx, lang: str, lines: list[str], defined: str
) -> tuple[np.ndarray, tuple[int, int, int, int] | None, int]:
    """The screenshot (an editor pane), the box of `defined` on its definition line, the font
    size."""
    rng = ctx.rng
    theme = THEMES[rng.choice(ctx.spec.code_themes)]
    font, size = rng.choice(ctx.spec.fonts.code), rng.randint(16, 22)
    f = load_font(font, size)
    numbers = ctx.spec.line_numbers
    gutter = int(f.getlength("000 ")) if numbers else 0
    width = int(max(f.getlength(line) for line in lines)) + gutter + 2 * 28
    page = Page(width, margin=28, paper=theme[0], ink=theme[1])
    box: tuple[int, int, int, int] | None = None
    for k, line in enumerate(lines, start=1):
        runs = _runs(line, lang, font, size, theme, defined)
        if numbers:
            page.runs([Run(f"{k:>3}", font, size, theme[5])], line_height=0)
        is_def = box is None and re.search(rf"\b{re.escape(defined)}\b", line) is not None
        drawn = page.runs(
            runs, x=page.margin + gutter, line_height=1.55, marks=[defined] if is_def else []
        )
        if is_def:
            b = page.marks.get(defined, drawn)
            box = (int(b.x0), int(b.y0), int(b.x1), int(b.y1))
    return page.render(), box, size


def code(ctx: Ctx) -> list[EvalItem]:
    """One question per screenshot: the function's name, or (Python / JavaScript, every third
    screenshot) the class's name; the helpers it calls are the distractors."""
    rng, spec = ctx.rng, ctx.spec
    items = []
    for i in range(ctx.n):
        lang = spec.code_langs[i % len(spec.code_langs)]
        style = "snake" if lang in ("python", "c", "rust") else "camel"
        pairs = rng.sample([(v, n) for v in spec.code_verbs for n in spec.code_nouns], 5)
        names = [_name(v, n, style) for v, n in pairs]
        wants_class = i % 3 == 2 and lang in ("python", "javascript")
        if wants_class:
            gold = rng.choice(spec.class_nouns)
            lines = _class(lang, gold, names[0], names[1:4])
            question = spec.ask("code_class", rng)
        else:
            gold = names[0]
            lines = _function(lang, gold, names[1:4], rng)
            question = spec.ask("code_function", rng)
        arr, box, size = code_screenshot(ctx, lang, lines, gold)
        path = save_png(arr, ctx.path(f"code_{i}.png"))
        items.append(
            ctx.item(
                i,
                media_kind="document",
                media=(path,),
                question=question,
                answer=gold,
                kind="doc",
                target="identifier",
                frames=(0,),
                box=box,
                text_size=size,
                distractors=tuple(n for n in names if n != gold),
            )
        )
    return items
