"""video_frames / fetch_frames / images: sampling counts, full-res fetch, and bad inputs."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from pydantic import ValidationError

from cascade.artifacts import Box, Frame, Image
from cascade.errors import InputError, StageError
from cascade.media import VideoSource
from cascade.stages.sources import drop_near_duplicates, thin


def test_fps_sampling_counts_and_timestamps(stage, sign_video):
    out = stage("video_frames", mode="fps", fps=2, size=224, max_frames=None)(video=sign_video.path)
    assert [f.index for f in out.frames] == list(range(0, 80, 5))
    assert [f.timestamp for f in out.frames] == pytest.approx([i / 10 for i in range(0, 80, 5)])
    f = out.frames[0]
    assert isinstance(f, Frame) and f.pixels.shape == (168, 224, 3)
    assert f.box == Box(0, 0, 640, 480) and f.source_size == (640, 480)
    assert f.source == str(sign_video.path)


def test_keyframes_only_and_uniform_and_all(stage, sign_video):
    keys = stage("video_frames", mode="keyframes", max_frames=None)(video=sign_video.path).frames
    assert [f.index for f in keys] == list(sign_video.keyframes)
    uni = stage("video_frames", mode="uniform", max_frames=5)(video=sign_video.path).frames
    assert [f.index for f in uni] == [0, 20, 40, 59, 79]
    every = stage("video_frames", mode="all", max_frames=None, size=64)(
        video=sign_video.path
    ).frames
    assert len(every) == sign_video.n_frames
    capped = stage("video_frames", mode="all", max_frames=8)(video=sign_video.path).frames
    assert len(capped) == 8 and capped[0].index == 0 and capped[-1].index == 79


def test_dedup_keeps_scene_cuts_and_a_small_sign_and_drops_a_static_shot(stage, sign_video):
    every = stage("video_frames", mode="all", max_frames=None, size=160)(
        video=sign_video.path
    ).frames
    kept = stage("video_frames", mode="all", max_frames=None, size=160, dedup=6.0)(
        video=sign_video.path
    ).frames
    starts = {0, 20, 40, 60}  # the four scenes: a cut is never a near-duplicate
    assert starts <= {f.index for f in kept}
    # a static shot of identical frames keeps one; a small sign appearing in it is kept
    frame = every[0]
    same = [dataclasses.replace(frame, timestamp=t, index=i) for i, t in enumerate((0.0, 0.1, 0.2))]
    assert [f.index for f in drop_near_duplicates(same, 0.5)] == [0]
    assert drop_near_duplicates(same, 0.0) == same
    px = frame.pixels.copy()
    px[10:18, 120:150] = 255  # a plate of 30x8 px: 1 % of the frame, its mean barely moves
    sign = dataclasses.replace(frame, pixels=px, timestamp=0.3, index=3)
    assert [f.index for f in drop_near_duplicates([*same, sign], 6.0)] == [0, 3]
    capped = stage("video_frames", mode="all", max_frames=3, size=160, dedup=6.0)(
        video=sign_video.path
    ).frames
    assert [f.index for f in capped] == [f.index for f in thin(kept, 3)]  # dedup, then thin


def test_indexed_frames_are_reused_without_decoding(stage, sign_video, tmp_path, monkeypatch):
    import shutil

    video = tmp_path / "copy.mp4"
    shutil.copy(sign_video.path, video)
    params = dict(mode="keyframes", size=160, dedup=2.0, video_index=True)
    first = stage("video_frames", **params)(video=video).frames
    assert sorted(p.suffix for p in (tmp_path / "copy.mp4.cascade-index").iterdir()) == [
        ".json",
        ".npy",
    ]

    def no_decoding(*a, **k):
        raise AssertionError("decoded the video again")

    monkeypatch.setattr(VideoSource, "sample", no_decoding)
    again = stage("video_frames", **params)(video=video).frames
    assert [(f.timestamp, f.index, f.box, f.source_size) for f in again] == [
        (f.timestamp, f.index, f.box, f.source_size) for f in first
    ]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.pixels, b.pixels)
        assert (
            b.__content_hash__()
            == a.__content_hash__()
            == Image(np.array(b.pixels)).__content_hash__()
        )
    full = stage("fetch_frames")(video=video, frames=again[-1:]).frames  # loaded frames fetch too
    assert full[0].pixels.shape == (480, 640, 3) and full[0].index == first[-1].index
    with pytest.raises(AssertionError, match="decoded"):  # other params: another set
        stage("video_frames", **{**params, "size": 128})(video=video)
    os.utime(video, ns=(0, 0))  # an edited video is sampled again
    with pytest.raises(AssertionError, match="decoded"):
        stage("video_frames", **params)(video=video)


def test_fetch_full_resolution_matches_full_decode(stage, sign_video):
    low = stage("video_frames", mode="fps", fps=1, size=160)(video=sign_video.path).frames
    picked = [low[6], low[1], low[4]]  # out of order on purpose
    full = stage("fetch_frames")(video=sign_video.path, frames=picked).frames
    reference = VideoSource(sign_video.path).sample("all", max_frames=None, size=None)
    for lo, hi in zip(picked, full, strict=True):
        assert (hi.timestamp, hi.index) == (lo.timestamp, lo.index)
        assert hi.pixels.shape == (480, 640, 3) and hi.box == lo.box
        np.testing.assert_array_equal(hi.pixels, reference[lo.index].pixels)
    # a box found on the low-res frame maps onto the full-res one unchanged (source coordinates)
    box = lo.to_source(Box(10, 10, 50, 40))
    assert hi.from_source(box) == Box(40, 40, 200, 160)


def test_video_source_object_flows_from_video_frames_to_fetch(stage, sign_video):
    out = stage("video_frames", mode="keyframes")(video=sign_video.path)
    assert out.video.describe()["frames"] == 80
    full = stage("fetch_frames", size=320)(video=out.video, frames=out.frames[-2:]).frames
    assert [f.pixels.shape for f in full] == [(240, 320, 3)] * 2


def test_images_stage_numbers_inputs(stage, bus_path):
    arr = np.zeros((20, 30, 3), np.uint8)
    from PIL import Image as PILImage

    out = stage("images")(images=[bus_path, PILImage.fromarray(arr), arr, Image(arr)]).images
    assert [im.media_index for im in out] == [0, 1, 2, 3]
    assert out[0].source == bus_path and out[0].width == 810


# -- bad inputs: every error names the file and the stage ----------------------------------------
def run_in_pipeline(yaml_text: str, **inputs):
    from cascade import Pipeline

    return Pipeline.from_yaml(yaml_text).run(**inputs)


VIDEO_YAML = """
name: v
inputs: {video: path}
stages:
  frames: {type: video_frames, params: {max_side: %d}, inputs: {video: $video}}
