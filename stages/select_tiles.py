"""Pick which high-resolution tiles the VLM sees, under a visual-token budget.

A tile earns its place by holding what the question is about: OCR lines (more when they share words
with the question), detections whose label the question names, and its retrieval score. Tiles are
taken best-first until the budget is spent, ties in source order; when any tile is relevant, tiles
that are not stay out even if the budget has room (with nothing relevant, the best-ranked fill it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import Field

from cascade.artifacts import Detection, Image, OcrLine
from cascade.models import ModelName
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record

from ._intent import rule_intent

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return {w.rstrip("s") for w in _WORD.findall(text.lower()) if len(w) > 2}


@stage("select_tiles")
class SelectTiles(Stage):
    """Choose the tiles that hold question-relevant text, objects or retrieval hits, within a token budget."""

    class Params(StageParams):
        max_visual_tokens: int = Field(1280, gt=0, description="budget of visual tokens for all tiles")
        max_tiles: int = Field(8, gt=0, description="at most this many tiles")
        text_weight: float = Field(1.0, ge=0, description="score per relevant OCR line in a tile")
        object_weight: float = Field(1.0, ge=0, description="score per question-named detection")
        retrieval_weight: float = Field(1.0, ge=0, description="weight of the retrieval score")
        model: ModelName = Field("vlm", description="the model the tiles are for (prices each tile)")
        only_relevant: bool = Field(True, description="when some tile scores above zero, send only "
                                    "those; the budget is a ceiling, not a target")

    @dataclass(frozen=True)
    class Outputs:
        tiles: list[Image]
        scores: list[float]
        visual_tokens: int

    def run(self, tiles: list[Image], question: str, ocr_lines: list[OcrLine] | None = None,
            detections: list[Detection] | None = None,
            retrieval_scores: list[float] | None = None) -> Outputs:
        p = self.params
        q_words, intent = words(question), rule_intent(question)
        scores = []
        for i, tile in enumerate(tiles):
            score = 0.0
            for line in ocr_lines or ():
                if tile.is_from(line.media_index, line.timestamp) and tile.box.intersects(line.box):
                    overlap = len(words(line.text) & q_words)
                    score += p.text_weight * ((1.0 if "read" in intent.matched else 0.25) + overlap)
            for det in detections or ():
                if tile.is_from(det.media_index, det.timestamp) and tile.box.intersects(det.box) \
                        and words(det.label) & q_words:
                    score += p.object_weight
            if retrieval_scores is not None and i < len(retrieval_scores):
                score += p.retrieval_weight * retrieval_scores[i]
            scores.append(score)
        order = sorted(range(len(tiles)), key=lambda i: (-scores[i], i))
        if p.only_relevant and scores and max(scores) > 0:
            order = [i for i in order if scores[i] > 0]
        chosen, spent = [], 0
        family = self.model(p.model).family
        for i in order:
            cost = family.visual_tokens(tiles[i].width, tiles[i].height)
            if len(chosen) < p.max_tiles and spent + cost <= p.max_visual_tokens:
                chosen.append(i)
                spent += cost
        chosen.sort()  # the VLM reads tiles in source order
        record(tiles_considered=len(tiles), tiles_selected=len(chosen), visual_tokens_selected=spent)
        return self.Outputs([tiles[i] for i in chosen], [scores[i] for i in chosen], spent)
