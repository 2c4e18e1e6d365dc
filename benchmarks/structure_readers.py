"""The document-structure readers alone, on the evaluation set's document questions: does the
reader the question's target calls for find the gold region, and is its answer the exact span?

Real OCR (RapidOCR) and real layout (PP-Layout CDLA, given the OCR lines) on every page; the
`Query` (`understand`) supplies what the question names (section number or topic, row and column
keys, code kind, answer type); the gold target picks the reader, so a question the `Query`
misreads still measures the reader:

- title -> `headings.document_title`; heading -> `headings.section_heading` (number or topic;
  the answer is the heading's `name`, without its number);
- cell -> `tables.table_cell(row_key, column_key)` when the `Query` picked keys out, else
  `tables.cells_named_in(question)`;
- identifier in a code genre -> `codeblocks.defined(kind)`;
- fact -> `paragraphs.sentence_with(cues)`, then `spans.exact_span` of the answer type.

found: a returned box holds the gold box (or overlaps it by IoU > 0.3); answered: one distinct
answer; exact: that answer is the gold span (`cascade.eval.judge.same_span`); wrong: answered and
not exact. No timing: these numbers do not depend on the machine.

    python benchmarks/structure_readers.py --split dev            # tune on dev only
    python benchmarks/structure_readers.py --split dev --quick    # a few pages per genre
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from cascade.provenance import write_results  # noqa: E402

GENRES = ("heading", "table", "code", "paragraph", "photo_doc", "zh_question")
TARGETS = ("title", "heading", "cell", "identifier", "fact")


def read_item(item, ocr, layout):
    from cascade.artifacts import Image

    images = [Image.open(p, media_index=i) for i, p in enumerate(item.media)]
    lines = ocr(images=images).lines
    return lines, layout(images=images, ocr_lines=lines).regions


def answers(item, lines, regions) -> tuple[list, list]:
    """(what the reader found, the answer each found region gives)."""
    from cascade.evidence import codeblocks, headings, paragraphs, tables
    from cascade.evidence.documents import SPAN_KINDS
    from cascade.evidence.spans import exact_span
    from cascade.evidence.understanding import understand

    q = understand(item.question)
    if item.target == "title":
        found = headings.document_title(lines, regions)
        return found, [f.text for f in found]
    if item.target == "heading":
        found = (
            headings.section_heading(lines, regions, number=q.section_number)
            if q.section_number
            else headings.section_heading(lines, regions, topic=q.section_name or " ".join(q.cues))
        )
        return found, [f.name for f in found]
    if item.target == "cell":
        found = (
            tables.table_cell(lines, regions, row_key=q.row_key, column_key=q.column_key)
            if q.row_key and q.column_key
            else []
        )
        found = found or tables.cells_named_in(lines, regions, question=item.question)
        return found, [f.text for f in found]
    if item.target == "identifier":
        found = codeblocks.defined(lines, regions, q.code_kind)
        return found, [f.text for f in found]
    found = paragraphs.sentence_with(lines, regions, phrase=" ".join(q.cues))
    kind = SPAN_KINDS.get(q.answer_type)
    spans = [exact_span(f.text, kind) if kind not in (None, "text") else None for f in found]
    return found, [s.text if s else None for s in spans]


def holds_gold(item, found) -> bool:
    from cascade.artifacts import Box

    if not item.box:
        return False
    gold, frames = Box(*item.box), item.frames or (0,)
    return any(
        f.media_index in frames
        and any(b.pad(6).union(gold) == b.pad(6) or b.iou(gold) > 0.3 for b in f.boxes)
        for f in found
    )


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--genres", default=",".join(GENRES), help="comma-separated genres")
    ap.add_argument("--quick", action="store_true", help="the split's quick set (a few per genre)")
    ap.add_argument(
        "--media", default=None, help="folder for the generated media (default: a temporary folder)"
    )
    ap.add_argument(
        "--ocr-side",
        type=int,
        default=960,
        help="OCR detector side (det_limit_side_len); pipelines use 960",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="JSON path (default: benchmarks/results/structure_readers_<split>[_quick].json)",
    )
    args = ap.parse_args(argv)

    import cascade.stages  # noqa: F401
    from cascade.eval.build import build_genre
    from cascade.eval.judge import same_span
    from cascade.registry import get_stage_class

    ocr = get_stage_class("ocr")({"det_limit_side_len": args.ocr_side})
    layout = get_stage_class("layout")({})
    media = Path(args.media or tempfile.mkdtemp(prefix="structure-readers-"))
    per: dict[str, Counter] = {}
    misses = []
    for genre in args.genres.split(","):
        for item in build_genre(media, args.split, genre, quick=args.quick):
            if (
                item.target not in TARGETS
                or genre not in GENRES
                or (item.target == "identifier" and genre not in ("code",))
            ):
                continue  # ids and key values are read by the key-value reader, not structure
            lines, regions = read_item(item, ocr, layout)
            found, said = answers(item, lines, regions)
            distinct = set(said)
            answer = next(iter(distinct)) if len(distinct) == 1 else None
            exact = bool(answer) and same_span(answer, item.answer)
            hit = holds_gold(item, found)
            c = per.setdefault(f"{genre}/{item.target}", Counter())
            c.update(
                {
                    "n": 1,
                    "found": int(hit),
                    "answered": int(answer is not None),
                    "exact": int(exact),
                    "wrong": int(answer is not None and not exact),
                }
            )
            if not hit or answer is not None and not exact:
                misses.append(
                    {
                        "id": item.id,
                        "question": item.question,
                        "gold": item.answer,
                        "answers": said[:4],
                    }
                )
    result = {
        "split": args.split,
        "quick": args.quick,
        "ocr_det_limit_side_len": args.ocr_side,
        "machine": platform.machine(),
        "per_target": {k: dict(v) for k, v in per.items()},
        "misses": misses,
    }
    out = Path(
        args.out
        or Path(__file__).parent
        / "results"
        / f"structure_readers_{args.split}{'_quick' if args.quick else ''}.json"
    )
    write_results(out, result)
    for k, v in result["per_target"].items():
        print(f"{k:24s} {v}")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
