"""`text_embed` with a video index: the frames' text is embedded once and read back from the
video's index by later questions (a new process, or after every cache was emptied)."""

from __future__ import annotations

import numpy as np

from cascade.artifacts import Box, Frame, OcrLine
from cascade.cache import clear_all_caches
from cascade.trace import StageRecord, stage_scope


def _frames() -> list[Frame]:
    rng = np.random.default_rng(1)
    return [
        Frame(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8), timestamp=float(i), index=i)
        for i in range(3)
    ]


def test_frame_texts_are_embedded_once_then_read_from_the_index(stage, tmp_path):
    video = tmp_path / "clip.mp4"  # the index folder sits beside it; the file itself is not read
    frames = _frames()
    lines = [
        OcrLine("EXIT 3", 0.9, Box(2, 2, 60, 20), timestamp=0.0, media_index=0),
        OcrLine("GATE B7", 0.9, Box(2, 2, 60, 20), timestamp=2.0, media_index=0),
    ]
    embed = stage("text_embed", video_index=True)

    def ask(question: str):
        rec = StageRecord("text", "text_embed")
        with stage_scope(rec):
            out = embed(images=frames, ocr_lines=lines, text=question, video=video)
        return out.embeddings, rec.counters

    first, counters = ask("What does the sign say?")
    assert counters["text_embedded"] == 2 + 1  # the two frames' texts, then the question
    assert list((tmp_path / "clip.mp4.cascade-index").glob("texts-*.npy"))
    clear_all_caches()  # as a new process: only the files are left
    again, counters = ask("Which gate?")
    assert counters["saved_texts_loaded"] == 2 and counters["text_embedded"] == 1
    np.testing.assert_array_equal(first.vectors, again.vectors)
    assert not np.any(first.vectors[1])  # the frame without text: a zero vector
