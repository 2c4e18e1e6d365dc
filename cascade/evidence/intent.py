"""What kind of looking a question needs: reading text, counting, fine detail, or the whole scene.

Rules are cheap and explainable (English and Chinese); `IntentScorer` adds a zero-shot score from
a sentence-embedding model (cosine similarity of the question to a few prototype questions per
intent) for English wording the rules miss. `understand` (`cascade.evidence.query`) folds both
into the `Query` every later stage reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

INTENTS = ("read", "count", "detail", "scene")

_RULES: dict[str, re.Pattern[str]] = {
    "read": re.compile(
        r"\b(read|say|says|said|written|write|text|word|words|sign|label|title|"
        r"caption|poster|number|digits?|letters?|spell|name on|plate|price|date|time on|"
        r"headline|heading|section|menu|page|document|chart|axis|table|row|column|"
        r"code|function|invoice|receipt)\b",
        re.I,
    ),
    "count": re.compile(r"\b(how many|count|number of|several|total)\b", re.I),
    "detail": re.compile(
        r"\b(small|tiny|little|detail|details|exact|exactly|precise|fine|logo|"
        r"brand|color of the small|far away|background|distant|zoom)\b",
        re.I,
    ),
}
# Chinese has no word boundaries: the patterns are the words themselves.
_ZH_RULES: dict[str, re.Pattern[str]] = {
    "read": re.compile(
        r"写|字|文字|标志|牌|标签|标题|题目|名称|名字|号码|编号|单号|价格|多少钱|"
        r"金额|日期|哪天|星期|周几|几点|时间|内容|章节|第.[节章]|表格|表中|代码|函数|"
        r"合计|总计|小计|发票|收据|小票|通知|告示|菜单|读"
    ),
    "count": re.compile(
        r"(?:多少|几)[个辆只人位件张台棵头条名把瓶本块盏座架艘匹双杯盒袋箱支根朵间]|数量|一共有几|"
        r"数一数|数数"
    ),
    "detail": re.compile(r"细节|远处|角落|很小|小小|品牌|标识"),
}

PROTOTYPES: dict[str, tuple[str, ...]] = {
    "read": (
        "What does the sign say?",
        "What is written on the page?",
        "What number is shown?",
        "Read the text on the label.",
    ),
    "count": ("How many people are there?", "Count the cars.", "How many objects are visible?"),
    "detail": (
        "What brand is the small logo?",
        "What is the tiny object in the corner?",
        "What colour is the button on the far shelf?",
    ),
    "scene": (
        "What is happening in this video?",
        "Describe the scene.",
        "Where was this photo taken?",
        "What is the main subject?",
    ),
}


@dataclass(frozen=True)
class Intent:
    """Per-intent scores in [0, 1] and the intents the rules matched."""

    scores: dict[str, float]
    matched: tuple[str, ...] = ()
    zero_shot: dict[str, float] = field(default_factory=dict)

    @property
    def top(self) -> str:
        return max(self.scores, key=self.scores.__getitem__)

    @property
    def needs_high_res(self) -> float:
        """How strongly the question asks for pixels a thumbnail loses (max over fine intents)."""
        return max(self.scores["read"], self.scores["count"], self.scores["detail"])


def rule_intent(question: str) -> Intent:
    rules = _ZH_RULES if re.search(r"[\u4e00-\u9fff]", question) else _RULES
    matched = tuple(name for name, rx in rules.items() if rx.search(question))
    scores = {name: 1.0 if name in matched else 0.0 for name in INTENTS}
    scores["scene"] = 0.0 if matched else 1.0
    return Intent(scores, matched)


class IntentScorer:
    """Rules plus an optional sentence-embedding zero-shot score (any sentence-transformers
    model)."""

    def __init__(self, model: str | None = None, zero_shot_weight: float = 0.5):
        self.model_name = model
        self.weight = zero_shot_weight if model else 0.0
        self._prototypes: dict[str, np.ndarray] | None = None

    def __call__(self, question: str) -> Intent:
        rules = rule_intent(question)
        if not self.weight:
            return rules
        from cascade.shared_models import sentence_model

        assert self.model_name is not None  # the weight is 0 without a model (__init__)
        shared = sentence_model(self.model_name)
        with shared.lock:
            if self._prototypes is None:
                self._prototypes = {
                    k: shared.model.encode(list(v), normalize_embeddings=True)
                    for k, v in PROTOTYPES.items()
                }
            q = shared.model.encode([question], normalize_embeddings=True)[0]
        sims = {k: float((p @ q).max()) for k, p in self._prototypes.items()}
        # Softmax-free normalisation: best intent 1.0, others relative, so weights are comparable.
        best = max(sims.values())
        zero = {k: max(0.0, v) / best if best > 0 else 0.0 for k, v in sims.items()}
        mixed = {k: (1 - self.weight) * rules.scores[k] + self.weight * zero[k] for k in INTENTS}
        return Intent(mixed, rules.matched, zero)


# Plural and everyday words for COCO labels a question may use.
LABEL_WORDS = {
    "person": (
        "person",
        "people",
        "persons",
        "man",
        "men",
        "woman",
        "women",
        "pedestrian",
        "pedestrians",
        "kid",
        "kids",
        "child",
        "children",
    ),
    "car": ("car", "cars"),
    "bus": ("bus", "buses"),
    "truck": ("truck", "trucks"),
    "bicycle": ("bicycle", "bicycles", "bike", "bikes"),
    "dog": ("dog", "dogs"),
    "cat": ("cat", "cats"),
    "cup": ("cup", "cups", "mug", "mugs"),
}
# Chinese names, longest first ("公交车" before "车").
ZH_LABELS = (
    ("公交车", "bus"),
    ("巴士", "bus"),
    ("卡车", "truck"),
    ("货车", "truck"),
    ("自行车", "bicycle"),
    ("单车", "bicycle"),
    ("摩托车", "motorcycle"),
    ("汽车", "car"),
    ("轿车", "car"),
    ("小汽车", "car"),
    ("行人", "person"),
    ("人", "person"),
    ("狗", "dog"),
    ("猫", "cat"),
    ("杯子", "cup"),
    ("鸟", "bird"),
    ("船", "boat"),
    ("椅子", "chair"),
    ("火车", "train"),
    ("飞机", "airplane"),
    ("车", "car"),
)

# The COCO-80 names YOLO models use, so "how many giraffes" finds its label without a table entry.
COCO_LABELS = (
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
)
# Single words that name a COCO label only in the sense no question here means (a colour, a
# document's table): never taken for a label on their own.
_NOT_LABELS = {"orange", "tie", "remote", "book", "mouse"}


def label_in(words: list[str]) -> str | None:
    """The first COCO label named in `words` (lower-case English words, plurals allowed)."""
    for i, word in enumerate(words):
        pair = " ".join(words[i : i + 2])
        if pair.rstrip("s") in COCO_LABELS:
            return pair.rstrip("s")
        for label, names in LABEL_WORDS.items():
            if word in names:
                return label
        single = word[:-2] if word.endswith("es") and word[:-2] in COCO_LABELS else word.rstrip("s")
        if single in COCO_LABELS and single not in _NOT_LABELS:
            return single
    return None


def zh_label_in(text: str) -> str | None:
    """The COCO label a Chinese phrase names (the first of `ZH_LABELS` it contains)."""
    return next((label for name, label in ZH_LABELS if name in text), None)


def counted_label(question: str) -> str | None:
    """The object a counting question asks about: the first label named after "how many" /
    "count" (Chinese: after 多少 / 几), else anywhere in the question."""
    if re.search(r"[\u4e00-\u9fff]", question):
        at = re.search(r"多少|几|数量", question)
        return zh_label_in(question[at.start() :] if at else question) or zh_label_in(question)
    words = re.findall(r"[a-z]+", question.lower())
    if not words:
        return None
    start = next(
        (
            i + 1
            for i, (a, b) in enumerate(zip(words, words[1:] + [""], strict=True))
            if (a, b) == ("how", "many") or a in ("count", "number")
        ),
        0,
    )
    return label_in(words[start:])
