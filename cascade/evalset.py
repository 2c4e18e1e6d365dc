"""The built-in evaluation set, in two splits generated apart: **dev** (tune on it) and **test**
(report it). The splits share no seed, footage, photo, font, sign word or document layout.

- `video` / read: real footage (gradio's clips, pans over real photos) at 1280x720 and 1920x1080
  with a small sign (12-24 px text) shown for ~2 s at a random place, often across a tile
  boundary, plus one or more distractor texts (another sign at another time, a caption drawn on
  the footage, the footage's own text).
- `images` / read: sets of 5-8 photos at 800-1600 px with a small sign in one and a distractor
  text in another.
- `document` / doc: receipts, invoices and forms with key-value questions (total, date, number)
  next to distractor amounts (subtotal, tax, line items).
- a few count and scene questions, so the resolution router has something to decline.

Answers are known because we put them there. Everything is generated offline from what installs
with the package, into a cache folder, and reused when already there.
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from .media_gen import Overlay, make_overlay_video, photo, render_caption, render_document, render_sign

Kind = Literal["read", "count", "scene", "doc"]
Split = Literal["dev", "test"]
SPLITS: tuple[str, ...] = ("dev", "test")
FORMAT = 2  # bump when the generator changes: cached sets of another format are rebuilt


@dataclass(frozen=True)
class EvalItem:
    """One question about one piece of media, with its gold answer and where the answer is."""

    id: str
    split: str
    media_kind: Literal["video", "images", "document"]
    media: tuple[str, ...]  # one video path, or image paths
    question: str
    answer: str
    kind: Kind
    text_size: int | None = None  # font size of the text to read, in source pixels
    frames: tuple[int, ...] = ()  # images: indices of the images that hold the answer
    times: tuple[float, ...] = ()  # video: seconds during which the answer is visible

    def media_arg(self) -> str | list[str]:
        return self.media[0] if self.media_kind == "video" else list(self.media)


@dataclass(frozen=True)
class SplitSpec:
    """What one split is made of; the two splits overlap in none of these."""

    seed: int
    footage: tuple[tuple[str, int, int], ...]  # (footage source, width, height) for sign videos
    sign_fonts: tuple[str, ...]
    caption_fonts: tuple[str, ...]
    doc_fonts: tuple[str, ...]
    photos: tuple[str, ...]  # for image sets
    words: tuple[str, ...]  # first word of sign texts
    distractor_words: tuple[str, ...]
    doc_layouts: tuple[str, ...]
    count: tuple[str, str, str]  # (footage, question, answer)
    scenes: tuple[tuple[str, str, str], ...]


SPECS: dict[str, SplitSpec] = {
    "dev": SplitSpec(
        seed=1013,
        footage=(("pan:astronaut,coffee", 1280, 720), ("clip:b.mp4", 1280, 720),
                 ("pan:rocket,stereo_motorcycle", 1920, 1080), ("pan:chelsea,coffee", 1920, 1080)),
        sign_fonts=("DejaVuSans-Bold.ttf", "DejaVuSerif-Bold.ttf"),
        caption_fonts=("DejaVuSans.ttf",), doc_fonts=("DejaVuSans.ttf", "DejaVuSerif.ttf"),
        photos=("astronaut", "coffee", "rocket", "chelsea", "stereo_motorcycle",
                "immunohistochemistry", "hubble_deep_field", "retina"),
        words=("DOCK", "GATE", "BAY", "LEVEL", "ZONE", "ROOM"),
        distractor_words=("CITYCAM", "NEWS 24", "LIVE", "REC"),
        doc_layouts=("receipt", "form"),
        count=("still:zidane", "How many people are in the video?", "2"),
        scenes=(("pan:chelsea", "What animal appears in the video?", "cat"),
                ("pan:rocket", "What kind of vehicle is shown?", "rocket"))),
    "test": SplitSpec(
        seed=2029,
        footage=(("clip:a.mp4", 1920, 1080), ("clip:world.mp4", 1280, 720),
                 ("pan:gradio:tower.jpg,zidane", 1280, 720), ("pan:bus,gradio:groot.jpeg", 1920, 1080)),
        sign_fonts=("DejaVuSansMono-Bold.ttf", "DejaVuSans.ttf", "DejaVuSerif.ttf"),
        caption_fonts=("DejaVuSansMono.ttf",), doc_fonts=("DejaVuSansMono.ttf", "DejaVuSans-Bold.ttf"),
        photos=("gradio:tower.jpg", "gradio:groot.jpeg", "gradio:cheetah.jpg", "gradio:lion.jpg",
                "bus", "zidane", "gradio:cheetah1.jpg"),
        words=("PIER", "EXIT", "PLATFORM", "LOT", "WING", "TRACK"),
        distractor_words=("TRAFFIC CAM", "CH 5", "REPLAY", "SPORT"),
        doc_layouts=("invoice", "register"),
        count=("still:bus", "How many people are in the video?", "4"),
        scenes=(("pan:gradio:cheetah.jpg", "What animal appears in the video?", "cheetah"),
                ("pan:gradio:tower.jpg", "What kind of building is shown?", "tower"))),
}

READ_QUESTIONS = ("What is written on the small sign?", "What does the sign say?",
                  "Read the text on the sign.", "What text is shown on the small sign?")
IMAGE_QUESTIONS = ("What does the small sign in these pictures say?",
                   "What is written on the sign in one of the photos?",
                   "Read the small sign in the images.")
SIZES = {"full": {"video": 10, "images": 8, "docs": 4}, "quick": {"video": 3, "images": 3, "docs": 1}}


def _sign_text(rng: random.Random, words: tuple[str, ...]) -> str:
    tail = f"{rng.randint(2, 89)}{rng.choice('ABCDNRSW')}" if rng.random() < 0.5 else str(rng.randint(2, 99))
    return f"{rng.choice(words)} {tail}"


def _place(rng: random.Random, w: int, h: int, bw: int, bh: int) -> tuple[int, int]:
    """A random spot; half the time straddling a vertical or horizontal grid line (the 224/448-px
    tile boundaries a fixed grid would cut through)."""
    if rng.random() < 0.5:
        step = rng.choice((224, 448))
        lines = [k * step for k in range(1, w // step)] or [w // 2]
        x = rng.choice(lines) - bw // 2 + rng.randint(-bw // 4, bw // 4)
    else:
        x = rng.randint(8, w - bw - 8)
    return max(4, min(w - bw - 4, x)), rng.randint(8, h - bh - 8)


def _sign(rng: random.Random, spec: SplitSpec, text: str, size: int):
    plate, ink = rng.choice((((255, 255, 255), (0, 0, 0)), ((30, 110, 60), (255, 255, 255)),
                             ((20, 60, 150), (255, 255, 255)), ((250, 210, 40), (0, 0, 0))))
    return render_sign(text, rng.choice(spec.sign_fonts), size, plate, ink)


def _videos(folder: Path, spec: SplitSpec, split: str, rng: random.Random, n: int) -> list[EvalItem]:
    items = []
    for i in range(n):
        source, width, height = spec.footage[i % len(spec.footage)]
        seconds, fps = 10.0, 10.0
        size = rng.randint(12, 24)
        text = _sign_text(rng, spec.words)
        sign = _sign(rng, spec, text, size)
        t0 = round(rng.uniform(0.5, seconds - 3.0), 1)
        shown = (t0, t0 + rng.choice((1.5, 2.0, 2.5)))
        x, y = _place(rng, width, height, sign.shape[1], sign.shape[0])
        overlays = [Overlay(sign, x, y, *shown)]
        # distractors: a caption on the footage for the whole clip, and another sign elsewhere
        cap, alpha = render_caption(rng.choice(spec.distractor_words), rng.choice(spec.caption_fonts),
                                    rng.randint(14, 28))
        corner = rng.choice(((16, 16), (width - cap.shape[1] - 16, 16),
                             (16, height - cap.shape[0] - 16)))
        overlays.append(Overlay(cap, *corner, alpha=alpha))
        if rng.random() < 0.6:
            other = _sign(rng, spec, _sign_text(rng, spec.words), rng.randint(14, 30))
            d0 = (t0 + 4.0) % (seconds - 2.0)
            ox, oy = _place(rng, width, height, other.shape[1], other.shape[0])
            overlays.append(Overlay(other, ox, oy, d0, d0 + 2.0))
        path = make_overlay_video(folder / f"video_{i}.mp4", source, width, height, seconds,
                                  overlays, fps, start=rng.uniform(0, 2))
        times = tuple(round(shown[0] + k / fps, 3) for k in range(int((shown[1] - shown[0]) * fps)))
        items.append(EvalItem(f"{split}/video_read_{i}", split, "video", (str(path),),
                              rng.choice(READ_QUESTIONS), text, "read", size, times=times))
    for j, (source, question, answer) in enumerate((spec.count, *spec.scenes)):
        path = make_overlay_video(folder / f"video_plain_{j}.mp4", source, 1280, 720, 6.0, [], 5.0)
        kind = "count" if j == 0 else "scene"
        items.append(EvalItem(f"{split}/video_{kind}_{j}", split, "video", (str(path),), question,
                              answer, kind, times=(3.0,)))
    return items


def _image_sets(folder: Path, spec: SplitSpec, split: str, rng: random.Random,
                n: int) -> list[EvalItem]:
    import numpy as np
    from PIL import Image as PILImage

    items = []
    for i in range(n):
        names = rng.sample(spec.photos, k=min(len(spec.photos), rng.randint(5, 8)))
        target, distractor = rng.sample(range(len(names)), 2)
        size, text = rng.randint(12, 24), _sign_text(rng, spec.words)
        paths = []
        for k, name in enumerate(names):
            pic = PILImage.fromarray(photo(name))
            longest = rng.randint(800, 1600)
            f = longest / max(pic.size)
            arr = np.array(pic.resize((round(pic.width * f), round(pic.height * f)), PILImage.BICUBIC))
            if k in (target, distractor):
                if k == target:
                    ov = _sign(rng, spec, text, size)
                    alpha = None
                else:
                    ov, alpha = render_caption(rng.choice(spec.distractor_words),
                                               rng.choice(spec.caption_fonts), rng.randint(16, 30))
                x, y = _place(rng, arr.shape[1], arr.shape[0], ov.shape[1], ov.shape[0])
                Overlay(ov, x, y, alpha=alpha).paste(arr)
            path = folder / f"set_{i}_{k}.png"
            PILImage.fromarray(arr).save(path)
            paths.append(str(path))
        items.append(EvalItem(f"{split}/images_read_{i}", split, "images", tuple(paths),
                              rng.choice(IMAGE_QUESTIONS), text, "read", size, frames=(target,)))
    scene_paths = []
    for k, name in enumerate(spec.photos[:5]):
        path = folder / f"scene_{k}.png"
        PILImage.fromarray(photo(name)).save(path)
        scene_paths.append(str(path))
    items.append(EvalItem(f"{split}/images_scene_0", split, "images", tuple(scene_paths),
                          "Which picture shows the most colourful scene?", "", "scene"))
    return items


# -- documents --------------------------------------------------------------------------------

def _money(rng: random.Random, lo: float, hi: float) -> float:
    return round(rng.uniform(lo, hi), 2)


def _doc_rows(layout: str, rng: random.Random) -> tuple[list, dict[str, str], str]:
    """(rows for render_document, {key: gold value}, document noun) for one layout."""
    items = [(rng.choice(("Coffee", "Bagel", "Muffin", "Tea", "Salad", "Soup", "Juice", "Wrap")),
              _money(rng, 1.5, 14)) for _ in range(rng.randint(3, 6))]
    sub = round(sum(p for _, p in items), 2)
    tax = round(sub * rng.choice((0.05, 0.08, 0.1, 0.2)), 2)
    total = f"{sub + tax:.2f}"
    y, m, d = rng.randint(2019, 2025), rng.randint(1, 12), rng.randint(1, 28)
    num = f"{rng.randint(10000, 99999)}"
    if layout == "receipt":  # dev: keys left, values right-aligned on the same row
        date = f"{y}-{m:02d}-{d:02d}"
        rows = [[("GREEN LEAF DELI", 0.5, "center")], [("DATE", 0, "left"), (date, 1, "right")],
                [("RECEIPT NO", 0, "left"), (num, 1, "right")], [("-", 0, "left")]]
        rows += [[(n.upper(), 0, "left"), (f"{p:.2f}", 1, "right")] for n, p in items]
        rows += [[("-", 0, "left")], [("SUBTOTAL", 0, "left"), (f"{sub:.2f}", 1, "right")],
                 [("TAX", 0, "left"), (f"{tax:.2f}", 1, "right")],
                 [("TOTAL", 0, "left"), (total, 1, "right")]]
        return rows, {"total": total, "date": date, "number": num}, "receipt"
    if layout == "form":  # dev: 'Key: value' in one span
        date = f"{d:02d}/{m:02d}/{y}"
        rows = [[("EXPENSE CLAIM FORM", 0.5, "center")], [],
                [(f"Claim number: {num}", 0, "left")], [(f"Date: {date}", 0, "left")],
                [(f"Employee: {rng.choice(('A. Novak', 'J. Smith', 'L. Moreau'))}", 0, "left")], []]
        rows += [[(f"{n}: {p:.2f}", 0, "left")] for n, p in items]
        rows += [[(f"Subtotal: {sub:.2f}", 0, "left")], [(f"Tax: {tax:.2f}", 0, "left")],
                 [(f"Total: {total}", 0, "left")]]
        return rows, {"total": total, "date": date, "number": num}, "claim"
    months = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    if layout == "invoice":  # test: header keys with the value on the next row; $ amounts
        date, inv = f"{d} {months[m - 1]} {y}", f"INV-{num}"
        rows = [[("ACME SUPPLY CO.", 0, "left"), ("INVOICE", 1, "right")], [],
                [("Invoice Number", 0, "left"), ("Invoice Date", 0.55, "left")],
                [(inv, 0, "left"), (date, 0.55, "left")], [],
                [("Item", 0, "left"), ("Qty", 0.55, "left"), ("Amount", 1, "right")], [("-", 0, "left")]]
        rows += [[(n, 0, "left"), (str(rng.randint(1, 4)), 0.55, "left"), (f"${p:.2f}", 1, "right")]
                 for n, p in items]
        rows += [[("-", 0, "left")], [("Sub-total", 0.55, "left"), (f"${sub:.2f}", 1, "right")],
                 [("Sales tax", 0.55, "left"), (f"${tax:.2f}", 1, "right")],
                 [("Total due", 0.55, "left"), (f"${total}", 1, "right")]]
        return rows, {"total": total, "date": date, "number": inv}, "invoice"
    # register (test): a till slip with '#' numbers, keys in mixed case, amounts after a colon
    date = f"{m:02d}/{d:02d}/{y}"
    rows = [[("Harbor Market", 0.5, "center")], [(f"Order # {num}", 0, "left"), (date, 1, "right")],
            [("-", 0, "left")]]
    rows += [[(f"{n} x{rng.randint(1, 3)}", 0, "left"), (f"{p:.2f}", 1, "right")] for n, p in items]
    rows += [[("-", 0, "left")], [(f"Subtotal: {sub:.2f}", 1, "right")],
             [(f"Tax: {tax:.2f}", 1, "right")], [(f"Total: {total}", 1, "right")]]
    return rows, {"total": total, "date": date, "number": num}, "order"


DOC_QUESTIONS = {"total": "What is the total amount?", "date": "What is the date on the {noun}?",
                 "number": "What is the {noun} number?"}


def _documents(folder: Path, spec: SplitSpec, split: str, rng: random.Random,
               n: int) -> list[EvalItem]:
    from PIL import Image as PILImage

    items = []
    for i in range(n):
        layout = spec.doc_layouts[i % len(spec.doc_layouts)]
        rows, gold, noun = _doc_rows(layout, rng)
        size = rng.randint(16, 26)
        width = rng.randint(28, 40) * size
        page = render_document(rows, rng.choice(spec.doc_fonts), size, width)
        path = folder / f"doc_{i}.png"
        PILImage.fromarray(page).save(path)
        for key, value in gold.items():
            items.append(EvalItem(f"{split}/doc_{key}_{i}", split, "document", (str(path),),
                                  DOC_QUESTIONS[key].format(noun=noun), value, "doc", size,
                                  frames=(0,)))
    return items


def build_eval_set(folder: str | Path, split: str = "test", quick: bool = False) -> list[EvalItem]:
    """Write (or reuse) one split's media under `folder/<split>[-quick]`; return its questions.
    `quick` makes a smaller set (a few questions per kind) for a run of a few minutes."""
    if split not in SPECS:
        raise ValueError(f"unknown split '{split}': expected one of {', '.join(SPLITS)}")
    spec, sizes = SPECS[split], SIZES["quick" if quick else "full"]
    folder = Path(folder) / f"{split}{'-quick' if quick else ''}"
    folder.mkdir(parents=True, exist_ok=True)
    index = folder / "eval_set.json"
    if index.is_file():
        saved = json.loads(index.read_text())
        if saved.get("format") == FORMAT:
            items = [EvalItem(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
                     for d in saved["items"]]
            if all(Path(m).exists() for it in items for m in it.media):
                return items
    rng = random.Random(spec.seed)
    items = (_videos(folder, spec, split, rng, sizes["video"])
             + _image_sets(folder, spec, split, rng, sizes["images"])
             + _documents(folder, spec, split, rng, sizes["docs"]))
    index.write_text(json.dumps({"format": FORMAT, "items": [asdict(it) for it in items]}, indent=1))
    return items
