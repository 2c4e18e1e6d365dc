"""Assemble the final answer: evidence from every stage that looked, and the bill vs the
baseline."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pydantic import Field

from cascade.artifacts import Answer, Detection, Evidence, Image, OcrLine, Route
from cascade.evidence.query import Query
from cascade.models import ModelName
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record


@stage("compose_answer")
class ComposeAnswer(Stage):
    """Attach evidence (images, OCR, detections, routes, scores) and the baseline bill to an answer.

    The routes start with what was understood (`query`, from the `understand` stage), then the
    path taken (`path_route`: whole media or cascade, with both estimates; the bill gets its
    estimate), then the earlier decisions (retrieval, evidence search, crop selection), then the
    routers'. An answer without images of its own (a tool's) keeps the `images` its OCR lines
    and detections were found on: the page of a PDF the total was read from, not every page.

    The baseline is `baseline_images` (the source media) sent whole at full resolution to the
    declared `model`: its visual tokens, tower and prefill FLOPs come from the model's family, so
    they equal what the `full_res` pipeline really sends to that same model."""

    class Params(StageParams):
        model: ModelName | None = Field(
            "vlm", description="the model the baseline is priced on (null: no baseline)"
        )

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        answer: Answer

    def run(
        self,
        answer: Answer,
        images: list[Image] | None = None,
        ocr_lines: list[OcrLine] | None = None,
        detections: list[Detection] | None = None,
        route: Route | None = None,
        tool_route: Route | None = None,
        scores: list[float] | None = None,
        baseline_images: list[Image] | None = None,
        routes: list[Route] | None = None,
        query: Query | None = None,
        path_route: Route | None = None,
    ) -> Outputs:
        from cascade.vlm.billing import baseline

        ev = answer.evidence
        evidence = Evidence(
            images=ev.images or _where_found(tuple(images or ()), ev),
            ocr_lines=ev.ocr_lines or tuple(ocr_lines or ()),
            detections=ev.detections or tuple(detections or ()),
            routes=((query.route(),) if query is not None else ())
            + ((path_route,) if path_route is not None else ())
            + ev.routes
            + tuple(routes or ())
            + tuple(r for r in (route, tool_route) if r is not None),
            scores=ev.scores or tuple(scores or ()),
        )
        bill = answer.bill
        if baseline_images and self.params.model is not None:
            family = self.model(self.params.model).family
            tokens, vision, prefill = baseline(
                family, [im.source_size for im in baseline_images], bill.prompt_tokens
            )
            bill = bill.with_baseline(tokens, vision, prefill)
            record(baseline_visual_tokens=tokens)
        if path_route is not None:  # the path taken and what it was priced at
            s = path_route.scores
            bill = bill.with_route(
                path_route.branch,
                s.get(f"{path_route.branch}_s"),
                s.get(f"{path_route.branch}_flops"),
            )
        return self.Outputs(dataclasses.replace(answer, evidence=evidence, bill=bill))


def _where_found(images: tuple[Image, ...], found: Evidence) -> tuple[Image, ...]:
    """The images an answer's own OCR lines and detections were found on (the page of a
    document, the frames of a video a tool read), else all of them."""
    places = [(x.media_index, x.timestamp) for x in found.ocr_lines] + [
        (x.media_index, x.timestamp) for x in found.detections
    ]
    kept = tuple(im for im in images if any(im.is_from(m, t) for m, t in places))
    return kept or images
