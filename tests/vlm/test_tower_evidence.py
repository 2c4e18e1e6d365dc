"""The `tower` reduction guided by evidence: boxes in source pixels land on the right merge units
through the family's own resize, and the units of the text the cascade found are kept whole."""

import numpy as np
import pytest
import torch

from cascade.artifacts import Image
from cascade.errors import InputError
from cascade.vlm import VLM, KVPrefixCache, ReductionConfig
from cascade.vlm.reduction import KeepRegions, evidence_units, tower_select
from cascade.vlm.reduction.tower import box_units

ODD = (333, 217)  # (width, height): neither side a multiple of the 28-px merge unit


def _grid(vlm, size):
    rh, rw = vlm.family.resized(*size)
    unit = vlm.family.patch * vlm.family.merge
    return rh // unit, rw // unit, rh, rw


def test_box_units_are_the_units_the_resized_box_overlaps(vlm):
    rows, cols, rh, rw = _grid(vlm, ODD)
    assert (rh, rw) != ODD[::-1]  # the resize really rescales
    unit = vlm.family.patch * vlm.family.merge
    rng = np.random.default_rng(0)
    for _ in range(300):
        x0, x1 = sorted(rng.uniform(0, ODD[0], 2))
        y0, y1 = sorted(rng.uniform(0, ODD[1], 2))
        # brute force: unit (r, c) covers resized pixels [c*unit, (c+1)*unit) x [r*unit, ...)
        sx0, sx1, sy0, sy1 = x0 * rw / ODD[0], x1 * rw / ODD[0], y0 * rh / ODD[1], y1 * rh / ODD[1]
        want = {
            (r, c)
            for r in range(rows)
            for c in range(cols)
            if min(sx1, (c + 1) * unit) > max(sx0, c * unit)
            and min(sy1, (r + 1) * unit) > max(sy0, r * unit)
        }
        r0, r1, c0, c1 = box_units((x0, y0, x1, y1), ODD, (rows, cols))
        assert {(r, c) for r in range(r0, r1) for c in range(c0, c1)} == want


def test_a_drawn_box_lands_on_its_units_through_the_real_preprocessing(vlm):
    rt = vlm.backend.runtime
    box = (101.0, 63.0, 190.0, 131.0)
    white = np.full((ODD[1], ODD[0], 3), 255, np.uint8)
    drawn = white.copy()
    drawn[63:131, 101:190] = 0

    def units(px):
        vi = rt.collate(rt.preprocess([Image(px).to_pil()]))
        return vi["pixel_values"].reshape(-1, vi["pixel_values"].shape[1] * rt.family.merge**2), vi

    plain, vi = units(white)
    dark, _ = units(drawn)
    change = (plain - dark).abs().amax(1)
    t, h, w = vi["image_grid_thw"][0].tolist()
    rows, cols = h // rt.family.merge, w // rt.family.merge
    r0, r1, c0, c1 = box_units(box, ODD, (rows, cols))
    mapped = {r * cols + c for r in range(r0, r1) for c in range(c0, c1)}
    # every unit the resized box darkens strongly is mapped; every mapped unit is darkened
    assert set(torch.nonzero(change > 0.5 * change.max()).reshape(-1).tolist()) <= mapped
    assert mapped <= set(torch.nonzero(change > 1e-3).reshape(-1).tolist())


