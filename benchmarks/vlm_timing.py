"""Timed pieces of the VLM benchmark (benchmarks/vlm.py): every figure is the best of interleaved
rounds, after one untimed warm-up call of every piece (oneDNN builds kernels per input shape; a
serving process has them built).

A round calls every piece once, in order, so load from other processes on a shared machine hits
all configs alike and best-of filters it out. Pieces return their own seconds, so each times
exactly its interior.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from cascade.cost import fastv_prefill_flops, prefill_flops
from cascade.vlm import VLM, KVPrefixCache, ReductionConfig
from cascade.vlm.fastv import fastv_prefill
from cascade.vlm.kv_cache import dequantize_kv, quantize_kv
from cascade.vlm.reduction import keep_count, reduce_tokens, tower_select

__all__ = [
    "rounds",
    "Sweep",
    "turn2",
    "int8_storage",
    "reduction_at_4096",
    "use_clock",
    "timed",
    "CLOCK",
    "WALL",
]


# Wall-clock seconds of every piece's call, per `rounds` label, whatever the clock (recorded).
WALL: dict[str, dict[str, list[float]]] = {}


def rounds(
    pieces: dict[str, Callable[[], float]], n: int, label: str = ""
) -> dict[str, list[float]]:
    """Warm every piece once, then n interleaved rounds: {name: [seconds per round]}."""
    for f in pieces.values():
        f()
    times: dict[str, list[float]] = {k: [] for k in pieces}
    wall = WALL.setdefault(label, {k: [] for k in pieces})
    for i in range(n):
        for k, f in pieces.items():
            t = time.perf_counter()
            times[k].append(f())
            wall[k].append(time.perf_counter() - t)
        print(
            f"  {label} round {i + 1}/{n}: "
            + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()),
            flush=True,
        )
    return times


# The clock every piece is timed with (`use_clock`): "wall" (time.perf_counter) or "cpu"
# (time.process_time: CPU seconds of this process). With one torch thread on a CPU the process's
# CPU time is its compute time, the time it would take on a core of its own: on a shared machine
# the wall clock also counts the time other processes hold the core, which hits long pieces
# more often than short ones and so inflates speedups (best-of filters that only on a quiet
# machine). The benchmark uses "cpu" for 1-thread CPU runs and "wall" otherwise, and records both.
CLOCK = {"kind": "wall"}


def use_clock(kind: str) -> None:
    assert kind in ("wall", "cpu")
    CLOCK["kind"] = kind


def _clock(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.process_time() if CLOCK["kind"] == "cpu" else time.perf_counter()


def timed(device: torch.device, f: Callable[[], object]) -> float:
    """Seconds of f() on the benchmark's clock."""
    t = _clock(device)
    f()
    return _clock(device) - t


