"""How sure a tool answer is: a calibrated probability that it is exactly the span asked for.

A tool's reader (a key's value, a table cell, a heading, a sign's text) can find one candidate
and still be wrong: a neighbouring row's price, a count from the wrong column, the page's
running header for a section's heading, a number read with a stray character. The OCR's own
confidence says only that the characters were read well. Six general features, none tied to a
wording, say whether the answer fits the question (`features`):

- `ocr`: the OCR confidence of the lines the answer was read from (the lowest);
- `type_fit`: 1 when the whole answer is one span of the kind the question asks for (an amount
  for a price, a date for "when", a number for "how many"; any text for a text question), else 0;
- `echo`: the share of the answer's words that are the question's own (an answer that only says
  back what was asked, a section's "CREATURES" for "the second creature section", answers
  nothing);
- `key_value`: 1 when the answer is the value of a key the question names (the most constrained
  reader), 0 for a table cell, a sentence's span, a heading, a title or a sign's text;
- `meaning`: how much more the answer's lines (the key with its value, a cell with its row and
  column keys, a heading) mean what the question asks than the page's typical text does
  (`relevance.meaning`, without the cap: 1 = one `_SPAN` over the page's median cosine);
- `top`: 1 when the answer's lines hold the page's text nearest the question by meaning, else
  the share of the page's texts that are farther from it than they are.

A logistic model over them, fitted on the real-media dev split by
`benchmarks/tool_sureness.py` (its data and fitted weights in `tool_sureness.json`, reproducible
with one command), gives `sureness`; a tool answers only at or above the threshold chosen there
for zero wrong answers on dev, and otherwise leads the VLM to the evidence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path

import numpy as np

from . import spans
from .documents import SPAN_KINDS
from .query import cue_tokens
from .relevance import _SPAN, RelevanceModel

__all__ = ["FEATURES", "Features", "Calibration", "calibration", "features", "type_fit"]


@dataclass(frozen=True)
class Features:
    """One tool answer's features (the module's docstring says what each measures)."""

    ocr: float
    type_fit: float
    echo: float
    key_value: float
    meaning: float = 0.0
    top: float = 0.5  # unknown without a relevance model


FEATURES = tuple(f.name for f in fields(Features))
PARAMS = Path(__file__).with_name("tool_sureness.json")
_NUMERIC = ("amount", "number", "percent")  # a figure asked for may be written as any of these


def type_fit(answer: str, answer_type: str) -> float:
    """1.0 when the whole `answer` is one span of a kind the question's `answer_type` allows
    (a text, cell or description question allows any text), else 0.0."""
    kind = SPAN_KINDS.get(answer_type, "number" if answer_type == "count" else None)
    if kind in (None, "text", "cell"):
        return 1.0
    kinds = _NUMERIC if kind in _NUMERIC else (kind, "number") if kind == "id" else (kind,)
    whole = answer.strip()
    for kind in kinds:
        span = spans.exact_span(whole, kind)
        if span is not None and span.text.strip() == whole:
            return 1.0
    return 0.0


def features(
    question: str,
    answer_type: str,
    answer: str,
    reader: str,
    ocr_confidence: float,
    context: Sequence[str],
    page: Sequence[str],
    relevance: RelevanceModel | None,
    media: str = "",
) -> dict[str, float]:
    """The features of one tool answer: `reader` the tool's reader that gave it ('key_value',
    'structure', 'sign'), `context` the texts it was read from, `page` every text read on its
    image (the baseline of meaning). Without a relevance model, `meaning` is 0 and `top` 0.5
    (unknown); on a page that says nothing else, `top` is 1."""
    said = cue_tokens(answer)
    known = (
        float(ocr_confidence),
        type_fit(answer, answer_type),
        len(said & cue_tokens(question)) / max(len(said), 1),
        float(reader == "key_value"),
    )
    texts = list(dict.fromkeys([*page, *context]))
    if relevance is None or not context:
        return asdict(Features(*known))
    if len(texts) == len(set(context)):  # the answer's lines are all the page says
        return asdict(Features(*known, 0.0, 1.0))
    cos = relevance.passages(texts, media) @ relevance.query(question)
    mine = max(float(cos[texts.index(t)]) for t in context)
    base = float(np.median(cos)) if cos.size >= 3 else float(cos.min())
    others = [float(c) for t, c in zip(texts, cos, strict=True) if t not in context]
    below = sum(c < mine for c in others) / max(len(others), 1)
    raw = (mine - base) / _SPAN
    return asdict(Features(*known, float(np.clip(raw, -2.0, 4.0)), below))


@dataclass(frozen=True)
class Calibration:
    """A fitted logistic model: sureness = sigmoid(bias + sum w_i (x_i - mean_i) / scale_i),
    and the threshold a tool answer needs (chosen on dev for zero wrong answers)."""

    weights: dict[str, float]
    means: dict[str, float]
    scales: dict[str, float]
    bias: float
    threshold: float
    fitted_on: str = ""

    def sureness(self, x: dict[str, float]) -> float:
        """The calibrated probability that an answer with features `x` is the exact span."""
        z = self.bias + sum(
            w * (x[f] - self.means[f]) / self.scales[f] for f, w in self.weights.items()
        )
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def to_dict(self) -> dict[str, object]:
        return {"features": list(self.weights), **asdict(self)}


@cache
def calibration(path: Path = PARAMS) -> Calibration:
    """The fitted calibration shipped with the package (`tool_sureness.json`); a missing or
    malformed file is an error naming it."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        return Calibration(
            weights={f: float(raw["weights"][f]) for f in raw["features"]},
            means={f: float(raw["means"][f]) for f in raw["features"]},
            scales={f: float(raw["scales"][f]) for f in raw["features"]},
            bias=float(raw["bias"]),
            threshold=float(raw["threshold"]),
            fitted_on=str(raw.get("fitted_on", "")),
        )
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RuntimeError(
            f"{path}: not a tool-sureness calibration (features, weights, means, scales, bias, "
            f"threshold); refit it with `python benchmarks/tool_sureness.py` ({e})"
        ) from e
