"""MkDocs hook: every public object the API page documents has a docstring.

mkdocstrings hides an object without one (`show_if_no_docstring: false`), so a missing docstring
would leave a silent hole in the reference; this hook makes it a warning, which `mkdocs build
--strict` turns into a failed build naming the object.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import griffe

log = logging.getLogger("mkdocs.hooks.docstrings")

_IDENT = re.compile(r"^::: ([\w.]+)\s*$", re.MULTILINE)


def _public(name: str) -> bool:
    return not name.startswith("_")


def undocumented(obj: griffe.Object) -> list[str]:
    """The paths of `obj` and of its public members defined in it (modules, classes, functions,
    methods; attributes aside) that have no docstring."""
    missing = [] if obj.docstring else [obj.path]
    if obj.kind not in (griffe.Kind.MODULE, griffe.Kind.CLASS):
        return missing
    for name, member in obj.members.items():
        if not _public(name) or member.is_alias or member.is_attribute:
            continue
        if obj.is_module and member.is_module:
            continue  # submodules are documented where they are listed, if at all
        missing += undocumented(member)
    return missing


def objects_on_page(markdown: str, root: Path) -> list[griffe.Object]:
    """The objects named by `::: path` lines, loaded statically from the source tree."""
    found = []
    loader = griffe.GriffeLoader(search_paths=[str(root)])
    for ident in _IDENT.findall(markdown):
        package = ident.split(".")[0]
        module = loader.load(package)
        obj = module if ident == package else module[ident.split(".", 1)[1]]
        found.append(obj.final_target if obj.is_alias else obj)
    return found


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Warn about each undocumented public object on a page that renders API reference."""
    if "::: " not in markdown:
        return markdown
    root = Path(config["config_file_path"]).parent
    for obj in objects_on_page(markdown, root):
        for path in undocumented(obj):
            log.warning(f"{page.file.src_uri}: '{path}' has no docstring")
    return markdown