class Sweep:
    """The keep-ratio sweep on one image. Shared parts are computed once: preprocessing and the
    full tower's features (every post-tower method reduces the same features). Timed pieces:

    - preprocess: image -> tower inputs + tokenized prefix (shared by every config);
    - tower/full: the whole vision tower; tower/tower@r: the tower on the kept merge units only;
    - prefill/<m>@<r>: the reduction (selection, gather, embedding of the kept tokens; FastV's
      ranking runs inside its decoder) + the LLM prefill of the whole prompt (prefix + question,
      one chunk) + the last token's logits: the reduction's time is inside the timed prefill;
    - reduce/<m>@<r>: the reduction alone (`reduce_tokens` per block; `tower`: its selection).
    e2e TTFT of a config = preprocess + its tower + its prefill.
    """

    def __init__(self, vlm: VLM, img, question: str, configs: list[ReductionConfig]):
        b = self.b = vlm.backend
        self.fam, self.img, self.configs = b.runtime, img, configs
        self.prefix_text, suffix = b.layout.first_turn(1, None, question)
        self.suffix = b.layout.tokenize(suffix)
        self.pre = self._preprocess()
        with torch.inference_mode():
            self.feats = self.fam.encode(self.pre.vision_inputs)
        self.units = {
            red: self.fam.tower_keep(self.pre.vision_inputs, red.keep_ratio, red.keep_regions)
            for red in configs
            if red.before_tower
        }
        with torch.inference_mode():
            self.tower_feats = {
                red: self.fam.encode(self.pre.vision_inputs, keep=u)
                for red, u in self.units.items()
            }

    def _preprocess(self):
        fam = self.fam
        return fam.build_prefix(self.prefix_text, fam.preprocess([self.img.to_pil()]))

    # -- pieces -------------------------------------------------------------------------------
    def time_preprocess(self) -> float:
        t = _clock(self.b.device)
        self._preprocess()
        return _clock(self.b.device) - t

    def time_tower(self, red: ReductionConfig | None = None) -> float:
        t = _clock(self.b.device)
        with torch.inference_mode():
            if red is None:
                self.fam.encode(self.pre.vision_inputs)
            else:
                self.fam.encode(self.pre.vision_inputs, keep=self.units[red])
        return _clock(self.b.device) - t

    def time_reduce(self, red: ReductionConfig) -> float:
        t = _clock(self.b.device)
        with torch.inference_mode():
            if red.before_tower:
                self.fam.tower_keep(self.pre.vision_inputs, red.keep_ratio, red.keep_regions)
            else:
                for f, grid in zip(self.feats, self.pre.grids, strict=True):
                    reduce_tokens(f, grid, red, self.b.ops)
        return _clock(self.b.device) - t

    def prefill(self, red: ReductionConfig, units=None, feats=None) -> tuple[float, torch.Tensor]:
        """(seconds, last-token logits) of reduction + prefill of the whole prompt."""
        fam, eng = self.fam, self.b.engine
        fastv = red.method == "fastv" and not red.is_identity
        cache = eng.new_cache()
        t = _clock(self.b.device)
        with torch.inference_mode():
            if red.before_tower:
                units = fam.tower_keep(self.pre.vision_inputs, red.keep_ratio, red.keep_regions)
                feats = self.tower_feats[red]
            a = eng.reduce(
                self.pre,
                feats if feats is not None else self.feats,
                ReductionConfig() if fastv else red,
                units,
            )
            emb = torch.cat([a.embeds, fam.embed(torch.tensor(self.suffix, device=self.b.device))])[
                None
            ]
            pos = torch.cat([a.positions, fam.text_positions(a.next_pos, len(self.suffix))], dim=1)
            if fastv:
                visual = (a.ids == fam.image_token_id).nonzero().squeeze(1)
                h, _ = fastv_prefill(
                    fam,
                    emb,
                    pos,
                    visual,
                    keep_count(a.unreduced, red.keep_ratio),
                    red.fastv_layer,
                    cache,
                    a.extra,
                )
            else:
                kw = (
                    {}
                    if a.extra is None
                    else fam.visual_kwargs(
                        torch.nn.functional.pad(a.ids == fam.image_token_id, (0, len(self.suffix)))[
                            None
                        ],
                        a.extra,
                    )
                )
                h = fam.forward(emb, pos, cache, **kw)
            logits = fam.lm_head(h[:, -1])
            int(logits.argmax())
        return _clock(self.b.device) - t, logits[0]

    # -- what the cost model predicts -------------------------------------------------------------
    def tokens(self, red: ReductionConfig) -> tuple[int, int]:
        """(visual tokens the LLM reads, prompt length before reduction)."""
        n_full = self.pre.input_ids.numel() + len(self.suffix)
        unreduced = sum(e - s for s, e in self.pre.spans)
        if red.is_identity:
            return unreduced, n_full
        if red.method == "fastv":
            return keep_count(unreduced, red.keep_ratio), n_full
        if red.before_tower:
            return sum(int(u.numel()) for u in self.units[red]), n_full
        return sum(
            int(reduce_tokens(f, g, red).index.numel())
            for f, g in zip(self.feats, self.pre.grids, strict=True)
        ), n_full

    def predicted_prefill_flops(self, red: ReductionConfig) -> float:
        llm = self.fam.family.shapes.llm
        vis, n_full = self.tokens(red)
        unreduced = sum(e - s for s, e in self.pre.spans)
        n = n_full - unreduced + vis
        if red.method == "fastv" and not red.is_identity:
            return fastv_prefill_flops(llm, n_full, n, red.fastv_layer)
        return prefill_flops(llm, n)

    def predicted_vision_flops(self, red: ReductionConfig) -> float:
        fam = self.fam
        if red.before_tower:
            return fam.family.vision_flops([fam.tower_cost(self.pre.images[0], self.units[red])])
        return fam.family.vision_flops([fam.family.image_cost(self.img.width, self.img.height)])

    def identity(self) -> dict:
        """max |Δ logit| of keep 1.0 against the unreduced prefill, per method, and of the tower
        run through its kept-units path with every unit kept."""
        _, ref = self.prefill(ReductionConfig())
        out = {}
        for m in sorted({r.method for r in self.configs if r.method != "none"}):
            _, lg = self.prefill(ReductionConfig(m, 1.0))
            out[m] = float((lg - ref).abs().max())
        all_units = [torch.arange(f.shape[0]) for f in self.feats]
        with torch.inference_mode():
            feats = self.fam.encode(self.pre.vision_inputs, keep=all_units)
        _, lg = self.prefill(ReductionConfig(), units=all_units, feats=feats)
        return {
            "max_abs_logit_diff_keep_1.0_vs_unreduced": out,
            "max_abs_logit_diff_tower_path_all_units_vs_unreduced": float((lg - ref).abs().max()),
        }


