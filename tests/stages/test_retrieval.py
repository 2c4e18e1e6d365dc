"""Retrieval: FAISS flat/HNSW equal brute force, MMR and time coverage, CLIP mechanics (random
weights: shapes, caching, index save/load), and text-side retrieval finding the sign frames."""

from __future__ import annotations

import numpy as np
import pytest

from cascade import Pipeline
from cascade.evidence.understanding import understand
from cascade.stages._retrieval import Embeddings, VectorIndex, mmr_select, normalize

from .conftest import yolo_onnx_path

QUESTION = "What are the opening hours on the sign?"


def brute_topk(vectors, queries, k):
    scores = queries @ vectors.T
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, ids, 1), ids


@pytest.mark.parametrize("kind,n", [("flat", 1000), ("hnsw", 3000)])
def test_faiss_equals_brute_force(kind, n):
    rng = np.random.default_rng(0)
    vectors, queries = normalize(rng.normal(size=(n, 64))), normalize(rng.normal(size=(5, 64)))
    idx = VectorIndex.build(vectors, kind, ef_search=512, device="cpu")
    assert (idx.kind, idx.backend) == (kind, "faiss-cpu")
    scores, ids = idx.search(queries, 10)
    ref_scores, ref_ids = brute_topk(vectors, queries, 10)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-5)


def test_auto_switches_to_hnsw_above_threshold():
    v = normalize(np.random.default_rng(1).normal(size=(300, 16)))
    assert VectorIndex.build(v, "auto", hnsw_threshold=200, device="cpu").kind == "hnsw"
    assert VectorIndex.build(v, "auto", hnsw_threshold=500, device="cpu").kind == "flat"


def test_mmr_and_temporal_coverage():
    v = normalize(np.array([[1, 0], [0.99, 0.14], [0.7, 0.7], [0, 1]], np.float32))
    rel = np.array([0.9, 0.89, 0.5, 0.1])
    ids = np.arange(4)
    assert [i for i, _ in mmr_select(ids, rel, v, 2, lam=1.0)] == [0, 1]
    assert [i for i, _ in mmr_select(ids, rel, v, 2, lam=0.5)] == [0, 3]  # 1 is a near-duplicate
    times = [0.0, 0.5, 3.0, 10.0]
    assert [i for i, _ in mmr_select(ids, rel, v, 2, lam=1.0, times=times, min_gap=1.0)] == [0, 2]


CLIP_YAML = """
name: clip_only
index: %s
inputs: {video: video, question: str}
stages:
  frames: {type: video_frames, params: {mode: fps, fps: 2, size: 224}, inputs: {video: $video}}
  clip: {type: clip_embed, params: {pretrained: null},
         inputs: {images: frames.frames, text: $question, video: frames.video}}
  pick: {type: retrieve, params: {top_k: 3, mmr_lambda: 0.5, min_gap_s: 1.0},
         inputs: {embeddings: clip.embeddings, video: frames.video}}
outputs: {frames: pick.images, scores: pick.scores, emb: clip.embeddings}
"""


@pytest.mark.slow
def test_clip_random_weights_shapes_cache_and_retrieval(sign_video):
    """Random-init ViT-B-32: only mechanics are tested (no CLIP weights can be downloaded here)."""
    first = Pipeline.from_yaml(CLIP_YAML % "false").run(video=sign_video.path, question="a cat")
    emb = first["emb"]
    assert emb.vectors.shape == (16, 512) and emb.query.shape == (512,)
    np.testing.assert_allclose(np.linalg.norm(emb.vectors, axis=1), 1, rtol=1e-5)
    assert len(first["frames"]) == 3 and len(first["scores"]) == 3
    times = sorted(f.timestamp for f in first["frames"])
    assert min(np.diff(times)) >= 1.0
    # a second question on the same video (a fresh pipeline) re-embeds nothing
    second = Pipeline.from_yaml(CLIP_YAML % "false").run(video=sign_video.path, question="a bus")
    counters = second.trace["clip"].counters
    assert counters["embed_images"] == 0 and counters["embed_cache_hits"] == 16
    assert first.trace["clip"].counters["embed_images"] > 0


@pytest.mark.slow
def test_clip_batching_matches_single_images(stage, sign_video):
    from cascade.media import VideoSource

    frames = VideoSource(sign_video.path).sample("keyframes", size=160)[:5]
    clip = stage("clip_embed", pretrained=None, batch_size=2)
    clip.ensure_setup()
    clip.shared.extra["embed_cache"].clear()
    batched, _, computed = clip.embed_images(frames)
    assert computed == 5
    clip.shared.extra["embed_cache"].clear()
    one_by_one = np.concatenate([clip.embed_images([f])[0] for f in frames])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-4)


