"""`cascade bench`: the cascade against its baselines on one split of the built-in evaluation set.

For every pipeline (the cascade, its `[hint]` variant whose tools never answer, and the
`full_res` / `thumbnail_only` baselines, all through the same code) and every question of the
split, per kind of media:

- **evidence recall**: is the gold answer readable, by a real OCR model, in the exact pixels sent
  to the VLM, each image at the size the VLM's processor resizes it to? (A tool answer sends
  nothing; its pipeline's `[hint]` variant measures what the fine path would have sent.)
- **tool precision and coverage**, separately: of the questions a tool answered, how many are
  right; and how many questions it answered at all. Abstaining costs coverage, never precision.
- **router agreement** with an oracle: was high resolution needed? Decided by running OCR / the
  detector on a 224-px thumbnail of the frame that holds the answer.
- visual tokens, prefill FLOPs and seconds against `full_res`, like for like: every question is
  asked cold (all content caches emptied first; FLOPs as computed), then again warm (the
  follow-up figure, reported apart as `warm_seconds` / `warm_prefill_flops`).

Tune on `--split dev`, report `--split test` (the default). The VLM and CLIP have random weights
here (no model hub): their costs are real, their answers are not, so answers are only scored for
tools (real OCR / YOLO).
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
from .cache import clear_all_caches
from .evalset import EvalItem, build_eval_set

# media kind -> label -> (pipeline, overrides). The `[hint]` variants never let a tool answer: the
# VLM always reads the selected crops, with the tools' findings in the prompt, so their tokens are
# the cost of the fine path itself and their evidence is what the fine path sends.
PIPELINES = {
    "video": {"video_qa": ("video_qa", {}), "video_qa[hint]": ("video_qa", {"tool.mode": "hint"}),
              "full_res": ("full_res", {}), "thumbnail_only": ("thumbnail_only", {})},
    "images": {"multi_image_qa": ("multi_image_qa", {}),
               "multi_image_qa[hint]": ("multi_image_qa", {"tool.mode": "hint"}),
               "full_res": ("full_res", {}), "thumbnail_only": ("thumbnail_only", {})},
    "document": {"doc_qa": ("doc_qa", {}), "doc_qa[hint]": ("doc_qa", {"tool.mode": "hint"}),
                 "full_res": ("full_res", {})}}
CASCADES = {"video": "video_qa", "images": "multi_image_qa", "document": "doc_qa"}
def normalize(text: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", text.upper())


def sent_size(family, image: Image) -> tuple[int, int]:
    """(width, height) the model's processor resizes `image` to before the vision tower."""
    h, w = family.resized(image.width, image.height)
    return w, h


@dataclass
class Readers:
    """Real OCR and detector, loaded once: the judges. The text detector's recall depends on its
    input scale (a sign one scale misses, another finds), so the judge reads at several."""

    det_sides: tuple[int, ...] = (960, 2048, 1280)
    model: str | None = None  # the VLM checkpoint whose resizing "the size sent" means

    def __post_init__(self):
        from .registry import get_stage_class
        from .vlm import build_tiny_vlm
        from .vlm.families import ImageLimits, load_family

        model = self.model or str(build_tiny_vlm(size="test"))
        self.vlm = load_family(model, ImageLimits())
        self.full_res = load_family(model, ImageLimits(resolution="full"))

        self.ocrs = [get_stage_class("ocr")({"det_limit_side_len": s, "min_confidence": 0.3})
                     for s in self.det_sides]
        self.detect = get_stage_class("detect")()

    def texts(self, image: Image, family=None):
        """What OCR reads in `image` resized as the VLM gets it, on a plain margin (the detector
        needs a few pixels around text; a uniform border adds no information), per scale."""
        if family is not None:
            image = image.resized(*sent_size(family, image))
        px = image.pixels
        border = np.median(np.concatenate([px[0], px[-1], px[:, 0], px[:, -1]]), axis=0)
        padded = np.empty((px.shape[0] + 32, px.shape[1] + 32, 3), np.uint8)
        padded[:] = border.astype(np.uint8)
        padded[16:-16, 16:-16] = px
        for ocr in self.ocrs:
            yield " ".join(l.text for l in ocr(images=[Image(padded)]).lines)

    def reads(self, images: list[Image], gold: str, family=None) -> bool:
        """Is `gold` readable in one of `images`?"""
        return any(normalize(gold) in normalize(text) for im in images
                   for text in self.texts(im, family))

    def count(self, images: list[Image], label: str = "person") -> int:
        counts = [self.detect(images=[im]).counts.get(label, 0) for im in images]
        return max(counts, default=0)


