"""The openai backend (the `openai` SDK) against a local OpenAI-compatible server serving the same
tiny model: same answer, and the same bill once the family is known from the checkpoint."""

import pytest

from cascade.errors import CascadeError, InputError
from cascade.vlm import VLM, ReductionConfig

from .openai_server import make_app, serve_in_thread


@pytest.fixture(scope="module")
def server(vlm):
    url, srv = serve_in_thread(make_app(vlm))
    yield url
    srv.should_exit = True


def test_same_answer_and_bill_as_in_process(server, vlm, tiny_path, make_image):
    remote = VLM.load(vlm.model_id, backend="openai", base_url=server, config=str(tiny_path))
    img = make_image(20)
    local = vlm.generate([img], "What is shown?", max_new_tokens=8, system_prompt="Be brief.")
    r = remote.generate([img], "What is shown?", max_new_tokens=8, system_prompt="Be brief.")
    assert r.backend == "openai" and r.text == local.text and remote.family.name == "qwen2_vl"
    assert r.bill.generated_tokens == local.bill.generated_tokens
    assert (
        r.bill.visual_tokens == local.bill.visual_tokens
        and r.bill.prompt_tokens == local.bill.prompt_tokens
    )
    assert r.bill.prefill_flops == pytest.approx(local.bill.prefill_flops)
    assert r.bill.vision_flops == pytest.approx(local.bill.vision_flops) and r.bill.vision_flops > 0
    assert r.finish_reason == local.finish_reason and r.bill.total_s > 0
    # a server that does not report image tokens: the family counts them from the image sizes
    quiet = VLM.load(
        vlm.model_id, backend="openai", base_url=server + "/quiet", config=str(tiny_path)
    )
    assert (
        quiet.generate([img], "What is shown?", max_new_tokens=8).bill.visual_tokens
        == local.bill.visual_tokens
    )


def test_streaming_and_history_reach_the_server(server, vlm, tiny_path, make_image):
    remote = VLM.load(vlm.model_id, backend="openai", base_url=server, config=str(tiny_path))
    img = make_image(21)
    history = [("What is it?", "A cat.")]
    local = vlm.generate([img], "Which colour?", max_new_tokens=6, history=history)
    events = []
    r = remote.generate(
        [img], "Which colour?", max_new_tokens=6, history=history, on_token=events.append
    )
    assert r.text == local.text == "".join(e.text for e in events)
    assert [
        r.text for r in remote.generate_batch([([img], "Which colour?")], max_new_tokens=6)
    ] == [vlm.generate([img], "Which colour?", max_new_tokens=6).text]


def test_errors_are_clear(server, vlm, image):
    remote = VLM.load(vlm.model_id, backend="openai", base_url=server, config=None)
    assert (
        remote.family is None
        and remote.generate([image], "q", max_new_tokens=2).bill.prefill_flops == 0
    )
    with pytest.raises(InputError, match="inside the serving engine"):
        remote.generate([image], "q", reduction=ReductionConfig("pool", 0.5))
    with pytest.raises(CascadeError, match="answered 404"):
        VLM.load("other-model", backend="openai", base_url=server, config=None).generate(
            [image], "q"
        )
    with pytest.raises(CascadeError, match="unreachable"):
        VLM.load(
            "m",
            backend="openai",
            base_url="http://127.0.0.1:9/v1",
            timeout=2,
            max_retries=0,
            config=None,
        ).generate([image], "q")
    with pytest.raises(CascadeError, match="sessions need"):
        remote.session([image])
