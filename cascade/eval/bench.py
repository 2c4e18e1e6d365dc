"""`cascade bench`: the cascade against its baselines on one split of the built-in evaluation set,
reported per genre.

For every pipeline (the cascade, its `[hint]` variant whose tools never answer, and the
`full_res` / `thumbnail_only` baselines, all through the same code) and every question:

- **evidence recall**: is the gold answer readable, by a real OCR model, in the exact pixels sent
  to the VLM, each image at the size the VLM's processor resizes it to? (A tool answer sends
  nothing; its pipeline's `[hint]` variant measures what the fine path would have sent.)
- **tool answers given / exact**: a tool answer counts as right only when it is exactly the gold
  span (`judge.same_span`); the wrong ones are listed by id. Abstaining costs coverage, never
  precision.
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

import platform
import time
from pathlib import Path
from typing import Any

from ..api import QA
from ..artifacts import Answer, Image
from ..cache import clear_all_caches
from ..provenance import write_results
from .build import build_eval_set
from .items import EvalItem
from .judge import Readers, evidence_order, oracle_needs_high_res, same_span
from .report import plot_genres, ratios, summarize, summarize_genres
from .roles import PIPELINES, role_of


def _base_row(item: EvalItem, pipeline: str) -> dict[str, Any]:
    return {
        "id": item.id,
        "genre": item.genre,
        "lang": item.lang,
        "target": item.target,
        "pipeline": pipeline,
        "role": role_of(pipeline),
        "media": item.media_kind,
        "kind": item.kind,
        "question": item.question,
        "gold": item.answer,
        "text_size": item.text_size,
    }


def row_for(
    item: EvalItem,
    pipeline: str,
    answer: Answer,
    seconds: float,
    readers: Readers,
    oracle: bool | None,
) -> dict[str, Any]:
    usage = answer.usage
    routes = {r.branch for r in answer.evidence.routes}
    high_res = None
    if routes & {"high_res", "thumbnail"}:
        high_res = "high_res" in routes
    sent = list(answer.evidence.images) if answer.produced_by == "vlm" else []
    row = _base_row(item, pipeline) | {
        "answer": answer.text,
        "produced_by": answer.produced_by,
        "visual_tokens": int(usage.get("visual_tokens", 0)),
        "baseline_visual_tokens": usage.get("baseline_visual_tokens"),
        "prefill_flops": float(usage.get("computed_prefill_flops", 0.0)),
        "ttft_s": usage.get("ttft_s"),
        "seconds": seconds,
        "images_sent": len(sent),
        "routed_high_res": high_res,
        "oracle_high_res": oracle,
        "routes": [f"{r.branch}: {r.reason}" for r in answer.evidence.routes],
    }
    if item.kind in ("read", "doc") and answer.produced_by == "vlm":
        family = readers.full_res if pipeline == "full_res" else readers.vlm
        row["evidence_readable"] = readers.reads(evidence_order(item, sent), item.answer, family)
    if answer.produced_by == "tool":
        row["tool_exact"] = same_span(answer.text, item.answer)
    return row


def ask_cold_then_warm(
    qa: QA,
    item: EvalItem,
    label: str,
    readers: Readers,
    oracle: bool | None,
    warm: bool = True,
) -> tuple[dict[str, Any], Answer]:
    """Ask `item` like for like: every content cache emptied first (no embedding, OCR or KV
    prefix left from an earlier question), then once more warm (what a follow-up about the same
    media costs). The row holds the cold figures and the warm ones apart. `warm=False` skips the
    second ask (its figures are costs only: the judged row is the cold one either way)."""
    clear_all_caches()
    t0 = time.perf_counter()
    answer = qa.ask(item.media_arg(), item.question)
    row = row_for(item, label, answer, time.perf_counter() - t0, readers, oracle)
    if not warm:
        return row, answer
    t0 = time.perf_counter()
    again = qa.ask(item.media_arg(), item.question)
    row |= {
        "warm_seconds": time.perf_counter() - t0,
        "warm_prefill_flops": float(again.usage.get("computed_prefill_flops", 0.0)),
        "warm_kv_cache": again.usage.get("cache"),
    }
    return row, answer


def full_res_row(item: EvalItem, readers: Readers) -> dict[str, Any]:
    """The full_res row without running the VLM (`--full-res estimate`): the same frames full_res
    samples, their exact token count, and evidence read in them at the size sent. No timing."""
    from ..media import VideoSource

    images: list[Image]  # a video's frames, or the images
    if item.media_kind == "video":
        images = list(VideoSource(item.media[0]).sample("fps", 1.0, 32, None))
    else:
        images = [Image.open(m, media_index=i) for i, m in enumerate(item.media)]
    tokens = sum(readers.full_res.visual_tokens(im.width, im.height) for im in images)
    row = _base_row(item, "full_res") | {
        "answer": None,
        "produced_by": "vlm",
        "visual_tokens": tokens,
        "baseline_visual_tokens": tokens,
        "prefill_flops": None,
        "ttft_s": None,
        "seconds": None,
        "images_sent": len(images),
        "routed_high_res": None,
        "oracle_high_res": None,
        "estimated": True,
        "routes": [],
    }
    if item.kind in ("read", "doc"):
        row["evidence_readable"] = readers.reads(
            evidence_order(item, images), item.answer, readers.full_res
        )
    return row


def pipeline_qa(
    pipe: str,
    overrides: dict,
    size: str = "bench",
    max_new_tokens: int = 8,
    route_policy: str = "cascade",
) -> QA:
    """One of `PIPELINES`' entries set up as `cascade bench` runs it (random-weight VLM of
    `size`, answers cut at `max_new_tokens`, the path route's policy `route_policy`)."""
    by_type = {
        "vlm_answer": {"max_new_tokens": max_new_tokens},
        "path_route": {"policy": route_policy},
    }
    return QA.offline(pipe, size=size, overrides=overrides, type_overrides=by_type).setup()


