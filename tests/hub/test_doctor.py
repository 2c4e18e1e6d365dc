"""`cascade doctor` as a user runs it: the JSON report's schema and facts on this machine, and a
pipeline whose model is neither here nor downloadable turning the exit status to 1."""

from __future__ import annotations

import json

import pytest

from cascade.doctor import _packages_check, _video_check, render
from cascade.doctor_report import SCHEMA_VERSION, Codec, DoctorReport, Package, Video
from cascade.pipelines import shipped

from .conftest import run_cascade, user_env
from .servers import refusing_endpoint

pytestmark = pytest.mark.slow

NEEDS_MISSING_EMBEDDER = """\
name: needs_missing_embedder
inputs:
  images: {type: images}
stages:
  imgs: {type: images, inputs: {images: $images}}
  text: {type: text_embed, params: {model: nobody/no-such-embedder}, inputs: {images: imgs.images}}
outputs:
  embeddings: text.embeddings
"""


def test_doctor_json_on_this_machine(tmp_path):
    import torch

    ran = run_cascade(["doctor", "--json", "--offline"], user_env(refusing_endpoint(), tmp_path))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = DoctorReport.model_validate_json(ran.stdout)
    assert report.version == SCHEMA_VERSION and report.ok and report.offline
    versions = {p.name: p.version for p in report.packages}
    assert versions["torch"] and versions["transformers"] and versions["av"]
    assert all(p.satisfied for p in report.packages if p.extra is None)
    if torch.cuda.is_available():
        assert report.gpus and report.kernels.mode == "cuda"
    else:
        assert report.gpus == [] and report.kernels.mode == "interpreter"
    assert report.kernels.launched and report.kernels.max_abs_error < 1e-3
    assert report.video.h264_roundtrip
    assert {(c.name, c.mode) for c in report.video.codecs if c.available} >= {("h264", "decode")}
    bundled = {m.kind: m for m in report.bundled_models}
    for kind in ("OCR", "detector", "text embedder"):
        assert bundled[kind].state == "local" and bundled[kind].bundled
    assert report.hub.reachable is False and "refused" in report.hub.detail.lower()
    assert report.hub.cache_dir == str(tmp_path / "hub")
    assert [p.name for p in report.pipelines] == list(shipped())
    assert all(p.ready for p in report.pipelines)
    video_qa = next(p for p in report.pipelines if p.name == "video_qa")
    # --offline: the tiny VLM folder, and random CLIP, which loads no file
    assert {m.kind for m in video_qa.models} == {
        "VLM",
        "text embedder",
        "detector",
        "OCR",
        "layout",
        "table model",
    }
    assert report.ray.version
    assert isinstance(report.fonts.cjk, list)
    assert report.disk[0].path == str(tmp_path / "hub") and report.disk[0].free_gib > 0
    topics = {c.topic: c.status for c in report.checks}
    assert topics["model hub"] == "warn" and topics["pipeline video_qa"] == "ok"


def test_a_model_nowhere_flips_the_exit_status(tmp_path):
    bad = tmp_path / "needs_missing_embedder.yaml"
    bad.write_text(NEEDS_MISSING_EMBEDDER)
    ran = run_cascade(
        ["doctor", "--json", "--offline", "--pipeline", "route_demo", "--pipeline", bad],
        user_env(refusing_endpoint(), tmp_path),
    )
    assert ran.returncode == 1, ran.stderr
    report = DoctorReport.model_validate(json.loads(ran.stdout))
    assert not report.ok
    good, broken = report.pipelines
    assert good.ready and not broken.ready
    (missing,) = [m for m in broken.models if m.state == "missing"]
    assert missing.name == "nobody/no-such-embedder" and "cannot be reached" in missing.why
    assert any("--set text.model=<sentence-transformers folder>" in w for w in broken.ways_out)
    assert not any("--offline" in w for w in broken.ways_out)  # no random stand-in for it
    failed = [c for c in report.checks if c.status == "fail"]
    assert {c.topic for c in failed} == {"pipeline needs_missing_embedder", "missing models"}
    text = render(report)
    assert "FAIL  pipeline needs_missing_embedder" in text and "fix: " in text
    assert text.endswith("not ready: pipeline needs_missing_embedder, missing models")


def test_doctor_help_says_what_and_when_it_fails(tmp_path):
    ran = run_cascade(["doctor", "--help"], user_env(refusing_endpoint(), tmp_path))
    assert ran.returncode == 0
    for word in (
        "--json",
        "--offline",
        "--pipeline",
        "--timeout",
        "Exit status",
        "Triton",
        "H.264",
        "HF_ENDPOINT",
    ):
        assert word in ran.stdout


def test_verdicts_fail_on_what_the_pipelines_need():
    no_h264 = Video(pyav="18.0", codecs=[Codec(name="h264", mode="decode", available=False)])
    assert _video_check(no_h264).status == "fail"
    no_encoder = Video(
        pyav="18.0",
        codecs=[Codec(name="h264", mode="decode", available=True)],
        h264_roundtrip=False,
        detail="no encoder",
    )
    assert _video_check(no_encoder).status == "warn"
    old_torch = Package(name="torch", version="2.13.0", wanted=">=2.14", satisfied=False)
    check = _packages_check([old_torch])
    assert check.status == "fail" and check.fix == "pip install 'torch>=2.14'"
    missing_extra = Package(
        name="gradio", version=None, wanted=">=5.0", extra="web", satisfied=False
    )
    assert _packages_check([missing_extra]).status == "ok"
