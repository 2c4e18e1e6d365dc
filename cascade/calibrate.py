"""`cascade doctor --calibrate`: measure what the route decision needs on this device and cache it
(`cascade.calibration`).

- The VLM: real calls of a real architecture (default: the random-weight "bench" Qwen2-VL, a
  ~200M-parameter decoder 1024 wide and an 8-block tower: matmuls of a width near a 2B model's;
  or any checkpoint given) on images of growing size, after a warm-up call, every cache emptied
  first; seconds fitted against the cost model's FLOPs: overhead + FLOPs / throughput + decode
  steps x step + visual tokens x per-token work.
- Each shipped cascade (doc_qa, multi_image_qa, video_qa): the pipeline run with the cascade
  forced, then with the full path forced, on the generated evaluation media of the dev split
  (pages at two scales, image sets, videos), after one unmeasured run of each path, caches
  emptied first; the seconds spent outside
  the VLM fitted against the megapixels, frames and text the path router sees (the same
  `image_media` / `video_media` it prices with), and the share of cascade runs that reached the
  VLM.

Weights are random where no hub is reachable (the VLM, CLIP): their costs are real, which is all
that is measured here. OCR, layout and the detector are the real models.
"""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from .calibration import (
    Calibration,
    Clock,
    LinearCost,
    PathCosts,
    VLMThroughput,
    clock_seconds,
    device_clock,
    device_label,
)
from .errors import InputError

__all__ = [
    "calibrate",
    "measure_vlm",
    "measure_pipeline",
    "fit_nonnegative",
    "upscaled",
    "CALIBRATED",
]

# media kind of the eval set -> the shipped cascade measured on it
CALIBRATED = {"document": "doc_qa", "images": "multi_image_qa", "video": "video_qa"}


def fit_nonnegative(
    features: list[list[float]], seconds: list[float], relative: bool = False
) -> list[float]:
    """Least-squares coefficients >= 0 of seconds ~ features (costs never go negative).
    `relative`: minimise each point's error relative to its seconds, so a 0.5 s call weighs as
    much as a 40 s one (plain least squares fits the largest points and misses small ones by
    half; the route is judged on its relative error per run)."""
    from scipy.optimize import nnls

    x, y = np.asarray(features, dtype=float), np.asarray(seconds, dtype=float)
    if relative:
        w = 1.0 / np.maximum(y, 1e-3)
        x, y = x * w[:, None], y * w
    coef, _ = nnls(x, y)
    return [float(c) for c in coef]


def _calibration_image(tokens: int, unit: int, seed: int) -> Any:
    """A noisy RGB image of about `tokens` visual tokens (unit: pixels per token side)."""
    from PIL import Image as PILImage

    side = max(1, round(tokens**0.5)) * unit
    rng = np.random.default_rng(seed)
    return PILImage.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8))


def measure_vlm(
    model: str,
    device: str = "cpu",
    token_counts: Iterable[int] = (32, 256, 512, 1024, 2048),
    rounds: int = 2,
    max_new_tokens: int = 8,
) -> tuple[VLMThroughput, list[dict[str, float]]]:
    """Fit the VLM's seconds (on the device's clock, `device_clock`) on this device against its
    cost-model FLOPs and visual tokens. Each call is cold (caches emptied; a fresh image);
    every size is measured once per round, rounds after one another (a burst of load from
    another job then slows one call of a size, not all of its calls), the fastest of each size
    kept: noise on a shared machine only adds. Returns the fit and the points it was fitted
    on."""
    from .cache import clear_all_caches
    from .vlm import VLM

    clock = device_clock(device)
    vlm = VLM.load(model, device=device, resolution="full")
    unit = int(getattr(vlm.family, "patch", 14)) * int(getattr(vlm.family, "merge", 2))
    vlm.generate(_calibration_image(16, unit, 0), "warm up", max_new_tokens=2)  # warm every path
    sizes = list(token_counts)
    best: dict[int, dict[str, float]] = {}
    for r in range(rounds):
        for i, tokens in enumerate(sizes):
            clear_all_caches()
            image = _calibration_image(tokens, unit, 1000 * i + r + 1)
            t0 = clock_seconds(clock)
            b = vlm.generate(image, "Describe the image.", max_new_tokens=max_new_tokens).bill
            s = clock_seconds(clock) - t0
            if i not in best or s < best[i]["seconds"]:
                best[i] = {
                    "visual_tokens": float(b.visual_tokens),
                    "flops": b.vision_flops + b.prefill_flops + b.decode_flops,
                    "steps": float(max(b.generated_tokens - 1, 0)),
                    "seconds": s,
                }
    points = [best[i] for i in range(len(sizes))]
    a, rate_inv, step, per_token = fit_nonnegative(
        [[1.0, p["flops"], p["steps"], p["visual_tokens"]] for p in points],
        [p["seconds"] for p in points],
        relative=True,
    )
    if rate_inv <= 0:
        raise InputError(
            f"calibrating {model}: its seconds did not grow with FLOPs over "
            f"{[int(p['visual_tokens']) for p in points]} visual tokens; measure larger images"
        )
    return VLMThroughput(1.0 / rate_inv, a, step, str(model), per_token), points


