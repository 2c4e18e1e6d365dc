"""`understand` on questions it was not written for: 720 questions (8 English + 8 Chinese per
target kind, five sets) written by people who had not read the rules, each with the target and
fields a reader would give it (`tests/fixtures/questions_written_blind.json`).

Each set was run before the rules were fixed for it: set 1 read 119 of 144 right, set 2 121 (after
set 1's fixes), set 3 128, set 4 131, set 5 127 (each after the earlier sets' fixes); the failures
were fixed as general rules, and 707 of the 720 are now read as meant. The learned question
reader (`reader_model`) retypes a question where the rules only default, and tells furniture from
a table; one of the 707 needs it (the placard held in the front row). The 13 still read otherwise
are listed below with why, and must stay so (strict xfail): a new rule that reads one of them as
written is told to take it off the list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade.evidence.understanding import understand

QUESTIONS = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "questions_written_blind.json").read_text(
        encoding="utf-8"
    )
)

READ_OTHERWISE = {
    "这封信里说的婚礼是哪天举行？": "哪天 asks for a day; the rules read it as a weekday, not a "
    "date",
    "表格里张伟的数学成绩是多少？": "the column is read with its measure: 数学成绩, not 数学",
    "价目表里美式咖啡的大杯价格是多少？": "the column is read with its measure: 大杯价格, not 大杯",
    "Platform for the Express 402?": "no question word and no table word: the rules read a "
    "scene; the learned reader makes it a table cell, but no row or column is picked out",
    "what's Maria Lopez's score for Midterm in this grade sheet screenshot": "a grade sheet is a "
    "table the question does not call one: the learned reader makes it a table cell, but its keys "
    "are cut wrongly (the question's own words still find the cell: documents._cells_by_words)",
    "how many units of SKU 4471 are listed under Stock in that table": "'how many X are listed "
    "under Y': the row inside the counted phrase is not picked out",
    "What's the Units value for March?": "no table word: the learned reader makes it a table "
    "cell, with the column 'Units value' (the question's own words still find the cell)",
    "In the train schedule, what is the Departure time for train 204?": "the column is read as "
    "'Departure time' (its writer meant 'Departure'; the table lookup matches either)",
    "What's listed under Status for order #1182?": "'order #' makes it a key-value (the keys are "
    "still read: 'order #1182' x 'Status')",
    "成绩单上李明的数学成绩是多少？": "the column is read with its measure: 数学成绩, not 数学",
    "价目表里拿铁的中杯价格是多少？": "the column is read with its measure: 中杯价格, not 中杯",
    "What phone number does the letter ask me to call?": "read as the key-value 'phone number'; "
    "its writer meant a fact the letter tells",
    "In the timetable, what is the departure time for the Riverside stop?": "the row is read with "
    "its noun, 'Riverside stop' (the table lookup matches it fuzzily)",
}


def _read(question: str, field: str):
    query = understand(question)
    if field == "time_order":
        return query.time_order.relation if query.time_order else None
    return getattr(query, field)


def _same(field: str, got, want) -> bool:
    if field in ("row_key", "column_key", "section_name"):
        return got is not None and got.strip().casefold() == want.strip().casefold()
    return str(got) == str(want)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=f"set{c['set']}-{c['lang']}-{c['target']}-{i}",
            marks=[pytest.mark.xfail(reason=READ_OTHERWISE[c["question"]], strict=True)]
            if c["question"] in READ_OTHERWISE
            else [],
        )
        for i, c in enumerate(QUESTIONS)
    ],
)
def test_a_question_written_blind_is_understood_as_its_writer_meant(case):
    query = understand(case["question"])
    assert query.language == case["lang"]
    assert query.target == case["target"], query.describe()
    for field, want in case["fields"].items():
        assert _same(field, _read(case["question"], field), want), (field, query.describe())
