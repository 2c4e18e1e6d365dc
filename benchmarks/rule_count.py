"""Count the rule layer of `cascade/evidence`: regex literals (raw-string literals, every
pattern there is written as one) and word tables (list, tuple, set or dict displays of four or
more string literals, export lists aside) with their entries. The figure issue 36 asks to shrink.

    python benchmarks/rule_count.py [folder]   # default: cascade/evidence
"""

from __future__ import annotations

import ast
import io
import json
import sys
import tokenize
from pathlib import Path


def count(folder: Path) -> dict[str, int]:
    """{'regex_literals', 'word_tables', 'word_table_entries'} over the folder's .py files."""
    regexes = tables = entries = 0
    for path in sorted(folder.glob("*.py")):
        source = path.read_text()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            prefix = tok.string[: len(tok.string) - len(tok.string.lstrip("rRbBfFuU"))]
            if tok.type == tokenize.STRING and "r" in prefix.lower():
                regexes += 1
        tree = ast.parse(source)
        exports = {
            id(n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign)
            and any(getattr(t, "id", "") == "__all__" for t in n.targets)
        }  # a module's export list is no rule
        for node in ast.walk(tree):
            if id(node) in exports:
                continue
            if isinstance(node, (ast.Set, ast.List, ast.Tuple, ast.Dict)):
                elts = node.keys if isinstance(node, ast.Dict) else node.elts
                strings = [
                    e for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
                if len(elts) >= 4 and len(strings) == len(elts):
                    tables += 1
                    entries += len(elts)
    return {"regex_literals": regexes, "word_tables": tables, "word_table_entries": entries}


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "cascade" / "evidence"
    print(json.dumps(count(folder)))
