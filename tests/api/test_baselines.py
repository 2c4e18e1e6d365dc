"""The full-resolution baseline a cascade bills itself against is what `full_res` really sends.

For each model family (tiny random-weight checkpoints: real architectures, real token counts),
`multi_image_qa` prices its baseline with the declared model's family (`compose_answer`), and
`full_res` sends the same images whole at full resolution to that same model: the baseline's
visual tokens and vision-tower FLOPs must be the tokens and FLOPs `full_res` really spent.
"""
import pytest

from cascade import QA
from cascade.evalset import build_eval_set
from cascade.vlm import build_tiny_vlm


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    items = {it.id: it for it in build_eval_set(tmp_path_factory.mktemp("evalset"), n_videos=0)}
    return list(items["images_scene"].media)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["qwen2_vl", "idefics3", "qwen3_vl"])
def test_multi_image_baseline_equals_what_full_res_sends(photos, family):
    model = str(build_tiny_vlm(family=family, size="test"))
    question = "Which picture shows an animal?"  # a scene question: the cascade stays on thumbnails
    cascade = QA.offline("multi_image_qa", model=model).ask(photos, question)
    full = QA.offline("full_res", model=model).ask(photos, question)
    assert cascade.produced_by == full.produced_by == "vlm"
    assert cascade.bill.model == full.bill.model == model
    assert cascade.bill.baseline_visual_tokens == full.bill.visual_tokens > 0
    assert cascade.bill.baseline_vision_flops == full.bill.vision_flops > 0
    assert full.bill.baseline_visual_tokens == full.bill.visual_tokens  # full_res is its own baseline
    # Idefics3 resizes every image to its longest edge before tiling, so a 224-px thumbnail
    # costs it exactly what the photo does; the Qwen families pay per pixel.
    assert (cascade.bill.visual_tokens == full.bill.visual_tokens) == (family == "idefics3")
