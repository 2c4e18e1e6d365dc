"""A harder long_video than the dev split's: longer footage, a smaller placard, shown for 1 s.

The dev split's `long_video` genre shows a 16-px-or-larger sign (3-4.5 % of the height) for
1-2 s in 3-5 minutes of 640-960 px footage. Here, on the dev split's fonts, words and photos
(never the test split's) with a seed of its own: 5-6 minutes of 1280x720 footage at 2 fps, a
placard 2-2.5 % of the height (14-18 px), visible for 1 s (two video frames), a caption all along.
Each video is asked through the shipped `video_qa` (its `[hint]` variant, as `cascade bench`
measures recall), with the bench's judge: is the gold readable in the pixels sent? Prints one
JSON line per question (recall, visual tokens, seconds cold, routes) and the frames scanned.

    python benchmarks/long_video_hard.py /tmp/hard 2     # ~10 minutes per video on 2 busy cores
"""
from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from pathlib import Path


def build(folder: Path, n: int) -> list:
    from cascade.eval.genres.common import (Ctx, box_of, caption_overlay, place, sign, sign_text,
                                            visible_times)
    from cascade.eval.render import Overlay
    from cascade.eval.splits import spec_for
    from cascade.eval.video import make_overlay_video

    spec = dataclasses.replace(spec_for("dev"), seed=777)
    rng = random.Random("long-video-hard/777")
    ctx = Ctx(folder, spec, "dev", "long_video_hard", rng, n)
    source, width, height, fps = ("pan:astronaut,coffee,rocket,chelsea,stereo_motorcycle,retina",
                                  1280, 720, 2.0)
    items = []
    for i in range(n):
        seconds = float(rng.randint(300, 360))
        text = sign_text(rng, spec.sign_words)
        size = round(rng.uniform(0.02, 0.025) * height)
        board = sign(rng, spec.fonts.sign, text, size)
        t0 = round(rng.uniform(5.0, seconds - 10.0), 1)
        x, y = place(rng, width, height, board.shape[1], board.shape[0])
        target = Overlay(board, x, y, t0, t0 + 1.0)
        caption, caption_text = caption_overlay(ctx, width, height)
        start = rng.uniform(0, 2)  # drawn whether or not the video is cached: the same items
        path = folder / f"hard_{i}.mp4"
        if not path.exists():
            make_overlay_video(path, source, width, height, seconds, [target, caption], fps,
                               start=start, crf=23, keyframe_s=10.0)
        items.append(ctx.item(i, media_kind="video", media=(str(path),),
                              question=spec.ask("long_video", rng), answer=text, kind="read",
                              target="sign", text_size=size, box=box_of(target),
                              times=visible_times(target.t0, target.t1, fps, seconds),
                              distractors=(caption_text,)))
    return items


def main(folder: str, n: int = 2) -> None:
    from cascade.api import QA
    from cascade.eval.bench import row_for
    from cascade.eval.judge import Readers
    from cascade.eval.roles import PIPELINES
    from cascade.vlm import build_tiny_vlm

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    items = build(out, n)
    readers = Readers(model=str(build_tiny_vlm(size="test")))
    pipe, overrides = PIPELINES["video"]["video_qa[hint]"]
    qa = QA.offline(pipe, size="test", overrides=overrides).setup()
    for it in items:
        t = time.perf_counter()
        answer = qa.ask(it.media_arg(), it.question)
        row = row_for(it, "video_qa[hint]", answer, time.perf_counter() - t, readers, None)
        print(json.dumps({k: row.get(k) for k in ("id", "gold", "text_size", "evidence_readable",
                                                  "visual_tokens", "seconds", "routes")}
                         | {"shown_at": it.times}, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2)
