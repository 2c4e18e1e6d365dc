"""Answer a question about images with a declared VLM: pruned visual tokens, KV prefix cache, bill.

The model is one of the pipeline's `models:` (param `model`, default "vlm"); it loads once per
process and is shared by every stage and pipeline that declares it the same, KV prefix cache
included, so a second question about the same images skips the vision tower and the visual
prefill. The reduction defaults come from the model's declaration; the stage's own `reduction` /
`keep_ratio` / `fastv_layer` override them. The answer carries the call's `Bill` (visual tokens
before/after reduction, tower / prefill / decode FLOPs, TTFT, cache outcome); `compose_answer`
adds the full-resolution baseline. `confidence` is the model's geometric-mean token probability
(None when the backend cannot tell); a router can read it to escalate an unsure thumbnail answer.

With the `tower` reduction (merge units dropped before the vision tower), the evidence wired in
(`ocr_lines`, `detections`, layout `regions`, and the `query` that says what the question targets)
picks the units kept: every unit under a found box is kept with one unit around it, the target's
boxes first (`_tower_guide`). A reading question with no evidence on some image is answered
without the reduction rather than from text cut apart; the answer's route says which happened.

Decoding: greedy unless sampling settings say otherwise. The `sampling` param
(`cascade.decoding.SamplingParams`: temperature, top_p / top_k / min_p, penalties, seed, n, stop,
stop_token_ids, logprobs / top_logprobs) sets the stage's own; a request's `sampling` input is
laid over them field by field (what the request sets wins). With n > 1 the answer carries n
completions from one tower run and one prefill (`Answer.completions`).

Per request, a pipeline may pass `max_new_tokens` (overrides the param: the server's `max_tokens`)
and `history`, the conversation's earlier (question, answer) turns: they go into the prompt after
the images and before the question, so the media's KV prefix is still reused. With `stream` on
(the default), the call streams its tokens to the run's caller (`cascade.streaming`); a stage whose
answer is a draft for a router turns it off.

Served on Ray (`serving`): a heavy deployment of the "model" pool, routed by its images (a
conversation's next turn finds its KV prefix in the replica that answered the first), and
batchable: `run_batch` answers concurrent first turns with one `VLM.generate_batch` (one batched
prefill, lockstep decode; it bypasses the KV prefix cache, so follow-ups, conversations and
question-dependent reductions take `run`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from cascade.artifacts import Answer, Detection, Evidence, Image, LayoutRegion, OcrLine
from cascade.bill import Bill
from cascade.decoding import SamplingParams
from cascade.errors import InputError
from cascade.evidence.query import Query
from cascade.evidence.understanding import understand
from cascade.models import ModelName
from cascade.stage import Serving, Stage, StageParams, stage
from cascade.streaming import claim_stream
from cascade.trace import record
from cascade.vlm.reduction import ReductionConfig, ReductionName

from ._inputs import as_image_list, bound_pixels
from ._tower_guide import guide_tower


@stage("vlm_answer")
class VLMAnswer(Stage):
    """Answer a question about images with a vision-language model (transformers or a server)."""

    serving = Serving(heavy=True, num_cpus=1.0, pool="model", batch=True, affinity="images")

    class Params(StageParams):
        model: ModelName = Field(
            "vlm", description="the model, by its name in the pipeline's `models:`"
        )
        max_new_tokens: int = Field(128, gt=0)
        reduction: ReductionName | None = Field(
            None, description="visual token reduction (default: the model's)"
        )
        keep_ratio: float | None = Field(
            None,
            gt=0.0,
            le=1.0,
            description="fraction of visual tokens kept (default: the model's)",
        )
        fastv_layer: int | None = Field(
            None, ge=1, description="FastV: drop tokens after this layer"
        )
        video_pruning_rate: float | None = Field(
            None,
            ge=0.0,
            lt=1.0,
            description="vLLM's video_pruning_rate: the images are frames in order and this "
            "share of their tokens, those that repeat the frame before, is dropped before the "
            "tower (the `evs` reduction, keep_ratio 1 - rate); 0 keeps every token",
        )
        system_prompt: str | None = None
        min_pixels: int | None = Field(
            None,
            gt=0,
            description="each image scaled up to at "
            "least this many pixels first (vLLM's min_pixels)",
        )
        max_pixels: int | None = Field(
            None,
            gt=0,
            description="each image scaled down to at "
            "most this many pixels first (vLLM's max_pixels); the "
            "model's own limits still apply",
        )
        stream: bool = Field(
            True,
            description="stream the tokens to the run's caller; off for a "
            "draft answer that a router may replace",
        )
        sampling: SamplingParams | None = Field(
            None,
            description="decoding settings (default greedy); a request's `sampling` input "
            "overrides the fields it sets",
        )

        @model_validator(mode="after")
        def _one_reduction(self) -> VLMAnswer.Params:
            if self.video_pruning_rate is not None and (
                self.reduction not in (None, "evs") or self.keep_ratio is not None
            ):
                raise ValueError(
                    "video_pruning_rate sets the reduction (evs, keep_ratio 1 - rate): leave "
                    "reduction and keep_ratio unset"
                )
            return self

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        answer: Answer
        confidence: float | None

    def reduction(self) -> ReductionConfig:
        """The call's reduction: the stage's params over the model's defaults."""
        p = self.params
        declared = self.model(p.model)
        if p.video_pruning_rate is not None:
            return declared.reduction("evs", 1.0 - p.video_pruning_rate, p.fastv_layer)
        return declared.reduction(p.reduction, p.keep_ratio, p.fastv_layer)

    def setup(self) -> None:
        _ = self.model(self.params.model).vlm  # load (or join) the shared model now, timed as setup

    def streams(self) -> bool:
        return self.params.stream

    def run(
        self,
        images: list[Image] | Image,
        question: str,
        hint: str | None = None,
        max_new_tokens: int | None = None,
        history: list[tuple[str, str]] | None = None,
        query: Query | None = None,
        ocr_lines: list[OcrLine] | None = None,
        detections: list[Detection] | None = None,
        regions: list[LayoutRegion] | None = None,
        sampling: SamplingParams | None = None,
    ) -> Outputs:
        p = self.params
        declared = self.model(p.model)
        items = bound_pixels(as_image_list(images), p.min_pixels, p.max_pixels)
        red = self.reduction()
        route = None
        if red.before_tower and not red.sequence_dependent:  # `tower`, guided by the evidence
            # the question is understood here when no `understand` stage ran
            found = [*(ocr_lines or ()), *(detections or ()), *(regions or ())]
            red, route = guide_tower(red, items, query or understand(question), found)
        text = _prompt(question, hint)
        if max_new_tokens is not None and max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        limit = p.max_new_tokens if max_new_tokens is None else max_new_tokens
        on_token = claim_stream(self.name) if self.streams() else None
        # The model is thread-safe: concurrent runs' decoding shares one batch
        # (`cascade.vlm.batcher`).
        r = declared.vlm.generate(
            items,
            text,
            max_new_tokens=limit,
            reduction=red,
            system_prompt=p.system_prompt,
            history=history or (),
            on_token=on_token,
            sampling=self.sampling(sampling),
        )
        record_bill(r.bill)
        evidence = Evidence(images=tuple(items), routes=(route,) if route is not None else ())
        return self.Outputs(
            Answer(r.text, "vlm", evidence, r.bill, completions=r.completions), r.bill.confidence
        )

    def sampling(self, request: SamplingParams | None) -> SamplingParams:
        """The stage's settings with the fields the request set laid over them."""
        own = self.params.sampling or SamplingParams()
        if request is None:
            return own
        return SamplingParams(
            **{
                **own.model_dump(exclude_unset=True),
                **request.model_dump(include=request.model_fields_set),
            }
        )

    def batchable(self, inputs: Mapping[str, Any]) -> bool:
        """A first turn at the param's length and sampling settings (no request's own; n = 1)
        with a question-independent reduction (a batch
        decodes every call to one length, and `generate_batch` prunes without the question) that
        is not `tower` (guided per call by its own evidence, which a batch does not carry)."""
        p = self.params
        if inputs.get("history") or inputs.get("max_new_tokens") not in (None, p.max_new_tokens):
            return False
        if inputs.get("sampling") is not None or self.sampling(None).n > 1:
            return False  # a batch decodes every call with the stage's one setting, n = 1
        red = self.reduction()
        return not red.question_dependent and not red.before_tower

    def run_batch(self, calls: Sequence[Mapping[str, Any]]) -> Iterator[Outputs]:
        """`run` of several `batchable` calls through one `VLM.generate_batch`."""
        p = self.params
        declared = self.model(p.model)
        red = self.reduction()
        items = [
            bound_pixels(as_image_list(c["images"]), p.min_pixels, p.max_pixels) for c in calls
        ]
        requests = [
            (ims, _prompt(c["question"], c.get("hint")))
            for ims, c in zip(items, calls, strict=True)
        ]
        results = declared.vlm.generate_batch(
            requests,
            max_new_tokens=p.max_new_tokens,
            reduction=red,
            system_prompt=p.system_prompt,
            sampling=self.sampling(None),
        )
        for ims, r in zip(items, results, strict=True):
            record_bill(r.bill, vlm_batch_size=len(calls))
            yield self.Outputs(
                Answer(
                    r.text, "vlm", Evidence(images=tuple(ims)), r.bill, completions=r.completions
                ),
                r.bill.confidence,
            )


