"""Understand the question once: `understand(question) -> Query`, read by every later stage.

The language decides the reader (`english`, `chinese`: exact rules from `lexicon`); an optional
sentence-embedding zero-shot scorer (`IntentScorer`) adds intent scores for English wording the
rules miss. The learned question reader (`reader_model`: a classifier over the relevance
embedder's question vector, calibrated) retypes the target when it is sure, unless the question's
own words name it (a section number, a title or heading, a key); without the embedder the rules
read alone. What a `Query` holds is documented in `query`.
"""

from __future__ import annotations

import unicodedata

from . import lexicon as lx
from .chinese import read_chinese
from .english import read_english
from .intent import INTENTS, IntentScorer, rule_intent
from .query import TEXT_TARGETS, Query, language_of
from .reader_model import threshold_guess

__all__ = ["understand"]


def understand(question: str, scorer: IntentScorer | None = None, learned: bool = True) -> Query:
    """The `Query` for a question, English or Chinese (other languages: English rules on what
    they share, e.g. digits and Latin names). `scorer` adds zero-shot intent scores (English);
    `learned=False` reads with the rules alone (the learned reader's retyping off)."""
    text = unicodedata.normalize("NFKC", question).strip()
    lang = language_of(text)
    guess = threshold_guess(text) if learned else None
    if lang == "zh":
        reading = lx.zh_without_few(text)
        intent = rule_intent(reading)
        found = read_chinese(reading, intent, guess)
    else:
        intent = scorer(text) if scorer is not None and lang == "en" else rule_intent(text)
        found = read_english(text, intent, guess)
    guessed = found.pop("guessed", None)
    target = found["target"]
    top = (
        "read"
        if target in TEXT_TARGETS
        else "count"
        if target == "object_count"
        else "detail"
        if target == "object"
        else intent.top
        if intent.top != "read"
        else "scene"
    )
    # the route says when the target is the learned reader's, not a rule's
    said = f"learned:{target}" if guessed else target
    matched = tuple(dict.fromkeys((*intent.matched, said)))
    return Query(
        question=text,
        language=lang,
        intent=top,
        matched=matched,
        intent_scores=tuple((k, float(intent.scores[k])) for k in INTENTS),
        **found,
    )
