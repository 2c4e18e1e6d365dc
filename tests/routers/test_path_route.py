"""The path route: the whole media or the cascade, priced before any specialist runs.

The pipelines are the shipped ones, offline: the random-weight tiny Qwen2-VL runs, the declared
Qwen2-VL-2B is priced (its reference config), OCR / layout are real. The device's costs come from
a calibration file written here with a GPU-class VLM throughput and CPU specialists (what a
`cascade doctor --calibrate` on such a machine caches), so each test knows the prices it routes on;
the measurement itself is `test_measured_vlm_fit_reproduces_its_points`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cascade import QA, InputError, SpecError
from cascade.api import offline_params
from cascade.calibration import (
    Calibration,
    LinearCost,
    PathCosts,
    VLMThroughput,
    device_label,
    load_calibration,
    save_calibration,
)
from cascade.pipeline import Pipeline

pytestmark = pytest.mark.slow  # the shipped doc pipeline with real OCR / layout, a generated video

# A GPU-class VLM (2B prefill of 1,000 tokens in tens of ms) next to CPU specialists (seconds).
GPU_VLM = VLMThroughput(flops_per_s=2e14, overhead_s=0.02, step_s=0.01, measured_on="test")
CPU_SPECIALISTS = PathCosts(
    cascade=LinearCost(0.5, 1.2, 0.1), full=LinearCost(0.01, 0.0, 0.005), vlm_share=0.6, runs=6
)


@pytest.fixture
def calibrated(tmp_path, monkeypatch):
    monkeypatch.setenv("CASCADE_CALIBRATION_DIR", str(tmp_path / "calibration"))
    cal = Calibration(
        device=device_label("cpu"),
        threads=1,
        created="test",
        vlm=GPU_VLM,
        pipelines={p: CPU_SPECIALISTS for p in ("doc_qa", "multi_image_qa", "video_qa")},
    )
    save_calibration(cal)
    return cal


@pytest.fixture(scope="module")
def receipt(tmp_path_factory) -> str:
    """A small scan: a 480 x 320 receipt with a total (~200 visual tokens whole)."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    im = PILImage.new("RGB", (480, 320), "white")
    d = ImageDraw.Draw(im)
    for i, line in enumerate(["CORNER SHOP", "Milk 2.10", "Bread 3.40", "TOTAL 5.50"]):
        d.text((40, 40 + 60 * i), line, fill="black")
    path = tmp_path_factory.mktemp("media") / "receipt.png"
    im.save(path)
    return str(path)


@pytest.fixture(scope="module")
def doc_qa() -> QA:
    return QA.offline("doc_qa", type_overrides={"vlm_answer": {"max_new_tokens": 2}})


def _path_route(answer):
    return next(r for r in answer.evidence.routes if r.branch in ("full", "cascade"))


def _ran(answer) -> set[str]:
    return {r.name for r in answer.trace.stages if r.status == "ran"}


def test_a_small_image_goes_whole_and_no_specialist_runs(calibrated, doc_qa, receipt):
    answer = doc_qa.ask(receipt, "What is the total?")
    route = _path_route(answer)
    assert route.branch == "full", route.reason
    assert "vlm_whole" in _ran(answer) and not {"ocr", "layout", "understand"} & _ran(answer)
    # both estimates named, priced as the declared 2B (not the tiny stand-in that ran)
    assert route.scores["full_s"] < route.scores["cascade_s"]
    assert "priced as Qwen/Qwen2-VL-2B-Instruct" in route.reason
    assert route.scores["full_visual_tokens"] == 17 * 11  # 480 x 320 in 28-px tokens, rounded
    bill = answer.bill
    assert bill.path == "full" and bill.estimated_s == route.scores["full_s"]
    assert bill.estimated_flops == route.scores["full_flops"]
    assert bill.spent_s > 0 and bill.spent_cpu_s > 0


def test_the_route_prices_the_declared_model_not_the_stand_in(doc_qa):
    declared = doc_qa.pipeline.models["vlm"]
    assert declared.spec.priced_as == "Qwen/Qwen2-VL-2B-Instruct"
    real, tiny = declared.pricing_family.shapes.llm, declared.family.shapes.llm
    assert (real.layers, real.hidden) == (28, 1536) and real.linear_params > 1e9
    assert tiny.hidden < real.hidden  # the stand-in would have made every page look cheap


def test_a_long_video_cascades(calibrated, tmp_path):
    from cascade.eval.video import make_sign_video

    # 160 s at 640 x 360: 160 frames at 1 fps whole (294 tokens each) overflow the 2B's
    # 32k-token context, and 150 frames of specialists cost far less than that prefill.
    video = make_sign_video(
        tmp_path / "long.mp4",
        width=640,
        height=360,
        fps=1,
        frames_per_scene=40,
        sign_text="EXIT",
        sign_frames=range(10, 12),
    )
    pipe = Pipeline.load("video_qa", **offline_params())  # the tiny stand-in, priced as the 2B
    route = pipe.stages["path"].run(video=Path(video.path)).route
    assert route.branch == "cascade", route.reason
    assert route.scores["frames"] >= 150 and "context" in route.reason