def judged_row(
    item: EvalItem,
    label: str,
    qa: QA | None,
    readers: Readers,
    oracle: bool | None,
    warm: bool = True,
) -> dict[str, Any]:
    """One question through one pipeline, judged: asked cold then warm (`ask_cold_then_warm`),
    or, with no `qa` (full_res estimated), `full_res_row`."""
    if qa is None:
        return full_res_row(item, readers)
    return ask_cold_then_warm(qa, item, label, readers, oracle, warm)[0]


def bench_items(
    items: list[EvalItem],
    readers: Readers,
    size: str = "bench",
    max_new_tokens: int = 8,
    full_res: str = "run",
    progress: bool = True,
    warm: bool = True,
    route_policy: str = "cascade",
) -> list[dict[str, Any]]:
    """The rows of `cascade bench` for `items`: every pipeline of `PIPELINES` for their kind of
    media, one pipeline at a time, every question judged by `judged_row`. `full_res="estimate"`
    counts the full-resolution baseline's tokens and reads its evidence without running it
    through the VLM; `warm=False` asks each question cold only (no follow-up figures);
    `route_policy` as in `run_bench`."""
    from tqdm import tqdm

    oracles = {it.id: oracle_needs_high_res(it, readers) for it in items}
    rows = []
    for media, pipelines in PIPELINES.items():
        subset = [it for it in items if it.media_kind == media]
        for label, (pipe, overrides) in pipelines.items() if subset else ():
            estimate = label == "full_res" and full_res == "estimate"
            qa = (
                None
                if estimate
                else pipeline_qa(pipe, overrides, size, max_new_tokens, route_policy)
            )
            for it in tqdm(subset, desc=f"{media}/{label}", disable=not progress or estimate):
                rows.append(judged_row(it, label, qa, readers, oracles[it.id], warm))
    return rows


def run_bench(
    out_dir: str | Path = "benchmarks/results",
    media_dir: str | Path | None = None,
    split: str = "test",
    quick: bool = False,
    size: str = "bench",
    limit: int | None = None,
    max_new_tokens: int = 8,
    full_res: str = "run",
    progress: bool = True,
    genres=None,
    route_policy: str = "cascade",
) -> dict[str, Any]:
    """Run every pipeline on one split; write `cascade_<split>[_quick][_<genres>]_<device>.json`
    and a per-genre `.png`.

    `genres` runs some genres only; `limit` keeps the first `limit` questions of each genre.
    `full_res="estimate"` does not run the full-resolution baseline through the VLM (tens of
    thousands of visual tokens per video: minutes each on a CPU): its tokens are counted exactly
    and its evidence read by OCR on the frames it would send; it has no time then.
    `route_policy` is the cascades' path route (`path_route`): "cascade" (forced, the default:
    the evidence targets measure the cascade, small images included), "cost" (what users get:
    the whole media where that is cheaper on this device) or "full"."""
    import torch

    from ..vlm import build_tiny_vlm, default_tiny_dir

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    media_dir = Path(media_dir or default_tiny_dir().parent / "evalset")
    items = build_eval_set(media_dir, split, quick, genres)
    if limit:
        items = [
            it
            for g in dict.fromkeys(i.genre for i in items)
            for it in [i for i in items if i.genre == g][:limit]
        ]
    readers = Readers(model=str(build_tiny_vlm(size=size)))
    rows = bench_items(
        items, readers, size, max_new_tokens, full_res, progress, route_policy=route_policy
    )
    summary, per_genre = summarize(rows), summarize_genres(rows)
    gpu = torch.cuda.is_available()
    device = (
        torch.cuda.get_device_name()
        if gpu
        else f"cpu ({platform.processor() or platform.machine()})"
    )
    picked = f"_{'+'.join(sorted(set(genres)))}" if genres else ""
    policy = "" if route_policy == "cascade" else f"_{route_policy}"
    tag = f"cascade_{split}{'_quick' if quick else ''}{picked}{policy}_{'gpu' if gpu else 'cpu'}"
    result = {
        "split": split,
        "quick": quick,
        "limit": limit,
        "genres": sorted(per_genre),
        "full_res": full_res,
        "route_policy": route_policy,
        "device": device,
        "vlm": f"random-weight tiny Qwen2-VL ({size})",
        "clip": "random-init ViT-B-32",
        "ocr": "RapidOCR PP-OCR (real)",
        "detector": "YOLO11n ONNX (real)",
        "max_new_tokens": max_new_tokens,
        "note": "VLM and CLIP weights are random: costs are real, VLM answers are not. "
        "Evidence recall = real OCR reads the gold answer in the pixels sent to the "
        "VLM at the size sent (the cascade's is measured on its [hint] variant). "
        "A tool answer counts as exact only when it is the gold span itself. "
        "Seconds and FLOPs are cold (caches emptied per question, FLOPs as "
        "computed); warm_* re-asks with every cache hot. Seconds were measured on a "
        "shared CPU: noisy.",
        "by_genre": per_genre,
        "summary": summary,
        "ratios": ratios(summary),
        "rows": rows,
    }
    write_results(out_dir / f"{tag}.json", result, bulky=("rows",))
    plot_genres(per_genre, out_dir / f"{tag}.png", split)
    return result
