"""Fit the tool answers' sureness (`cascade.evidence.sureness`) on the real-media dev split.

Every dev question (`benchmarks/real_media/`, never the test split) goes through the stages
`doc_qa` runs before its tool (understand, OCR, layout) and the tool's reader, with no gate: each
answer a reader would give is kept with its features (`sureness.features`) and whether it is
exactly the gold span (`cascade.eval.judge.same_span`). A logistic model over the features
(standardised, L2-regularised, each weight kept to its feature's sign) is fitted to those
labels, and the threshold is the lowest sureness at which no wrong answer on dev is given. The
fitted parameters go to `cascade/evidence/tool_sureness.json` (what the tool reads); the
findings, the reliability curve (in-sample and leave-one-out) and the threshold to
`results/tool_sureness_dev_cpu.json` (+ .png).

    python benchmarks/tool_sureness.py            # read the dev split, fit, write both files
    python benchmarks/tool_sureness.py --refit    # fit again from the findings in --out
    python benchmarks/tool_sureness.py --quick    # the first dev question of each source
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RESULTS = Path(__file__).parent / "results"
OUT = RESULTS / "tool_sureness_dev_cpu.json"
L2 = 1.0  # ridge on the standardised weights: a handful of findings, six features
BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0001)
# each weight's sign, in `sureness.FEATURES` order: ocr, type_fit, echo, key_value, meaning, top
SIGNS = (1, 1, -1, 1, 1, 1)


def collect(quick: bool) -> list[dict[str, Any]]:
    """Each dev question's ungated tool answer (when a reader gives one), its features and label."""
    import torch
    from real_media import load_questions
    from tqdm import tqdm

    from cascade.artifacts import Image
    from cascade.eval.judge import same_span
    from cascade.registry import get_stage_class

    torch.set_num_threads(1)
    items = load_questions(split="dev")
    if quick:
        items = [next(it for it in items if it.genre == s) for s in {i.genre: 0 for i in items}]
    stages = {
        name: get_stage_class(name)(params)
        for name, params in (
            ("understand", {}),
            ("ocr", {}),
            ("layout", {}),
            ("tool_answer", {"always_read": True, "sureness": "calibrated"}),  # as doc_qa sets it
        )
    }
    for s in stages.values():
        s.ensure_setup()
    tool: Any = stages["tool_answer"]
    read: dict[str, Any] = {}
    rows = []
    for it in tqdm(items, desc="dev questions"):
        query = stages["understand"].run(question=it.question).query
        image = Image.open(it.media[0], media_index=0)
        if it.media[0] not in read:
            read[it.media[0]] = stages["ocr"].run(images=[image]).lines
        lines = read[it.media[0]]
        regions = stages["layout"].run(images=[image], ocr_lines=lines, query=query).regions
        finding = tool.find(query, lines, [], [image], regions)
        if finding is None or not finding.text or not finding.lines:
            continue
        x = tool.features(query, finding, lines, [image])
        rows.append(
            {
                "id": it.id,
                "source": it.genre,
                "lang": it.lang,
                "target": query.target,
                "answer_type": query.answer_type,
                "answer": finding.text,
                "gold": it.answer,
                "exact": same_span(finding.text, it.answer),
                "features": {k: round(v, 4) for k, v in x.items()},
            }
        )
    return rows


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """(weights, bias, means, scales) of an L2-regularised logistic regression whose weights keep
    the sign each feature's meaning gives (`SIGNS`: surer with a higher OCR confidence, a fitting
    type, a key's value, more meaning; less sure with an echo), by projected gradient descent:
    a few findings cannot teach that reading well makes an answer less likely right."""
    mean, scale = x.mean(0), x.std(0)
    scale[scale < 1e-6] = 1.0
    z = (x - mean) / scale
    sign = np.array(SIGNS, float)
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(20000):
        p = 1 / (1 + np.exp(-(b + z @ w)))
        w -= 0.05 * (z.T @ (p - y) + L2 * w) / len(y)
        b -= 0.05 * float((p - y).sum()) / len(y)
        w = np.where(w * sign < 0, 0.0, w)
    return w, b, mean, scale


def predict(x: np.ndarray, w: np.ndarray, b: float, mean: np.ndarray, scale: np.ndarray):
    return 1 / (1 + np.exp(-(b + ((x - mean) / scale) @ w)))


