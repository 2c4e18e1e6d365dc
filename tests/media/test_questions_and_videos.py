"""Pipeline inputs are checked before any model loads; a truncated video answers from the part
that decodes, with a warning in the trace."""

from __future__ import annotations

import pytest

from cascade.errors import InputError
from cascade.media import VideoSource
from cascade.pipeline import Pipeline
from cascade.trace import StageRecord, stage_scope

from .videos import remux


@pytest.mark.parametrize(
    "question, match",
    [
        ("", "input 'question' is empty"),
        ("   \n", "input 'question' is empty"),
        (b"caf\xe9?", "input 'question': not valid UTF-8"),
        ("what \udcff is it?", "input 'question': not valid UTF-8 text"),  # undecodable argv bytes
    ],
)
def test_bad_questions_fail_before_any_model_loads(question, match, tmp_path):
    from cascade.eval.video import make_sign_video

    pipe = Pipeline.load("video_qa")
    video = make_sign_video(tmp_path / "v.mp4", width=64, height=48, frames_per_scene=2).path
    with pytest.raises(InputError, match=match):
        pipe.run(video=video, question=question)
    assert not any(st._is_setup for st in pipe.stages.values())  # nothing was loaded


def test_bytes_questions_in_utf8_are_text():
    from cascade.inputs import coerce

    assert coerce("question", "str", "café?".encode()) == "café?"


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    from cascade.eval.video import make_sign_video

    d = tmp_path_factory.mktemp("trunc")
    make_sign_video(d / "src.mp4", width=160, height=120, frames_per_scene=10)  # 40 frames, 4 s
    remux(d / "src.mp4", d / "fast.mp4", movflags="faststart")
    remux(d / "src.mp4", d / "whole.mkv")
    for name in ("fast.mp4", "whole.mkv"):
        data = (d / name).read_bytes()
        (d / f"cut-{name}").write_bytes(data[: len(data) // 2])
    return d


@pytest.mark.parametrize("name", ["cut-fast.mp4", "cut-whole.mkv"])
@pytest.mark.parametrize("mode", ["uniform", "fps", "keyframes"])
def test_a_truncated_video_answers_from_what_decodes_with_a_warning(videos, name, mode):
    src = VideoSource(videos / name)
    rec = StageRecord("frames", "video_frames")
    with stage_scope(rec):
        frames = src.sample(mode, fps=2.0, max_frames=64, size=64)
    assert frames and frames[-1].timestamp < src.info.duration - 1.0
    if mode == "keyframes" and name.endswith("mkv"):
        return  # key frames alone cannot show where a cleanly cut container ends
    assert len(rec.warnings) == 1 and rec.warnings[0].startswith("video truncated or damaged")
    assert f"of {src.info.duration:.2f} s" in rec.warnings[0]


@pytest.mark.parametrize("name", ["fast.mp4", "whole.mkv", "src.mp4"])
def test_a_whole_video_has_no_warning(videos, name):
    rec = StageRecord("frames", "video_frames")
    with stage_scope(rec):
        for mode in ("uniform", "fps", "keyframes"):
            VideoSource(videos / name).sample(mode, fps=2.0, max_frames=64, size=64)
    assert rec.warnings == []