def _features(qa: Any, media: Any) -> tuple[Any, Any]:
    """The path router's view of `media` in this pipeline: (Media, its `path` stage)."""
    from .artifacts import Image
    from .routers.path_route import image_media, video_media

    path = qa.pipeline.stages["path"]
    p = path.params
    if isinstance(media, str):
        return video_media(
            media, p.full_fps, p.full_max_frames, p.cascade_fps, p.cascade_max_frames,
            p.cascade_size,
        ), path  # fmt: skip
    return image_media([Image.open(m, media_index=i) for i, m in enumerate(media)]), path


def run_priced(
    qa: Any,
    media: Any,
    question: str,
    policy: str,
    count_flops: bool = False,
    clock: Clock = "wall",
) -> tuple[dict[str, Any], Any]:
    """One cold run of `qa` on `media` under `policy`: (seconds on `clock`, wall seconds, the
    VLM's share of the seconds (its stages'), what produced the answer, the VLM's cost-model
    FLOPs and the route's estimates; the answer). `count_flops`: also the specialists' FLOPs
    (`cascade.flop_count`: recorded during the run for microseconds, counted after the clock
    stopped)."""
    from .cache import clear_all_caches
    from .flop_count import count_specialist_flops

    clear_all_caches()
    counting = count_specialist_flops() if count_flops else contextlib.nullcontext()
    with counting as seen:
        t0, w0 = clock_seconds(clock), time.perf_counter()
        answer = qa.ask(media, question, route_policy=policy)
        seconds, wall = clock_seconds(clock) - t0, time.perf_counter() - w0
    vlm_s = sum(
        r.cpu_seconds if clock == "cpu" else r.seconds
        for r in answer.trace.stages
        if r.type == "vlm_answer"
    )
    route = next(r for r in answer.evidence.routes if r.branch in ("full", "cascade"))
    row: dict[str, Any] = {
        "seconds": seconds,
        "wall_seconds": wall,
        "vlm_seconds": vlm_s,
        "produced_by": answer.produced_by,
        "path": route.branch,
        "flops": answer.bill.flops,
        **{f"est_{k}": v for k, v in route.scores.items()},
    }
    if seen is not None:
        counted = seen.total()
        row |= {
            "specialist_flops": counted["flops"],
            "specialist_flops_by_stage": counted["per_stage"],
            "uncounted": counted["uncounted"],
        }
    return row, answer


def measure_pipeline(
    qa: Any, items: list[Any], rounds: int = 2, clock: Clock = "wall"
) -> tuple[PathCosts, list[dict[str, Any]]]:
    """Fit one pipeline's costs outside the VLM (seconds on `clock`), on both paths, from cold
    runs of `items` (after one unmeasured run of each path: the specialists' sessions load on
    their first call). Each run is repeated `rounds` times, rounds interleaved (every item and
    path once, then again), the fastest kept: on a shared machine noise only adds."""
    for policy in ("cascade", "full"):
        run_priced(qa, items[0].media_arg(), items[0].question, policy)
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for _ in range(rounds):
        for it in items:
            media = it.media_arg()
            m, _ = _features(qa, media)
            for policy in ("cascade", "full"):
                r, _ = run_priced(qa, media, it.question, policy, clock=clock)
                key = (it.id, policy)
                if key not in best or r["seconds"] < best[key]["seconds"]:
                    features = {"mp": m.megapixels, "frames": m.frames, "text": m.text,
                                "full_frames": len(m.full_sizes)}  # fmt: skip
                    best[key] = {"id": it.id, "policy": policy, **features, **r}
    rows = list(best.values())
    casc = [r for r in rows if r["policy"] == "cascade"]
    full = [r for r in rows if r["policy"] == "full"]
    c = fit_nonnegative(
        [[1.0, r["mp"], r["frames"], r["text"]] for r in casc],
        [r["seconds"] - r["vlm_seconds"] for r in casc],
        relative=True,
    )
    f = fit_nonnegative(
        [[1.0, r["full_frames"]] for r in full],
        [r["seconds"] - r["vlm_seconds"] for r in full],
        relative=True,
    )
    share = sum(r["produced_by"] == "vlm" for r in casc) / max(len(casc), 1)
    return PathCosts(LinearCost(*c), LinearCost(f[0], 0.0, f[1]), share, len(casc)), rows


