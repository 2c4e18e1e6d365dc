"""What an answer cost: one typed `Bill`, from the VLM call to the answer, the server and /metrics.

The VLM runtime fills it once (`cascade.vlm.billing`): tokens, cost-model FLOPs of the vision
tower, the LLM prefill and decode apart (`cascade.cost`), times, the KV-cache outcome and the
reduction. `compose_answer` adds the full-resolution baseline of the same model
(`with_baseline`). A tool answer (OCR read the sign, the detector counted) has the empty bill of
`Bill.tool()`: no VLM token was spent. Everything downstream reads these fields; nothing recomputes
or probes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

__all__ = ["Bill", "CacheOutcome"]

CacheOutcome = Literal["hit", "partial", "blended", "miss", "session", "off"]


@dataclass(frozen=True)
class Bill:
    """One answer's cost next to its baselines. FLOPs are cost-model estimates (`cascade.cost`).

    Tokens: `visual_tokens` the LLM attended to (after reduction; FastV: after its layer K),
    `unreduced_visual_tokens` the same images without reduction, `prompt_tokens` the prompt's
    text tokens (template, system prompt, history, question), `cached_tokens` prompt tokens (visual
    and text) served from the KV cache instead of prefilled, `generated_tokens`.

    FLOPs of this call as if run cold: `vision_flops` (vision tower and merger), `prefill_flops`
    (LLM prefill of the whole prompt up to the first token's logits), `decode_flops` (the later
    tokens). `computed_vision_flops` / `computed_prefill_flops`: what actually ran (a KV prefix hit
    or a later session turn skips the tower and the cached part of the prefill).
    `unreduced_prefill_flops`: the same prompt with every visual token.

    Baseline (set by `compose_answer`, else None): the source media sent whole at full resolution
    to the same model: its visual tokens, tower FLOPs and prefill FLOPs for the same prompt.

    Times in seconds: `ttft_s` from the call to the first token (preprocessing, tower, reduction,
    prefill), `vision_s` the tower, `prefill_s` the prefills, `total_s` the call, `tpot_s` mean
    time per output token after the first. `cache`: the KV prefix cache's outcome ("partial" when a
    leading part of the prefix was reused and the rest prefilled, "blended" when an image's KV was
    moved from another prompt by the opt-in position-independent mode, "session" for a later turn
    of a conversation, "off" when unused). `images_encoded`: images this call ran
    through the vision tower; `images_cached`: images whose tower output came from the encoder
    cache instead (images inside a reused KV prefix need neither). `confidence`: the answer's
    geometric-mean token probability (VLM) or the tool's confidence; None when unknown.

    KV memory (`cascade.vlm.press`): `kv_bytes` the KV the answer's last token was decoded
    against (prompt after any press, plus generated tokens; a session turn: the session's whole
    cache), in the model's dtype; `kv_bytes_unpressed` the same KV had no press dropped a token;
    `kv_press` the press and `kv_keep` its keep ratio.

    The route (set by `compose_answer` when a `path_route` ran, else None): `path` the path it
    took ("full": the whole media to the VLM, "cascade"), `estimated_s` / `estimated_flops` what
    it priced that path at (FLOPs: the VLM's, priced as the declared model), and `spent_s` /
    `spent_cpu_s` the wall / this process's CPU seconds the whole run actually took (set by
    `QA.ask` from the trace; the estimate is on the calibration's clock, which is CPU seconds on
    a one-thread CPU: `cascade.calibration.device_clock`).
    """

    model: str | None = None
    visual_tokens: int = 0
    unreduced_visual_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    finish_reason: Literal["stop", "length"] = "stop"
    vision_flops: float = 0.0
    prefill_flops: float = 0.0
    decode_flops: float = 0.0
    computed_vision_flops: float = 0.0
    computed_prefill_flops: float = 0.0
    unreduced_prefill_flops: float = 0.0
    baseline_visual_tokens: int | None = None
    baseline_vision_flops: float | None = None
    baseline_prefill_flops: float | None = None
    ttft_s: float = 0.0
    vision_s: float = 0.0
    prefill_s: float = 0.0
    total_s: float = 0.0
    tpot_s: float | None = None
    cache: CacheOutcome = "off"
    images_encoded: int = 0
    images_cached: int = 0
    reduction: str = "none"
    keep_ratio: float = 1.0
    confidence: float | None = None
    kv_bytes: int = 0
    kv_bytes_unpressed: int = 0
    kv_press: str = "none"
    kv_keep: float = 1.0
    path: str | None = None
    estimated_s: float | None = None
    estimated_flops: float | None = None
    spent_s: float | None = None
    spent_cpu_s: float | None = None

    @classmethod
    def tool(cls, confidence: float | None = None) -> Bill:
        """A tool's answer: no VLM call, nothing spent."""
        return cls(confidence=confidence)

    def with_baseline(self, visual_tokens: int, vision_flops: float, prefill_flops: float) -> Bill:
        """This bill with the full-resolution baseline's visual tokens and FLOPs filled in."""
        return replace(
            self,
            baseline_visual_tokens=int(visual_tokens),
            baseline_vision_flops=float(vision_flops),
            baseline_prefill_flops=float(prefill_flops),
        )

    def with_route(
        self, path: str, estimated_s: float | None, estimated_flops: float | None
    ) -> Bill:
        return replace(self, path=path, estimated_s=estimated_s, estimated_flops=estimated_flops)

    def with_spent(self, seconds: float, cpu_seconds: float) -> Bill:
        return replace(self, spent_s=float(seconds), spent_cpu_s=float(cpu_seconds))

    # -- derived -------------------------------------------------------------------------------
    @property
    def input_tokens(self) -> int:
        """What the LLM's prompt held: visual + text tokens (OpenAI's prompt_tokens)."""
        return self.visual_tokens + self.prompt_tokens

    @property
    def flops(self) -> float:
        """Tower + prefill + decode, cold."""
        return self.vision_flops + self.prefill_flops + self.decode_flops

    @property
    def visual_token_savings(self) -> float | None:
        """Baseline visual tokens per visual token sent (None without a baseline)."""
        if self.baseline_visual_tokens is None:
            return None
        return self.baseline_visual_tokens / max(self.visual_tokens, 1)

    @property
    def prefill_savings(self) -> float | None:
        """Baseline prefill FLOPs over this call's (the unreduced prompt's when there is no
        baseline; None for a tool answer without one)."""
        base = self.baseline_prefill_flops
        if base is None:
            base = self.unreduced_prefill_flops or None
        return None if base is None else base / max(self.prefill_flops, 1.0)

    @property
    def ttft_savings(self) -> float | None:
        """Baseline tower + prefill FLOPs over this call's: what time to first token scales with."""
        if self.baseline_prefill_flops is None:
            return None
        base = self.baseline_prefill_flops + (self.baseline_vision_flops or 0.0)
        return base / max(self.vision_flops + self.prefill_flops, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """Flat and JSON-friendly: every field plus the derived ratios."""
        return {
            **asdict(self),
            "input_tokens": self.input_tokens,
            "flops": self.flops,
            "visual_token_savings": self.visual_token_savings,
            "prefill_savings": self.prefill_savings,
            "ttft_savings": self.ttft_savings,
        }
