"""Does the `tower` reduction keep the answer? OCR recall of the gold text on the pixels it keeps,
guided by the cascade's evidence vs unguided vs the full image, beside its end-to-end TTFT gain.

For every question of the eval set's split (`cascade bench`'s generator, `cascade.eval`) whose
media are images (documents, receipts, code, tables, photographed pages, signs in image sets),
each image that holds the answer is:

1. read by the cascade's `ocr` stage (its default parameters, as in `doc_qa`): the evidence;
2. resized as the model's processor resizes it (`Qwen2-VL`, the tiny "bench" checkpoint's
   processor: its pixel budget) and cut into merge units by the model's own preprocessing;
3. reduced by `tower` at keep 0.5 / 0.25 / 0.1: unguided (one unit per cell, the most varied) and
   guided by the OCR lines exactly as `vlm_answer` guides it (`image_regions`: the lines of the
   question's target first; the `understand` stage's `Query`);
4. rebuilt from the kept units only and read by the judge of `cascade bench`
   (`cascade.eval.judge.Readers`: real OCR at three detector scales, letters and digits
   compared), two ways. `whole` (keys `guided@0.25`, as first recorded): the image with the
   dropped units blank white, in one OCR pass. `regions` (`guided@0.25+regions`): that, and also
   each region of kept units that touch (8-neighbours) on its own, cut to its box; the gold
   counts as read when one of them reads it, as the judge already counts it when one of its
   detector scales does (an OCR misread does not make up an exact run of the gold's letters
   and digits). Why: the model never sees dropped units (absent tokens, not blank pixels) and
   reads each kept token at its own position, so a field of scattered kept units beside a page
   is nothing it must read through; to a text detector in one pass it is, and it can hide the
   whole page's text (dev: a photographed invoice kept whole, only its last paragraph read in
   one pass, every line once the scattered units were left out). `lines`
   (`guided@0.25+lines`): that, and also the place of each OCR line of the full image (its box
   at the model's resize, one unit of margin) cut from the rebuilt image, for both modes alike.
   Why: a region can still join the page to a field of kept photo units around it (test: a
   receipt photographed on a lion's mane, 'Total: 45.40' kept whole and legible, and the
   detector in one pass over that region reads fur, not one line of the receipt). A line's place
   holds only kept pixels, blank where a unit under it was dropped, so a gold cut by a dropped
   unit is in no view whole and stays a miss; unguided `tower` reads as rarely either way. The
   full image at the same size, read whole, is the reference. Each guided row also says whether
   the OCR line holding the answer (on the full image) was kept whole (`answer_line_kept@r`).

Recall is not a timing: it is recorded as measured. The TTFT part times, on one document of the
split (the one with the most visual tokens), preprocessing + vision tower + reduction + prefill
with the method of benchmarks/vlm.py (benchmarks/vlm_timing.py: torch threads pinned, CPU time
with one thread, interleaved best-of rounds after a warm-up of every piece): unreduced, `tower`
unguided and `tower` guided at each keep ratio. The evidence's own cost (OCR) is the cascade's,
paid before the VLM whatever the reduction, and is not in the TTFT. The tiny VLM has RANDOM
weights: token counts and timings are the architecture's, answers are noise (none are used).

    python benchmarks/tower_evidence.py --quick            # 2 questions per genre, + TTFT
    python benchmarks/tower_evidence.py --no-ttft          # every question: recall only
    python benchmarks/tower_evidence.py --ttft-only        # timings (a quiet machine)
    python benchmarks/tower_evidence.py --split dev --no-ttft --ratios 0.25 --modes guided \
        --save-misses /tmp/misses                          # tune on dev: look at each miss
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from vlm_timing import CLOCK, Sweep, rounds, use_clock  # noqa: E402

from cascade.artifacts import Image  # noqa: E402
from cascade.eval.build import build_eval_set  # noqa: E402
from cascade.eval.judge import Readers, normalize, sent_size  # noqa: E402
from cascade.evidence.understanding import understand  # noqa: E402
from cascade.provenance import write_results  # noqa: E402
from cascade.registry import get_stage_class  # noqa: E402
from cascade.stages._tower_guide import image_regions  # noqa: E402
from cascade.vlm import VLM, ReductionConfig, build_tiny_vlm, default_tiny_dir  # noqa: E402
from cascade.vlm.reduction import evidence_units  # noqa: E402

# Genres whose questions read text off still images (documents and image sets); the video genres
# reach the VLM as frames through the same path but their recall is measured by `cascade bench`.
IMAGE_GENRES = (
    "receipt",
    "zh_receipt",
    "heading",
    "table",
    "code",
    "paragraph",
    "ids",
    "photo_doc",
    "image_sign",
    "zh_sign",
    "colour",
    "zh_question",
)
RATIOS = (0.5, 0.25, 0.1)
MODES = ("guided", "unguided")
READINGS = ("whole", "regions", "lines")


def variant(mode: str, ratio: float, reading: str = "whole") -> str:
    """A row's key for one reduction and one way of reading it ("guided@0.25+regions")."""
    return f"{mode}@{ratio:g}" + ("" if reading == "whole" else f"+{reading}")


