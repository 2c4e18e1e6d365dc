"""Tile selection: relevant tiles first, within the visual-token budget, in source order.

Each tile is priced by the declared model's family (the tiny random-weight Qwen2-VL: its config
and processor, no weights), i.e. exactly the visual tokens the VLM will spend on it."""
import numpy as np

from cascade import Box, Detection, Image, OcrLine
from cascade.models import Models
from cascade.registry import get_stage_class
from cascade.vlm import build_tiny_vlm

FULL = Image(np.zeros((448, 1344, 3), np.uint8), source="wide.png")
TILES = [FULL.crop(Box(x, 0, x + 448, 448)) for x in (0, 448, 896)]
MODELS = Models({"vlm": {"id": str(build_tiny_vlm(size="test"))}})
PER_TILE = MODELS["vlm"].family.visual_tokens(448, 448)


def select(**params):
    return get_stage_class("select_tiles")(params, models=MODELS)


def test_tile_cost_is_what_the_declared_model_spends():
    small = Models({"vlm": {"id": MODELS["vlm"].spec.id, "max_pixels": 28 * 28 * 16}})
    out = get_stage_class("select_tiles")({"max_visual_tokens": 10_000}, models=small).run(
        tiles=TILES, question="anything")
    assert PER_TILE == 64 and out.visual_tokens == 3 * 16  # the model's 16-token cap per tile


def test_tile_holding_the_text_wins_under_a_one_tile_budget():
    lines = [OcrLine("STOP", 0.99, Box(1000, 100, 1100, 150))]
    out = select(max_visual_tokens=PER_TILE).run(tiles=TILES, question="What does the sign say?",
                                                  ocr_lines=lines)
    assert [t.box for t in out.tiles] == [TILES[2].box]
    assert out.visual_tokens == PER_TILE


def test_question_named_detections_and_budget_order():
    dets = [Detection("bus", 0.9, Box(10, 10, 400, 400)), Detection("dog", 0.9, Box(500, 10, 600, 80))]
    out = select(max_visual_tokens=2 * PER_TILE).run(
        tiles=TILES, question="what colour is the bus?", detections=dets,
        retrieval_scores=[0.0, 0.0, 0.5])
    assert [t.box.x0 for t in out.tiles] == [0, 896]  # bus tile + best retrieval, source order
    assert out.scores[0] == 1.0


def test_budget_is_a_ceiling_when_something_is_relevant():
    lines = [OcrLine("STOP", 0.99, Box(1000, 100, 1100, 150))]
    out = select(max_visual_tokens=3 * PER_TILE).run(tiles=TILES, question="read the sign", ocr_lines=lines)
    assert [t.box for t in out.tiles] == [TILES[2].box]
    filled = select(max_visual_tokens=3 * PER_TILE, only_relevant=False).run(
        tiles=TILES, question="read the sign", ocr_lines=lines)
    assert len(filled.tiles) == 3


def test_other_frames_do_not_count():
    lines = [OcrLine("STOP", 0.99, Box(1000, 100, 1100, 150), media_index=1)]
    out = select(max_visual_tokens=PER_TILE).run(tiles=TILES, question="read the sign", ocr_lines=lines)
    assert out.tiles[0].box == TILES[0].box and out.scores == [0.0]
