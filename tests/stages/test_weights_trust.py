"""Pipeline YAML is configuration, never code: weights named in a YAML load as data (ONNX,
safetensors, `torch.load(weights_only=True)`) unless the stage says `allow_pickle: true`.

The "weights" here are pickles whose unpickling creates a marker file: the marker existing means
the file's code ran.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from cascade.errors import SpecError
from cascade.pipeline import Pipeline


class _RunsCode:
    """Unpickling this calls open(path, "w"), i.e. runs code chosen by whoever wrote the file."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.fixture
def evil(tmp_path):
    marker = tmp_path / "the-pickle-ran"
    weights = tmp_path / "weights.pt"
    torch.save({"model": _RunsCode(str(marker))}, weights)
    return weights, marker


def _detect_yaml(tmp_path, weights, extra: str = "") -> str:
    path = tmp_path / "detect.yaml"
    path.write_text(f"""name: detect_only
inputs:
  images: {{type: images}}
stages:
  imgs: {{type: images, inputs: {{images: $images}}}}
  det:
    type: detect
    params: {{weights: '{weights}'{extra}}}
    inputs: {{images: imgs.images}}
outputs:
  detections: det.detections
""")
    return str(path)


def test_the_marker_really_runs_when_loaded_as_a_pickle(evil):
    weights, marker = evil  # so the tests below would notice if the pickle ran
    torch.load(weights, weights_only=False)["model"].close()
    assert marker.exists()


@pytest.mark.slow
def test_a_pickled_pt_in_a_yaml_never_runs(tmp_path, evil, bus_path):
    weights, marker = evil
    yaml = _detect_yaml(tmp_path, weights)
    with pytest.raises(SpecError) as e:
        Pipeline.load(yaml)
    msg = str(e.value)
    assert "stages.det.params.weights" in msg and "allow_pickle: true" in msg
    assert "runs any code" in msg
    out = subprocess.run(
        [sys.executable, "-m", "cascade.cli", "run", yaml, "-i", f"images={bus_path}"],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=300,
    )
    assert out.returncode != 0 and "allow_pickle" in out.stderr
    assert not marker.exists()


def test_allow_pickle_is_the_explicit_opt_in(tmp_path, evil):
    weights, marker = evil
    pipe = Pipeline.load(_detect_yaml(tmp_path, weights, ", allow_pickle: true"))  # validates
    assert not marker.exists()  # validation never loads weights
    # whatever loading a non-model raises: the marker file is what shows it was unpickled
    with pytest.raises(Exception):  # noqa: B017
        pipe.setup()  # the user vouched for the file: Ultralytics unpickles it (and it is no model)
    assert marker.exists()


def test_onnx_weights_need_no_opt_in(stage, yolo_weights, bus_path):
    from cascade.artifacts import Image

    dets = stage("detect", weights=yolo_weights)(images=Image.open(bus_path)).detections
    assert any(d.label == "bus" for d in dets)
    default = stage("detect")
    default.ensure_setup()
    assert default.weights.endswith("yolo11n.onnx")  # the default is the bundled ONNX


@pytest.mark.slow
def test_a_clip_checkpoint_loads_tensors_only(evil):
    from cascade.registry import get_stage_class

    weights, marker = evil
    clip = get_stage_class("clip_embed")(
        {"model": "ViT-B-32", "pretrained": str(weights), "device": "cpu"}
    )
    with pytest.raises(RuntimeError, match="allow_pickle: true"):
        clip.setup()
    assert not marker.exists()