outputs: {frames: frames.frames}
"""


def test_missing_video(stage, tmp_path):
    with pytest.raises(InputError, match="not found.*nope.mp4"):
        stage("video_frames")(video=tmp_path / "nope.mp4")


def test_corrupt_video_names_file_and_stage(tmp_path):
    bad = tmp_path / "x.mp4"
    bad.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(StageError, match=r"stage 'frames' \(video_frames\).*x\.mp4"):
        run_in_pipeline(VIDEO_YAML % 8192, video=bad)


def test_zero_frame_video(tmp_path):
    import av

    empty = tmp_path / "empty.mp4"
    with av.open(str(empty), "w") as c:
        s = c.add_stream("libx264", rate=10)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
    with pytest.raises(InputError, match="empty.mp4"):
        VideoSource(empty)


def test_not_a_video_and_audio_only(tmp_path):
    import av

    notes = tmp_path / "notes.mp4"
    notes.write_text("these are meeting notes, not a video\n" * 50)
    with pytest.raises(InputError, match="notes.mp4"):
        VideoSource(notes)

    audio = tmp_path / "tone.wav"
    with av.open(str(audio), "w") as c:
        s = c.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, 800), np.int16), format="s16", layout="mono"
        )
        frame.sample_rate = 8000
        for p in s.encode(frame):
            c.mux(p)
    with pytest.raises(InputError, match="tone.wav.*no video stream|no video stream"):
        VideoSource(audio)


def test_oversized_video_refused(sign_video):
    with pytest.raises(StageError, match="640x480, larger than max_side=320"):
        run_in_pipeline(VIDEO_YAML % 320, video=sign_video.path)


def test_fetch_needs_frames_and_existing_times(stage, sign_video):
    with pytest.raises(InputError, match="not a video Frame"):
        stage("fetch_frames")(video=sign_video.path, frames=[Image(np.zeros((4, 4, 3), np.uint8))])
    late = Frame(np.zeros((4, 4, 3), np.uint8), timestamp=99.0)
    with pytest.raises(InputError, match="no frame at 99.000"):
        stage("fetch_frames")(video=sign_video.path, frames=[late])


def test_bad_image_inputs(stage, tmp_path, bus_path):
    with pytest.raises(InputError, match="images 0: image file not found"):
        stage("images")(images=[tmp_path / "missing.png"])
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not an image")
    with pytest.raises(InputError, match="junk.png"):
        stage("images")(images=[junk])
    with pytest.raises(InputError, match="810x1080, larger than max_side=512"):
        stage("images", max_side=512)(images=[bus_path])
    with pytest.raises(InputError, match="empty list"):
        stage("images")(images=[])


@pytest.mark.parametrize(
    "type_name,params",
    [
        ("video_frames", {"mode": "sometimes"}),
        ("video_frames", {"fps": 0}),
        ("video_frames", {"fsp": 1}),
        ("fetch_frames", {"size": -1}),
        ("images", {"max_images": 0}),
    ],
)
def test_bad_params(stage, type_name, params):
    with pytest.raises(ValidationError):
        stage(type_name, **params)
