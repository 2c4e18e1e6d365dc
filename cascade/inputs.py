"""Turn user-supplied pipeline inputs (Python objects or CLI strings) into their declared types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .artifacts import Image
from .decoding import sampling_params
from .errors import InputError, did_you_mean
from .media import load_image
from .pdf import is_pdf, render_pdf
from .spec import PipelineSpec

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _to_image(value: Any, name: str, index: int = 0) -> Image:
    """An `Image` passes through (its media_index says where it came from); anything else goes
    through `cascade.media.load_image`, the one image coercion."""
    return value if isinstance(value, Image) else load_image(value, index, name=f"input '{name}'")


def _pdf(value: Any) -> bool:
    """A PDF document given as a path or as bytes (by its header, not its name)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return is_pdf(bytes(value[:1024]))
    if isinstance(value, (str, Path)) and Path(value).is_file():
        return is_pdf(value)
    return False


def _to_images(value: Any, name: str, index: int) -> list[Image]:
    """One image, or every page of a PDF (rendered at `cascade.pdf.DEFAULT_DPI`; render with
    `cascade.pdf.render_pdf` yourself for another DPI), media indexes from `index`."""
    if not _pdf(value):
        return [_to_image(value, name, index)]
    if isinstance(value, (str, Path)):
        return render_pdf(value, name=str(value), first_index=index)
    return render_pdf(bytes(value), name=f"input '{name}' PDF {index}", first_index=index)


def _text(name: str, value: Any) -> str:
    """A str input: bytes must be UTF-8; lone surrogates (undecodable command-line bytes, a bad
    JSON escape) are refused here, before any stage runs, not deep inside a tokenizer."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"input '{name}': not valid UTF-8 (byte {e.start})") from None
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(
            f"input '{name}': not valid UTF-8 text (undecodable character at position {e.start})"
        ) from None
    return text


def _history(name: str, value: Any) -> list[tuple[str, str]]:
    """Earlier (question, answer) turns: a list of pairs of strings, or that list as JSON text
    (how a command line passes it)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise InputError(
                f"input '{name}': expected a JSON list of [question, answer] pairs ({e})"
            ) from None
    if not isinstance(value, (list, tuple)):
        raise InputError(
            f"input '{name}': expected a list of (question, answer) pairs, got "
            f"{type(value).__name__}"
        )
    turns = []
    for i, turn in enumerate(value):
        if not (
            isinstance(turn, (list, tuple))
            and len(turn) == 2
            and all(isinstance(t, str) for t in turn)
        ):
            raise InputError(
                f"input '{name}'[{i}]: expected a (question, answer) pair of strings, "
                f"got {turn!r:.80}"
            )
        turns.append((_text(f"{name}[{i}]", turn[0]), _text(f"{name}[{i}]", turn[1])))
    return turns


def coerce(name: str, type_: str, value: Any) -> Any:
    """Convert one input value to the pipeline input type `type_` (see
    cascade.types.INPUT_TYPES)."""
    try:
        if type_ == "str":
            return _text(name, value)
        if type_ in ("int", "float"):
            return int(value) if type_ == "int" else float(value)
        if type_ == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in _TRUE | _FALSE:
                return str(value).lower() in _TRUE
            raise ValueError(f"not a boolean: {value!r}")
    except (TypeError, ValueError) as e:
        raise InputError(f"input '{name}': expected {type_}, got {value!r} ({e})") from None
    if type_ == "history":
        return _history(name, value)
    if type_ == "sampling":
        if isinstance(value, str):  # a command line passes it as JSON text
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise InputError(
                    f"input '{name}': expected a JSON object of sampling settings ({e})"
                ) from None
        return sampling_params(value, f"input '{name}'")
    if type_ in ("path", "video"):
        p = Path(value)
        if not p.exists():
            raise InputError(f"input '{name}': file not found: '{p}'")
        return p
    if type_ == "image":
        images = _to_images(value, name, 0)
        if len(images) > 1:
            raise InputError(
                f"input '{name}' takes one image, and the PDF has {len(images)} "
                "pages; use a pipeline with an images input (doc_qa) for documents"
            )
        return images[0]
    if type_ == "images":
        items = value if isinstance(value, (list, tuple)) else [value]
        if not items:
            raise InputError(f"input '{name}': expected at least one image")
        images = []
        for v in items:  # a PDF adds one image per page
            images += _to_images(v, name, len(images))
        return images
    raise InputError(f"input '{name}': unknown input type '{type_}'")


def coerce_inputs(spec: PipelineSpec, given: dict[str, Any]) -> dict[str, Any]:
    """Check names (with suggestions), fill defaults, convert types."""
    for name in given:
        if name not in spec.inputs:
            raise InputError(
                f"pipeline '{spec.name}' has no input '{name}'"
                f"{did_you_mean(name, spec.inputs)}; inputs: {', '.join(spec.inputs)}"
            )
    out = {}
    for name, inp in spec.inputs.items():
        if name in given:
            out[name] = coerce(name, inp.type, given[name])
            if inp.required and inp.type == "str" and not out[name].strip():
                raise InputError(
                    f"input '{name}' is empty" + (f": {inp.description}" if inp.description else "")
                )
        elif inp.required:
            raise InputError(
                f"pipeline '{spec.name}' needs input '{name}' ({inp.type})"
                + (f": {inp.description}" if inp.description else "")
            )
        else:
            out[name] = None if inp.default is None else coerce(name, inp.type, inp.default)
    return out