@pytest.mark.slow
def test_index_saved_next_to_video_and_reloaded(sign_video, tmp_path):
    import shutil

    from cascade.stages import retrieve as retrieve_mod

    video = tmp_path / "copy.mp4"
    shutil.copy(sign_video.path, video)
    first = Pipeline.from_yaml(CLIP_YAML % "true").run(video=video, question="a cat")
    folder = tmp_path / "copy.mp4.cascade-index"
    assert (folder / "index.faiss").is_file() and (folder / "meta.json").is_file()
    assert first.trace["pick"].counters["index_saved"] == 1
    # a new process: no in-memory index, no embedding cache -> both come from the folder
    retrieve_mod._INDEXES.clear()
    pipe = Pipeline.from_yaml(CLIP_YAML % "true")
    pipe.setup()
    pipe.stages["clip"].shared.extra["embed_cache"].clear()
    again = pipe.run(video=video, question="a cat")
    assert again.trace["pick"].counters["index_loaded"] == 1
    assert again.trace["clip"].counters["embed_images"] == 0
    assert [f.timestamp for f in again["frames"]] == [f.timestamp for f in first["frames"]]


@pytest.mark.slow
def test_region_retrieval_over_tiles(stage, bus_path):
    from cascade.artifacts import Image

    tiles = stage("tiles", tile_size=224, max_tiles=6)(images=Image.open(bus_path)).tiles
    emb = stage("clip_embed", pretrained=None)(images=tiles, text="the bus door").embeddings
    out = stage("retrieve", top_k=2, order="time")(embeddings=emb)
    assert len(out.images) == 2 and all(im in tiles for im in out.images)
    assert out.evidence.scores == tuple(out.scores)


@pytest.mark.slow
def test_reading_questions_rank_by_text_salience_not_by_meaning(stage, sign_video):
    frames = stage("video_frames", mode="fps", fps=2, size=448)(video=sign_video.path).frames
    lines = stage("ocr")(images=frames).lines
    dets = stage("detect", weights=yolo_onnx_path())(images=frames).detections
    text = stage("text_embed")(
        images=frames, ocr_lines=lines, detections=dets, text=QUESTION
    ).embeddings
    clip = stage("clip_embed", pretrained=None)(images=frames, text=QUESTION).embeddings
    out = stage("retrieve", top_k=2)(
        embeddings=clip,
        text_embeddings=text,
        query=understand(QUESTION),
        ocr_lines=lines,
        detections=dets,
    )
    sign_times = set(sign_video.sign_times)
    # the best pick shows the sign; the second covers other text (none here), not the same sign
    assert out.images[0].timestamp in sign_times
    (route,) = out.routes
    assert route.branch == "read" and "text salience won" in route.reason
    assert sign_video.sign_text in route.reason and route.scores["text"] == 1.0
    assert out.ranked[0] is out.images[0] and len(out.ranked) == len(frames)
    # a scene question ranks by CLIP / the semantic side; the route says which signal won
    scene = stage("retrieve", top_k=2, clip_weight=0.0)(
        embeddings=clip, text_embeddings=text, query=understand("What animal is in the video?")
    )
    assert scene.routes[0].branch == "scene" and "semantic similarity won" in scene.routes[0].reason


def test_reading_picks_cover_different_texts():
    """A caption shown all along must not crowd out the one frame with the sign."""
    from cascade.artifacts import Box, Frame, OcrLine

    frames = [Frame(np.zeros((360, 640, 3), np.uint8), timestamp=float(t)) for t in range(4)]
    lines = [OcrLine("CHANNEL 5", 0.99, Box(10, 10, 120, 30), timestamp=float(t)) for t in range(4)]
    lines += [OcrLine("EXIT 7", 0.9, Box(300, 200, 360, 215), timestamp=3.0)]
    out = stage_instance("retrieve", top_k=2)(
        images=frames, query=understand("What does the sign say?"), ocr_lines=lines
    )
    assert [f.timestamp for f in out.images][0] == 3.0
    cover = stage_instance("retrieve", top_k=3)(
        images=frames, query=understand("What does the sign say?"), ocr_lines=lines[:4]
    )
    assert len(cover.images) == 3  # no text left to cover: the rest follow the fused order


def stage_instance(name, **params):
    from cascade.registry import get_stage_class

    return get_stage_class(name)(params)


def test_retrieve_errors(stage):
    from cascade.artifacts import Image
    from cascade.errors import InputError

    im = Image(np.zeros((4, 4, 3), np.uint8))
    emb = Embeddings(np.ones((1, 2), np.float32), (im,), "m")
    with pytest.raises(InputError, match="needs candidates: images, embeddings, text_embeddings"):
        stage("retrieve")()
    with pytest.raises(InputError, match="no query vector"):
        stage("retrieve")(embeddings=emb)
    with pytest.raises(ValueError, match="1 items but vectors"):
        Embeddings(np.ones((2, 2), np.float32), (im,), "m")
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        stage("retrieve", mmr_lambda=1.5)
    with pytest.raises(ValidationError):
        stage("retrieve", index="ivf")
    with pytest.raises(ValidationError, match="unknown signal"):
        stage("retrieve", weights={"read": {"meaning": 1.0}})
    with pytest.raises(ValidationError, match="unknown intent"):
        stage("retrieve", weights={"reading": {"text": 1.0}})
