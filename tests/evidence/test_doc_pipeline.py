"""doc_qa end to end on a page rendered here (real OCR and layout model; random-weight VLM): the
answer's routes start with what was understood, and a table question gets the cell."""

from __future__ import annotations

import pytest
from PIL import Image as PILImage

from cascade import QA

from ._pages import chinese_report, english_report
from ._render import page

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def timetable(tmp_path_factory):
    rows = [
        [("Train", 40), ("Dep.", 320), ("Arr.", 520), ("Platform", 700)],
        [("Express 12", 40), ("08:15", 320), ("09:40", 520), ("4", 700)],
        [("Local 7", 40), ("08:30", 320), ("10:05", 520), ("2", 700)],
        [("Express 21", 40), ("09:15", 320), ("10:30", 520), ("5", 700)],
    ]
    path = tmp_path_factory.mktemp("doc") / "timetable.png"
    PILImage.fromarray(page(rows, title="Morning departures")).save(path)
    return str(path)


@pytest.fixture(scope="module")
def doc_qa():
    """doc_qa with its readers ungated: these tests pin what the readers find (the sureness gate
    doc_qa ships with is `test_the_shipped_gate_states_its_sureness_and_threshold`'s)."""
    return QA.offline("doc_qa", size="test", overrides={"tool.sureness": "off"})


def test_the_shipped_gate_states_its_sureness_and_threshold(timetable):
    out = QA.offline("doc_qa", size="test").ask([timetable], "What is the title of this document?")
    tool = next(r for r in out.evidence.routes if r.scores.get("tool_threshold") is not None)
    assert "sureness" in tool.reason
    sure = tool.scores["tool_sureness"] >= tool.scores["tool_threshold"]
    assert (out.produced_by == "tool") == sure  # below the threshold the VLM answers
    assert out.produced_by == "vlm" or out.text == "Morning departures"


@pytest.mark.parametrize(
    "question,answer,understood",
    [
        (
            "What is the Dep. of Express 12 in the table?",
            "08:15",
            "understood: table_cell row='Express 12' col='Dep' answer=cell",
        ),
        ("What is the title of this document?", "Morning departures", "understood: title"),
        ("表格中Local 7的Arr.是什么？", "10:05", "understood: table_cell row='Local 7' col='Arr.'"),
    ],
)
def test_the_route_says_what_was_understood_and_the_tool_answers_the_span(
    doc_qa, timetable, question, answer, understood
):
    out = doc_qa.ask([timetable], question)
    assert out.evidence.routes[0].branch == "understood"
    assert out.evidence.routes[0].reason.startswith(understood)
    assert (out.text, out.produced_by) == (answer, "tool")


def test_an_ambiguous_cell_abstains_and_the_vlm_gets_the_candidates(doc_qa, timetable):
    out = doc_qa.ask([timetable], "What is the Dep. of Express in the table?")
    assert out.produced_by == "vlm"
    assert any("different candidates" in r.reason for r in out.evidence.routes)
    assert 0 < out.bill.visual_tokens < out.bill.baseline_visual_tokens


@pytest.mark.parametrize(
    "report,question,heading",
    [
        (english_report, "Which section covers the east entrance repairs?", "Service Changes"),
        (chinese_report, "东入口在哪一节？", "服务变更"),
        (chinese_report, "哪个部分讲客流统计？", "客流统计"),
        # the section next to a named one, in reading order
        (english_report, "Which section comes after Ridership by Line?", "Service Changes"),
        (
            english_report,
            "What is the heading of the section before Service Changes?",
            "Ridership by Line",
        ),
        (chinese_report, "客流统计之后是哪一节？", "服务变更"),
        (chinese_report, "服务变更前面是哪个部分？", "客流统计"),
    ],
)
def test_a_section_asked_for_by_its_topic_is_answered_by_its_heading(
    doc_qa, tmp_path, report, question, heading
):
    path = tmp_path / "report.png"
    PILImage.fromarray(report().pixels).save(path)
    out = doc_qa.ask([str(path)], question)
    assert out.evidence.routes[0].reason.startswith("understood: heading ")
    assert (out.text, out.produced_by) == (heading, "tool")
