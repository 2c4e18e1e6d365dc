"""What the genre generators share: the context they write into, sign texts and plates, where a
sign goes, sign videos and image sets with distractors."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...artifacts import Box
from ..items import EvalItem
from ..photos import photo
from ..render import Overlay, render_caption, render_sign
from ..splits import SplitSpec
from ..video import make_overlay_video

# A caption keeps this many pixels off the signs a question is about.
CLEAR = 8

PLATES = (
    ((255, 255, 255), (0, 0, 0)),
    ((30, 110, 60), (255, 255, 255)),
    ((20, 60, 150), (255, 255, 255)),
    ((250, 210, 40), (0, 0, 0)),
)
# named plate colours for questions by colour: (plate, ink)
COLOURS = {
    "red": ((200, 35, 35), (255, 255, 255)),
    "blue": ((25, 70, 170), (255, 255, 255)),
    "green": ((30, 120, 60), (255, 255, 255)),
    "yellow": ((245, 205, 40), (0, 0, 0)),
    "orange": ((240, 130, 20), (0, 0, 0)),
    "white": ((250, 250, 250), (0, 0, 0)),
}
ZH_COLOURS = {
    "red": "红色",
    "blue": "蓝色",
    "green": "绿色",
    "yellow": "黄色",
    "orange": "橙色",
    "white": "白色",
}


@dataclass
class Ctx:
    """One genre of one split being generated: where to write, what to draw from, how many."""

    folder: Path
    spec: SplitSpec
    split: str
    genre: str
    rng: random.Random
    n: int  # how many units (videos, pages, sets) to make; a unit may carry several questions

    def path(self, name: str) -> Path:
        return self.folder / name

    def item(self, index: int, **fields) -> EvalItem:
        return EvalItem(
            id=f"{self.split}/{self.genre}_{index}", split=self.split, genre=self.genre, **fields
        )


def sign_text(rng: random.Random, words: tuple[str, ...]) -> str:
    """'DOCK 35' / 'GATE 12C' / '出口 7'. Tail letters are ones OCR does not take for digits
    (no B/8, D/0, S/5): a sign the judge cannot read at full resolution measures nothing."""
    if rng.random() < 0.5:
        tail = f"{rng.randint(2, 89)}{rng.choice('ACEKNRW')}"
    else:
        tail = str(rng.randint(2, 99))
    return f"{rng.choice(words)} {tail}"


def place(rng: random.Random, w: int, h: int, bw: int, bh: int) -> tuple[int, int]:
    """A random spot; half the time straddling a vertical grid line (the 224/448-px tile
    boundaries a fixed grid would cut through)."""
    if rng.random() < 0.5:
        step = rng.choice((224, 448))
        lines = [k * step for k in range(1, w // step)] or [w // 2]
        x = rng.choice(lines) - bw // 2 + rng.randint(-bw // 4, bw // 4)
    else:
        x = rng.randint(8, max(8, w - bw - 8))
    return max(4, min(w - bw - 4, x)), rng.randint(8, max(8, h - bh - 8))


def place_apart(
    rng: random.Random, w: int, h: int, boxes: list[tuple[int, int, int, int]], bw: int, bh: int
) -> tuple[int, int]:
    """A spot for a bw x bh box that overlaps none of `boxes` (x0, y0, x1, y1), with a margin."""
    for _ in range(200):
        x, y = place(rng, w, h, bw, bh)
        if all(
            x + bw + 24 < x0 or x > x1 + 24 or y + bh + 24 < y0 or y > y1 + 24
            for x0, y0, x1, y1 in boxes
        ):
            return x, y
    raise RuntimeError(f"no free place for a {bw}x{bh} box in {w}x{h}")


def sign(
    rng: random.Random,
    fonts: tuple[str, ...],
    text: str,
    size: int,
    colours: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None,
) -> np.ndarray:
    plate, ink = colours or rng.choice(PLATES)
    return render_sign(text, rng.choice(fonts), size, plate, ink)


def shade(
    rng: random.Random, colour: tuple[int, int, int], spread: int = 14
) -> tuple[int, int, int]:
    """`colour` moved a little per channel, so no split has one exact RGB per colour name."""
    r, g, b = (int(np.clip(c + rng.randint(-spread, spread), 0, 255)) for c in colour)
    return r, g, b


def caption_overlay(
    ctx: Ctx, width: int, height: int, clear_of: tuple[Overlay, ...] = ()
) -> tuple[Overlay, str]:
    """A caption on the footage for the whole clip in a corner (a channel logo, a watermark).
    It is drawn over the footage's other overlays, so it keeps `CLEAR` px off each sign in
    `clear_of` (a sign a question is about must stay readable, and not run into the caption as
    one line): the drawn corner, else the next one clear (no further draws, so every caption
    that was clear stays where it was)."""
    text = ctx.rng.choice(ctx.spec.distractor_words)
    cap, alpha = render_caption(
        text, ctx.rng.choice(ctx.spec.fonts.caption), ctx.rng.randint(14, 28)
    )
    corners = [(16, 16), (width - cap.shape[1] - 16, 16), (16, height - cap.shape[0] - 16)]
    drawn = ctx.rng.choice(corners)
    for corner in (drawn, *corners):
        caption = Overlay(cap, *corner, alpha=alpha)
        if not any(_near(caption.box, sign.box, CLEAR) for sign in clear_of):
            return caption, text
    raise RuntimeError(f"no corner of {width}x{height} is clear of {[box_of(o) for o in clear_of]}")


def _near(a: Box, b: Box, margin: float) -> bool:
    return Box(a.x0 - margin, a.y0 - margin, a.x1 + margin, a.y1 + margin).intersects(b)


def visible_times(t0: float, t1: float, fps: float, seconds: float) -> tuple[float, ...]:
    """Timestamps of the frames (at `fps`) on which an overlay shown from t0 to t1 appears."""
    return tuple(round(i / fps, 3) for i in range(int(round(seconds * fps))) if t0 <= i / fps < t1)


def box_of(ov: Overlay) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = (int(v) for v in ov.box.as_tuple())
    return x0, y0, x1, y1


def sign_video(
    ctx: Ctx,
    name: str,
    text: str,
    fonts: tuple[str, ...],
    size: int,
    footage: tuple[str, int, int],
    seconds: float = 10.0,
    fps: float = 10.0,
    shown_for: float | None = None,
    other_words: tuple[str, ...] | None = None,
    other_p: float = 0.6,
) -> dict:
    """A clip of real footage with a small sign reading `text` shown once, a caption on the
    footage all along and (with probability `other_p`) a second sign at another time.
    Returns the fields of an EvalItem about the sign (media, times, box, text_size, distractors)."""
    rng = ctx.rng
    source, width, height = footage
    board = sign(rng, fonts, text, size)
    shown_for = shown_for or rng.choice((1.5, 2.0, 2.5))
    t0 = round(rng.uniform(0.5, seconds - shown_for - 0.5), 1)
    x, y = place(rng, width, height, board.shape[1], board.shape[0])
    target = Overlay(board, x, y, t0, t0 + shown_for)
    caption, caption_text = caption_overlay(ctx, width, height, clear_of=(target,))
    overlays, distractors = [target, caption], [caption_text]
    if rng.random() < other_p:
        other_text = sign_text(rng, other_words or ctx.spec.sign_words)
        other = sign(rng, fonts, other_text, rng.randint(14, 30))
        d0 = (t0 + shown_for + 2.0) % max(seconds - 2.0, 1.0)
        ox, oy = place(rng, width, height, other.shape[1], other.shape[0])
        overlays.append(Overlay(other, ox, oy, d0, d0 + 2.0))
        distractors.append(other_text)
    path = make_overlay_video(
        ctx.path(name), source, width, height, seconds, overlays, fps, start=rng.uniform(0, 2)
    )
    return dict(
        media_kind="video",
        media=(str(path),),
        text_size=size,
        box=box_of(target),
        times=visible_times(target.t0, target.t1, fps, seconds),
        distractors=tuple(distractors),
    )


def resized_photo(rng: random.Random, name: str, lo: int = 800, hi: int = 1600) -> np.ndarray:
    """A photo with its longest side drawn from [lo, hi] px."""
    from PIL import Image as PILImage

    pic = PILImage.fromarray(photo(name))
    f = rng.randint(lo, hi) / max(pic.size)
    return np.array(
        pic.resize((round(pic.width * f), round(pic.height * f)), PILImage.Resampling.BICUBIC)
    )


def save_png(arr: np.ndarray, path: Path) -> str:
    from PIL import Image as PILImage

    PILImage.fromarray(arr).save(path, compress_level=1)  # fast; the pixels are the same
    return str(path)


def sign_image_set(ctx: Ctx, stem: str, text: str, fonts: tuple[str, ...], size: int) -> dict:
    """5-8 photos of the split; a small sign reading `text` in one, a caption in another.
    Returns the fields of an EvalItem about the sign."""
    rng = ctx.rng
    names = rng.sample(ctx.spec.photos, k=min(len(ctx.spec.photos), rng.randint(5, 8)))
    target, distractor = rng.sample(range(len(names)), 2)
    paths, box, caption_text = [], None, ""
    for k, name in enumerate(names):
        arr = resized_photo(rng, name)
        if k == target:
            ov = Overlay(sign(rng, fonts, text, size), 0, 0)
            x, y = place(rng, arr.shape[1], arr.shape[0], ov.pixels.shape[1], ov.pixels.shape[0])
            ov = Overlay(ov.pixels, x, y)
            box = box_of(ov)
            ov.paste(arr)
        elif k == distractor:
            caption_text = rng.choice(ctx.spec.distractor_words)
            pixels, alpha = render_caption(
                caption_text, rng.choice(ctx.spec.fonts.caption), rng.randint(16, 30)
            )
            x, y = place(rng, arr.shape[1], arr.shape[0], pixels.shape[1], pixels.shape[0])
            Overlay(pixels, x, y, alpha=alpha).paste(arr)
        paths.append(save_png(arr, ctx.path(f"{stem}_{k}.png")))
    return dict(
        media_kind="images",
        media=tuple(paths),
        text_size=size,
        frames=(target,),
        box=box,
        distractors=(caption_text,),
    )