def _page(lines, size=(700, 520)):
    """A rendered page with `lines` of text; (pixels, each line's box)."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    from cascade.eval.fonts import load_font

    page = PILImage.new("RGB", size, "white")
    draw = ImageDraw.Draw(page)
    font = load_font("DejaVuSans.ttf", 22)
    boxes = []
    for i, text in enumerate(lines):
        xy = (60 + 40 * (i % 3), 60 + 110 * i)
        draw.text(xy, text, font=font, fill=(20, 20, 20))
        boxes.append(tuple(float(v) for v in draw.textbbox(xy, text, font=font)))
    return np.asarray(page), boxes


def test_guided_selection_keeps_rendered_text_lines_whole(vlm):
    # the tiny test model's pixel budget makes this page a 9 x 6 unit grid: two lines fit in half
    px, boxes = _page(["TOTAL 1,284.50", "Dep. 14:35"])
    rt = vlm.backend.runtime
    vi = rt.collate(rt.preprocess([Image(px).to_pil()]))
    t, h, w = vi["image_grid_thw"][0].tolist()
    grid = (t, h // rt.family.merge, w // rt.family.merge)
    regions = KeepRegions((px.shape[1], px.shape[0]), tuple(boxes))
    guided = set(rt.tower_keep(vi, 0.5, (regions,))[0].tolist())
    unguided = set(rt.tower_keep(vi, 0.5)[0].tolist())
    assert len(guided) == len(unguided)  # the same budget: the same time to first token
    text = set()
    for with_margin, core in evidence_units(regions, grid):
        assert set(with_margin.tolist()) <= guided  # each line whole, with its margin
        text |= set(core.tolist())
    assert not text <= unguided  # the unguided rule drops part of the text


def test_evidence_beyond_the_budget_is_kept_box_by_box_never_cut():
    grid, size = (1, 10, 10), (280, 280)  # one 28-px unit per 28 source pixels
    units = torch.randn(100, 12)
    first = (28.0, 28.0, 140.0, 140.0)  # 4x4 units; 6x6 with the margin: over the budget of 25
    second = (196.0, 196.0, 280.0, 280.0)  # 3x3 units (its margin is clipped to 4x4)
    third = (0.0, 252.0, 28.0, 280.0)  # one unit: no room left
    kept = set(tower_select(units, grid, 0.25, KeepRegions(size, (first, second, third))).tolist())
    core_first = {r * 10 + c for r in range(1, 5) for c in range(1, 5)}
    core_second = {r * 10 + c for r in range(7, 10) for c in range(7, 10)}
    assert len(kept) == 25 and core_first | core_second == kept
    assert 9 * 10 + 0 not in kept


def test_no_evidence_is_todays_rule():
    units = torch.randn(96, 8)
    assert torch.equal(
        tower_select(units, (1, 8, 12), 0.25, KeepRegions((336, 224), ())),
        tower_select(units, (1, 8, 12), 0.25),
    )


def test_what_is_left_of_the_budget_covers_cells_the_evidence_left_empty():
    grid = (1, 8, 8)  # budget: 4x4 cells of 2x2 units
    kept = tower_select(
        torch.randn(64, 8), grid, 0.25, KeepRegions((224, 224), ((0.0, 0.0, 28.0, 28.0),))
    )
    units = set(kept.tolist())
    # the evidence and its margin fill units (0..1, 0..1); 12 are left, of which scattered single
    # units may take 6 (a tenth of 64): the 6 over grow the evidence, the next ring (5 units)
    # whole, then the most enclosed unit of the one after ((1, 3): three kept neighbours)
    assert {r * 8 + c for r in range(3) for c in range(3)} | {11} <= units
    # the 6 others go to 6 cells nothing else reached
    cells = {(i // 8 // 2, i % 8 // 2) for i in kept.tolist()}
    assert kept.numel() == 16 and len(cells) == 4 + 6


def _component(mask: torch.Tensor, start: tuple[int, int]) -> set[tuple[int, int]]:
    """The 8-connected kept units reached from `start`."""
    seen, todo = {start}, [start]
    while todo:
        r, c = todo.pop()
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                n = (r + dr, c + dc)
                if (
                    n not in seen
                    and 0 <= n[0] < mask.shape[0]
                    and 0 <= n[1] < mask.shape[1]
                    and mask[n]
                ):
                    seen.add(n)
                    todo.append(n)
    return seen


def test_beyond_a_share_of_scattered_units_the_budget_grows_one_solid_region_around_the_line():
    grid, size = (1, 20, 30), (840, 560)  # one unit per 28 source pixels
    line = (300.0, 250.0, 500.0, 290.0)  # units rows 8..10, cols 10..17; 5 x 10 with the margin
    for ratio in (0.5, 0.25, 0.1):
        kept = tower_select(torch.randn(600, 12), grid, ratio, KeepRegions(size, (line,), lead=1))
        budget = tower_select(torch.randn(600, 12), grid, ratio).numel()
        assert kept.numel() == budget  # the evidence changes which units, never how many
        mask = torch.zeros(600, dtype=torch.bool)
        mask[kept] = True
        mask = mask.reshape(20, 30)
        assert bool(mask[7:12, 9:19].all())
        # every unit over a tenth of the image (60) is part of the line's own solid region
        assert len(_component(mask, (8, 10))) >= budget - 60
        if ratio == 0.5:  # 294 units: the growth closes whole rings around the line
            assert bool(mask[6:13, 8:20].all())


def test_keep_regions_guide_only_a_reduction_before_the_tower():
    with pytest.raises(InputError, match="keep_regions guide a reduction before the vision tower"):
        ReductionConfig("pool", 0.25, keep_regions=(None,))
    with pytest.raises(InputError, match="KeepRegions box"):
        KeepRegions((10, 10), ((5.0, 5.0, 1.0, 9.0),))


def test_the_kept_set_is_part_of_the_reductions_identity(tiny_path, make_image):
    img = make_image(11, 224, 224)
    a = ReductionConfig(
        "tower", 0.25, keep_regions=(KeepRegions((224, 224), ((0.0, 0.0, 60.0, 30.0),)),)
    )
    b = ReductionConfig(
        "tower", 0.25, keep_regions=(KeepRegions((224, 224), ((100.0, 100.0, 200.0, 130.0),)),)
    )
    assert len({a.cache_key(), b.cache_key(), ReductionConfig("tower", 0.25).cache_key()}) == 3
    cached = VLM.load(str(tiny_path), device="cpu", kv_cache=KVPrefixCache(64 << 20))
    outcomes = [
        cached.generate([img], "What is it?", max_new_tokens=1, reduction=red).bill.cache
        for red in (a, b, a)
    ]
    assert outcomes == ["miss", "miss", "hit"]


def test_keep_regions_are_per_call_not_per_batch(vlm, make_image):
    red = ReductionConfig("tower", 0.25, keep_regions=(None,))
    with pytest.raises(InputError, match="keep_regions name the images of one call"):
        vlm.generate_batch([([make_image(1)], "q"), ([make_image(2)], "r")], reduction=red)


def test_the_target_is_kept_with_its_margin_before_other_boxes_when_the_budget_is_tight():
    grid, size = (1, 10, 10), (280, 280)  # one 28-px unit per 28 source pixels; budget 25
    units = torch.randn(100, 12)
    target = (140.0, 140.0, 168.0, 168.0)  # unit (5, 5); 3x3 with its margin
    others = (
        (0.0, 0.0, 112.0, 28.0),
        (0.0, 56.0, 112.0, 84.0),
        (0.0, 224.0, 112.0, 252.0),
        (168.0, 0.0, 280.0, 28.0),
        (168.0, 56.0, 280.0, 84.0),
    )  # five 4-unit lines
    margin = {r * 10 + c for r in range(4, 7) for c in range(4, 7)}
    boxes = (target,) + others
    led = set(tower_select(units, grid, 0.25, KeepRegions(size, boxes, lead=1)).tolist())
    # the target whole with the glyphs around its box, then four of the five others
    assert margin <= led and len(led) == 25
    # unled, every box's own units come first and the margins after: the target's margin is cut
    unled = set(tower_select(units, grid, 0.25, KeepRegions(size, boxes)).tolist())
    assert 55 in unled and not margin <= unled


def test_a_lead_box_too_big_with_its_margin_is_kept_without_it():
    grid, size = (1, 10, 10), (280, 280)
    wide = (0.0, 28.0, 280.0, 56.0)  # a whole row of 10 units; 30 with its margin, over 25
    kept = set(
        tower_select(torch.randn(100, 12), grid, 0.25, KeepRegions(size, (wide,), lead=1)).tolist()
    )
    assert set(range(10, 20)) <= kept and len(kept) == 25


def test_lead_counts_leading_boxes():
    with pytest.raises(InputError, match="KeepRegions.lead counts leading boxes: 0 to 1"):
        KeepRegions((10, 10), ((1.0, 1.0, 5.0, 5.0),), lead=2)


def _tilted_page(lines, angle, size=(700, 460)):
    """`lines` ((x, y), text) rendered and turned `angle` degrees, as a page photographed at an
    angle: (the page, each line alone on a blank page turned alike: where its ink is)."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    from cascade.eval.fonts import load_font

    out = []
    for only in [None, *range(len(lines))]:
        layer = PILImage.new("RGB", size, "white")
        draw = ImageDraw.Draw(layer)
        font = load_font("DejaVuSans.ttf", 24)
        for i, (xy, text) in enumerate(lines):
            if only in (None, i):
                draw.text(xy, text, font=font, fill=(15, 15, 15))
        out.append(np.asarray(layer.rotate(angle, resample=PILImage.BICUBIC, fillcolor="white")))
    return out[0], out[1:]


