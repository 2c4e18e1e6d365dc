"""The openai backend against a local OpenAI-compatible server serving the same tiny model."""
import pytest

from cascade.errors import CascadeError, InputError
from cascade.vlm import VLM, ReductionConfig

from .openai_server import make_app, serve_in_thread


@pytest.fixture(scope="module")
def server(vlm):
    url, srv = serve_in_thread(make_app(vlm))
    yield url
    srv.should_exit = True


def test_same_answer_and_usage_as_in_process(server, vlm, make_image):
    remote = VLM.load(vlm.model_id, backend="openai", base_url=server,
                      model_shape=vlm.backend.shape)
    img = make_image(20)
    local = vlm.generate([img], "What is shown?", max_new_tokens=8, system_prompt="Be brief.")
    r = remote.generate([img], "What is shown?", max_new_tokens=8, system_prompt="Be brief.")
    assert r.backend == "openai" and r.text == local.text
    assert r.generated_tokens == local.generated_tokens
    assert r.visual_tokens == local.visual_tokens and r.prompt_tokens == local.prompt_tokens
    assert r.prefill_flops == pytest.approx(local.prefill_flops)
    assert r.finish_reason == local.finish_reason and r.total_s > 0


def test_errors_are_clear(server, vlm, image):
    remote = VLM.load(vlm.model_id, backend="openai", base_url=server)
    with pytest.raises(InputError, match="inside the serving engine"):
        remote.generate([image], "q", reduction=ReductionConfig("pool", 0.5))
    with pytest.raises(CascadeError, match="answered 404"):
        VLM.load("other-model", backend="openai", base_url=server).generate([image], "q")
    with pytest.raises(CascadeError, match="unreachable"):
        VLM.load("m", backend="openai", base_url="http://127.0.0.1:9/v1", timeout=2).generate([image], "q")
    with pytest.raises(CascadeError, match="sessions need"):
        remote.session([image])