def _prefix_logits(vlm: VLM, img, question: str, state) -> torch.Tensor:
    b = vlm.backend
    _, suffix = b.layout.first_turn(1, None, question)
    hidden = b.engine.prefill(b.engine.cache_of(state), state.next_pos, b.layout.tokenize(suffix))
    with torch.inference_mode():
        return b.runtime.lm_head(hidden[0, -1])


def turn2(
    path: str,
    device: str,
    img,
    question: str,
    repeats: int,
    generate_configs: list[ReductionConfig] = (),
) -> tuple[dict, dict, VLM]:
    """Turn-2 TTFT, interleaved best-of: prefix-cache hit and a session's second turn vs
    recomputing everything (tower + prefill) with `generate` (no cache); identity of a hit on
    logits. The same rounds time `generate` (no cache) under each of `generate_configs`: the
    runtime's own TTFT (prefix chunk, then the question), a check on the sweep's composed e2e
    figure. Returns (turn-2 figures, {config key: generate TTFT}, the cached VLM)."""
    cached = VLM.load(path, device=device, kv_cache_bytes=4 << 30)
    plain = VLM.load(path, device=device)
    q1, q2 = "What is in the image?", question
    cached.generate([img], q1, max_new_tokens=1)  # turn 1 fills the cache
    dev = cached.backend.device

    def session() -> float:  # turn 1 from the prefix cache (untimed), then the timed turn 2
        s = cached.session([img], max_new_tokens=1)
        s.ask(q1)
        return timed(dev, lambda: s.ask(q2))

    # max_new_tokens=1: the call ends at its first token, so its seconds are its TTFT
    pieces = {
        "cache_hit": lambda: timed(dev, lambda: cached.generate([img], q2, max_new_tokens=1)),
        "session_turn2": session,
        "recompute": lambda: timed(dev, lambda: plain.generate([img], q2, max_new_tokens=1)),
    }
    for red in generate_configs:
        pieces[f"{red.method}@{red.keep_ratio:g}"] = lambda red=red: timed(
            dev, lambda: plain.generate([img], q2, max_new_tokens=1, reduction=red)
        )
    t = rounds(pieces, repeats, "turn 2 / generate")
    b = cached.backend
    prefix, _ = b.layout.first_turn(1, None, q2)
    hit, status, *_ = b.engine.state([img], prefix, ReductionConfig())
    fresh, *_ = plain.backend.engine.compute([img], prefix, ReductionConfig())
    diff = float(
        (_prefix_logits(cached, img, q2, hit) - _prefix_logits(plain, img, q2, fresh)).abs().max()
    )
    best = {k: min(v) for k, v in t.items()}
    out = {
        "visual_tokens": hit.visual_tokens,
        "ttft_cache_hit_s": best["cache_hit"],
        "ttft_recompute_s": best["recompute"],
        "ttft_session_turn2_s": best["session_turn2"],
        "ttft_s_all": {k: t[k] for k in ("cache_hit", "session_turn2", "recompute")},
        "speedup_cache": best["recompute"] / best["cache_hit"],
        "speedup_session": best["recompute"] / best["session_turn2"],
        "cache_outcome": status,
        "max_abs_logit_diff_hit_vs_recompute": diff,
    }
    gen = {"none@1": best["recompute"], **{k: best[k] for k in pieces if "@" in k}}
    return out, gen, cached