def calibration_items(media_dir: Path, quick: bool) -> dict[str, list[Any]]:
    """Per media kind, the dev-split questions the cascades are measured on; pages also at twice
    their size (a large page), so the fit sees megapixels vary."""
    from .eval.build import build_eval_set

    items = build_eval_set(media_dir, "dev", quick=True)
    per_kind: dict[str, list[Any]] = {k: [] for k in CALIBRATED}
    seen: set[tuple[str, ...]] = set()
    for it in items:
        if it.media in seen or it.kind == "scene":
            continue
        seen.add(it.media)
        per_kind[it.media_kind].append(it)
    n = (
        {"document": 3, "images": 2, "video": 2}
        if quick
        else {"document": 6, "images": 3, "video": 4}
    )
    out = {k: v[: n[k]] for k, v in per_kind.items()}
    out["document"] += [upscaled(it, 2) for it in out["document"]]
    return out


def upscaled(item: Any, factor: int) -> Any:
    """A document question on its page `factor` times larger (a large page: the same text, more
    megapixels), written beside the page once."""
    from PIL import Image as PILImage

    src = Path(item.media[0])
    big = src.with_name(f"{src.stem}.x{factor}{src.suffix}")
    if not big.exists():
        im = PILImage.open(src)
        size = (im.width * factor, im.height * factor)
        im.resize(size, PILImage.Resampling.LANCZOS).save(big)
    return type(item).from_dict(
        {**item.to_dict(), "id": f"{item.id}-x{factor}", "media": [str(big)]}
    )


def calibrate(
    vlm_model: str | None = None,
    device: str = "cpu",
    media_dir: str | Path | None = None,
    quick: bool = False,
    pipelines: Iterable[str] = tuple(CALIBRATED.values()),
    progress: Callable[[str], Any] = print,
) -> tuple[Calibration, dict[str, Any]]:
    """Measure this device: the VLM's throughput (on `vlm_model`, default the random-weight
    "bench" Qwen2-VL) and each named cascade's costs outside the VLM (run offline: the tiny
    "test" VLM answers, the declared model is priced). Returns the calibration and the measured
    points (not saved: `cascade.calibration.save_calibration` does)."""
    import torch

    from .api import QA
    from .vlm import build_tiny_vlm, default_tiny_dir

    wanted = list(pipelines)
    unknown = [p for p in wanted if p not in CALIBRATED.values()]
    if unknown:
        raise InputError(
            f"cannot calibrate {unknown}: calibrated cascades are {list(CALIBRATED.values())}"
        )
    model = vlm_model or str(build_tiny_vlm(size="bench"))
    clock = device_clock(device)
    progress(f"VLM throughput on {device} with {model} ...")
    vlm, vlm_points = measure_vlm(model, device)
    progress(
        f"  {vlm.flops_per_s / 1e9:.1f} GFLOP/s, {vlm.overhead_s * 1e3:.0f} ms per call, "
        f"{vlm.step_s * 1e3:.1f} ms per decode step"
    )
    media = Path(media_dir or default_tiny_dir().parent / "evalset")
    items = calibration_items(media, quick)
    costs, rows = {}, {}
    for kind, pipe in CALIBRATED.items():
        if pipe not in wanted or not items[kind]:
            continue
        progress(f"{pipe}: {len(items[kind])} media, cascade and full path ...")
        qa = QA.offline(pipe, type_overrides={"vlm_answer": {"max_new_tokens": 8}}).setup()
        costs[pipe], rows[pipe] = measure_pipeline(qa, items[kind], clock=clock)
        c = costs[pipe]
        progress(
            f"  cascade {c.cascade.fixed_s:.2f} s + {c.cascade.per_megapixel_s:.2f} s/MP + "
            f"{c.cascade.per_frame_s:.2f} s/frame + {c.cascade.per_text_s:.2f} s/M text edges, "
            f"VLM in {c.vlm_share:.0%} of runs; "
            f"full {c.full.fixed_s:.2f} s + {c.full.per_frame_s:.3f} s/frame"
        )
    cal = Calibration(
        device=device_label(device),
        threads=torch.get_num_threads(),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        vlm=vlm,
        pipelines=costs,
        clock=clock,
    )
    return cal, {"vlm": vlm_points, "pipelines": rows}