def answer_frames(item: EvalItem) -> list[Image]:
    """Full-resolution images that hold the answer (the middle gold frame for a video)."""
    if item.media_kind != "video":
        return [Image.open(item.media[i], media_index=i) for i in item.frames]
    from .media import VideoSource

    mid = item.times[len(item.times) // 2]
    return list(VideoSource(item.media[0]).fetch([mid]).values())


def oracle_needs_high_res(item: EvalItem, readers: Readers, thumb: int = 224) -> bool | None:
    """Is the answer lost on a thumbnail? Decided by the real OCR/detector, not by us. None for
    documents (doc_qa has no resolution router)."""
    if item.media_kind == "document":
        return None
    if item.kind == "scene":
        return False
    from .stages.resize import fit_longest_side

    thumbs = [fit_longest_side(im, thumb) for im in answer_frames(item)]
    if item.kind == "read":
        return not readers.reads(thumbs, item.answer)
    return readers.count(thumbs) != int(item.answer)


def _evidence_order(item: EvalItem, images: list[Image]) -> list[Image]:
    """Images that show the answer's frame first (judging stops at the first that reads it)."""
    def first(im: Image) -> bool:
        t = getattr(im, "timestamp", None)
        if item.media_kind == "video" and t is not None and item.times:
            return min(item.times) - 0.05 <= t <= max(item.times) + 0.05
        return im.media_index in item.frames
    return sorted(images, key=lambda im: not first(im))


def row_for(item: EvalItem, pipeline: str, answer: Answer, seconds: float, readers: Readers,
            oracle: bool | None) -> dict[str, Any]:
    usage = answer.usage
    routes = {r.branch for r in answer.evidence.routes}
    high_res = None
    if routes & {"high_res", "thumbnail"}:
        high_res = "high_res" in routes
    sent = list(answer.evidence.images) if answer.produced_by == "vlm" else []
    row = {"id": item.id, "pipeline": pipeline, "media": item.media_kind, "kind": item.kind,
           "question": item.question, "gold": item.answer, "answer": answer.text,
           "produced_by": answer.produced_by, "text_size": item.text_size,
           "visual_tokens": int(usage.get("visual_tokens", 0)),
           "baseline_visual_tokens": usage.get("baseline_visual_tokens"),
           "prefill_flops": float(usage.get("computed_prefill_flops", 0.0)),
           "ttft_s": usage.get("ttft_s"), "seconds": seconds, "images_sent": len(sent),
           "routed_high_res": high_res, "oracle_high_res": oracle,
           "routes": [f"{r.branch}: {r.reason}" for r in answer.evidence.routes]}
    if item.kind in ("read", "doc") and answer.produced_by == "vlm":
        family = readers.full_res if pipeline == "full_res" else readers.vlm
        row["evidence_readable"] = readers.reads(_evidence_order(item, sent), item.answer, family)
    if answer.produced_by == "tool":
        row["tool_correct"] = normalize(answer.text) == normalize(item.answer)
    return row


def ask_cold_then_warm(qa: QA, item: EvalItem, label: str, readers: Readers,
                       oracle: bool | None) -> tuple[dict[str, Any], Answer]:
    """Ask `item` like for like: every content cache emptied first (no embedding, OCR or KV
    prefix left from an earlier question), then once more warm (what a follow-up about the same
    media costs). The row holds the cold figures and the warm ones apart."""
    clear_all_caches()
    t0 = time.perf_counter()
    answer = qa.ask(item.media_arg(), item.question)
    row = row_for(item, label, answer, time.perf_counter() - t0, readers, oracle)
    t0 = time.perf_counter()
    warm = qa.ask(item.media_arg(), item.question)
    row |= {"warm_seconds": time.perf_counter() - t0,
            "warm_prefill_flops": float(warm.usage.get("computed_prefill_flops", 0.0)),
            "warm_kv_cache": warm.usage.get("cache")}
    return row, answer


def full_res_row(item: EvalItem, readers: Readers) -> dict[str, Any]:
    """The full_res row without running the VLM (`--full-res estimate`): the same frames full_res
    samples, their exact token count, and evidence read in them at the size sent. No timing."""
    from .media import VideoSource

    if item.media_kind == "video":
        images = VideoSource(item.media[0]).sample("fps", 1.0, 32, None)
    else:
        images = [Image.open(m, media_index=i) for i, m in enumerate(item.media)]
    tokens = sum(readers.full_res.visual_tokens(im.width, im.height) for im in images)
    row = {"id": item.id, "pipeline": "full_res", "media": item.media_kind, "kind": item.kind,
           "question": item.question, "gold": item.answer, "answer": None, "produced_by": "vlm",
           "text_size": item.text_size, "visual_tokens": tokens, "baseline_visual_tokens": tokens,
           "prefill_flops": None, "ttft_s": None, "seconds": None, "images_sent": len(images),
           "routed_high_res": None, "oracle_high_res": None, "estimated": True, "routes": []}
    if item.kind in ("read", "doc"):
        row["evidence_readable"] = readers.reads(_evidence_order(item, images), item.answer,
                                                 readers.full_res)
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key, subset):
        vals = [r[key] for r in subset if r.get(key) is not None]
        return float(np.mean(vals)) if vals else None

    out: dict[str, Any] = {}
    for media in PIPELINES:
        for pipe in dict.fromkeys(r["pipeline"] for r in rows if r["media"] == media):
            sub = [r for r in rows if r["pipeline"] == pipe and r["media"] == media]
            reads = [r for r in sub if "evidence_readable" in r]
            routed = [r for r in sub if r["routed_high_res"] is not None
                      and r["oracle_high_res"] is not None]
            tools = [r for r in sub if "tool_correct" in r]
            askable = [r for r in sub if r["kind"] in ("read", "doc", "count")]
            out[f"{media}/{pipe}"] = {
                "questions": len(sub), "visual_tokens": mean("visual_tokens", sub),
                "prefill_flops": mean("prefill_flops", sub), "seconds": mean("seconds", sub),
                "ttft_s": mean("ttft_s", sub), "warm_seconds": mean("warm_seconds", sub),
                "warm_prefill_flops": mean("warm_prefill_flops", sub),
                "evidence_recall": (sum(r["evidence_readable"] for r in reads) / len(reads))
                if reads else None,
                "evidence_questions": len(reads),
                "router_agreement": (sum(r["routed_high_res"] == r["oracle_high_res"] for r in routed)
                                     / len(routed)) if routed else None,
                # Missing a needed high-res look loses the answer; an extra one only costs tokens.
                "router_missed_high_res": sum(r["oracle_high_res"] and not r["routed_high_res"]
                                              for r in routed),
                "router_extra_high_res": sum(r["routed_high_res"] and not r["oracle_high_res"]
                                             for r in routed),
                "tool_answers": len(tools),
                "tool_wrong": sum(not r["tool_correct"] for r in tools),
                "tool_precision": (sum(r["tool_correct"] for r in tools) / len(tools)) if tools else None,
                "tool_coverage": (len(tools) / len(askable)) if askable and tools is not None else None}
    return out