def int8_storage(path: str, device: str, img, fp: VLM) -> dict:
    """Prefix-cache bytes with int8 storage against the runtime's own KV dtype (fp32 on CPU, bf16
    on GPU) and against bf16, the KV error of each, and the effect of int8 on logits. fp: a VLM
    whose fp prefix cache holds this image's prefix (turn 2's)."""
    q = VLM.load(path, device=device, kv_cache=KVPrefixCache(4 << 30, int8=True))
    question = "Describe the image."
    q.generate([img], question, max_new_tokens=1)  # fill the int8 cache
    prefix, _ = fp.backend.layout.first_turn(1, None, question)
    state, *_ = fp.backend.engine.state([img], prefix, ReductionConfig())
    qstate, *_ = q.backend.engine.state([img], prefix, ReductionConfig())
    i8_err, bf_err, elems = [], [], 0
    for k, v in state.layers:
        dk, dv = dequantize_kv(quantize_kv(k, v))
        for x, d in ((k, dk), (v, dv)):
            i8_err.append(((d - x).norm() / x.norm()).item())
            bf_err.append(((x.to(torch.bfloat16).to(x.dtype) - x).norm() / x.norm()).item())
            elems += x.numel()
    bf16_bytes = 2 * elems
    diff = float(
        (_prefix_logits(q, img, question, qstate) - _prefix_logits(fp, img, question, state))
        .abs()
        .max()
    )
    a = fp.generate([img], question, max_new_tokens=8)
    b = q.generate([img], question, max_new_tokens=8)
    agree = sum(x == y for x, y in zip(a.token_ids, b.token_ids, strict=False)) / max(
        len(a.token_ids), 1
    )
    return {
        "kv_dtype": str(state.layers[0][0].dtype),
        "fp_bytes": fp.kv_cache.bytes,
        "bf16_bytes": bf16_bytes,
        "int8_bytes": q.kv_cache.bytes,
        "memory_ratio": fp.kv_cache.bytes / q.kv_cache.bytes,
        "memory_ratio_vs_bf16": bf16_bytes / q.kv_cache.bytes,
        "kv_relative_error_mean": float(np.mean(i8_err)),
        "kv_relative_error_max": float(np.max(i8_err)),
        "bf16_kv_relative_error_mean": float(np.mean(bf_err)),
        "max_abs_logit_diff_int8_vs_fp": diff,
        "greedy_token_agreement": agree,
    }


