"""Every genre generates in both splits, with well-formed items whose gold span is in the pixels:
the real OCR reads it at the item's box (or on its page) at source size."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

import cascade.stages  # noqa: F401
from cascade.artifacts import Image
from cascade.eval import build
from cascade.eval.fonts import has_font
from cascade.eval.genres import GENERATORS, Ctx
from cascade.eval.items import GENRES, EvalItem
from cascade.eval.judge import answer_frames, normalize
from cascade.eval.splits import spec_for
from cascade.registry import get_stage_class

PAGES = ("receipt", "heading", "table", "code", "paragraph", "ids", "zh_receipt")
# media-heavy genres, each made in one split (alternating, so both splits' footage and photos run)
VISUAL = {
    "video_sign": "dev",
    "image_sign": "test",
    "router": "test",
    "zh_sign": "dev",
    "zh_question": "test",
    "colour": "dev",
    "time_order": "test",
    "photo_doc": "test",
    "long_video": "dev",
}


@pytest.fixture(scope="module")
def ocr():
    return get_stage_class("ocr")({"min_confidence": 0.3})


def generate(split: str, genre: str, folder, n: int = 1) -> list[EvalItem]:
    spec = spec_for(split)
    if genre.startswith("zh_") and not has_font(spec.fonts.cjk):
        pytest.skip(
            f"the {split} split's Chinese genres need the CJK font {spec.fonts.cjk} "
            "(Debian: fonts-wqy-microhei / fonts-wqy-zenhei; .ci/run installs both)"
        )
    make = GENERATORS[genre][0]
    return make(Ctx(folder, spec, split, genre, random.Random(f"{spec.seed}/{genre}"), n))


def check_item(item: EvalItem, split: str, genre: str) -> None:
    assert item.split == split and item.genre == genre and item.id.startswith(f"{split}/{genre}_")
    assert item.answer.strip() and item.question.strip()
    assert item.lang in ("en", "zh")
    assert all(Path(m).is_file() for m in item.media)
    if item.media_kind == "video":
        assert len(item.media) == 1 and item.times
    if item.frames:
        assert all(0 <= f < len(item.media) for f in item.frames)
    if item.kind == "count":
        assert item.label and item.answer.isdigit()
    assert EvalItem.from_dict(json.loads(json.dumps(item.to_dict()))) == item


def reads_gold(item: EvalItem, ocr) -> tuple[bool, str]:
    """OCR on the answer's box (with a margin) in the frame or image that holds it."""
    (frame, *_) = answer_frames(item)
    px = frame.pixels
    if item.box:
        x0, y0, x1, y1 = item.box
        assert 0 <= x0 < x1 <= frame.width and 0 <= y0 < y1 <= frame.height
        px = px[max(0, y0 - 24) : y1 + 24, max(0, x0 - 24) : x1 + 24]
    text = " ".join(line.text for line in ocr(images=[Image(np.ascontiguousarray(px))]).lines)
    return normalize(item.answer) in normalize(text), text


@pytest.mark.parametrize("split", ["dev", "test"])
@pytest.mark.parametrize("genre", PAGES)
def test_every_page_genre_generates_with_its_gold_span_readable(genre, split, tmp_path, ocr):
    items = generate(split, genre, tmp_path)
    assert items
    for item in items:
        check_item(item, split, genre)
        ok, text = reads_gold(item, ocr)
        assert ok, f"{item.id}: OCR read {text!r}, gold {item.answer!r}"


@pytest.mark.slow  # writes videos (one of several minutes) and photo sets: ~1 min in all
@pytest.mark.parametrize("genre", sorted(VISUAL))
def test_every_media_genre_generates_with_its_gold_readable(genre, tmp_path, ocr):
    split = VISUAL[genre]
    items = generate(split, genre, tmp_path)
    assert items
    for item in items:
        check_item(item, split, genre)
        if item.kind in ("read", "doc"):
            ok, text = reads_gold(item, ocr)
            assert ok, f"{item.id}: OCR read {text!r}, gold {item.answer!r}"
    if genre == "long_video":
        from cascade.media import VideoSource

        (item,) = items
        assert VideoSource(item.media[0]).info.duration >= 180  # several minutes
        assert max(item.times) - min(item.times) <= 2.0  # the sign is visible <= 2 s


@pytest.mark.slow  # two 10-20 s videos
def test_the_time_order_gold_is_on_the_asked_side_of_the_banner(tmp_path):
    spec = spec_for("dev")
    items = GENERATORS["time_order"][0](
        Ctx(tmp_path, spec, "dev", "time_order", random.Random(5), 2)
    )  # after, then before
    for item in items:
        other, banner = item.distractors
        assert banner in spec.banners and other != item.answer
    asks = lambda it, words: any(w in it.question for w in words)  # noqa: E731
    after = [it for it in items if asks(it, ("after", "last", "之后"))]
    before = [it for it in items if asks(it, ("before", "first", "之前"))]
    assert after and before
    assert min(it.times[0] for it in after) > max(it.times[-1] for it in before)


def test_a_genre_is_cached_and_rebuilt_when_the_format_changes(tmp_path, monkeypatch):
    first = build.build_genre(tmp_path, "dev", "table", quick=True)
    index = tmp_path / "dev-quick" / "table" / "items.json"
    stamp = index.stat().st_mtime_ns
    assert build.build_genre(tmp_path, "dev", "table", quick=True) == first
    assert index.stat().st_mtime_ns == stamp  # reused, not rewritten
    monkeypatch.setattr(build, "FORMAT", build.FORMAT + 1)
    assert build.build_genre(tmp_path, "dev", "table", quick=True) == first  # same seed, same items
    assert json.loads(index.read_text())["format"] == build.FORMAT


def test_build_eval_set_keeps_genre_order_and_names_an_unknown_genre(tmp_path):
    items = build.build_eval_set(tmp_path, "test", quick=True, genres=["ids", "heading"])
    assert [it.genre for it in items] == sorted((it.genre for it in items), key=list(GENRES).index)
    with pytest.raises(ValueError, match="unknown genre.*'?recipes'?.*expected some of"):
        build.build_eval_set(tmp_path, "test", quick=True, genres=["recipes"])


def test_quick_keeps_one_to_three_units_per_genre():
    for genre, (_, full, few) in GENERATORS.items():
        assert 1 <= few <= 3 and few < full, genre


def test_a_caption_never_covers_the_sign_a_question_is_about(tmp_path):
    """The caption is drawn over the footage's other overlays: wherever the sign stands (here in
    each corner a caption can take), the caption keeps clear of it, so the gold stays readable
    (a caption once hid the first letter of a test split's long-video placard)."""
    from cascade.eval.genres.common import CLEAR, caption_overlay
    from cascade.eval.render import Overlay

    spec = spec_for("test")
    board = np.zeros((30, 120, 3), np.uint8)
    for seed in range(12):
        for x, y in ((16, 16), (1280 - 136, 16), (16, 720 - 46)):
            sign = Overlay(board, x, y)
            ctx = Ctx(tmp_path, spec, "test", "long_video", random.Random(seed), 1)
            caption, _ = caption_overlay(ctx, 1280, 720, clear_of=(sign,))
            c, s = caption.box, sign.box
            apart = max(c.x0 - s.x1, s.x0 - c.x1, c.y0 - s.y1, s.y0 - c.y1)
            assert apart >= CLEAR, (seed, c, s)