def questions(media_dir: Path, split: str, per_genre: int | None) -> list:
    """The split's reading questions on still images (the first `per_genre` of each genre)."""
    items = [
        it
        for it in build_eval_set(media_dir, split, genres=IMAGE_GENRES)
        if it.media_kind != "video" and it.kind in ("read", "doc") and it.answer
    ]
    if per_genre is None:
        return items
    taken: dict[str, int] = defaultdict(int)
    out = []
    for it in items:
        if taken[it.genre] < per_genre:
            taken[it.genre] += 1
            out.append(it)
    return out


class Units:
    """One image as the model sees it: resized pixels, its merge-unit grid and the normalized
    units the `tower` selection scores (the runtime's own preprocessing)."""

    def __init__(self, vlm: VLM, image: Image):
        rt = vlm.backend.runtime
        self.runtime, self.image = rt, image
        w, h = sent_size(vlm.family, image)
        self.resized = image.resized(w, h)
        self.vision_inputs = rt.collate(rt.preprocess([image.to_pil()]))
        t, gh, gw = self.vision_inputs["image_grid_thw"][0].tolist()
        self.rows, self.cols = gh // rt.family.merge, gw // rt.family.merge
        self.unit = h // self.rows
        assert (self.rows * self.unit, self.cols * self.unit) == (h, w)

    def kept(self, keep_ratio: float, regions) -> torch.Tensor:
        return self.runtime.tower_keep(self.vision_inputs, keep_ratio, (regions,))[0]

    def holds_whole(self, kept: torch.Tensor, regions) -> bool | None:
        """Is every unit under each box of `regions` kept? None without regions."""
        if regions is None:
            return None
        have = set(kept.tolist())
        return all(
            set(core.tolist()) <= have
            for _, core in evidence_units(regions, (1, self.rows, self.cols))
        )

    def grid(self, kept: torch.Tensor) -> np.ndarray:
        """The merged grid, 1 where a unit is kept."""
        grid = np.zeros((self.rows, self.cols), np.uint8)
        grid.flat[kept.tolist()] = 1
        return grid

    def rebuild(self, kept: torch.Tensor) -> Image:
        """The resized image with only the kept units; the rest blank white."""
        mask = np.kron(self.grid(kept), np.ones((self.unit, self.unit), np.uint8)).astype(bool)
        px = self.resized.pixels
        return Image(np.where(mask[..., None], px, np.uint8(255)), source=self.image.source)

    def regions(self, kept: torch.Tensor, rebuilt: Image) -> list[Image]:
        """Each region of kept units that touch (8-neighbours), cut to its box from `rebuilt`."""
        import cv2  # OpenCV comes with the OCR backend

        _, _, stats, _ = cv2.connectedComponentsWithStats(self.grid(kept), connectivity=8)
        px, u = rebuilt.pixels, self.unit
        return [
            Image(np.ascontiguousarray(px[y * u : (y + h) * u, x * u : (x + w) * u]))
            for x, y, w, h, _ in stats[1:]
        ]  # label 0 is the dropped units

    def line_places(self, rebuilt: Image, lines) -> list[Image]:
        """Where each OCR line of the full image lies (its box at the model's resize, one unit of
        margin), cut from `rebuilt`: kept pixels, and blank where a unit under it was dropped."""
        sx, sy, u = (
            self.resized.width / self.image.width,
            self.resized.height / self.image.height,
            self.unit,
        )
        px = rebuilt.pixels
        out = []
        for ln in lines:
            x0, y0 = max(0, int(ln.box.x0 * sx) - u), max(0, int(ln.box.y0 * sy) - u)
            x1, y1 = (
                min(px.shape[1], int(ln.box.x1 * sx) + u),
                min(px.shape[0], int(ln.box.y1 * sy) + u),
            )
            out.append(Image(np.ascontiguousarray(px[y0:y1, x0:x1])))
        return out