def reduction_at_4096(
    sweep: Sweep,
    methods: list[str],
    ratio: float,
    repeats: int,
    known_prefill: tuple[int, float] | None = None,
) -> dict:
    """Each reduction's seconds on 4,096 visual tokens (this image's tower features, and its pixel
    units for `tower`, bilinearly resized to a 64 x 64 grid) against the reduced prefill it
    precedes: the LLM prefill of round(4096 * ratio) visual tokens + the prompt's text.
    known_prefill: (prompt tokens, seconds) of a prefill already timed (the sweep's unreduced
    one); when its length is that of the reduced prompt it is used instead of timing again."""
    fam, b = sweep.fam, sweep.b
    t, h, w = sweep.pre.grids[0]
    side = 64

    def grow(x: torch.Tensor) -> torch.Tensor:
        g = x.float().reshape(h, w, -1).permute(2, 0, 1)[None]
        up = torch.nn.functional.interpolate(
            g, size=(side, side), mode="bilinear", align_corners=False
        )
        return up[0].permute(1, 2, 0).reshape(side * side, -1).to(x.dtype).contiguous()

    x = grow(sweep.feats[0])
    m2 = fam.family.merge**2 if hasattr(fam.family, "merge") else 1
    units = (
        grow(sweep.pre.vision_inputs["pixel_values"].reshape(t * h * w, -1))
        if "tower" in methods
        else None
    )
    grid = (1, side, side)
    n_prefill = (
        keep_count(side * side, ratio)
        + (sweep.pre.input_ids.numel() - t * h * w)
        + len(sweep.suffix)
    )
    prefill = bare_prefill(sweep, n_prefill)

    def reducer(m: str) -> Callable[[], float]:
        red = ReductionConfig(m, ratio)

        def run() -> float:
            t0 = _clock(b.device)
            with torch.inference_mode():
                if m == "tower":
                    tower_select(units, grid, ratio)
                else:
                    reduce_tokens(x, grid, red, b.ops)
            return _clock(b.device) - t0

        return run

    reuse = known_prefill is not None and known_prefill[0] == n_prefill
    pieces = {**({} if reuse else {"prefill": prefill}), **{m: reducer(m) for m in methods}}
    times = rounds(pieces, repeats, "4096 tokens")
    pre_s = known_prefill[1] if reuse else min(times.pop("prefill"))
    return {
        "visual_tokens": side * side,
        "keep_ratio": ratio,
        "reduced_prefill_tokens": n_prefill,
        "reduced_prefill_is_the_sweeps_unreduced_prefill": reuse,
        "reduced_prefill_s": pre_s,
        "merge_unit_features": int(units.shape[1]) if units is not None else None,
        "unit_patches": m2,
        "methods": {
            m: {"reduction_s": min(v), "ratio_to_reduced_prefill": min(v) / pre_s}
            for m, v in times.items()
        },
    }


def bare_prefill(sweep: Sweep, n: int) -> Callable[[], float]:
    """A timed LLM prefill of `n` random embeddings up to the last token's logits (seconds)."""
    fam, b = sweep.fam, sweep.b
    emb = torch.randn(1, n, fam.text_config.hidden_size, dtype=sweep.feats[0].dtype)
    pos = fam.text_positions(0, n)

    def run() -> float:
        cache = b.engine.new_cache()
        t0 = _clock(b.device)
        with torch.inference_mode():
            int(fam.lm_head(fam.forward(emb, pos, cache)[:, -1]).argmax())
        return _clock(b.device) - t0

    return run


def prefill_scaling(sweep: Sweep, lengths: list[int], repeats: int) -> dict:
    """CPU/GPU seconds of the bare LLM prefill (random embeddings, last-token logits) at several
    prompt lengths, next to the cost model's FLOPs: shows what a FLOP count cannot, e.g. the
    fixed cost of a forward (a 1-token prefill reads every weight once) and kernels whose
    FLOP rate depends on the length (attention vs dense matmuls)."""
    llm = sweep.fam.family.shapes.llm
    times = rounds({str(n): bare_prefill(sweep, n) for n in lengths}, repeats, "prefill scaling")
    rows = [
        {"tokens": n, "seconds": min(times[str(n)]), "flops": prefill_flops(llm, n)}
        for n in lengths
    ]
    for r in rows:
        r["seconds_per_gflop"] = r["seconds"] / (r["flops"] / 1e9)
    return {"rows": rows, "one_token_forward_s": rows[0]["seconds"] if lengths[0] == 1 else None}
