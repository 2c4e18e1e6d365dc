"""What kind of looking a question needs: reading text, counting, fine detail, or the whole scene.

Rules are cheap and explainable; `IntentScorer` adds a zero-shot score from a sentence-embedding
model (cosine similarity of the question to a few prototype questions per intent) for wording the
rules miss. Both feed the resolution router and the tool-answer stage, and both report their scores.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

INTENTS = ("read", "count", "detail", "scene")

_RULES: dict[str, re.Pattern[str]] = {
    "read": re.compile(r"\b(read|say|says|said|written|write|text|word|words|sign|label|title|"
                       r"caption|poster|number|digits?|letters?|spell|name on|plate|price|date|time on|"
                       r"headline|menu|page|document|chart|axis)\b", re.I),
    "count": re.compile(r"\b(how many|count|number of|several|total)\b", re.I),
    "detail": re.compile(r"\b(small|tiny|little|detail|details|exact|exactly|precise|fine|logo|"
                         r"brand|color of the small|far away|background|distant|zoom)\b", re.I),
}

PROTOTYPES: dict[str, tuple[str, ...]] = {
    "read": ("What does the sign say?", "What is written on the page?", "What number is shown?",
             "Read the text on the label."),
    "count": ("How many people are there?", "Count the cars.", "How many objects are visible?"),
    "detail": ("What brand is the small logo?", "What is the tiny object in the corner?",
               "What colour is the button on the far shelf?"),
    "scene": ("What is happening in this video?", "Describe the scene.",
              "Where was this photo taken?", "What is the main subject?"),
}


@dataclass(frozen=True)
class Intent:
    """Per-intent scores in [0, 1] and the intents the rules matched."""

    scores: dict[str, float]
    matched: tuple[str, ...] = ()
    zero_shot: dict[str, float] = field(default_factory=dict)

    @property
    def top(self) -> str:
        return max(self.scores, key=self.scores.get)

    @property
    def needs_high_res(self) -> float:
        """How strongly the question asks for pixels a thumbnail loses (max over fine intents)."""
        return max(self.scores["read"], self.scores["count"], self.scores["detail"])


def rule_intent(question: str) -> Intent:
    matched = tuple(name for name, rx in _RULES.items() if rx.search(question))
    scores = {name: 1.0 if name in matched else 0.0 for name in INTENTS}
    scores["scene"] = 0.0 if matched else 1.0
    return Intent(scores, matched)


class IntentScorer:
    """Rules plus an optional sentence-embedding zero-shot score (any sentence-transformers model)."""

    def __init__(self, model: str | None = None, zero_shot_weight: float = 0.5):
        self.model_name = model
        self.weight = zero_shot_weight if model else 0.0
        self._prototypes = None

    def __call__(self, question: str) -> Intent:
        rules = rule_intent(question)
        if not self.weight:
            return rules
        from cascade.stages.text_embed import sentence_model

        shared = sentence_model(self.model_name)
        with shared.lock:
            if self._prototypes is None:
                self._prototypes = {k: shared.model.encode(list(v), normalize_embeddings=True)
                                    for k, v in PROTOTYPES.items()}
            q = shared.model.encode([question], normalize_embeddings=True)[0]
        sims = {k: float((p @ q).max()) for k, p in self._prototypes.items()}
        # Softmax-free normalisation: best intent 1.0, others relative, so weights are comparable.
        best = max(sims.values())
        zero = {k: max(0.0, v) / best if best > 0 else 0.0 for k, v in sims.items()}
        mixed = {k: (1 - self.weight) * rules.scores[k] + self.weight * zero[k] for k in INTENTS}
        return Intent(mixed, rules.matched, zero)


# Plural and everyday words for COCO labels a question may use.
LABEL_WORDS = {"person": ("person", "people", "persons", "man", "men", "woman", "women", "pedestrian",
                          "pedestrians", "kid", "kids", "child", "children"),
               "car": ("car", "cars"), "bus": ("bus", "buses"), "truck": ("truck", "trucks"),
               "bicycle": ("bicycle", "bicycles", "bike", "bikes"), "dog": ("dog", "dogs"),
               "cat": ("cat", "cats"), "cup": ("cup", "cups", "mug", "mugs")}


def counted_label(question: str) -> str | None:
    """The object a counting question asks about: the first label word after "how many"/"count"."""
    words = re.findall(r"[a-z]+", question.lower())
    start = next((i + 1 for i, (a, b) in enumerate(zip(words, words[1:] + [""]))
                  if (a, b) == ("how", "many") or a in ("count", "number")), 0)
    for word in words[start:]:
        for label, names in LABEL_WORDS.items():
            if word in names:
                return label
        if word.rstrip("s") in COCO_LABELS:
            return word.rstrip("s")
    return None


# The COCO-80 names YOLO models use, so "how many giraffes" finds its label without a table entry.
COCO_LABELS = set("""person bicycle car motorcycle airplane bus train truck boat traffic light fire
hydrant stop sign parking meter bench bird cat dog horse sheep cow elephant bear zebra giraffe
backpack umbrella handbag tie suitcase frisbee skis snowboard sports ball kite baseball bat glove
skateboard surfboard tennis racket bottle wine glass cup fork knife spoon bowl banana apple sandwich
orange broccoli carrot hot dog pizza donut cake chair couch potted plant bed dining table toilet tv
laptop mouse remote keyboard cell phone microwave oven toaster sink refrigerator book clock vase
scissors teddy bear hair drier toothbrush""".split())
