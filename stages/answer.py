"""Assemble the final answer: evidence from every stage that looked, and the bill vs the baseline."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pydantic import Field

from cascade.artifacts import Answer, Detection, Evidence, Image, OcrLine, Route
from cascade.cost import ModelShape, prefill_flops, qwen2vl_visual_tokens
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record


def baseline_visual_tokens(images: list[Image], max_pixels: int) -> int:
    """Visual tokens if every image were sent whole at its source resolution (the full_res baseline)."""
    return sum(qwen2vl_visual_tokens(*im.source_size, max_pixels=max_pixels) for im in images)


@stage("compose_answer")
class ComposeAnswer(Stage):
    """Attach evidence (images, OCR, detections, routes, scores) and the baseline bill to an answer."""

    class Params(StageParams):
        baseline_max_pixels: int = Field(
            28 * 28 * 16384, gt=0, description="per-image pixel cap of the full-resolution baseline "
            "(default: effectively native resolution)")

    @dataclass(frozen=True)
    class Outputs:
        answer: Answer

    def run(self, answer: Answer, images: list[Image] | None = None,
            ocr_lines: list[OcrLine] | None = None, detections: list[Detection] | None = None,
            route: Route | None = None, tool_route: Route | None = None,
            scores: list[float] | None = None, baseline_images: list[Image] | None = None,
            routes: list[Route] | None = None) -> Outputs:
        ev = answer.evidence
        evidence = Evidence(
            images=ev.images or tuple(images or ()),
            ocr_lines=ev.ocr_lines or tuple(ocr_lines or ()),
            detections=ev.detections or tuple(detections or ()),
            # earlier decisions (retrieval, evidence search, crop selection), then the routers'
            routes=ev.routes + tuple(routes or ()) + tuple(r for r in (route, tool_route)
                                                         if r is not None),
            scores=ev.scores or tuple(scores or ()))
        usage = dict(answer.usage)
        if baseline_images:
            base = baseline_visual_tokens(baseline_images, self.params.baseline_max_pixels)
            usage["baseline_visual_tokens"] = base
            usage["visual_token_savings"] = base / max(usage.get("visual_tokens", 0), 1)
            shape = usage.get("model_shape")
            if shape:
                prompt = usage.get("prompt_tokens", 0)
                usage["baseline_prefill_flops"] = prefill_flops(ModelShape(**shape), base, prompt)
                usage["prefill_savings"] = usage["baseline_prefill_flops"] / max(
                    usage.get("prefill_flops", 0.0), 1.0)
            record(baseline_visual_tokens=base)
        return self.Outputs(dataclasses.replace(answer, evidence=evidence, usage=usage))
