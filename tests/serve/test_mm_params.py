"""vLLM's media parameters: `mm_processor_kwargs` onto a pipeline's stages, and
`--limit-mm-per-prompt` in both of vLLM's forms."""

from __future__ import annotations

import pytest

from cascade.errors import CascadeError
from cascade.pipeline import Pipeline
from cascade.serve.config import ServeConfig, _mm_limits
from cascade.serve.errors import APIError
from cascade.serve.mm_params import check_limits, stage_params_of

from .conftest import PIPELINES


def test_keys_map_onto_every_stage_of_their_type():
    stages = Pipeline.load(PIPELINES / "video_small.yaml").stages
    params = stage_params_of({"fps": 3.0, "max_frames": 9, "max_pixels": 4096}, stages, "m")
    frames, vlm = stages["frames"], stages["vlm"]
    assert (params[frames].mode, params[frames].fps, params[frames].max_frames) == ("fps", 3.0, 9)
    assert params[frames].size == frames.params.size  # the rest stays the stage's own
    assert params[vlm].max_pixels == 4096 and frames.params.mode == "uniform"


def test_a_key_with_nothing_to_set_or_a_value_the_stage_refuses_is_400():
    stages = Pipeline.load(PIPELINES / "images_plain.yaml").stages
    with pytest.raises(APIError, match="has no video_frames stage") as e:
        stage_params_of({"max_frames": 4}, stages, "cascade/images")
    assert e.value.param == "mm_processor_kwargs.max_frames"
    video = Pipeline.load(PIPELINES / "video_small.yaml").stages
    with pytest.raises(APIError, match=r"mm_processor_kwargs\.fps: .*240") as e:
        stage_params_of({"fps": 500.0}, video, "cascade/video")
    assert e.value.status == 400


def test_video_pruning_rate_sets_the_vlm_stages_evs_and_a_bad_rate_is_400():
    stages = Pipeline.load(PIPELINES / "video_small.yaml").stages
    vlm = stages["vlm"]
    params = stage_params_of({"video_pruning_rate": 0.5}, stages, "m")
    assert params[vlm].video_pruning_rate == 0.5
    with pytest.raises(ValueError, match="leave reduction and keep_ratio unset"):
        type(vlm.params).model_validate({"reduction": "pool", "video_pruning_rate": 0.5})
    with pytest.raises(APIError, match=r"mm_processor_kwargs\.video_pruning_rate: .*less than 1"):
        stage_params_of({"video_pruning_rate": 1.0}, stages, "m")


@pytest.mark.parametrize("text", ["image=2,video=1", '{"image": 2, "video": 1}'])
def test_limit_mm_per_prompt_takes_vllms_two_forms(text):
    assert ServeConfig(limit_mm_per_prompt=_mm_limits(text)).limit_mm_per_prompt == {
        "image": 2,
        "video": 1,
    }


def test_limit_mm_per_prompt_refuses_what_it_cannot_mean():
    with pytest.raises(CascadeError, match="expected MODALITY=COUNT"):
        _mm_limits("image:2")
    with pytest.raises(ValueError, match="unknown modality 'imgae' \\(did you mean 'image'"):
        ServeConfig(limit_mm_per_prompt={"imgae": 2})


def test_the_part_past_the_limit_is_named():
    check_limits(["image", "video", "image"], ["a", "b", "c"], {"image": 2})
    with pytest.raises(APIError, match="more than 0 video part") as e:
        check_limits(["image", "video"], ["a", "b"], {"video": 0})
    assert e.value.param == "b" and e.value.code == "too_many_media"
