"""Decide from the thumbnail and the question whether high resolution is needed at all.

The seed's rule: process a low-resolution thumbnail first to determine whether high-resolution
tiles are strictly necessary. Three cheap signals, each reported in the route's scores and reason:
what the question asks for (the `Query`: text of any kind, in any language, or a counted object
needs pixels; otherwise its intent scores, rules + a sentence-embedding zero-shot score), the text
density the OCR detector found on the thumbnail, and, when a thumbnail-only VLM pass ran, its
confidence.

With `model` set, the router also asks that model's family what each route costs in visual tokens
(thumbnails as sent vs their sources at full resolution) and reports both; when full resolution
costs at most `cheap_tokens` more, there is nothing to save and it goes `high_res` whatever the
signals say (a small image is read at full resolution for the price of a thumbnail).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from cascade.artifacts import Image, OcrLine, Route
from cascade.evidence.query import Query
from cascade.models import ModelName
from cascade.stage import Router, StageParams, stage


def shows(image: Image, line: OcrLine) -> bool:
    """The line was read on this image's source (same media and frame) inside its box."""
    return image.is_from(line.media_index, line.timestamp) and image.box.intersects(line.box)


def text_density(lines: list[OcrLine], images: list[Image]) -> float:
    """Fraction of the thumbnails' source area covered by text boxes (boxes are in source
    pixels)."""
    area = sum(im.source_size[0] * im.source_size[1] for im in images) or 1
    return min(1.0, sum(line.box.area for line in lines) / area)


@stage("resolution_router")
class ResolutionRouter(Router):
    """Route to `high_res` when the query and the thumbnail say fine pixels matter, else
    `thumbnail`."""

    branches = ("thumbnail", "high_res")

    class Params(StageParams):
        threshold: float = Field(0.5, ge=0, le=1, description="need score at which to go high_res")
        intent_weight: float = Field(
            0.6, ge=0, description="weight of the query's need for pixels (its target and intent)"
        )
        text_weight: float = Field(
            0.4, ge=0, description="weight of the thumbnail text-density signal"
        )
        confidence_weight: float = Field(
            0.5, ge=0, description="weight of (1 - VLM thumbnail confidence)"
        )
        text_density_saturation: float = Field(
            0.02, gt=0, description="text area fraction counted as fully text-heavy"
        )
        model: ModelName | None = Field(
            None,
            description="the VLM the routes feed, by its name in `models:`; its family prices "
            "each route in visual tokens (null: routes are not priced)",
        )
        cheap_tokens: int = Field(
            128,
            ge=0,
            description="go high_res when full resolution costs at most this many more "
            "visual tokens than the thumbnails (needs `model`)",
        )

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        route: Route

    def run(
        self,
        query: Query,
        images: list[Image],
        text_lines: list[OcrLine] | None = None,
        confidence: float | None = None,
    ) -> Outputs:
        p = self.params
        need_px = query.needs_high_res
        signals = {"intent": (p.intent_weight, need_px)}
        reasons = [
            f"intent {query.intent} ({', '.join(query.matched) or 'no rule'}, "
            f"lang {query.language}) -> {need_px:.2f}"
        ]
        scores = {f"intent_{k}": v for k, v in query.intent_scores}
        if text_lines is not None:
            text_lines = [ln for ln in text_lines if any(shows(im, ln) for im in images)]
            density = text_density(text_lines, images)
            signal = min(1.0, density / p.text_density_saturation)
            signals["text"] = (p.text_weight, signal)
            scores |= {"text_density": density, "text_lines": float(len(text_lines))}
            reasons.append(f"text density {density:.4f} ({len(text_lines)} lines) -> {signal:.2f}")
        if confidence is not None:
            signals["confidence"] = (p.confidence_weight, 1.0 - confidence)
            scores["vlm_confidence"] = confidence
            reasons.append(f"thumbnail confidence {confidence:.2f} -> {1 - confidence:.2f}")
        # A weighted mean over the signals that exist: a missing OCR pass neither helps nor hurts.
        need = sum(w * s for w, s in signals.values()) / (
            sum(w for w, _ in signals.values()) or 1.0
        )
        scores["need"] = need
        branch = "high_res" if need >= p.threshold else "thumbnail"
        cmp = ">=" if branch == "high_res" else "<"
        reason = "; ".join(reasons) + f"; need {need:.2f} {cmp} {p.threshold}"
        if p.model is not None:
            family = self.model(p.model).family
            thumb = sum(family.visual_tokens(im.width, im.height) for im in images)
            full = sum(
                family.visual_tokens(round(im.box.width), round(im.box.height)) for im in images
            )
            scores |= {"tokens_thumbnail": float(thumb), "tokens_full_res": float(full)}
            reason += f"; {family.name}: thumbnails {thumb} visual tokens, full resolution {full}"
            if branch == "thumbnail" and full - thumb <= p.cheap_tokens:
                branch = "high_res"
                reason += f" (at most {p.cheap_tokens} more: nothing to save, read it whole)"
        return self.Outputs(Route(branch, reason, scores))
