"""Let a specialist answer when it is sure: OCR reads text and key-value pairs, the detector counts.

Right or silent. A reading answer is one whole text block (all lines of one sign) that passes the
plausibility checks (`_evidence.implausible`: length, script, not the whole frame, confidence) and
is the only such text, or the only one containing a word of the question. A document question that
names a key ("total", "date", "invoice number") is answered with the value of that key
(`_keyvalue`), never the label and never a neighbouring key's value. Anything else abstains: the
route goes to `vlm` with what the tools found as a hint. In `hint` mode the stage always routes to
`vlm` with the hint; `off` routes to `vlm` with none. The answer says which happened (`produced_by`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from cascade.artifacts import Answer, Detection, Evidence, Image, OcrLine, Route
from cascade.bill import Bill
from cascade.stage import Router, StageParams, stage
from cascade.evidence.blocks import (TextBlock, cue_words, frame_size_of, has_cue, implausible,
                                      norm_text, text_blocks)
from cascade.evidence.intent import counted_label, rule_intent
from cascade.evidence.keyvalue import PATTERNS, key_query, lone_value, read_key_value

def count_objects(dets: list[Detection], label: str) -> int:
    """Objects of `label` in the frame/image that shows the most of them (a video count)."""
    per_place: dict[tuple[int, float | None], int] = {}
    for d in dets:
        if d.label == label:
            key = (d.media_index, d.timestamp)
            per_place[key] = per_place.get(key, 0) + 1
    return max(per_place.values(), default=0)


def _where(line: OcrLine | TextBlock) -> str:
    return f" (t={line.timestamp:.1f} s)" if line.timestamp is not None else \
        f" (image {line.media_index})"


@dataclass(frozen=True)
class Finding:
    """What a tool concluded: an answer (text, confidence, the findings used) or why not, and
    what it saw, for the VLM's hint."""

    text: str = ""
    confidence: float = 0.0
    why: str = ""
    seen: str = ""
    lines: tuple[OcrLine, ...] = ()
    detections: tuple[Detection, ...] = ()


def read_document(question: str, lines: list[OcrLine]) -> Finding | None:
    """The value of the key the question names; None when the question names no key."""
    query = key_query(question)
    if query is None:
        return None
    found, keys = read_key_value(lines, query)
    if not keys and query.value == "date":
        lone = lone_value(lines, "date")
        if lone is not None:  # no 'date' key, but the page shows exactly one date
            return Finding(lone[0], lone[1].confidence, "the only date the OCR read",
                           f"{lone[1].text}", (lone[1],))
    seen = "; ".join(f"{kv.key_line.text} -> {kv.value}" for kv in found)
    values = {norm_text(kv.value) for kv in found}
    if not found:
        why = (f"found the key '{keys[0].text}' but no {query.value} next to it" if keys
               else f"no '{query.name}' key in the OCR text")
        return Finding(why=why, seen=seen)
    if len(values) > 1:
        return Finding(why=f"{len(values)} different values for '{query.name}'", seen=seen)
    used = tuple(dict.fromkeys(l for kv in found for l in (kv.key_line, kv.value_line)))
    conf = min(l.confidence for l in used)
    return Finding(found[0].value, conf, f"OCR read key '{found[0].key_line.text}' -> value",
                   seen, used)


def read_sign(question: str, lines: list[OcrLine], images: list[Image] | None,
              min_confidence: float, min_chars: int, kind: str | re.Pattern | None = None) -> Finding:
    """One plausible text block that is the only one (or the only one with a question word);
    with `kind`, only blocks containing that pattern count."""
    blocks = [b for b in text_blocks(lines) if kind is None or re.search(kind, b.text)]
    good: dict[str, TextBlock] = {}
    rejected = []
    for b in blocks:
        why = implausible(b, question, frame_size_of(images, b.media_index, b.timestamp),
                          min_confidence, min_chars)
        if why:
            rejected.append(why)
        elif norm_text(b.text) not in good or b.confidence > good[norm_text(b.text)].confidence:
            good[norm_text(b.text)] = b
    seen = ", ".join(f"'{b.text}'{_where(b)}" for b in good.values())
    if not good:
        return Finding(why="no plausible text" + (f" ({'; '.join(rejected[:3])})" if rejected else ""))
    cues = cue_words(question) - {"number", "no", "num", "date", "total", "id", "code"}
    cued = [b for b in good.values() if has_cue(b.text, cues)]
    if cues and not cued:  # "which gate number?": an answer without 'gate' is some other text
        return Finding(why=f"no text holds the question's word(s) {sorted(cues)}", seen=seen)
    if len(good) > 1 and len(cued) != 1:
        return Finding(why=f"{len(good)} different texts and the question singles out none",
                       seen=seen)
    block = cued[0] if len(good) > 1 else next(iter(good.values()))
    return Finding(block.text, block.confidence, f"OCR read one text block of {len(block.lines)} "
                   "line(s)", seen, block.lines)


