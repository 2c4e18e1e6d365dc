"""Let a specialist answer when it is sure: OCR reads text and key-value pairs, the detector counts.

Right or silent, and the answer is the span asked for, never the line it sits on. What to read
comes from the `Query`: a key-value question ("total", "date", "invoice number") is answered with
that key's value (`keyvalue`), never the label and never a neighbouring key's value; a sign
question with the whole text of one sign: the one plausible block (`blocks.implausible`: length,
script, not the whole frame, confidence) that has the query's colour, position and time order
(`attributes.select`, only when measured and sure) and is the only such text, or the only one
holding a word of the question, or, when a span was asked for (a number, an id ...), the one span
of that type inside it (`spans.exact_span`). A document target (title, heading, table cell, fact
in a paragraph, code identifier) is read from the page's structure (`documents`: OCR lines and
`layout` regions), and answered only when one candidate fits and holds one span of the type
asked for. With `sureness: calibrated` (doc_qa sets it) a text answer must then also be sure:
its sureness (`cascade.evidence.sureness`: a logistic calibration over general features, fitted
on the real-media dev split) must reach the threshold chosen there for zero wrong answers; the
route states both. Anything else abstains: the route goes to `vlm` with what the tools found as
a hint. In `hint` mode the stage always routes to `vlm` with the hint; `off` routes to `vlm` with
none. The answer says which happened (`produced_by`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from cascade.artifacts import (
    Answer,
    Detection,
    Evidence,
    Image,
    LayoutRegion,
    OcrLine,
    Route,
    same_time,
)
from cascade.bill import Bill
from cascade.evidence import attributes, spans, sureness
from cascade.evidence.blocks import TextBlock, frame_size_of, implausible, norm_text, text_blocks
from cascade.evidence.documents import SPAN_KINDS, answer_span, located_for
from cascade.evidence.keyvalue import key_query, lone_value, other_keys, read_key_value
from cascade.evidence.query import Query, has_cue
from cascade.evidence.relevance import default_relevance
from cascade.stage import Router, StageParams, stage


def count_objects(dets: list[Detection], label: str) -> int:
    """Objects of `label` in the frame/image that shows the most of them (a video count)."""
    per_place: dict[tuple[int, float | None], int] = {}
    for d in dets:
        if d.label == label:
            key = (d.media_index, d.timestamp)
            per_place[key] = per_place.get(key, 0) + 1
    return max(per_place.values(), default=0)


def _where(line: OcrLine | TextBlock) -> str:
    return (
        f" (t={line.timestamp:.1f} s)"
        if line.timestamp is not None
        else f" (image {line.media_index})"
    )


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
    reader: str = ""  # which reader concluded: key_value, sign, structure, count


def read_document(query: Query, lines: list[OcrLine]) -> Finding | None:
    """The value of the key the query names; None when it names no key."""
    kq = key_query(query)
    if kq is None:
        return None
    if query.time_order is not None:  # "the balance after the utilities debit": the key's value
        # on one row of many, which the reader does not order: not sure
        return Finding(
            why=f"the {kq.name} {query.time_order.relation} a named entry: key-value "
            "reading does not order rows",
            seen="",
        )
    found, keys = read_key_value(lines, kq)
    if not keys and kq.value == "date":
        lone = lone_value(lines, "date")
        if lone is not None:  # no 'date' key, but the page shows exactly one date
            return Finding(
                lone[0],
                lone[1].confidence,
                "the only date the OCR read",
                f"{lone[1].text}",
                (lone[1],),
            )
    seen = "; ".join(f"{kv.key_line.text} -> {kv.value}" for kv in found)
    values = {norm_text(kv.value) for kv in found}
    if not found:
        named = other_keys(keys, kq)
        why = (
            f"no key names the {query.key_noun} {kq.name}; the page's keys name others ("
            + ", ".join(f"'{ln.text}'" for ln in named[:4])
            + ")"
            if named
            else f"found the key '{keys[0].text}' but no {kq.value} next to it"
            if keys
            else f"no '{kq.name}' key in the OCR text"
        )
        return Finding(why=why, seen="; ".join(ln.text for ln in keys))
    if len(values) > 1:
        return Finding(why=f"{len(values)} different values for '{kq.name}'", seen=seen)
    used = tuple(dict.fromkeys(ln for kv in found for ln in (kv.key_line, kv.value_line)))
    conf = min(ln.confidence for ln in used)
    return Finding(
        found[0].value, conf, f"OCR read key '{found[0].key_line.text}' -> value", seen, used
    )


def read_sign(
    query: Query,
    lines: list[OcrLine],
    images: list[Image] | None,
    detections: list[Detection],
    min_confidence: float,
    min_chars: int,
) -> Finding:
    """One plausible text block with the query's attributes that is the only one (or the only
    one with a word of the question)."""
    blocks = text_blocks(lines)
    chosen = attributes.select(query, blocks, images, detections)
    good: dict[str, TextBlock] = {}
    rejected = []
    for b in chosen.blocks:
        why = implausible(
            b,
            query.language,
            frame_size_of(images, b.media_index, b.timestamp),
            min_confidence,
            min_chars,
        )
        if why:
            rejected.append(why)
        elif norm_text(b.text) not in good or b.confidence > good[norm_text(b.text)].confidence:
            good[norm_text(b.text)] = b
    seen = ", ".join(f"'{b.text}'{_where(b)}" for b in good.values()) or ", ".join(
        f"'{b.text}'{_where(b)}" for b in blocks[:8]
    )
    if not chosen.sure:
        return Finding(
            why=f"the question's attributes do not single out a text ({chosen.reason})", seen=seen
        )
    if not good:
        return Finding(
            why="no plausible text" + (f" ({'; '.join(rejected[:3])})" if rejected else ""),
            seen=seen,
        )
    cued = [b for b in good.values() if has_cue(b.text, query.cues)]
    if query.cues and not cued:  # "which gate?": an answer without 'gate' is some other text
        return Finding(why=f"no text holds the question's word(s) {list(query.cues)}", seen=seen)
    if len(good) > 1 and len(cued) != 1:
        return Finding(
            why=f"{len(good)} different texts and the question singles out none", seen=seen
        )
    block = cued[0] if len(good) > 1 else next(iter(good.values()))
    also = f" ({chosen.reason})" if chosen.reason else ""
    if query.answer_type != "text":  # a span was asked for: the whole line is not the answer
        kind = SPAN_KINDS.get(query.answer_type)
        span = spans.exact_span(block.text, kind) if kind else None
        if span is None:
            return Finding(why=f"no single {query.answer_type} in '{block.text}'", seen=seen)
        return Finding(
            span.text,
            block.confidence,
            f"the {query.answer_type} in one text block{also}",
            seen,
            block.lines,
        )
    return Finding(
        block.text,
        block.confidence,
        f"OCR read one text block of {len(block.lines)} line(s){also}",
        seen,
        block.lines,
    )


def read_structure(query: Query, lines: list[OcrLine], regions: list[LayoutRegion]) -> Finding:
    """A title, heading, cell, fact or identifier from the page's structure, as its exact span."""
    found, what = located_for(query, lines, regions)
    text, why = answer_span(query, found)
    seen = "; ".join(f"{f.kind} '{f.text}'" for f in found[:6]) or "; ".join(
        ln.text for ln in lines[:12]
    )
    if text is None:
        return Finding(why=f"{what}: {why}", seen=seen)
    best = found[0]
    used = tuple(
        ln
        for ln in lines
        if ln.media_index == best.media_index
        and same_time(ln.timestamp, best.timestamp)
        and any(ln.box.intersects(b) for b in best.boxes)
    )
    conf = min((ln.confidence for ln in used), default=0.0)
    return Finding(text, conf, f"{what}: {why}", seen, used)


