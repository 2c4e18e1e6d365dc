"""Document pages nobody here generated: hand-written HTML pages rendered by headless Chromium,
each with one question and its gold span (`browser_pages/<set>/`), written by helpers that had
not read the cascade's code, to check the document readers on media they were not built on.

- `set1`: 36 pages (6 genres x 3 English + 3 Chinese; header bars, letterheads, two columns,
  dark tables, four code-editor themes). Its misses were fixed as general rules: it is now a
  regression set.
- `set2`: 48 pages (6 genres x 4 + 4; sidebars, cards, watermarks, 第三章 / （三） numbering,
  eight programming languages), written after those fixes and run once on them; its misses were
  then fixed too: tuned on since.
- `set3`: 48 pages (6 genres x 4 + 4; news, notices, READMEs, statements, timetables, invoices,
  dark settings pages; questions that often share no word with the heading they ask about),
  written after the relevance-by-meaning work by a helper that had read neither the code nor the
  earlier sets, and run once on it: its first pass is `browser_pages_set3_first_pass_cpu.json`.
- `set4`: 48 pages (6 genres x 4 + 4; recipes, manuals, leaflets, statements, config files, VAT
  invoices), written blind the same way after the rows-as-units work, and run once on it: its
  first pass is `browser_pages_set4_first_pass_cpu.json`.
- `set5`: 48 pages (6 genres x 4 + 4; programmes, syllabi, dataset cards, Dockerfiles, CI and
  SQL files, tickets, 体检 / 挂号 / 回单 forms), written blind the same way after the work on
  lines meant alone and headings over the text meant, and run once on it: its first pass is
  `browser_pages_set5_first_pass_cpu.json`. Sets 3, 4 and 5 were tuned on after their first
  passes.
- `set6`: 48 pages (6 genres x 4 + 4; recipe cards, datasheets, policy schedules, API references,
  bus timetables, bills, report cards, boarding passes, Terraform / Python / Bash / package.json
  files, 说明书 / 体检报告 / 租赁合同 / 成绩单 / 行程单 / 快递面单), written blind the same way
  after the learned reader's retyping and the question's second reading, and run once on them:
  its first pass is `browser_pages_set6_first_pass_cpu.json`.
- `set7`: 48 pages (6 genres x 4 + 4; document kinds not in sets 5 and 6), written blind the
  same way after the reader was trained on real-media questions and second readings became
  leads, and run once on them: its first pass is `browser_pages_set7_first_pass_cpu.json`.
- `set8`: 48 pages (6 genres x 4 + 4; document kinds not in set 7), written blind the same way
  after cells, sentences and headings were found by meaning where the words are not the page's,
  and run once on them: its first pass is `browser_pages_set8_first_pass_cpu.json`.
- `set9`: 48 pages (6 genres x 4 + 4; document kinds not in set 8), written blind the same way
  after traditional Chinese was matched as simplified and a page's crops went up to 8, and run
  once on them: its first pass is `browser_pages_set9_first_pass_cpu.json`.

For every page, as `cascade bench` does: `doc_qa` (may a tool answer? is it the exact span?),
`doc_qa[hint]` (is the gold readable, by real OCR, in the exact pixels sent, at the size sent?)
and the full-resolution baseline's tokens and evidence. The VLM has random weights here: only
tool answers are scored.

    python benchmarks/browser_pages.py --set set2  # -> results/browser_pages_set2_cpu.json
    python benchmarks/browser_pages.py --quick     # the first page of each genre and language

The pages are screenshots already; `browser_pages/<set>/html/` holds what they were rendered from
(chromium --headless --screenshot --window-size=W,H file://...).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")

from cascade.provenance import write_results  # noqa: E402

HERE = Path(__file__).parent / "browser_pages"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--set",
        default="set1",
        choices=("set1", "set2", "set3", "set4", "set5", "set6", "set7", "set8", "set9"),
        help="which page set",
    )
    ap.add_argument("--quick", action="store_true", help="one page per genre and language")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()

    import torch
    from tqdm import tqdm

    from cascade.api import QA
    from cascade.eval.bench import full_res_row, row_for
    from cascade.eval.items import EvalItem
    from cascade.eval.judge import Readers

    torch.set_num_threads(1)
    pages = HERE / args.set
    raw = json.loads((pages / "items.json").read_text(encoding="utf-8"))
    if args.quick:
        raw = [r for r in raw if r["id"].endswith("_1")]
    items = [
        EvalItem(
            id=r["id"],
            split="browser",
            genre=r["genre"],
            media_kind="document",
            media=(str(pages / r["image"]),),
            question=r["question"],
            answer=r["gold"],
            kind="doc",
            lang=r["lang"],
            frames=(0,),
        )
        for r in raw
    ]
    readers = Readers()
    answer = QA.offline("doc_qa", size="test")
    hint = QA.offline("doc_qa", size="test", overrides={"tool.mode": "hint"})
    rows = []
    for it in tqdm(items, desc="browser pages"):
        tool = row_for(it, "doc_qa", answer.ask(it.media_arg(), it.question), 0.0, readers, None)
        sent = row_for(
            it, "doc_qa[hint]", hint.ask(it.media_arg(), it.question), 0.0, readers, None
        )
        full = full_res_row(it, readers)
        rows.append(
            {
                "id": it.id,
                "genre": it.genre,
                "lang": it.lang,
                "question": it.question,
                "gold": it.answer,
                "answer": tool["answer"],
                "produced_by": tool["produced_by"],
                "tool_exact": tool.get("tool_exact"),
                "found": sent["evidence_readable"],
                "full_res_found": full["evidence_readable"],
                "visual_tokens": sent["visual_tokens"],
                "full_res_tokens": full["visual_tokens"],
                "routes": sent["routes"],
            }
        )
    by = defaultdict(list)
    for r in rows:
        by[r["genre"]].append(r)
    summary = {
        g: {
            "questions": len(rs),
            "found": sum(r["found"] for r in rs),
            "full_res_found": sum(r["full_res_found"] for r in rs),
            "tool_answers": sum(r["produced_by"] == "tool" for r in rs),
            "tool_exact": sum(bool(r["tool_exact"]) for r in rs),
            "tool_wrong": [
                r["id"] for r in rs if r["produced_by"] == "tool" and not r["tool_exact"]
            ],
            "token_share": sum(r["visual_tokens"] for r in rs)
            / sum(r["full_res_tokens"] for r in rs),
        }
        for g, rs in by.items()
    }
    result = {
        "set": f"browser_pages/{args.set}",
        "quick": args.quick,
        "device": platform.processor() or "cpu",
        "threads": 1,
        "vlm": "tiny Qwen2-VL shape, random weights (size=test)",
        "note": "pages rendered by headless Chromium from HTML written apart from the code",
        "summary": summary,
        "missed": [r["id"] for r in rows if not r["found"]],
        "rows": rows,
    }
    out = Path(args.out) / f"browser_pages_{args.set}{'_quick' if args.quick else ''}_cpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out, result, bulky=("rows",))
    for g, s in summary.items():
        print(
            f"{g:16s} found {s['found']}/{s['questions']} (full res {s['full_res_found']}), tool "
            f"{s['tool_exact']}/{s['tool_answers']} exact, {100 * s['token_share']:.1f} % of tokens"
        )
    print("->", out)


if __name__ == "__main__":
    main()
