"""`cascade bench`: the cascade against its baselines on the built-in evaluation set.

For every pipeline (the cascade and the `full_res` / `thumbnail_only` baselines, all through the same
code) and every question: visual tokens, prefill FLOPs, end-to-end seconds and TTFT, who answered,
the router's decision next to the oracle (was high resolution needed? decided by running OCR / the
detector on a thumbnail of the frame that holds the answer), and evidence recall: whether the gold
answer is readable (real OCR) in the pixels the answer was based on.

The VLM and CLIP have random weights here (no model hub): their costs are real, their answers are
not, so answer accuracy is only reported for tool answers (real OCR / YOLO).
"""
from __future__ import annotations

import json
import platform
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .api import QA
from .artifacts import Answer, Image
from .evalset import EvalItem, build_eval_set

# label -> (pipeline, overrides). The `[hint]` variants never let a tool answer: the VLM always
# reads the selected tiles, with the tools' findings in the prompt, so their tokens are the cost of
# the fine path itself.
PIPELINES = {
    "video": {"video_qa": ("video_qa", {}), "video_qa[hint]": ("video_qa", {"tool.mode": "hint"}),
              "full_res": ("full_res", {}), "thumbnail_only": ("thumbnail_only", {})},
    "images": {"multi_image_qa": ("multi_image_qa", {}),
               "multi_image_qa[hint]": ("multi_image_qa", {"tool.mode": "hint"}),
               "full_res": ("full_res", {}), "thumbnail_only": ("thumbnail_only", {})}}


