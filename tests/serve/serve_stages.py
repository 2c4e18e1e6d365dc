"""A stand-in VLM stage for the server tests (registered as `serve_test_vlm`).

It bills like the real `vlm_answer` (Qwen2-VL visual token counts, the cost model, a content-keyed
"KV prefix cache" that reports hit/miss) but answers instantly and deterministically, so the
server's own behaviour (limits, errors, streaming, metrics, concurrency) is tested in milliseconds.
A question starting with `SLEEP <seconds>` sleeps first (timeout and busy tests); one starting with
`CRASH` raises, like a stage bug.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from cascade.artifacts import Answer, Evidence, Image
from cascade.cache import content_hash
from cascade.cost import ModelShape, prefill_flops, qwen2vl_visual_tokens
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record

SHAPE = ModelShape(params=1_500_000_000, layers=28, hidden=1536)
SEEN: set[str] = set()
_LOCK = threading.Lock()


@stage("serve_test_vlm")
class ServeTestVLM(Stage):
    """Deterministic answer with a real-shaped bill."""

    class Params(StageParams):
        max_pixels: int = 28 * 28 * 256

    @dataclass(frozen=True)
    class Outputs:
        answer: Answer

    def run(self, images: list[Image], question: str, hint: str = "") -> Outputs:
        if question.startswith("SLEEP "):
            time.sleep(float(question.split()[1]))
        if question.startswith("CRASH"):
            raise RuntimeError("the stand-in VLM crashed on purpose")
        visual = sum(qwen2vl_visual_tokens(im.width, im.height, max_pixels=self.params.max_pixels)
                     for im in images)
        prompt = 20 + len(question.split())
        key = content_hash([im.pixels for im in images], key="serve_test_vlm")
        with _LOCK:
            cache = "hit" if key in SEEN else "miss"
            SEEN.add(key)
        text = f"I looked at {len(images)} image(s)" + (f"; {hint}" if hint else "")
        gen = len(text.split())
        usage = {"visual_tokens": visual, "prompt_tokens": prompt, "generated_tokens": gen,
                 "completion_tokens": gen, "input_tokens": visual + prompt,
                 "prefill_flops": prefill_flops(SHAPE, visual, prompt),
                 "cache": cache, "ttft_s": 0.001, "total_s": 0.002, "finish_reason": "stop",
                 "model_shape": {"params": SHAPE.params, "layers": SHAPE.layers, "hidden": SHAPE.hidden}}
        record(visual_tokens=visual)
        return self.Outputs(Answer(text, "vlm", Evidence(images=tuple(images)), usage))
