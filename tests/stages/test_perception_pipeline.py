"""The shipped perception_demo pipeline end to end (Python API and `cascade run --json`)."""

from __future__ import annotations

import json

import pytest

from cascade import Pipeline

pytestmark = pytest.mark.slow  # real models on a generated video

QUESTION = "What are the opening hours on the sign?"


def test_perception_demo_python(sign_video, yolo_weights):
    pipe = Pipeline.load(
        "perception_demo", overrides={"clip.pretrained": None, "objects.weights": yolo_weights}
    )
    result = pipe.run(video=sign_video.path, question=QUESTION)
    picked = [f.timestamp for f in result["frames"]]
    assert set(picked) <= set(sign_video.sign_times), picked
    assert all(f.pixels.shape[1] <= 448 for f in result["frames"])  # the cheap look
    assert "OPEN 24 HOURS" in result["text"].splitlines()  # read again on full-res crops
    line = next(x for x in result["lines"] if x.text == "OPEN 24 HOURS")
    assert line.box.iou(sign_video.sign_box) > 0.6 and line.timestamp in picked
    assert result["tiles"] and all(t.timestamp in picked for t in result["tiles"])
    statuses = {r.name: r.status for r in result.trace.stages}
    assert set(statuses.values()) == {"ran"}, statuses
    assert result.trace["full"].counters["frames_fetched"] == 2


def test_perception_demo_cli_json(sign_video, yolo_weights, capsys):
    from cascade.cli import main

    code = main(
        [
            "run",
            "perception_demo",
            "--input",
            f"video={sign_video.path}",
            "--input",
            f"question={QUESTION}",
            "--set",
            "clip.pretrained=null",
            "--set",
            f"objects.weights={yolo_weights}",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert "OPEN 24 HOURS" in out["outputs"]["text"]
    assert {f["timestamp"] for f in out["outputs"]["frames"]} <= set(sign_video.sign_times)
    counters = out["trace"]["counters"]
    assert counters["embed_images"] + counters["embed_cache_hits"] == 16  # 8 s at 2 fps