def _prompt(question: str, hint: str | None) -> str:
    # The hint (what OCR/detection found) is question-side text: it never enters the cached
    # visual prefix.
    return f"{hint.strip()}\n{question}" if hint and hint.strip() else question


def record_bill(b: Bill, **extra: float) -> None:
    """The trace counters of one VLM answer."""
    record(
        visual_tokens=b.visual_tokens,
        visual_tokens_before_reduction=b.unreduced_visual_tokens,
        prompt_tokens=b.prompt_tokens,
        generated_tokens=b.generated_tokens,
        vision_flops=b.vision_flops,
        prefill_flops=b.prefill_flops,
        unreduced_prefill_flops=b.unreduced_prefill_flops,
        computed_vision_flops=b.computed_vision_flops,
        computed_prefill_flops=b.computed_prefill_flops,
        decode_flops=b.decode_flops,
        kv_cache_hits=int(b.cache == "hit"),
        kv_cache_misses=int(b.cache == "miss"),
        kv_cache_partial=int(b.cache in ("partial", "blended")),
        vision_tower_calls=int(b.images_encoded > 0),
        vision_images_encoded=b.images_encoded,
        encoder_cache_hits=b.images_cached,
        encoder_images=b.images_encoded,
        ttft_s=b.ttft_s,
        vision_s=b.vision_s,
        **extra,
    )
