"""The real-media evaluation set (`benchmarks/real_media/`): every source's questions follow the
schema, and the harness judges a real dev question end to end, as `cascade bench` does."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
ROOT = BENCH / "real_media"
FIELDS = {"id", "image", "question", "lang", "gold", "target", "split"}


def _sources() -> list[Path]:
    return sorted(p.parent for p in ROOT.glob("*/questions.jsonl"))


def _questions(source: Path) -> list[dict]:
    lines = (source / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _harness():
    spec = importlib.util.spec_from_file_location("real_media", BENCH / "real_media.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_question_follows_the_schema():
    sources = _sources()
    assert len(sources) >= 4
    ids = Counter()
    for source in sources:
        questions = _questions(source)
        assert questions, f"{source.name}: no questions"
        split_of_image: dict[str, str] = {}
        for q in questions:
            where = f"{source.name}/{q.get('id')}"
            assert set(q) == FIELDS, f"{where}: fields {sorted(q)}"
            assert all(isinstance(q[f], str) and q[f].strip() for f in FIELDS), where
            assert q["lang"] in ("en", "zh"), where
            assert q["split"] in ("dev", "test", "test2", "test3", "test4", "test5", "test6"), where
            assert q["id"].startswith(f"{source.name}-"), where
            assert (source / q["image"]).is_file(), f"{where}: no image {q['image']}"
            # the split is decided per image: every question of an image shares it
            assert split_of_image.setdefault(q["image"], q["split"]) == q["split"], where
            ids[q["id"]] += 1
        licence = (source / "SOURCE.md").read_text(encoding="utf-8")
        assert "licen" in licence.lower(), f"{source.name}/SOURCE.md states no licence"
    assert not [i for i, n in ids.items() if n > 1], "duplicate ids"


def test_the_loader_names_the_line_of_a_bad_question(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "questions.jsonl").write_text('{"id": "src-1"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"questions.jsonl:1: missing field"):
        _harness().load_questions(tmp_path)


@pytest.mark.slow
def test_the_harness_judges_a_dev_question_end_to_end(tmp_path, monkeypatch):
    # the smallest dev image of the set, with its first question, in a folder of its own
    candidates = [
        (source, q)
        for source in _sources()
        for q in _questions(source)
        if q["split"] == "dev" and q["lang"] == "en"
    ]
    source, q = min(candidates, key=lambda sq: (sq[0] / sq[1]["image"]).stat().st_size)
    folder = tmp_path / "media" / source.name
    folder.mkdir(parents=True)
    shutil.copyfile(source / q["image"], folder / q["image"])
    (folder / "questions.jsonl").write_text(json.dumps(q) + "\n", encoding="utf-8")
    out = tmp_path / "result.json"
    argv = ["real_media.py", "--split", "dev", "--root", str(tmp_path / "media"), "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    _harness().main()

    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["questions"] == 1 and result["sources"] == [source.name]
    rows = result["rows"]
    assert {r["role"] for r in rows} == {"cascade", "cascade[hint]", "full_res"}
    full = next(r for r in rows if r["role"] == "full_res")
    assert full["visual_tokens"] > 0 and isinstance(full["evidence_readable"], bool)
    head = result["by_source"][source.name]
    assert head["questions"] == 1
    assert head["readable_questions"] + len(head["full_res_unreadable"]) == 1
    cascade = next(r for r in rows if r["role"] == "cascade")
    if cascade["produced_by"] == "tool":
        assert head["tool_answers"] == 1 and cascade["tool_exact"] == (not head["tool_wrong"])
    assert out.with_suffix(".png").stat().st_size > 0
