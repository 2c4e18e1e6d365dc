"""The cascade on real photos and scans nobody here made (`benchmarks/real_media/<source>/`):
receipts, forms, tables, document pages, signs and labels fetched from public repositories, with
questions written by people looking at each image before any run (`docs/real_media.md`).

Every question becomes an `EvalItem` (one document image) and is judged exactly as `cascade bench`
judges its own set (`cascade.eval.bench.bench_items`): `doc_qa` (may a tool answer? only an exact
span counts), `doc_qa[hint]` (is the gold readable, by real OCR, in the exact pixels sent, at the
size sent?) and `full_res` (its tokens, and whether the gold is readable in the whole image at
the size the VLM gets it). A question whose gold OCR cannot read even at full resolution is not
the cascade's fault: it is counted apart (`full_res_unreadable`) and listed.

    python benchmarks/real_media.py --split dev            # -> results/real_media_dev_cpu.json
    python benchmarks/real_media.py --split test6          # the sixth held-out split, run once
    python benchmarks/real_media.py --split all --quick    # the first question of each source
    python benchmarks/real_media.py --source pubtabnet --out /tmp/x.json

`--rows FILE` keeps every source's rows in a JSON-lines file as soon as that source is done and
reuses them on the next call (same split, size and full-res mode), so a long CPU run can be
resumed or extended by sources. The VLM has random weights here (no model hub): only tool
answers are scored, and tokens and evidence are real.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")

ROOT = Path(__file__).parent / "real_media"
RESULTS = Path(__file__).parent / "results"
FIELDS = ("id", "image", "question", "lang", "gold", "target", "split")


def load_questions(root: Path = ROOT, split: str = "all", sources: list[str] | None = None):
    """Every question of `root/<source>/questions.jsonl` as an `EvalItem` (genre = the source),
    in source then file order. A malformed line is an error naming its file and line."""
    from cascade.eval.items import EvalItem

    items = []
    for qfile in sorted(root.glob("*/questions.jsonl")):
        source = qfile.parent.name
        if sources and source not in sources:
            continue
        for n, line in enumerate(qfile.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            q = json.loads(line)
            missing = [f for f in FIELDS if f not in q]
            if missing:
                raise ValueError(f"{qfile}:{n}: missing field(s) {missing}; expected {FIELDS}")
            image = qfile.parent / q["image"]
            if not image.is_file():
                raise FileNotFoundError(f"{qfile}:{n}: image {q['image']!r} is not in {source}/")
            if split != "all" and q["split"] != split:
                continue
            items.append(
                EvalItem(
                    id=q["id"],
                    split=q["split"],
                    genre=source,
                    media_kind="document",
                    media=(str(image),),
                    question=q["question"],
                    answer=q["gold"],
                    kind="doc",
                    lang=q["lang"],
                    target=q["target"],
                    frames=(0,),
                )
            )
    return items


def headline(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One group of questions (a source, a language): evidence found by the cascade (when it let
    the VLM answer), its [hint] variant (what the fine path sends) and full_res; the same counted
    only over questions full_res can read (the rest are not the cascade's fault, listed apart);
    tool answers given / exact / wrong; visual tokens as a share of full_res."""
    by_role: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_role.setdefault(r["role"], {})[r["id"]] = r
    full, hint, casc = (by_role.get(k, {}) for k in ("full_res", "cascade[hint]", "cascade"))
    ids = list(dict.fromkeys(r["id"] for r in rows))
    unreadable = [i for i in ids if not full.get(i, {}).get("evidence_readable", False)]
    readable = [i for i in ids if i not in unreadable]
    tools = [casc[i] for i in ids if i in casc and casc[i]["produced_by"] == "tool"]
    vlm_cascade = [casc[i] for i in readable if i in casc and "evidence_readable" in casc[i]]

    def tokens(role: dict[str, dict[str, Any]]) -> int:
        return sum(int(role[i]["visual_tokens"]) for i in ids if i in role)

    full_tokens = tokens(full)
    return {
        "questions": len(ids),
        "full_res_unreadable": unreadable,
        "readable_questions": len(readable),
        "found_hint": sum(bool(hint.get(i, {}).get("evidence_readable")) for i in readable),
        "missed_hint": [i for i in readable if not hint.get(i, {}).get("evidence_readable")],
        "found_cascade": sum(bool(r["evidence_readable"]) for r in vlm_cascade),
        "cascade_vlm_questions": len(vlm_cascade),
        "found_full_res": len(readable),
        "found_hint_all": sum(bool(hint.get(i, {}).get("evidence_readable")) for i in ids),
        "tool_answers": len(tools),
        "tool_exact": sum(bool(r["tool_exact"]) for r in tools),
        "tool_wrong": [
            {"id": r["id"], "answer": r["answer"], "gold": r["gold"]}
            for r in tools
            if not r["tool_exact"]
        ],
        "full_res_tokens_mean": full_tokens / max(len(full), 1),
        "tokens_share_cascade": tokens(casc) / full_tokens if full_tokens else None,
        "tokens_share_hint": tokens(hint) / full_tokens if full_tokens else None,
        # the target: <= 10 % of full_res on large media, <= 25 % where full_res < 1,000
        "token_target": 0.25 if full_tokens / max(len(full), 1) < 1000 else 0.10,
    }


