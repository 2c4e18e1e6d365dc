"""The vlm_answer stage on the tiny random-weight Qwen2-VL: loading, accounting, trace,
pipelines."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image as PILImage

from cascade.artifacts import Image
from cascade.stages.vlm_answer import VLMAnswer
from cascade.trace import StageRecord, stage_scope


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from cascade.vlm import build_tiny_vlm

    return str(build_tiny_vlm(tmp_path_factory.mktemp("tiny"), family="qwen2_vl", size="test"))


def _image(seed: int) -> Image:
    rng = np.random.default_rng(seed)
    return Image((rng.random((120, 160, 3)) * 255).astype(np.uint8), source=f"img{seed}")


def test_answers_and_records_the_bill(tiny_model):
    # the model's declared reduction is the default; the stage overrides the keep ratio
    models = {
        "vlm": {"id": tiny_model, "device": "cpu", "reduction": "divprune", "keep_ratio": 0.25}
    }
    st = VLMAnswer({"max_new_tokens": 4, "keep_ratio": 0.5}, name="vlm", models=models)
    img = _image(0)
    rec = StageRecord("vlm", "vlm_answer")
    with stage_scope(rec):
        out = st(images=[img], question="What is this?")
    a = out.answer
    assert a.produced_by == "vlm" and a.evidence.images == (img,)
    assert (a.bill.reduction, a.bill.keep_ratio) == ("divprune", 0.5)
    assert a.bill.visual_tokens == round(a.bill.unreduced_visual_tokens * 0.5)
    c = rec.counters
    assert c["visual_tokens"] == a.bill.visual_tokens and c["kv_cache_misses"] == 1
    assert c["prefill_flops"] < c["unreduced_prefill_flops"] and c["vision_tower_calls"] == 1
    assert c["vision_flops"] == a.bill.vision_flops > 0

    # another stage (another pipeline) declaring the same model shares the loaded one and its
    # prefix cache: a second question about the same image hits it
    again = VLMAnswer({"max_new_tokens": 4, "keep_ratio": 0.5}, name="vlm2", models=models)
    rec2 = StageRecord("vlm2", "vlm_answer")
    with stage_scope(rec2):
        again(images=img, question="Something else?", hint="OCR read: EXIT")
    assert again.model("vlm").vlm is st.model("vlm").vlm
    assert rec2.counters["kv_cache_hits"] == 1 and rec2.counters["vision_tower_calls"] == 0


def test_stages_of_two_pipelines_share_the_tower_outputs_and_leading_blocks(tiny_model):
    """[A] in one pipeline, then [A, B] in another: A's tower output and its KV block are reused;
    the trace counts what ran."""
    models = {"vlm": {"id": tiny_model, "device": "cpu", "kv_cache_bytes": 1 << 26}}
    first = VLMAnswer({"max_new_tokens": 2}, name="vlm", models=models)
    other = VLMAnswer({"max_new_tokens": 2}, name="vlm2", models=models)
    a, b = _image(11), _image(12)
    with stage_scope(StageRecord("vlm", "vlm_answer")):
        first(images=[a], question="What is this?")
    rec = StageRecord("vlm2", "vlm_answer")
    with stage_scope(rec):
        out = other(images=[a, b], question="What is this?")
    c = rec.counters
    assert out.answer.bill.cache == "partial" and out.answer.bill.cached_tokens > 0
    assert (c["kv_cache_partial"], c["vision_images_encoded"], c["encoder_images"]) == (1, 1, 1)
    assert c["encoder_cache_hits"] == 0  # A lay in the reused block: no tower output needed


def test_params_are_validated_and_an_undeclared_model_is_named():
    from pydantic import ValidationError

    from cascade.errors import CascadeError

    with pytest.raises(ValidationError):
        VLMAnswer({"reduction": "prune_everything"})
    with pytest.raises(ValidationError):
        VLMAnswer({"keep_ratio": 0})
    with pytest.raises(ValidationError):
        VLMAnswer({"modle": "x"})
    with pytest.raises(CascadeError, match="no model 'vlm' is declared; declared models: none"):
        VLMAnswer()(images=[_image(0)], question="q")


def test_runs_inside_a_yaml_pipeline(tiny_model, tmp_path):
    from cascade.pipeline import Pipeline

    paths = []
    for i in range(2):
        p = tmp_path / f"img{i}.png"
        PILImage.fromarray(_image(i).pixels).save(p)
        paths.append(str(p))
    yaml = f"""
