"""The full-resolution baseline a cascade bills itself against is what `full_res` really sends.

For each model family (tiny random-weight checkpoints: real architectures, real token counts),
`multi_image_qa` prices its baseline with the declared model's family (`compose_answer`), and
`full_res` sends the same images whole at full resolution to that same model: the baseline's
visual tokens and vision-tower FLOPs must be the tokens and FLOPs `full_res` really spent.
"""

import pytest
from PIL import Image as PILImage

from cascade import QA
from cascade.eval.photos import scene_images
from cascade.vlm import build_tiny_vlm


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("photos")
    paths = []
    for name in ("astronaut", "coffee", "chelsea"):
        paths.append(str(folder / f"{name}.png"))
        PILImage.fromarray(scene_images()[name]).save(paths[-1])
    return paths


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
    assert (
        full.bill.baseline_visual_tokens == full.bill.visual_tokens
    )  # full_res is its own baseline
    assert cascade.bill.visual_tokens < full.bill.visual_tokens
