"""The two splits are generated apart: no seed, font, photo, footage, word, layout or question
phrasing of one is in the other, and every genre is made in both from the same slots."""

from __future__ import annotations

import dataclasses

import pytest

from cascade.eval.genres import GENERATORS
from cascade.eval.items import GENRES
from cascade.eval.splits import SPECS, spec_for

DEV, TEST = SPECS["dev"], SPECS["test"]


def _fonts(spec) -> set[str]:
    f = spec.fonts
    return set(f.sign + f.caption + f.body + f.bold + f.code + (f.cjk,))


def _words(spec) -> set[str]:
    """Every word a generator may print, except the days of the week (a day is a day)."""
    words = set(
        spec.sign_words
        + spec.zh_sign_words
        + spec.distractor_words
        + spec.banners
        + spec.doc_titles
        + spec.code_verbs
        + spec.code_nouns
        + spec.class_nouns
        + spec.notice_titles
        + spec.fillers
        + spec.companies
    )
    words |= {s.heading for s in spec.sections} | {s.topic for s in spec.sections}
    for t in spec.tables:
        words |= {t.title, *t.rows, *t.cols}
    words |= {f.sentence for f in spec.facts} | {f.label for f in spec.id_fields}
    for kind, values in spec.fact_values.items():
        if kind != "day":
            words |= set(values)
    zh = spec.zh_receipt
    words |= set(zh.shops + zh.goods) | {
        zh.number_label,
        zh.date_label,
        zh.subtotal_label,
        zh.discount_label,
        zh.total_label,
    }
    return words


def _phrasings(spec) -> set[str]:
    return (
        {t for templates in spec.questions.values() for t in templates}
        | {f.question for f in spec.facts}
        | {f.question for f in spec.id_fields}
        | {q for _, q, _, _ in spec.counts}
        | {q for _, q, _ in spec.scenes}
    )


def test_the_splits_share_no_seed_font_or_media():
    assert DEV.seed != TEST.seed
    assert not _fonts(DEV) & _fonts(TEST)
    assert not set(DEV.photos) & set(TEST.photos)
    assert not set(DEV.backgrounds) & set(TEST.backgrounds)
    footage = lambda spec: {s for s, _, _ in spec.footage + spec.long_footage}  # noqa: E731
    assert not footage(DEV) & footage(TEST)
    assert DEV.fonts.cjk != TEST.fonts.cjk  # two CJK designs


def test_the_splits_share_no_word():
    assert not _words(DEV) & _words(TEST)


def test_the_splits_share_no_question_phrasing():
    shared = _phrasings(DEV) & _phrasings(TEST)
    assert not shared, f"phrased alike in both splits: {sorted(shared)}"


def test_the_splits_share_no_layout():
    assert not set(DEV.receipt_layouts) & set(TEST.receipt_layouts)
    assert not set(DEV.numbering) & set(TEST.numbering)
    assert set(DEV.table_styles) != set(TEST.table_styles)
    assert not set(DEV.code_langs) & set(TEST.code_langs)
    assert DEV.zh_receipt.total_label != TEST.zh_receipt.total_label
    assert DEV.line_numbers != TEST.line_numbers


def test_both_splits_fill_the_same_slots_and_every_genre_has_a_generator():
    assert set(DEV.questions) == set(TEST.questions)
    for spec in (DEV, TEST):
        assert all(f"cell_{t.kind}" in spec.questions for t in spec.tables)
    assert set(GENERATORS) == set(GENRES)
    for field in dataclasses.fields(DEV):
        assert getattr(DEV, field.name) not in (None, (), {}), field.name
        assert getattr(TEST, field.name) not in (None, (), {}), field.name


def test_an_unknown_split_or_slot_is_named():
    with pytest.raises(ValueError, match="unknown split 'train'.*dev, test"):
        spec_for("train")
    import random

    with pytest.raises(KeyError, match="no question templates for 'colour_fr'"):
        DEV.ask("colour_fr", random.Random(0))