def calibrate(x: np.ndarray, y: np.ndarray, feats: list[str]):
    """The fitted `Calibration` (threshold: the lowest sureness at which no wrong dev answer is
    given), the in-sample sureness of each finding and its leave-one-out sureness."""
    from cascade.evidence import sureness

    w, b, mean, scale = fit(x, y)
    p = predict(x, w, b, mean, scale)
    wrong_max = max((float(q) for q, t in zip(p, y, strict=True) if not t), default=0.0)
    above = sorted(float(q) for q, t in zip(p, y, strict=True) if t and q > wrong_max)
    loo = np.array(
        [predict(x[i : i + 1], *fit(np.delete(x, i, 0), np.delete(y, i)))[0] for i in range(len(x))]
    )
    params = sureness.Calibration(
        weights={f: float(v) for f, v in zip(feats, w, strict=True)},
        means={f: float(v) for f, v in zip(feats, mean, strict=True)},
        scales={f: float(v) for f, v in zip(feats, scale, strict=True)},
        bias=b,
        threshold=round(min(above) - 1e-4 if above else 1.0, 4),
        fitted_on=f"real-media dev split: {len(y)} tool findings, {int(y.sum())} exact",
    )
    return params, p, loo


def reliability(p: np.ndarray, y: np.ndarray) -> list[dict[str, Any]]:
    """Per sureness bin: answers, their mean sureness and the share that are exact."""
    out = []
    for lo, hi in zip(BINS[:-1], BINS[1:], strict=True):
        m = (p >= lo) & (p < hi)
        if m.any():
            out.append(
                {
                    "bin": [lo, min(hi, 1.0)],
                    "answers": int(m.sum()),
                    "mean_sureness": float(p[m].mean()),
                    "exact_share": float(y[m].mean()),
                }
            )
    return out


def at_threshold(p: np.ndarray, y: np.ndarray, t: float) -> dict[str, int]:
    given = p >= t
    return {
        "answers": int(given.sum()),
        "exact": int((given & (y == 1)).sum()),
        "wrong": int((given & (y == 0)).sum()),
    }


def plot(curves: dict[str, list[dict[str, Any]]], threshold: float, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0, 4.6))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="gray", ls=":", lw=0.8, label="perfectly calibrated")
    for (name, bins), style in zip(curves.items(), ("o-", "s--"), strict=False):
        xs = [b["mean_sureness"] for b in bins]
        ax.plot(xs, [b["exact_share"] for b in bins], style, label=name)
        for b in bins:
            ax.annotate(str(b["answers"]), (b["mean_sureness"], b["exact_share"]), fontsize=7)
    ax.axvline(threshold, color="tab:red", lw=0.8, label=f"threshold {threshold:.2f}")
    ax.set_xlabel("sureness (predicted share exact)")
    ax.set_ylabel("share of tool answers exactly the gold span")
    ax.set_title("tool sureness on real-media dev (n per point)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--refit", action="store_true", help="fit from the findings in --out")
    ap.add_argument("--quick", action="store_true", help="the first dev question of each source")
    ap.add_argument("--out", default=str(OUT), help="results JSON")
    ap.add_argument("--params", help="fitted parameters (default: the package's)")
    args = ap.parse_args()

    from cascade.evidence import sureness
    from cascade.provenance import write_results

    rows = json.loads(Path(args.out).read_text())["findings"] if args.refit else collect(args.quick)
    feats = list(sureness.FEATURES)
    x = np.array([[r["features"][f] for f in feats] for r in rows], float)
    y = np.array([float(r["exact"]) for r in rows])
    if args.quick:  # a smoke run: the shipped calibration scores what the readers found
        params = sureness.calibration()
        p = loo = np.array([params.sureness(r["features"]) for r in rows])
    else:
        params, p, loo = calibrate(x, y, feats)
        Path(args.params or sureness.PARAMS).write_text(
            json.dumps(params.to_dict(), indent=1) + "\n"
        )
    threshold = params.threshold
    for r, q, qo in zip(rows, p, loo, strict=True):
        r["sureness"], r["sureness_loo"] = round(float(q), 4), round(float(qo), 4)
    result = {
        "split": "dev",
        "quick": args.quick,
        "features": feats,
        "calibration": params.to_dict(),
        "findings_total": len(rows),
        "findings_exact": int(y.sum()),
        "ungated": at_threshold(p, y, 0.0),
        "at_threshold": at_threshold(p, y, threshold),
        "at_threshold_loo": at_threshold(loo, y, threshold),
        "reliability": reliability(p, y),
        "reliability_loo": reliability(loo, y),
        "note": "Each dev question's tool answer before any gate. at_threshold: the answers the "
        "tool gives with the fitted sureness (in sample: the threshold is chosen there for zero "
        "wrong); at_threshold_loo: the same with each finding's sureness from a model fitted "
        "without it (an estimate of unseen data).",
        "findings": rows,
    }
    out = write_results(Path(args.out), result)
    plot(
        {"in sample": result["reliability"], "leave-one-out": result["reliability_loo"]},
        threshold,
        out.with_suffix(".png"),
    )
    print(
        f"{len(rows)} findings ({int(y.sum())} exact); threshold {threshold:.3f}: "
        f"{result['at_threshold']} in sample, {result['at_threshold_loo']} leave-one-out"
    )
    for f, v in params.weights.items():
        print(f"  weight {f:9s} {v:+.3f}")
    print("->", out)


if __name__ == "__main__":
    main()