def test_a_line_photographed_at_an_angle_is_kept_whole(vlm):
    from cascade.evidence.understanding import understand
    from cascade.stages._tower_guide import image_regions
    from cascade.stages.ocr import Ocr

    lines = [
        ((70, 90), "Harbour Supplies Ltd"),
        ((70, 180), "Invoice No: INV-40213"),
        ((70, 250), "Date: 12/03/2021"),
        ((70, 330), "Please quote it when you pay"),
    ]
    page, alone = _tilted_page(lines, 7)
    found = Ocr(name="ocr")(images=[Image(page)]).lines
    target = next(ln for ln in found if "INV" in ln.text)
    assert target.angle > 5  # the detector's polygon is a turned quad
    regions, used = image_regions(Image(page), understand("What is the invoice number?"), found)
    assert used[0] is target and regions.lead == 2  # the id, then its line
    rt = vlm.backend.runtime
    vi = rt.collate(rt.preprocess([Image(page).to_pil()]))
    _, h, w = vi["image_grid_thw"][0].tolist()
    rows, cols = h // rt.family.merge, w // rt.family.merge
    rh, rw = vlm.family.resized(page.shape[1], page.shape[0])
    # the units the target line's ink falls on, at the model's resize
    ink = Image(alone[1]).resized(rw, rh).pixels.min(-1) < 128
    ys, xs = np.nonzero(ink)
    inked = set((ys // (rh // rows) * cols + xs // (rw // cols)).tolist())
    assert len(inked) >= 4
    kept = set(rt.tower_keep(vi, 0.25, (regions,))[0].tolist())
    assert inked <= kept and len(kept) < rows * cols // 3
    assert not inked <= set(rt.tower_keep(vi, 0.25)[0].tolist())  # unguided cuts it


def _sign_at_dusk(rows=30, cols=36, unit=28):
    """A small sign on a smooth dark sky crossed by a few dark struts, one unit per `unit` pixels:
    (pixels, the sign's box, its text)."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    from cascade.eval.fonts import load_font

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0 : rows * unit, 0 : cols * unit] / (rows * unit)
    sky = np.stack([40 + 30 * yy, 50 + 30 * yy, 90 + 33 * xx], -1) + rng.normal(
        0, 2, (*yy.shape, 3)
    )
    im = PILImage.fromarray(np.clip(sky, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(im)
    for _ in range(12):
        x = int(rng.integers(0, cols * unit))
        draw.line(
            (x, rows * unit, x + int(rng.integers(-80, 80)), int(rng.integers(0, rows * unit))),
            fill=(20, 20, 30),
            width=3,
        )
    text, font = "GATE 7B", load_font("DejaVuSans-Bold.ttf", 20)
    x0, y0, x1, y1 = draw.textbbox((390, 320), text, font=font)
    box = (x0 - 6.0, y0 - 5.0, x1 + 6.0, y1 + 5.0)
    draw.rectangle(box, fill="white", outline="black", width=2)
    draw.text((390, 320), text, font=font, fill="black")
    return np.asarray(im), box, text


def test_a_sign_kept_with_its_surroundings_is_read_on_the_kept_pixels():
    # what a reader of the kept pixels sees (dropped units blank white): a field of isolated
    # kept units reads as text to the detector and hides the sign from it; the sign inside one
    # solid kept region is read
    from cascade.stages.ocr import Ocr
    from cascade.vlm.reduction.tower import _best_per_cell, _cells, _variance

    rows, cols, unit = 30, 36, 28
    px, box, text = _sign_at_dusk(rows, cols, unit)
    units = torch.from_numpy(
        px.reshape(rows, unit, cols, unit, 3)
        .transpose(0, 2, 1, 3, 4)
        .reshape(rows * cols, -1)
        .copy()
    )
    grid, size = (1, rows, cols), (cols * unit, rows * unit)
    kept = tower_select(units, grid, 0.25, KeepRegions(size, (box,), lead=1))

    def read(idx):
        out = np.full_like(px, 255)
        for i in idx.tolist():
            r, c = divmod(i, cols)
            out[r * unit : (r + 1) * unit, c * unit : (c + 1) * unit] = px[
                r * unit : (r + 1) * unit, c * unit : (c + 1) * unit
            ]
        return " ".join(ln.text for ln in Ocr(name="ocr")(images=[Image(out)]).lines)

    assert text in read(kept)
    # the same budget spent as the sign with its margin and one scattered unit per other cell
    sign = evidence_units(KeepRegions(size, (box,)), grid)[0][0]
    cell, budget = _cells(grid, 0.25, "cpu")
    mask = torch.zeros(rows * cols, dtype=torch.bool)
    mask[sign] = True
    covered = torch.zeros(budget, dtype=torch.bool)
    covered[cell[mask]] = True
    score = _variance(units)
    spread = torch.nonzero(
        _best_per_cell(score.masked_fill(mask, float("-inf")), cell) & ~covered[cell]
    )
    spread = spread.reshape(-1)[torch.argsort(-score[spread.reshape(-1)], stable=True)]
    mask[spread[: budget - int(mask.sum())]] = True
    assert kept.numel() == budget == int(mask.sum())
    assert text not in read(torch.nonzero(mask).reshape(-1))
