"""long_video.py's temporal pruning part: the `evs` reduction (vLLM's video_pruning_rate) checked
on a sign held 2 s within moving footage, and the baselines vLLM users deploy on long video.

- Sign check: gradio's `world.mp4` (a turning globe, 480x270) with a real photographed sign (the
  "cero emisiones" panel of ultralytics' `bus.jpg`) held on screen for 2 s. Sampled at 1 fps at
  the model's native video size (Qwen2-VL's 768*28*28 pixel cap), pruned by `evs` at rate 0.5
  with the tiny random-weight Qwen2-VL's own preprocessing (`cascade.vlm.tiny`: the real
  processor, so the real merge units), then the *kept pixels* (every dropped merge unit blacked
  out, what the tower is given) are read by RapidOCR: the sign must still be read.
- Baselines (per video length): `full_res` at Qwen2-VL's native video sampling (2 fps, at most
  768 frames: qwen-vl-utils' FPS / FPS_MAX_FRAMES), and uniform 1 fps (same frame budget) +
  `evs` at 0.5, its token count measured on the video's real frames.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

SIGN_TEXT = "cero emisiones"
SIGN_AT = (5.0, 7.0)  # seconds the sign is on screen
SIGN_VIDEO_SECONDS = 12.0
# Qwen2-VL's video sampling as qwen-vl-utils does it (what vLLM users feed the model)
NATIVE_FPS, MAX_FRAMES = 2.0, 768
VIDEO_MAX_PIXELS = 768 * 28 * 28
CONTEXT = 32768  # Qwen2-VL-2B's max_position_embeddings


def make_sign_video(path: Path) -> Path:
    """Write (once) the sign video: world.mp4 at 25 fps with the bus photo's sign panel pasted
    from SIGN_AT[0] to SIGN_AT[1]."""
    import av
    from PIL import Image as PILImage

    from cascade.eval.photos import bus_image_path, footage_path

    if path.is_file():
        return path
    with av.open(footage_path("world.mp4")) as c:
        s = c.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(s)]
        src_fps = float(s.average_rate)
    with PILImage.open(bus_image_path()) as im:
        panel = im.convert("RGB").crop((430, 400, 810, 700)).resize((253, 200), PILImage.BICUBIC)
    sign = np.asarray(panel)
    h, w = frames[0].shape[:2]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part.mp4")
    with av.open(str(tmp), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = {"g": "50", "preset": "veryfast", "crf": "20"}
        for i in range(int(SIGN_VIDEO_SECONDS * 25)):
            t = i / 25
            px = frames[min(int(t * src_fps), len(frames) - 1)].copy()
            if SIGN_AT[0] <= t < SIGN_AT[1]:
                px[40 : 40 + sign.shape[0], 200 : 200 + sign.shape[1]] = sign
            for packet in stream.encode(av.VideoFrame.from_ndarray(px, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    tmp.rename(path)
    return path


def load_tiny():
    """The tiny random-weight Qwen2-VL at native video size (its processor is Qwen2-VL's)."""
    from cascade.vlm import VLM, build_tiny_vlm

    return VLM.load(
        str(build_tiny_vlm(size="test")),
        device="cpu",
        max_pixels=VIDEO_MAX_PIXELS,
        encoder_cache_bytes=0,
    )


def evs_units(vlm, frames: list, keep_ratio: float) -> tuple[list, list]:
    """(kept merge units per frame, each frame's merged grid (t, h, w)) as `evs` chooses them;
    frame by frame (one frame's pixels in memory at a time), then the call-wide selection."""
    import torch

    from cascade.vlm.reduction.evs import change, keep_changed

    rt = vlm.backend.runtime
    scores, grids, previous = [], [], None
    with torch.inference_mode():
        for f in frames:
            (item,) = rt.preprocess([f.to_pil()])
            (units,) = rt.unit_pixels(rt.collate([item]))
            grid = item.blocks[0]
            scores.append(change(units, grid, previous))
            grids.append(grid)
            previous = (units, grid)
        if keep_ratio >= 1.0:
            return [torch.arange(s.numel()) for s in scores], grids
        return keep_changed(scores, keep_ratio), grids


def kept_pixels(vlm, frame, kept, grid) -> np.ndarray:
    """The frame at the size the tower sees it, every dropped merge unit black."""
    from PIL import Image as PILImage

    _, gh, gw = grid
    unit = 14 * vlm.backend.runtime.family.merge  # patch 14 px x merge
    px = np.asarray(frame.to_pil().resize((gw * unit, gh * unit), PILImage.BICUBIC)).copy()
    mask = np.zeros(gh * gw, dtype=bool)
    mask[kept.numpy()] = True
    for u in np.nonzero(~mask)[0]:
        r, c = divmod(int(u), gw)
        px[r * unit : (r + 1) * unit, c * unit : (c + 1) * unit] = 0
    return px


def _reads(ocr, pixels: np.ndarray) -> list[str]:
    from cascade.artifacts import Image

    return [line.text for line in ocr(images=[Image(pixels)]).lines]


def _has_sign(texts: list[str]) -> bool:
    joined = re.sub(r"\s+", "", " ".join(texts).lower())
    return all(word in joined for word in SIGN_TEXT.split())


def sign_check(vlm, folder: Path, rate: float = 0.5) -> dict:
    """The evidence check: is the sign read in the pixels `evs` keeps at `rate`?"""
    from cascade.media import VideoSource
    from cascade.registry import get_stage_class

    video = make_sign_video(folder / "sign_cero_emisiones_v1.mp4")
    frames = VideoSource(video).sample("fps", 1.0, None, None)
    ocr = get_stage_class("ocr")({})
    kept, grids = evs_units(vlm, frames, 1.0 - rate)
    full, _ = evs_units(vlm, frames, 1.0)
    on = [i for i, f in enumerate(frames) if SIGN_AT[0] <= f.timestamp < SIGN_AT[1]]
    read_kept = {i: _reads(ocr, kept_pixels(vlm, frames[i], kept[i], grids[i])) for i in on}
    read_full = {i: _reads(ocr, kept_pixels(vlm, frames[i], full[i], grids[i])) for i in on}
    total = sum(int(np.prod(g)) for g in grids)
    return {
        "video": "gradio world.mp4 (moving globe, 480x270, 12 s) with ultralytics bus.jpg's "
        f"'{SIGN_TEXT}' panel held {SIGN_AT[0]:g}-{SIGN_AT[1]:g} s",
        "frames": len(frames),
        "sampling": "1 fps, native size (max_pixels 768*28*28), Qwen2-VL's processor",
        "video_pruning_rate": rate,
        "visual_tokens_unpruned": total,
        "visual_tokens_kept": sum(int(k.numel()) for k in kept),
        "sign_frames": [round(frames[i].timestamp, 2) for i in on],
        "sign_frame_tokens_kept_share": [
            round(kept[i].numel() / int(np.prod(grids[i])), 3) for i in on
        ],
        "ocr_on_kept_pixels": {f"{frames[i].timestamp:g}s": read_kept[i] for i in on},
        "ocr_unpruned": {f"{frames[i].timestamp:g}s": read_full[i] for i in on},
        "sign_read_unpruned": any(_has_sign(t) for t in read_full.values()),
        "sign_read_in_kept_pixels": any(_has_sign(t) for t in read_kept.values()),
    }


def baselines(vlm, video: Path, minutes: float, cascade_tokens: float | None) -> dict:
    """What vLLM users run on this video, beside the cascade's per-question visual tokens."""
    from cascade.media import VideoSource

    src = VideoSource(video)
    seconds = minutes * 60
    fam = vlm.backend.runtime.family
    per_frame = fam.image_cost(src.info.width, src.info.height).tokens
    native = min(MAX_FRAMES, int(seconds * NATIVE_FPS))
    frames = src.sample("fps", 1.0, MAX_FRAMES, None)
    kept, _ = evs_units(vlm, frames, 0.5)
    pruned = sum(int(k.numel()) for k in kept)

    def row(n: int, tokens: int, how: str) -> dict:
        return {
            "sampling": how,
            "frames_sent": n,
            "frame_budget": MAX_FRAMES,
            "visual_tokens": tokens,
            "over_context": tokens > CONTEXT,
            # a sign on screen 2 s is in a sampled frame at most this often
            "two_second_sign_sampled_share": round(min(1.0, 2.0 * n / seconds), 3),
        }

    return {
        "full_res_native": row(
            native,
            native * per_frame,
            f"{NATIVE_FPS:g} fps (Qwen2-VL's video default), at most {MAX_FRAMES} frames, "
            f"native size ({per_frame} tokens a frame)",
        ),
        "uniform_1fps_evs_0.5": row(
            len(frames),
            pruned,
            f"1 fps, at most {MAX_FRAMES} frames, native size, evs at video_pruning_rate 0.5 "
            "(tokens measured on the frames)",
        ),
        "cascade_visual_tokens_per_question": cascade_tokens,
        "context_tokens": CONTEXT,
    }
