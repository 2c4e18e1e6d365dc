"""`cascade.indexing.index_video`: an index built in chunks, stopped part way (`max_chunks`) and
resumed, ends as the index of an uninterrupted run; real CLIP architecture (random weights),
RapidOCR, YOLO and the sentence embedder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cascade import Pipeline
from cascade.cache import clear_all_caches
from cascade.errors import InputError
from cascade.eval.photos import footage_path
from cascade.eval.render import render_text_image
from cascade.indexing import index_video

from .conftest import yolo_onnx_path

YAML = """
name: indexed
index: {folder: %s}
inputs: {video: video, question: str}
stages:
  frames: {type: video_frames, params: {mode: fps, fps: 1.0, max_frames: null, size: 192},
           inputs: {video: $video}}
  clip: {type: clip_embed, params: {pretrained: null},
         inputs: {images: frames.frames, text: $question, video: frames.video}}
  frame_text: {type: ocr, inputs: {images: frames.frames, video: frames.video}}
  frame_objects: {type: detect, params: {weights: %s},
                  inputs: {images: frames.frames, video: frames.video}}
  text: {type: text_embed, inputs: {images: frames.frames, ocr_lines: frame_text.lines,
         detections: frame_objects.detections, text: $question, video: frames.video}}
outputs: {emb: clip.embeddings, texts: text.embeddings}
"""


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """8 s of gradio's turning globe at 5 fps, 192x108, a sign 'GATE 4' on seconds 3-5."""
    import av

    path = tmp_path_factory.mktemp("media") / "globe.mp4"
    with av.open(footage_path("world.mp4")) as c:
        src = [f.to_ndarray(width=192, height=108, format="rgb24") for f in c.decode(video=0)]
    sign = render_text_image("GATE 4", font_size=22, padding=6, bold=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=5)
        stream.width, stream.height, stream.pix_fmt = 192, 108, "yuv420p"
        for i in range(40):
            px = src[(i * 5) % len(src)].copy()
            if 15 <= i < 30:
                px[8 : 8 + sign.shape[0], 8 : 8 + sign.shape[1]] = sign
            for packet in stream.encode(av.VideoFrame.from_ndarray(px, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def _contents(folder: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in sorted(folder.iterdir()):
        out[f.name] = np.load(f) if f.suffix == ".npy" else json.loads(f.read_text())
    return out


def _same(a: dict[str, object], b: dict[str, object]) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k] for k in a
    )


@pytest.mark.slow
def test_a_stopped_index_resumes_to_the_index_of_an_uninterrupted_run(clip, tmp_path):
    whole = Pipeline.from_yaml(YAML % (tmp_path / "whole", yolo_onnx_path())).setup()
    run = index_video(whole, clip, chunk_frames=3)
    assert (run.frames, run.chunks, run.chunks_now, run.complete) == (8, 3, 3, True)
    assert run.minutes_per_second > 0
    (folder,) = (tmp_path / "whole").iterdir()
    reference = _contents(folder)
    assert any(k.startswith("clip-") for k in reference)
    assert any(k.startswith("texts-") for k in reference)

    clear_all_caches()  # as a new process
    parts = Pipeline.from_yaml(YAML % (tmp_path / "parts", yolo_onnx_path())).setup()
    first = index_video(parts, clip, chunk_frames=3, max_chunks=1)  # stopped after chunk 0
    assert (first.chunks_now, first.complete) == (1, False)
    (part_folder,) = (tmp_path / "parts").iterdir()
    assert not _same(_contents(part_folder), reference)
    clear_all_caches()  # the crash: nothing left in memory, only the files
    rest = index_video(parts, clip, chunk_frames=3)
    assert (rest.chunks_before, rest.chunks_now, rest.complete) == (1, 2, True)
    assert _same(_contents(part_folder), reference)
    again = index_video(parts, clip, chunk_frames=3)  # complete: nothing left to run
    assert again.chunks_now == 0 and _same(_contents(part_folder), reference)


def test_a_pipeline_without_an_index_or_frames_stage_is_refused(clip):
    off = Pipeline.from_yaml((YAML % ("x", yolo_onnx_path())).replace("index: {folder: x}", ""))
    with pytest.raises(InputError, match="keeps no index"):
        index_video(off, clip)
    with pytest.raises(InputError, match="'clip' is not a video_frames stage"):
        index_video(off, clip, frames="clip")