def measure(
    item,
    vlm: VLM,
    readers: Readers,
    ocr,
    ratios,
    modes=MODES,
    readings=READINGS,
    misses: Path | None = None,
) -> list[dict]:
    """One row per answer image of `item`: what OCR reads on the full image and on the kept pixels.
    misses: a folder where the kept pixels of each guided miss (the full image read) are saved as
    PNG, to look at what the selection cut."""
    query = understand(item.question)
    rows = []
    for i in item.frames or (0,):
        image = Image.open(item.media[i], media_index=i)
        lines = ocr(images=[image]).lines
        regions, used = image_regions(image, query, lines)
        # the OCR lines that hold the gold answer: whether the selection keeps them whole tells a
        # cut answer from a judge that misreads kept pixels (blank units around text can throw
        # its text detector off)
        gold = normalize(item.answer)
        answer_lines, _ = image_regions(
            image, query, [ln for ln in lines if gold and gold in normalize(ln.text)]
        )
        u = Units(vlm, image)
        row = {
            "id": item.id,
            "genre": item.genre,
            "media_kind": item.media_kind,
            "image": i,
            "answer": item.answer,
            "size": [image.width, image.height],
            "sent": [u.resized.width, u.resized.height],
            "units": u.rows * u.cols,
            "evidence_lines": len(used),
            "full": readers.reads([u.resized], item.answer),
        }
        for r in ratios:
            for mode, guide in (("unguided", None), ("guided", regions)):
                if mode not in modes:
                    continue
                kept = u.kept(r, guide)
                row[f"kept_units@{r:g}"] = int(kept.numel())
                if mode == "guided":
                    row[f"answer_line_kept@{r:g}"] = u.holds_whole(kept, answer_lines)
                rebuilt = u.rebuild(kept)
                read = False  # each reading adds its views to those of the readings before it
                for n, reading in enumerate(k for k in READINGS if k in readings):
                    views = (
                        []
                        if reading == "whole"
                        else u.regions(kept, rebuilt)
                        if reading == "regions"
                        else u.line_places(rebuilt, lines)
                    )
                    key = variant(mode, r, reading)
                    read = row[key] = read or readers.reads(
                        [rebuilt] * (n == 0) + views, item.answer
                    )
                    if misses is not None and mode == "guided" and row["full"] and not row[key]:
                        misses.mkdir(parents=True, exist_ok=True)
                        rebuilt.to_pil().save(misses / f"{item.id.replace('/', '_')}_{i}_{key}.png")
        rows.append(row)
        print(
            f"  {item.id}: full {row['full']}, "
            + ", ".join(f"{k} {v}" for k, v in row.items() if "guided@" in k),
            flush=True,
        )
    return rows