name: vlm_only
models:
  vlm: {{id: "{tiny_model}", device: cpu, max_pixels: 12544}}
inputs:
  images: {{type: images}}
  question: {{type: str}}
stages:
  imgs:
    type: images
    inputs: {{images: $images}}
  vlm:
    type: vlm_answer
    params: {{max_new_tokens: 3, reduction: pool, keep_ratio: 0.25}}
    inputs: {{images: imgs.images, question: $question}}
outputs:
  answer: vlm.answer
"""
    result = Pipeline.from_yaml(yaml).run(images=paths, question="What differs between them?")
    answer = result["answer"]
    assert answer.produced_by == "vlm" and answer.bill.generated_tokens >= 1
    assert len(answer.evidence.images) == 2
    assert result.trace["vlm"].counters["visual_tokens"] == answer.bill.visual_tokens


def test_per_request_length_and_history_and_the_run_s_token_stream(tiny_model):
    from cascade.streaming import answer_stream

    models = {"vlm": {"id": tiny_model, "device": "cpu"}}
    st = VLMAnswer({"max_new_tokens": 6}, name="final", models=models)
    draft = VLMAnswer({"max_new_tokens": 6, "stream": False}, name="draft", models=models)
    img = _image(7)
    base = st(images=[img], question="What is this?").answer
    assert base.bill.generated_tokens == 6  # random weights: no early end-of-turn
    # the max_new_tokens input overrides the param, below and above it
    assert (
        st(images=[img], question="What is this?", max_new_tokens=2).answer.bill.generated_tokens
        == 2
    )
    assert (
        st(images=[img], question="What is this?", max_new_tokens=9).answer.bill.generated_tokens
        == 9
    )
    with pytest.raises(Exception, match="max_new_tokens must be >= 1"):
        st(images=[img], question="What is this?", max_new_tokens=0)

    # history goes after the cached image prefix: more prompt tokens, still a prefix hit
    rec = StageRecord("final", "vlm_answer")
    with stage_scope(rec):
        turn2 = st(images=[img], question="And now?", history=[("What is this?", base.text)]).answer
    alone = st(images=[img], question="And now?").answer
    assert turn2.bill.prompt_tokens > alone.bill.prompt_tokens + 6
    assert turn2.bill.cache == "hit" and rec.counters["vision_tower_calls"] == 0

    # a run's token stream goes to the first streaming stage only; a draft never claims it
    events = []
    with answer_stream(events.append) as stream:
        d = draft(images=[img], question="Draft?").answer
        assert events == [] and stream.streamed_by is None
        a = st(images=[img], question="What is this?").answer
        st(images=[img], question="A second streaming call?")
    assert stream.streamed_by == "final" and d.text
    assert len(events) == a.bill.generated_tokens == 6  # the second call's tokens are not there
    # the streamed text is the answer, less an incomplete last character held back (the server
    # sends that rest with the final chunk)
    assert a.text == base.text and a.text.startswith("".join(e.text for e in events))


def test_the_stream_reaches_stages_running_on_the_runner_s_threads(tiny_model):
    import threading

    from cascade.pipeline import Pipeline
    from cascade.streaming import answer_stream

    yaml = f"""
name: two_vlms
models:
  vlm: {{id: "{tiny_model}", device: cpu, max_pixels: 12544}}