def test_max_visual_tokens_forces_the_cascade(calibrated, doc_qa, receipt):
    answer = doc_qa.ask(receipt, "What is the total?", max_visual_tokens=100)
    route = _path_route(answer)
    assert route.branch == "cascade" and "> max_visual_tokens 100" in route.reason
    assert "ocr" in _ran(answer) and "vlm_whole" not in _ran(answer)


def test_a_request_overrides_the_pipeline_policy(calibrated, receipt):
    forced = QA.offline("doc_qa", overrides={"path.policy": "cascade"})  # YAML: always cascade
    assert _path_route(forced.ask(receipt, "What is the total?")).branch == "cascade"
    answer = forced.ask(receipt, "What is the total?", route_policy="full")  # the request wins
    assert _path_route(answer).branch == "full" and "policy full" in _path_route(answer).reason
    whole = QA.offline("doc_qa", overrides={"path.policy": "full"})
    assert _path_route(whole.ask(receipt, "What is the total?")).branch == "full"


def test_without_a_calibration_cost_keeps_the_cascade_and_says_why(
    doc_qa, receipt, tmp_path, monkeypatch
):
    monkeypatch.setenv("CASCADE_CALIBRATION_DIR", str(tmp_path))  # empty
    route = _path_route(doc_qa.ask(receipt, "What is the total?"))
    assert route.branch == "cascade"
    assert "no calibration for" in route.reason and "cascade doctor --calibrate" in route.reason


def test_bad_policy_names_the_field(doc_qa, receipt):
    with pytest.raises(InputError, match="route_policy: unknown route policy 'cheap'.*cost"):
        doc_qa.ask(receipt, "What is the total?", route_policy="cheap")
    with pytest.raises(SpecError, match="policy"):
        Pipeline.load("doc_qa", {"path.policy": "cheap"})
    with pytest.raises(InputError, match="route_policy: pipeline 'full_res' has no"):
        QA.offline("full_res").ask(receipt, "What is the total?", route_policy="full")


def test_the_server_request_field_is_typed():
    from pydantic import ValidationError

    from cascade.serve.mm_params import MM_KEYS
    from cascade.serve.schema import MMProcessorKwargs

    assert MM_KEYS["route_policy"] == ("path_route", "policy")
    assert MMProcessorKwargs(route_policy="full").route_policy == "full"
    with pytest.raises(ValidationError, match="route_policy"):
        MMProcessorKwargs(route_policy="cheap")


def test_calibration_round_trips_and_fits_are_nonnegative(calibrated):
    from cascade.calibrate import fit_nonnegative

    assert load_calibration(device_label("cpu")) == calibrated
    x = [[1.0, mp, f] for mp, f in [(0.2, 1), (0.5, 1), (1.0, 2), (2.0, 4), (3.0, 6)]]
    y = [0.3 + 1.5 * mp + 0.2 * f for _, mp, f in x]
    assert np.allclose(fit_nonnegative(x, y), [0.3, 1.5, 0.2], atol=1e-6)
    assert np.allclose(fit_nonnegative(x, y, relative=True), [0.3, 1.5, 0.2], atol=1e-6)
    # one slow outlier: plain least squares bends to it; the relative fit keeps the small points
    noisy = [*y[:-1], y[-1] * 3]
    small = x[0]
    plain, rel = fit_nonnegative(x, noisy), fit_nonnegative(x, noisy, relative=True)
    err = [abs(float(np.dot(c, small)) / y[0] - 1) for c in (plain, rel)]
    assert err[1] < err[0]
    assert min(fit_nonnegative(x, [5.0 - r[1] for r in x])) >= 0  # never a negative cost


def test_measured_vlm_fit_reproduces_its_points():
    import torch

    from cascade.calibrate import measure_vlm
    from cascade.vlm import build_tiny_vlm

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: measured on the CPU clock, which other jobs leave be
    try:
        fit, points = measure_vlm(str(build_tiny_vlm(size="test")), token_counts=(64, 256, 1024))
    finally:
        torch.set_num_threads(threads)
    assert fit.flops_per_s > 1e8 and len(points) == 3
    big = points[-1]  # the largest call, where FLOPs dominate: the fit within 25 %
    assert (
        abs(
            fit.seconds(big["flops"], int(big["steps"]) + 1, big["visual_tokens"]) / big["seconds"]
            - 1
        )
        < 0.25
    )


def test_a_priced_run_counts_the_cascades_specialists_flops(calibrated, doc_qa, receipt):
    from cascade.calibrate import run_priced

    cascade, _ = run_priced(doc_qa, receipt, "What is the total?", "cascade", count_flops=True)
    by_stage = cascade["specialist_flops_by_stage"]
    assert by_stage["ocr"] > 1e9 and by_stage["layout"] > 1e9 and cascade["uncounted"] == []
    full, _ = run_priced(doc_qa, receipt, "What is the total?", "full", count_flops=True)
    assert full["path"] == "full" and full["specialist_flops"] == 0  # the VLM's: the cost model
    assert full["flops"] > 0 and cascade["est_full_s"] == full["est_full_s"]