def ratios(summary: dict[str, Any]) -> dict[str, Any]:
    """The headline comparisons, measured in this run."""
    out = {}
    for media, cascade in CASCADES.items():
        for label in (cascade, f"{cascade}[hint]"):
            c, f = summary.get(f"{media}/{label}"), summary.get(f"{media}/full_res")
            if not (c and f):
                continue
            out[f"{media}/{label}"] = {
                "token_reduction_vs_full_res": (f["visual_tokens"] or 0) / max(c["visual_tokens"] or 0, 1),
                "evidence_recall": c["evidence_recall"], "full_res_evidence_recall": f["evidence_recall"],
                "seconds_speedup_vs_full_res": (f["seconds"] or 0) / max(c["seconds"] or 1e-9, 1e-9)}
    return out


def plot(summary: dict[str, Any], path: Path, split: str) -> None:
    from matplotlib.figure import Figure  # no pyplot: leaves a notebook's backend alone

    fig = Figure(figsize=(9.6, 4.4))
    ax = fig.subplots()
    markers = {"video": "o", "images": "s", "document": "^"}
    points: dict[tuple[float, float], list[str]] = {}  # pipelines at the same point share an entry
    for key, s in summary.items():
        if s["evidence_recall"] is not None and s["visual_tokens"]:
            points.setdefault((s["visual_tokens"], 100 * s["evidence_recall"]), []).append(key)
    for xy, keys in points.items():  # a legend, not labels: many points sit at 100 % recall
        ax.scatter(*xy, s=70, marker=markers[keys[0].split("/")[0]], label=" = ".join(keys))
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    ax.set_xscale("log")
    ax.set_xlabel("visual tokens per question (log)")
    ax.set_ylabel("evidence recall (%)")
    ax.set_ylim(-5, 105)
    ax.set_title(f"{split} split: tokens sent to the VLM vs. whether the answer was in them")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run_bench(out_dir: str | Path = "benchmarks/results", media_dir: str | Path | None = None,
              split: str = "test", quick: bool = False, size: str = "bench",
              limit: int | None = None, max_new_tokens: int = 8, full_res: str = "run",
              progress: bool = True) -> dict[str, Any]:
    """Run every pipeline on one split; write `cascade_<split>[_quick]_<device>.json` and `.png`.

    `full_res="estimate"` does not run the full-resolution baseline through the VLM (tens of
    thousands of visual tokens per video: minutes each on a CPU): its tokens are counted exactly
    and its evidence read by OCR on the frames it would send; it has no time then."""
    from tqdm import tqdm

    from .vlm import build_tiny_vlm, default_tiny_dir

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    media_dir = Path(media_dir or default_tiny_dir().parent / "evalset")
    items = build_eval_set(media_dir, split, quick)
    if limit:  # the first `limit` questions of each kind of media
        items = [it for media in PIPELINES for it in
                 [i for i in items if i.media_kind == media][:limit]]
    readers = Readers(model=str(build_tiny_vlm(size=size)))
    oracles = {it.id: oracle_needs_high_res(it, readers) for it in items}
    rows = []
    vlm_params = {"max_new_tokens": max_new_tokens}
    for media, pipelines in PIPELINES.items():
        subset = [it for it in items if it.media_kind == media]
        for label, (pipe, overrides) in pipelines.items() if subset else ():
            if label == "full_res" and full_res == "estimate":
                rows += [full_res_row(it, readers) for it in subset]
                continue
            qa = QA.offline(pipe, size=size, overrides=overrides,
                            type_overrides={"vlm_answer": vlm_params}).setup()
            for it in tqdm(subset, desc=f"{media}/{label}", disable=not progress):
                row, _ = ask_cold_then_warm(qa, it, label, readers, oracles[it.id])
                rows.append(row)
    summary = summarize(rows)
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else \
        f"cpu ({platform.processor() or platform.machine()})"
    tag = f"cascade_{split}{'_quick' if quick else ''}_{'gpu' if torch.cuda.is_available() else 'cpu'}"
    result = {"split": split, "quick": quick, "limit": limit, "full_res": full_res, "device": device,
              "vlm": f"random-weight tiny Qwen2-VL ({size})", "clip": "random-init ViT-B-32",
              "ocr": "RapidOCR PP-OCR (real)", "detector": "YOLO11n ONNX (real)",
              "max_new_tokens": max_new_tokens,
              "note": "VLM and CLIP weights are random: costs are real, VLM answers are not. "
                      "Evidence recall = real OCR reads the gold answer in the pixels sent to the "
                      "VLM at the size sent. Seconds and FLOPs are cold (caches emptied per "
                      "question, FLOPs as computed); warm_* re-asks with every cache hot. "
                      "Seconds were measured on a shared CPU: noisy.",
              "summary": summary, "ratios": ratios(summary), "rows": rows}
    (out_dir / f"{tag}.json").write_text(json.dumps(result, indent=1, default=str))
    plot(summary, out_dir / f"{tag}.png", split)
    return result
