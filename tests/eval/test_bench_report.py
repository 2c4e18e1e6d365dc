"""`cascade bench` reports per genre: on a tiny real run (two page genres, one question each, the
real OCR, the random-weight VLM), the JSON and the PNG have the per-genre shape."""

from __future__ import annotations

import json

import pytest

from cascade.eval.bench import run_bench
from cascade.eval.report import summarize_genres
from cascade.provenance import read_rows


@pytest.mark.slow  # doc_qa twice per question plus the OCR judges: ~1 min
def test_a_tiny_run_reports_every_figure_per_genre(tmp_path):
    result = run_bench(
        tmp_path / "out",
        tmp_path / "media",
        split="dev",
        quick=True,
        size="test",
        limit=1,
        full_res="estimate",
        progress=False,
        genres=["code", "ids"],
    )
    out = tmp_path / "out" / "cascade_dev_quick_code+ids_cpu.json"
    assert out.is_file() and out.with_suffix(".png").stat().st_size > 10_000
    saved = json.loads(out.read_text())
    assert saved["genres"] == ["code", "ids"] == sorted(result["by_genre"])
    for report in saved["by_genre"].values():
        assert report["questions"] == 1 and report["languages"] == ["en"]
        assert set(report["roles"]) == {"cascade", "cascade[hint]", "full_res"}
        head = report["headline"]
        assert head["evidence_questions"] == 1  # the [hint] variant always sends pixels
        assert head["evidence_found"] + len(head["evidence_missed"]) == 1
        assert head["full_res_evidence_recall"] == 1.0  # the whole page holds the gold
        assert head["full_res_visual_tokens"] > 0
        assert 0 < head["hint_tokens_share_of_full_res"] <= 1.5
        assert head["tool_exact"] + len(head["tool_wrong"]) == head["tool_answers"]
    assert saved["provenance"]["packages"]["torch"] and saved["rows_file"]
    rows = read_rows(out)["rows"]  # the per-question rows, beside the summary
    assert {r["genre"] for r in rows} == {"code", "ids"}
    assert {r["role"] for r in rows} == {"cascade", "cascade[hint]", "full_res"}
    assert all("tool_exact" in r for r in rows if r["produced_by"] == "tool")
    assert set(saved["summary"]) == {
        "document/doc_qa",
        "document/doc_qa[hint]",
        "document/full_res",
    }


def test_a_tool_answer_that_is_not_the_span_is_listed_wrong_by_id():
    base = {
        "lang": "en",
        "target": "fact",
        "media": "document",
        "kind": "doc",
        "routed_high_res": None,
        "oracle_high_res": None,
        "visual_tokens": 0,
    }
    rows = [
        base
        | {
            "id": "dev/paragraph_0",
            "genre": "paragraph",
            "role": "cascade",
            "pipeline": "doc_qa",
            "produced_by": "tool",
            "tool_exact": False,
            "answer": "The east entrance will be closed on Tuesday.",
            "gold": "Tuesday",
        },
        base
        | {
            "id": "dev/paragraph_1",
            "genre": "paragraph",
            "role": "cascade",
            "pipeline": "doc_qa",
            "produced_by": "tool",
            "tool_exact": True,
            "answer": "Room 214",
            "gold": "Room 214",
        },
        base
        | {
            "id": "dev/paragraph_0",
            "genre": "paragraph",
            "role": "cascade[hint]",
            "pipeline": "doc_qa[hint]",
            "produced_by": "vlm",
            "evidence_readable": False,
            "answer": "",
            "gold": "Tuesday",
            "visual_tokens": 40,
        },
        base
        | {
            "id": "dev/paragraph_0",
            "genre": "paragraph",
            "role": "full_res",
            "pipeline": "full_res",
            "produced_by": "vlm",
            "evidence_readable": True,
            "answer": None,
            "gold": "Tuesday",
            "visual_tokens": 800,
        },
    ]
    head = summarize_genres(rows)["paragraph"]["headline"]
    assert head["tool_answers"] == 2 and head["tool_exact"] == 1
    assert head["tool_wrong"] == [
        {
            "id": "dev/paragraph_0",
            "gold": "Tuesday",
            "answer": "The east entrance will be closed on Tuesday.",
        }
    ]
    assert head["evidence_missed"] == ["dev/paragraph_0"] and head["evidence_recall"] == 0.0
    assert head["hint_tokens_share_of_full_res"] == pytest.approx(40 / 800)