def count_named(question: str, detections: list[Detection]) -> Finding | None:
    label = counted_label(question)
    if label is None:
        return None
    used = tuple(d for d in detections if d.label == label)
    if not used:
        return Finding(why=f"the detector found no {label}")
    n = count_objects(list(used), label)
    conf = sum(d.confidence for d in used) / len(used)
    return Finding(str(n), conf, f"detector counted {n} {label}", f"{n} {label}", detections=used)


@stage("tool_answer")
class ToolAnswer(Router):
    """Answer reading, key-value and counting questions from OCR/detections when sure; else hand
    the VLM what the tools found as a hint."""

    branches = ("tool", "vlm")

    class Params(StageParams):
        mode: Literal["answer", "hint", "off"] = Field(
            "answer", description="answer from the tool, pass its output as a VLM hint, or neither")
        min_confidence: float = Field(0.8, ge=0, le=1, description="recognition / detection "
                                      "confidence every line of an answer needs")
        min_chars: int = Field(2, ge=1, description="letters/digits a read answer needs at least")
        always_read: bool = Field(False, description="treat every question as a reading question "
                                  "(documents: the answer is in the text)")

    @dataclass(frozen=True)
    class Outputs:
        route: Route
        answer: Answer | None
        hint: str

    def run(self, question: str, ocr_lines: list[OcrLine] | None = None,
            detections: list[Detection] | None = None,
            images: list[Image] | None = None) -> Outputs:
        p = self.params
        intent = rule_intent(question)
        lines, dets = list(ocr_lines or ()), list(detections or ())
        finding = None
        if "count" in intent.matched:
            finding = count_named(question, dets)
        # A key the question names is read wherever it is. Without such a key on the page, a
        # reading question may still be answered by a sign, but only by text of the kind the key
        # asks for ("which gate number?" -> text with a digit; never a word that merely matches).
        reading = "read" in intent.matched or p.always_read
        query = key_query(question)
        kind = None if query is None else (r"\d" if query.value == "id" else PATTERNS[query.value])
        attempts = (lambda: read_document(question, lines),
                    lambda: read_sign(question, lines, images, p.min_confidence, p.min_chars, kind)
                    if reading else None)
        for attempt in attempts if lines else ():
            if finding is not None and finding.text:
                break
            found = attempt()
            if found is not None and (found.text or finding is None):
                finding = found
        if finding is None:
            return self.Outputs(Route("vlm", "no tool fits the question"), None, "")
        hint = f"Tools found: {finding.seen}" if finding.seen else ""
        scores = {"tool_confidence": finding.confidence}
        if not finding.text:
            return self.Outputs(Route("vlm", f"tool abstains: {finding.why}", scores), None,
                                hint if p.mode != "off" else "")
        if p.mode == "answer" and finding.confidence >= p.min_confidence:
            evidence = Evidence(ocr_lines=finding.lines, detections=finding.detections)
            return self.Outputs(Route("tool", f"{finding.why} (confidence {finding.confidence:.2f})",
                                      scores), Answer(finding.text, "tool", evidence,
                                                      Bill.tool(finding.confidence)), hint)
        why = {"answer": f"confidence {finding.confidence:.2f} < {p.min_confidence}",
               "hint": "hint mode", "off": "tool answers off"}[p.mode]
        hint = f"{finding.why}: {finding.text}" if p.mode != "off" else ""
        return self.Outputs(Route("vlm", f"{finding.why}; {why}", scores), None, hint)