inputs:
  images: {{type: images}}
  question: {{type: str}}
  max_new_tokens: {{type: int, default: null}}
stages:
  a: {{type: vlm_answer, inputs: {{images: $images, question: $question,
                                  max_new_tokens: $max_new_tokens}}}}
  b: {{type: vlm_answer, inputs: {{images: $images, question: $question,
                                  max_new_tokens: $max_new_tokens}}}}
outputs:
  a: a.answer
  b: b.answer
"""
    pipeline = Pipeline.from_yaml(yaml)
    events, threads = [], set()

    def on_token(event) -> None:
        events.append(event)
        threads.add(threading.current_thread().name)

    with answer_stream(on_token) as stream:
        result = pipeline.run(images=[_image(1).pixels], question="What?", max_new_tokens=3)
    # a and b are ready together, so they run on the runner's pool: the caller's stream is
    # visible there, and only one of them streams
    assert stream.streamed_by in ("a", "b") and len(events) == 3
    assert result[stream.streamed_by].bill.generated_tokens == 3
    assert threads == {"cascade-decode"}  # the tokens come from the model's batch loop


def test_run_batch_answers_several_calls_at_once_and_counts_each_in_its_own_record(tiny_model):
    """The declared batch path (`serving.batch`, what a Ray replica calls for concurrent first
    turns): one `generate_batch`, each call's counters recorded in the scope the caller opened."""
    models = {"vlm": {"id": tiny_model, "device": "cpu"}}
    st = VLMAnswer({"max_new_tokens": 4}, name="vlm", models=models)
    st.ensure_setup()
    assert st.serving.heavy and st.serving.batch and st.serving.affinity == "images"
    calls = [
        {"images": [_image(10)], "question": "What is it?"},
        {"images": [_image(11)], "question": "Which colour?", "hint": "OCR: STOP"},
    ]
    assert all(st.batchable(c) for c in calls)
    assert not st.batchable({**calls[0], "history": [("q", "a")]})  # a conversation: `run`
    assert not st.batchable({**calls[0], "max_new_tokens": 9})  # its own length: `run`
    records = [StageRecord("vlm", "vlm_answer") for _ in calls]
    items, outs = st.run_batch(calls), []
    for rec in records:
        with stage_scope(rec):
            outs.append(next(items))
    assert next(items, None) is None
    vlm = st.model("vlm").vlm
    expected = vlm.generate_batch(
        [
            (c["images"], q)
            for c, q in zip(calls, ["What is it?", "OCR: STOP\nWhich colour?"], strict=True)
        ],
        max_new_tokens=4,
        reduction=st.model("vlm").reduction(None, None, None),
    )
    assert [o.answer.text for o in outs] == [r.text for r in expected]
    for rec, out, call in zip(records, outs, calls, strict=True):
        assert out.answer.evidence.images == tuple(call["images"])
        assert rec.counters["vlm_batch_size"] == 2
        assert rec.counters["visual_tokens"] == out.answer.bill.visual_tokens > 0


def test_video_pruning_rate_prunes_the_frames_with_evs(tiny_model):
    models = {"vlm": {"id": tiny_model, "device": "cpu", "reduction": "divprune"}}
    frames = [_image(7)] * 3  # a still shot: every frame after the first repeats it
    st = VLMAnswer({"max_new_tokens": 2, "video_pruning_rate": 0.5}, name="vlm", models=models)
    with stage_scope(StageRecord("vlm", "vlm_answer")):
        bill = st(images=frames, question="What changes?").answer.bill
    assert (bill.reduction, bill.keep_ratio) == ("evs", 0.5)  # the model's default replaced
    assert bill.visual_tokens == round(bill.unreduced_visual_tokens * 0.5)
    with pytest.raises(ValueError, match="leave reduction and keep_ratio unset"):
        VLMAnswer({"video_pruning_rate": 0.5, "keep_ratio": 0.5}, name="vlm", models=models)