def count_named(query: Query, detections: list[Detection]) -> Finding | None:
    label = query.label
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
            "answer", description="answer from the tool, pass its output as a VLM hint, or neither"
        )
        min_confidence: float = Field(
            0.8,
            ge=0,
            le=1,
            description="recognition / detection confidence every line of an answer needs",
        )
        min_chars: int = Field(2, ge=1, description="letters/digits a read answer needs at least")
        always_read: bool = Field(
            False,
            description="read a sign-like answer even when the "
            "query's target is not text (documents: the answer is in the text)",
        )
        sureness: Literal["calibrated", "off"] = Field(
            "off",
            description="calibrated: a text answer also needs its sureness "
            "(`cascade.evidence.sureness`, fitted on the real-media dev split of documents, "
            "what doc_qa sets) at or over the threshold; off: recognition confidence only",
        )
        min_sureness: float | None = Field(
            None,
            ge=0,
            le=1,
            description="the sureness a text answer needs; null = the threshold chosen on dev "
            "for zero wrong answers (tool_sureness.json)",
        )

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        route: Route
        answer: Answer | None
        hint: str

    def find(
        self,
        query: Query,
        lines: list[OcrLine],
        dets: list[Detection],
        images: list[Image] | None,
        regions: list[LayoutRegion],
    ) -> Finding | None:
        """What the tool that fits the question concluded (an answer or why not), before any
        gate; None when no tool fits."""
        p = self.params
        found, reader = None, ""
        if query.target == "object_count":
            found, reader = count_named(query, dets), "count"
        elif query.target == "key_value" and lines:
            found, reader = read_document(query, lines), "key_value"
        elif lines and (query.target == "sign" or (p.always_read and not query.reads_text)):
            found = read_sign(query, lines, images, dets, p.min_confidence, p.min_chars)
            reader = "sign"
        elif lines and query.reads_text:
            found, reader = read_structure(query, lines, regions), "structure"
        return dataclasses.replace(found, reader=reader) if found is not None else None

    def features(
        self, query: Query, finding: Finding, lines: list[OcrLine], images: list[Image] | None
    ) -> dict[str, float]:
        """`sureness.features` of a finding: its lines against the other texts of its image."""
        used = finding.lines
        page = [
            ln.text
            for ln in lines
            if used
            and ln.media_index == used[0].media_index
            and same_time(ln.timestamp, used[0].timestamp)
        ]
        owner = next(
            (
                im
                for im in images or ()
                if used and im.is_from(used[0].media_index, used[0].timestamp)
            ),
            None,
        )
        return sureness.features(
            query.question,
            query.answer_type,
            finding.text,
            finding.reader,
            finding.confidence,
            [ln.text for ln in used],
            page,
            default_relevance(),  # loaded once per process
            owner.__content_hash__() if owner is not None else "",
        )

    def run(
        self,
        query: Query,
        ocr_lines: list[OcrLine] | None = None,
        detections: list[Detection] | None = None,
        images: list[Image] | None = None,
        regions: list[LayoutRegion] | None = None,
    ) -> Outputs:
        p = self.params
        lines, dets = list(ocr_lines or ()), list(detections or ())
        finding = self.find(query, lines, dets, images, list(regions or ()))
        if finding is None:
            return self.Outputs(
                Route("vlm", f"no tool fits the question ({query.target})"), None, ""
            )
        hint = f"Tools found: {finding.seen}" if finding.seen else ""
        scores = {"tool_confidence": finding.confidence}
        if not finding.text:
            return self.Outputs(
                Route("vlm", f"tool abstains: {finding.why}", scores),
                None,
                hint if p.mode != "off" else "",
            )
        sure, why_not = "", ""
        if p.mode == "answer" and p.sureness == "calibrated" and finding.lines:
            cal = sureness.calibration()
            prob = cal.sureness(self.features(query, finding, lines, images))
            need = cal.threshold if p.min_sureness is None else p.min_sureness
            scores |= {"tool_sureness": prob, "tool_threshold": need}
            sure = f", sureness {prob:.2f} >= {need:.2f}"
            if prob < need:
                why_not = f"sureness {prob:.2f} < {need:.2f}" + (
                    " (the threshold chosen on dev)" if p.min_sureness is None else ""
                )
        if p.mode == "answer" and finding.confidence < p.min_confidence:
            why_not = f"confidence {finding.confidence:.2f} < {p.min_confidence}"
        if p.mode == "answer" and not why_not:
            evidence = Evidence(ocr_lines=finding.lines, detections=finding.detections)
            return self.Outputs(
                Route("tool", f"{finding.why} (confidence {finding.confidence:.2f}{sure})", scores),
                Answer(finding.text, "tool", evidence, Bill.tool(finding.confidence)),
                hint,
            )
        why = {"answer": why_not, "hint": "hint mode", "off": "tool answers off"}[p.mode]
        hint = f"{finding.why}: {finding.text}" if p.mode != "off" else ""
        return self.Outputs(Route("vlm", f"{finding.why}; {why}", scores), None, hint)