def recall(rows: list[dict], ratios, modes=MODES, readings=READINGS) -> dict:
    """Share of answer images whose gold OCR reads, per variant."""
    keys = ["full"] + [variant(m, r, k) for r in ratios for m in modes for k in readings]
    n = len(rows)
    return {"images": n, **{k: (sum(r[k] for r in rows) / n if n else None) for k in keys}}


def by(rows: list[dict], field: str, ratios, modes=MODES, readings=READINGS) -> dict:
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        groups[r[field]].append(r)
    return {g: recall(rs, ratios, modes, readings) for g, rs in groups.items()}


def ttft(vlm: VLM, items: list, ocr, ratios, repeats: int) -> dict:
    """e2e TTFT (preprocess + tower + reduction + prefill) on the split's document with the most
    visual tokens: unreduced, tower unguided, tower guided by its OCR lines."""
    docs = [
        (it, Image.open(it.media[(it.frames or (0,))[0]]))
        for it in items
        if it.media_kind == "document"
    ]
    item, image = max(docs, key=lambda p: vlm.family.image_cost(p[1].width, p[1].height).tokens)
    regions, used = image_regions(image, understand(item.question), ocr(images=[image]).lines)
    configs = {"none": ReductionConfig()}
    for r in ratios:
        configs[f"unguided@{r:g}"] = ReductionConfig("tower", r)
        configs[f"guided@{r:g}"] = ReductionConfig("tower", r, keep_regions=(regions,))
    s = Sweep(vlm, image, item.question, list(configs.values()))
    pieces = {"preprocess": s.time_preprocess, "tower/none": s.time_tower}
    for name, red in configs.items():
        if red.before_tower:
            pieces[f"tower/{name}"] = lambda red=red: s.time_tower(red)
        pieces[f"prefill/{name}"] = lambda red=red: s.prefill(red)[0]
    best = {k: min(v) for k, v in rounds(pieces, repeats, "ttft").items()}
    e2e = {
        name: best["preprocess"] + best[f"tower/{name}"] + best[f"prefill/{name}"]
        for name in configs
    }
    return {
        "item": item.id,
        "image": Path(item.media[(item.frames or (0,))[0]]).name,
        "question": item.question,
        "size": [image.width, image.height],
        "evidence_lines": len(used),
        "visual_tokens": {name: s.tokens(red)[0] for name, red in configs.items()},
        "e2e_ttft_s": e2e,
        "e2e_ttft_speedup_vs_full": {k: e2e["none"] / v for k, v in e2e.items() if k != "none"},
        "best_s": best,
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--split", default="test", choices=["dev", "test"])
    ap.add_argument("--quick", action="store_true", help="2 questions per genre; 1 timed round")
    ap.add_argument(
        "--per-genre", type=int, default=None, help="questions per genre (default: all)"
    )
    ap.add_argument("--ratios", type=float, nargs="+", default=list(RATIOS))
    ap.add_argument("--media-dir", default=None, help="eval set folder (default: cascade bench's)")
    ap.add_argument(
        "--modes",
        nargs="+",
        default=list(MODES),
        choices=list(MODES),
        help="which tower variants' recall to measure (default both)",
    )
    ap.add_argument(
        "--readings",
        nargs="+",
        default=list(READINGS),
        choices=list(READINGS),
        help="how the judge reads the kept pixels, each adding views to the ones "
        "before it: the whole rebuilt image in one pass; each region of touching "
        "kept units on its own; each OCR line's place (default all three)",
    )
    ap.add_argument(
        "--save-misses",
        default=None,
        help="folder for the kept pixels (PNG) of each guided miss the full image reads",
    )
    ap.add_argument("--no-ttft", action="store_true", help="recall only")
    ap.add_argument("--ttft-only", action="store_true", help="timings only")
    ap.add_argument(
        "--repeats", type=int, default=None, help="interleaved best-of rounds (default 3, quick 1)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: CPU-time clock)")
    ap.add_argument("--out", default=None, help="output path without suffix")
    args = ap.parse_args(argv)
    per_genre = args.per_genre or (2 if args.quick else None)
    repeats = args.repeats or (1 if args.quick else 3)
    torch.set_num_threads(args.threads)
    use_clock("cpu" if args.threads == 1 else "wall")
    t0 = time.perf_counter()
    media_dir = Path(args.media_dir or default_tiny_dir().parent / "evalset")
    model = str(build_tiny_vlm(family="qwen2_vl", size="bench"))
    vlm = VLM.load(model, device="cpu")
    ocr = get_stage_class("ocr")()
    items = questions(media_dir, args.split, per_genre)
    result: dict = {
        "benchmark": "tower reduction: OCR recall on the kept pixels, and e2e TTFT",
        "command": "python benchmarks/tower_evidence.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "split": args.split,
        "questions": len(items),
        "ratios": args.ratios,
        "model": "tiny Qwen2-VL 'bench' (RANDOM weights; its processor's resize and merge units)",
        "evidence": "the cascade's `ocr` stage (rapidocr, default parameters) on the full image; "
        "target lines first by the `understand` stage's Query",
        "judge": "cascade.eval.judge.Readers: real OCR at detector scales 960 / 2048 / 1280 on the "
        "rebuilt image; gold found as a run of letters and digits",
        "kept_pixels": "the image at the model's resize; units not kept blank white; read whole, "
        "(+regions) also each region of touching kept units on its own, (+lines) "
        "also each OCR line's place (its box, one unit of margin)",
        "threads": torch.get_num_threads(),
    }
    if not args.ttft_only:
        readers = Readers(model=model)
        rows = []
        for it in items:
            rows.extend(
                measure(
                    it,
                    vlm,
                    readers,
                    ocr,
                    args.ratios,
                    args.modes,
                    args.readings,
                    Path(args.save_misses) if args.save_misses else None,
                )
            )
        grid = (args.ratios, args.modes, args.readings)
        result |= {
            "recall": recall(rows, *grid),
            "recall_by_genre": by(rows, "genre", *grid),
            "recall_by_media_kind": by(rows, "media_kind", *grid),
            "rows": rows,
        }
    if not args.no_ttft:
        result["clock"] = CLOCK["kind"]
        result["ttft"] = ttft(vlm, items, ocr, args.ratios, repeats)
        result["ttft_note"] = (
            "timings from the machine this ran on: record them on a quiet one "
            f"({repeats} interleaved round(s))"
        )
    result["wall_s"] = time.perf_counter() - t0
    out = Path(
        args.out
        or f"benchmarks/results/tower_evidence_{args.split}{'_quick' if args.quick else ''}_cpu"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out.with_suffix(".json"), result, bulky=("rows",))
    if "recall" in result:
        rc = result["recall"]
        print(
            f"recall over {rc['images']} answer images: full {rc['full']:.2f}; "
            + ", ".join(
                f"{variant(m, r, k)} {rc[variant(m, r, k)]:.2f}"
                for r in args.ratios
                for m in args.modes
                for k in args.readings
            )
        )
        for r in args.ratios:
            for k in args.readings if "guided" in args.modes else ():
                key = variant("guided", r, k)
                missed = [row for row in result["rows"] if row["full"] and not row[key]]
                whole = sum(bool(row[f"answer_line_kept@{r:g}"]) for row in missed)
                print(
                    f"{key}: {len(missed)} miss(es) the full image reads, {whole} of them "
                    "with the OCR line holding the answer kept whole"
                )
    if "ttft" in result:
        print(
            "e2e TTFT speedup vs unreduced: "
            + ", ".join(
                f"{k} {v:.2f}x" for k, v in result["ttft"]["e2e_ttft_speedup_vs_full"].items()
            )
        )
    print(f"wrote {out.with_suffix('.json')} in {result['wall_s']:.0f} s")
    return result


if __name__ == "__main__":
    main()