def normalize(text: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", text.upper())


@dataclass
class Readers:
    """Real OCR and detector, loaded once, for oracles and evidence recall."""

    def __post_init__(self):
        from .registry import get_stage_class

        self.ocr = get_stage_class("ocr")()
        self.detect = get_stage_class("detect")()

    def reads(self, images: list[Image], gold: str) -> bool:
        if not images:
            return False
        text = " ".join(line.text for line in self.ocr(images=list(images)).lines)
        return normalize(gold) in normalize(text)

    def count(self, images: list[Image], label: str = "person") -> int:
        if not images:
            return 0
        counts = [self.detect(images=[im]).counts.get(label, 0) for im in images]
        return max(counts)


def answer_frames(item: EvalItem) -> list[Image]:
    """Full-resolution images that hold the answer (the middle gold frame for a video)."""
    if item.media_kind == "images":
        return [Image.open(item.media[i], media_index=i) for i in item.frames]
    from .media import VideoSource

    source = VideoSource(item.media[0])
    mid = item.frames[len(item.frames) // 2]
    return list(source.fetch([mid / source.info.fps]).values())


def oracle_needs_high_res(item: EvalItem, readers: Readers, thumb: int = 224) -> bool:
    """Is the answer lost on a thumbnail? Decided by the real OCR/detector, not by us."""
    if item.kind == "scene":
        return False
    from .stages.resize import fit_longest_side

    thumbs = [fit_longest_side(im, thumb) for im in answer_frames(item)]
    if item.kind == "read":
        return not readers.reads(thumbs, item.answer)
    return readers.count(thumbs) != int(item.answer)


def row_for(item: EvalItem, pipeline: str, answer: Answer, seconds: float, readers: Readers,
            oracle: bool) -> dict[str, Any]:
    usage = answer.usage
    routes = {r.branch for r in answer.evidence.routes}
    high_res = None
    if routes & {"high_res", "thumbnail"}:
        high_res = "high_res" in routes
    evidence = list(answer.evidence.images)
    row = {"id": item.id, "pipeline": pipeline, "kind": item.kind, "question": item.question,
           "gold": item.answer, "answer": answer.text, "produced_by": answer.produced_by,
           "visual_tokens": int(usage.get("visual_tokens", 0)),
           "baseline_visual_tokens": usage.get("baseline_visual_tokens"),
           "prefill_flops": float(usage.get("prefill_flops", 0.0)),
           "ttft_s": usage.get("ttft_s"), "seconds": seconds, "evidence_images": len(evidence),
           "routed_high_res": high_res, "oracle_high_res": oracle}
    if item.kind == "read":
        row["evidence_readable"] = readers.reads(evidence, item.answer)
    if answer.produced_by == "tool":
        row["tool_correct"] = normalize(item.answer) in normalize(answer.text) if item.kind == "read" \
            else answer.text.strip() == item.answer
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key, subset):
        vals = [r[key] for r in subset if r.get(key) is not None]
        return float(np.mean(vals)) if vals else None

    out: dict[str, Any] = {}
    for media in ("video", "images"):
        for pipe in dict.fromkeys(r["pipeline"] for r in rows if r["media"] == media):
            sub = [r for r in rows if r["pipeline"] == pipe and r["media"] == media]
            reads = [r for r in sub if "evidence_readable" in r]
            routed = [r for r in sub if r["routed_high_res"] is not None]
            tools = [r for r in sub if "tool_correct" in r]
            out[f"{media}/{pipe}"] = {
                "questions": len(sub), "visual_tokens": mean("visual_tokens", sub),
                "prefill_flops": mean("prefill_flops", sub), "seconds": mean("seconds", sub),
                "ttft_s": mean("ttft_s", sub),
                "evidence_recall": (sum(r["evidence_readable"] for r in reads) / len(reads)) if reads else None,
                "router_agreement": (sum(r["routed_high_res"] == r["oracle_high_res"] for r in routed)
                                     / len(routed)) if routed else None,
                # Missing a needed high-res look loses the answer; an extra one only costs tokens.
                "router_missed_high_res": sum(r["oracle_high_res"] and not r["routed_high_res"]
                                              for r in routed),
                "router_extra_high_res": sum(r["routed_high_res"] and not r["oracle_high_res"]
                                             for r in routed),
                "tool_answers": len(tools),
                "tool_accuracy": (sum(r["tool_correct"] for r in tools) / len(tools)) if tools else None}
    return out


def plot(summary: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure  # no pyplot: leaves a notebook's backend alone

    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for key, s in summary.items():
        if s["evidence_recall"] is None or not s["visual_tokens"]:
            continue
        marker = "o" if key.startswith("video") else "s"
        ax.scatter(s["visual_tokens"], 100 * s["evidence_recall"], s=70, marker=marker)
        ax.annotate(key, (s["visual_tokens"], 100 * s["evidence_recall"]),
                    textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("visual tokens per question (log)")
    ax.set_ylabel("evidence recall, reading questions (%)")
    ax.set_ylim(-5, 105)
    ax.set_title("Tokens sent to the VLM vs. whether the answer was in them")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run_bench(out_dir: str | Path = "benchmarks/results", media_dir: str | Path | None = None,
              size: str = "bench", limit: int | None = None, max_new_tokens: int = 8,
              progress: bool = True) -> dict[str, Any]:
    """Run every pipeline on the evaluation set; write `cascade_<device>.json` and `.png`."""
    from tqdm import tqdm

    from .vlm import default_tiny_dir

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    media_dir = Path(media_dir or default_tiny_dir().parent / "evalset")
    items = build_eval_set(media_dir)[:limit]
    readers = Readers()
    oracles = {it.id: oracle_needs_high_res(it, readers) for it in items}
    rows = []
    vlm_params = {"max_new_tokens": max_new_tokens}
    for media in ("video", "images"):
        subset = [it for it in items if it.media_kind == media]
        for label, (pipe, overrides) in PIPELINES[media].items() if subset else ():
            qa = QA.offline(pipe, size=size, overrides=overrides,
                            type_overrides={"vlm_answer": vlm_params}).setup()
            for it in tqdm(subset, desc=f"{media}/{label}", disable=not progress):
                t0 = time.perf_counter()
                answer = qa.ask(it.media_arg(), it.question)
                row = row_for(it, label, answer, time.perf_counter() - t0, readers, oracles[it.id])
                rows.append({"media": media, **row})
    summary = summarize(rows)
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"cpu ({platform.processor() or platform.machine()})"
    tag = "gpu" if torch.cuda.is_available() else "cpu"
    result = {"device": device, "vlm": f"random-weight tiny Qwen2-VL ({size})",
              "clip": "random-init ViT-B-32", "ocr": "RapidOCR PP-OCR (real)",
              "detector": "YOLO11n ONNX (real)", "max_new_tokens": max_new_tokens,
              "note": "VLM and CLIP weights are random: costs and timings are real, VLM answers "
                      "are not. Evidence recall uses real OCR on the pixels each answer was based on.",
              "summary": summary, "ratios": ratios(summary), "rows": rows}
    (out_dir / f"cascade_{tag}.json").write_text(json.dumps(result, indent=1, default=str))
    plot(summary, out_dir / f"cascade_{tag}.png")
    return result


def ratios(summary: dict[str, Any]) -> dict[str, Any]:
    """The headline comparisons, measured in this run."""
    out = {}
    for media, cascade in (("video", "video_qa"), ("video", "video_qa[hint]"),
                           ("images", "multi_image_qa"), ("images", "multi_image_qa[hint]")):
        c, f, t = (summary.get(f"{media}/{p}") for p in (cascade, "full_res", "thumbnail_only"))
        if not (c and f and t):
            continue
        out[f"{media}/{cascade}"] = {
            "token_reduction_vs_full_res": (f["visual_tokens"] or 0) / max(c["visual_tokens"] or 0, 1),
            "evidence_recall_points_vs_full_res": 100 * ((c["evidence_recall"] or 0) - (f["evidence_recall"] or 0)),
            "evidence_recall_points_vs_thumbnail_only": 100 * ((c["evidence_recall"] or 0) - (t["evidence_recall"] or 0)),
            "seconds_speedup_vs_full_res": (f["seconds"] or 0) / max(c["seconds"] or 1e-9, 1e-9)}
    return out
