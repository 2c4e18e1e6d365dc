"""Let a specialist answer when it can: OCR reads text, the detector counts.

"What does the sign say?" with confident OCR lines, or "how many people?" with detections, needs no
VLM. In `answer` mode the stage answers and routes to `tool`; in `hint` mode it always routes to
`vlm` and passes what the tools found as a hint for the prompt; `off` always routes to `vlm`.
The answer says which happened (`produced_by`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from cascade.artifacts import Answer, Detection, Evidence, OcrLine, Route
from cascade.bill import Bill
from cascade.stages._intent import rule_intent
from cascade.stage import Router, StageParams, stage

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


def best_place(lines: list[OcrLine], question: str) -> list[OcrLine]:
    """The lines of the one frame/image whose text shares most words with the question.

    A video can show several texts (a sign, lettering on a bus): reading them all out would answer
    a question nobody asked. Ties keep the first place, which is the retrieval order upstream.
    """
    places: dict[tuple[int, float | None], list[OcrLine]] = {}
    for line in lines:
        places.setdefault((line.media_index, line.timestamp), []).append(line)
    group = max(places.values(), key=lambda g: _overlap(question, " ".join(l.text for l in g)))
    # On a busy page, the lines that share words with the question are the answer, not the page.
    matching = [l for l in group if _overlap(question, l.text)]
    return matching or group


def _overlap(question: str, text: str) -> int:
    words = lambda t: {w for w in re.findall(r"[a-z0-9]+", t.lower()) if len(w) > 2 or w.isdigit()}
    return len(words(question) & words(text))


def read_text(lines: list[OcrLine]) -> str:
    """The distinct lines, in reading order (top to bottom, then left to right)."""
    seen, out = set(), []
    for line in sorted(lines, key=lambda l: (l.media_index, l.timestamp or 0.0, l.box.y0, l.box.x0)):
        key = line.text.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(line.text.strip())
    return " ".join(out)


def count_objects(dets: list[Detection], label: str) -> int:
    """Objects of `label` in the frame/image that shows the most of them (a video count)."""
    per_place: dict[tuple[int, float | None], int] = {}
    for d in dets:
        if d.label == label:
            key = (d.media_index, d.timestamp)
            per_place[key] = per_place.get(key, 0) + 1
    return max(per_place.values(), default=0)


@stage("tool_answer")
class ToolAnswer(Router):
    """Answer reading and counting questions from OCR/detections when confident; else hand to the VLM."""

    branches = ("tool", "vlm")

    class Params(StageParams):
        mode: Literal["answer", "hint", "off"] = Field(
            "answer", description="answer from the tool, pass its output as a VLM hint, or neither")
        min_confidence: float = Field(0.7, ge=0, le=1, description="mean tool confidence needed")
        always_read: bool = Field(False, description="treat every question as a reading question "
                                  "(documents: the answer is in the text)")

    @dataclass(frozen=True)
    class Outputs:
        route: Route
        answer: Answer | None
        hint: str

    def run(self, question: str, ocr_lines: list[OcrLine] | None = None,
            detections: list[Detection] | None = None) -> Outputs:
        intent = rule_intent(question)
        text, confidence, kind = "", 0.0, ""
        used_lines: tuple[OcrLine, ...] = ()
        used_dets: tuple[Detection, ...] = ()
        if "count" in intent.matched and detections:
            label = counted_label(question)
            if label and any(d.label == label for d in detections):
                used_dets = tuple(d for d in detections if d.label == label)
                n = count_objects(list(used_dets), label)
                text, kind = str(n), f"detector counted {n} {label}"
                confidence = sum(d.confidence for d in used_dets) / len(used_dets)
        if not text and ("read" in intent.matched or self.params.always_read) and ocr_lines:
            used_lines = tuple(best_place(ocr_lines, question))
            text, kind = read_text(list(used_lines)), f"OCR read {len(used_lines)} line(s)"
            confidence = sum(l.confidence for l in used_lines) / len(used_lines)
        scores = {"tool_confidence": confidence}
        if not text:
            return self.Outputs(Route("vlm", "no tool output fits the question", scores), None, "")
        hint = f"{kind}: {text}"
        if self.params.mode == "answer" and confidence >= self.params.min_confidence:
            evidence = Evidence(ocr_lines=used_lines, detections=used_dets)
            return self.Outputs(Route("tool", f"{kind} (confidence {confidence:.2f})", scores),
                                Answer(text, "tool", evidence, Bill.tool(confidence)), hint)
        why = {"answer": f"confidence {confidence:.2f} < {self.params.min_confidence}",
               "hint": "hint mode", "off": "tool answers off"}[self.params.mode]
        return self.Outputs(Route("vlm", f"{kind}; {why}", scores), None,
                            hint if self.params.mode != "off" else "")