def plot(per_source: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """Per source: evidence found ([hint] and cascade over readable questions, full_res over all)
    with tool answers exact/given above; visual tokens as a share of full_res (log)."""
    import numpy as np
    from matplotlib.figure import Figure

    names = list(per_source)
    x = np.arange(len(names))
    fig = Figure(figsize=(max(8.0, 0.8 * len(names) + 2), 7.0))
    top, bottom = fig.subplots(2, 1, sharex=True)

    def pct(a: int, b: int) -> float:
        return 100 * a / b if b else 0.0

    bars = (
        ("[hint]", lambda h: pct(h["found_hint"], h["readable_questions"]), "tab:blue"),
        ("cascade", lambda h: pct(h["found_cascade"], h["cascade_vlm_questions"]), "tab:cyan"),
        ("full_res", lambda h: pct(h["found_full_res"], h["questions"]), "tab:gray"),
    )
    for k, (label, value, colour) in enumerate(bars):
        vals = [value(per_source[s]) for s in names]
        top.bar(x + (k - 1) * 0.27, vals, 0.27, label=label, color=colour)
        for i, v in enumerate(vals):
            if v == 0:  # measured and none found: say so (an empty slot would read as not run)
                top.annotate("0", (i + (k - 1) * 0.27, 1), ha="center", fontsize=7, color=colour)
    for i, s in enumerate(names):
        h = per_source[s]
        top.annotate(
            f"{h['found_hint']}/{h['readable_questions']}",
            (i - 0.27, 92 * h["found_hint"] / max(h["readable_questions"], 1) + 2),
            ha="center",
            fontsize=6,
        )
        if h["tool_answers"]:
            top.annotate(
                f"tool {h['tool_exact']}/{h['tool_answers']}",
                (i, 102),
                ha="center",
                fontsize=7,
                color="darkred" if h["tool_wrong"] else "darkgreen",
            )
    top.set_ylim(0, 112)
    top.set_ylabel("evidence found (%)")
    top.axhline(90, color="tab:green", lw=0.8, ls="--")
    top.legend(fontsize=7, loc="lower left")
    top.set_title(title, fontsize=9)
    for dx, key, colour in (
        (-0.18, "tokens_share_cascade", "tab:blue"),
        (0.18, "tokens_share_hint", "tab:cyan"),
    ):
        vals = [per_source[s][key] for s in names]
        bottom.bar(
            x + dx,
            [100 * max(v, 1e-4) if v is not None else 0 for v in vals],
            0.36,
            color=colour,
            label=key.replace("tokens_share_", ""),
        )
    bottom.axhline(10, color="tab:red", lw=0.8, ls="--", label="10 %")
    bottom.axhline(25, color="tab:orange", lw=0.8, ls=":", label="25 % (full_res < 1,000)")
    bottom.set_yscale("log")
    bottom.set_ylabel("visual tokens, % of full_res")
    bottom.legend(fontsize=7)
    bottom.set_xticks(x, names, rotation=35, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def reused_rows(args: argparse.Namespace, wanted: set[str]) -> list[dict[str, Any]]:
    """Rows kept by earlier calls (`--rows` files), judged the same way (size, full-res mode)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    key = (args.size, args.full_res)  # rows judged another way are not reused
    for path in [args.rows, *args.reuse]:
        if not path or not Path(path).exists():
            continue
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r["id"] in wanted and (r.pop("_size"), r.pop("_full_res")) == key:
                rows[(r["id"], r["pipeline"])] = r
    return list(rows.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    splits = ("dev", "test", "test2", "test3", "test4", "test5", "test6", "all")
    ap.add_argument("--split", default="dev", choices=splits)
    ap.add_argument("--quick", action="store_true", help="the first question of each source")
    ap.add_argument("--source", action="append", help="only this source (repeatable)")
    ap.add_argument("--root", default=str(ROOT), help="folder of <source>/questions.jsonl")
    ap.add_argument("--size", default="test", choices=("test", "bench"), help="VLM shape")
    ap.add_argument(
        "--full-res",
        default="estimate",
        choices=("run", "estimate"),
        help="run full_res through the VLM, or count its tokens and read its evidence only",
    )
    ap.add_argument(
        "--warm", action="store_true", help="also re-ask warm (follow-up costs; judged the same)"
    )
    ap.add_argument("--rows", help="JSON-lines file of rows to reuse and extend, per question")
    ap.add_argument("--reuse", action="append", default=[], help="more rows files to reuse")
    ap.add_argument(
        "--shard", default="1/1", help="K/N: judge only every N-th question from the K-th"
    )
    ap.add_argument("--reverse", action="store_true", help="the shard's questions from the last")
    ap.add_argument(
        "--report-only", action="store_true", help="judge nothing: report the reused rows"
    )
    ap.add_argument("--out", help="result JSON (default results/real_media_<split>[_quick]_cpu)")
    args = ap.parse_args()

    import torch
    from tqdm import tqdm

    from cascade.eval.bench import judged_row, pipeline_qa
    from cascade.eval.judge import Readers
    from cascade.eval.roles import PIPELINES
    from cascade.vlm import build_tiny_vlm

    torch.set_num_threads(1)
    items = load_questions(Path(args.root), args.split, args.source)
    if args.quick:
        items = [next(it for it in items if it.genre == s) for s in {i.genre: 0 for i in items}]
    rows = reused_rows(args, {it.id for it in items})
    done = {r["id"] for r in rows}
    # sources interleaved in proportion (a run cut short has judged every source alike), then
    # every N-th question for shard K
    position: dict[str, float] = {}
    for source in {i.genre: 0 for i in items}:
        own = [i for i in items if i.genre == source]
        position |= {it.id: (n + 1) / len(own) for n, it in enumerate(own)}
    mixed = sorted(items, key=lambda it: position[it.id])
    k, shards = (int(x) for x in args.shard.split("/"))
    todo = [it for n, it in enumerate(mixed) if it.id not in done and n % shards == k - 1]
    if args.reverse:  # a second process on the same shard, meeting the first in the middle
        todo.reverse()
    if todo and not args.report_only:
        readers = Readers(model=str(build_tiny_vlm(size=args.size)))
        # every pipeline set up once; then question by question (not pipeline by pipeline, as
        # `cascade bench` does: the same rows), so each question's rows can be kept at once
        qas = {
            label: None
            if label == "full_res" and args.full_res == "estimate"
            else pipeline_qa(pipe, overrides, args.size)
            for label, (pipe, overrides) in PIPELINES["document"].items()
        }
        for it in tqdm(todo, desc="real media"):
            new = [judged_row(it, label, qa, readers, None, args.warm) for label, qa in qas.items()]
            rows += new
            if args.rows:
                with open(args.rows, "a", encoding="utf-8") as f:
                    for r in new:
                        extra = {"_size": args.size, "_full_res": args.full_res}
                        f.write(json.dumps(r | extra, default=str, ensure_ascii=False) + "\n")
    missing = [it.id for it in items if it.id not in {r["id"] for r in rows}]
    items = [it for it in items if it.id not in missing]  # other shards' questions

    order = {it.id: n for n, it in enumerate(items)}
    rows.sort(key=lambda r: order[r["id"]])
    per_source = {
        s: headline([r for r in rows if r["genre"] == s])
        for s in dict.fromkeys(r["genre"] for r in rows)
    }
    per_lang = {
        lang: headline([r for r in rows if r["lang"] == lang])
        for lang in sorted({r["lang"] for r in rows})
    }
    gpu = torch.cuda.is_available()
    tag = f"real_media_{args.split}{'_quick' if args.quick else ''}_{'gpu' if gpu else 'cpu'}"
    out = Path(args.out) if args.out else RESULTS / f"{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    small = [
        {
            k: r.get(k)
            for k in (
                "id",
                "role",
                "lang",
                "target",
                "produced_by",
                "answer",
                "gold",
                "evidence_readable",
                "tool_exact",
                "visual_tokens",
            )
        }
        for r in rows
    ]
    result = {
        "split": args.split,
        "quick": args.quick,
        "sources": list(per_source),
        "questions": len(items),
        "not_judged": missing,
        "images": len({it.media[0] for it in items}),
        "device": torch.cuda.get_device_name() if gpu else f"cpu ({platform.machine()}), 1 thread",
        "vlm": f"random-weight tiny Qwen2-VL ({args.size})",
        "ocr": "RapidOCR PP-OCR (real)",
        "full_res": args.full_res,
        "note": "Judged as `cascade bench` does (cascade.eval.bench.bench_items). found_hint / "
        "found_cascade count questions whose gold full_res can read; full_res_unreadable lists "
        "the rest. tokens_share_* = visual tokens / full_res's on the same questions.",
        "by_source": per_source,
        "by_lang": per_lang,
        "total": headline(rows),
        "rows": small,
    }
    from cascade.provenance import write_results

    write_results(out, result)
    plot(
        per_source,
        out.with_suffix(".png"),
        f"real media, {args.split} split: evidence found and tokens",
    )
    for name, h in [*per_source.items(), *(("lang=" + k, v) for k, v in per_lang.items())]:
        share = h["tokens_share_cascade"]
        print(
            f"{name:22s} found [hint] {h['found_hint']}/{h['readable_questions']}, cascade "
            f"{h['found_cascade']}/{h['cascade_vlm_questions']}, full_res {h['found_full_res']}/"
            f"{h['questions']} | tool {h['tool_exact']}/{h['tool_answers']} exact, wrong "
            f"{[w['id'] for w in h['tool_wrong']]} | tokens "
            f"{'-' if share is None else f'{100 * share:.1f} %'} of full_res "
            f"({h['full_res_tokens_mean']:.0f} mean)"
        )
    print("->", out)


if __name__ == "__main__":
    main()
