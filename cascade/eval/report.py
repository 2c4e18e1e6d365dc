"""Tables and the plot of `cascade bench`: per kind of media and pipeline (`summarize`), per genre
and role (`summarize_genres`), the headline ratios, and a per-genre PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .items import GENRES
from .roles import CASCADES

ROLES = ("cascade", "cascade[hint]", "full_res", "thumbnail_only")


def _mean(key: str, rows: list[dict]) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return float(np.mean(vals)) if vals else None


def stats(sub: list[dict[str, Any]]) -> dict[str, Any]:
    """Means and rates over the rows of one pipeline (or role) on some questions."""
    reads = [r for r in sub if "evidence_readable" in r]
    routed = [
        r for r in sub if r["routed_high_res"] is not None and r["oracle_high_res"] is not None
    ]
    tools = [r for r in sub if "tool_exact" in r]
    askable = [r for r in sub if r["kind"] in ("read", "doc", "count")]
    exact = sum(r["tool_exact"] for r in tools)
    return {
        "questions": len(sub),
        "visual_tokens": _mean("visual_tokens", sub),
        "prefill_flops": _mean("prefill_flops", sub),
        "seconds": _mean("seconds", sub),
        "ttft_s": _mean("ttft_s", sub),
        "warm_seconds": _mean("warm_seconds", sub),
        "warm_prefill_flops": _mean("warm_prefill_flops", sub),
        "evidence_recall": sum(r["evidence_readable"] for r in reads) / len(reads)
        if reads
        else None,
        "evidence_questions": len(reads),
        "router_agreement": (
            sum(r["routed_high_res"] == r["oracle_high_res"] for r in routed) / len(routed)
        )
        if routed
        else None,
        "router_questions": len(routed),
        # Missing a needed high-res look loses the answer; an extra one only costs tokens.
        "router_missed_high_res": sum(
            bool(r["oracle_high_res"] and not r["routed_high_res"]) for r in routed
        ),
        "router_extra_high_res": sum(
            bool(r["routed_high_res"] and not r["oracle_high_res"]) for r in routed
        ),
        "tool_answers": len(tools),
        "tool_exact": exact,
        "tool_wrong": len(tools) - exact,
        "tool_precision": exact / len(tools) if tools else None,
        "tool_coverage": len(tools) / len(askable) if askable else None,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per '<media>/<pipeline>' (e.g. 'video/video_qa'): `stats` over its questions."""
    out: dict[str, Any] = {}
    for media in ("video", "images", "document"):
        for pipe in dict.fromkeys(r["pipeline"] for r in rows if r["media"] == media):
            out[f"{media}/{pipe}"] = stats(
                [r for r in rows if r["pipeline"] == pipe and r["media"] == media]
            )
    return out


def ratios(summary: dict[str, Any]) -> dict[str, Any]:
    """The headline comparisons per kind of media, measured in this run."""
    out = {}
    for media, cascade in CASCADES.items():
        for label in (cascade, f"{cascade}[hint]"):
            c, f = summary.get(f"{media}/{label}"), summary.get(f"{media}/full_res")
            if not (c and f):
                continue
            tokens, full = c["visual_tokens"] or 0, f["visual_tokens"] or 0
            out[f"{media}/{label}"] = {
                "token_reduction_vs_full_res": full / max(tokens, 1),
                "tokens_share_of_full_res": tokens / max(full, 1),
                "evidence_recall": c["evidence_recall"],
                "full_res_evidence_recall": f["evidence_recall"],
                "seconds_speedup_vs_full_res": (f["seconds"] or 0)
                / max(c["seconds"] or 1e-9, 1e-9),
            }
    return out


def summarize_genres(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per genre: `stats` per role, and a headline — the cascade's evidence recall (on its [hint]
    variant: what the fine path sends), the ids it missed, tool answers given / exact with the
    wrong ones by id, router agreement, visual tokens and their share of full_res."""
    out: dict[str, Any] = {}
    order = list(GENRES)  # the genres' own order, whatever order the rows came in
    for genre in sorted(
        {r["genre"] for r in rows}, key=lambda g: order.index(g) if g in order else len(order)
    ):
        sub = [r for r in rows if r["genre"] == genre]
        roles = {
            role: stats([r for r in sub if r["role"] == role])
            for role in ROLES
            if any(r["role"] == role for r in sub)
        }
        hint = [r for r in sub if r["role"] == "cascade[hint]" and "evidence_readable" in r]
        tools = [r for r in sub if r["role"] == "cascade" and "tool_exact" in r]
        routed = [
            r
            for r in sub
            if r["role"] == "cascade"
            and r["routed_high_res"] is not None
            and r["oracle_high_res"] is not None
        ]
        full = roles.get("full_res", {}).get("visual_tokens")

        def share(role: str) -> float | None:
            # `share` runs in this iteration only (for `out[genre]`): B023 does not apply
            tokens = roles.get(role, {}).get("visual_tokens")  # noqa: B023
            return None if tokens is None or not full else tokens / full  # noqa: B023

        out[genre] = {
            "questions": len({r["id"] for r in sub}),
            "languages": sorted({r["lang"] for r in sub}),
            "headline": {
                "evidence_recall": roles.get("cascade[hint]", {}).get("evidence_recall"),
                "evidence_found": sum(r["evidence_readable"] for r in hint),
                "evidence_questions": len(hint),
                "evidence_missed": [r["id"] for r in hint if not r["evidence_readable"]],
                "full_res_evidence_recall": roles.get("full_res", {}).get("evidence_recall"),
                "thumbnail_evidence_recall": roles.get("thumbnail_only", {}).get("evidence_recall"),
                "tool_answers": len(tools),
                "tool_exact": sum(r["tool_exact"] for r in tools),
                "tool_wrong": [
                    {"id": r["id"], "answer": r["answer"], "gold": r["gold"]}
                    for r in tools
                    if not r["tool_exact"]
                ],
                "router_agreement": roles.get("cascade", {}).get("router_agreement"),
                "router_missed_high_res": [
                    r["id"] for r in routed if r["oracle_high_res"] and not r["routed_high_res"]
                ],
                "visual_tokens": roles.get("cascade", {}).get("visual_tokens"),
                "visual_tokens_hint": roles.get("cascade[hint]", {}).get("visual_tokens"),
                "full_res_visual_tokens": full,
                "tokens_share_of_full_res": share("cascade"),
                "hint_tokens_share_of_full_res": share("cascade[hint]"),
            },
            "roles": roles,
        }
    return out


def plot_genres(per_genre: dict[str, Any], path: Path, split: str) -> None:
    """Two panels per genre: evidence recall of the cascade ([hint]) vs full_res vs thumbnails,
    with tool answers exact / given written above; and the cascade's visual tokens as a share of
    full_res (log), with the 10 % budget line."""
    from matplotlib.figure import Figure  # no pyplot: leaves a notebook's backend alone

    genres = list(per_genre)
    x = np.arange(len(genres))
    fig = Figure(figsize=(max(8.0, 0.75 * len(genres) + 2), 7.2))
    top, bottom = fig.subplots(2, 1, sharex=True)
    bars = (
        ("evidence_recall", "cascade ([hint]: what it sends)", "tab:blue"),
        ("full_res_evidence_recall", "full_res", "tab:gray"),
        ("thumbnail_evidence_recall", "thumbnail_only", "tab:orange"),
    )
    width = 0.27
    for k, (key, label, colour) in enumerate(bars):
        vals = [per_genre[g]["headline"][key] for g in genres]
        top.bar(
            x + (k - 1) * width,
            [100 * v if v is not None else 0 for v in vals],
            width,
            label=label,
            color=colour,
        )
        for i, v in enumerate(vals):
            if v == 0:  # measured and none read: say so, an empty slot means not measured
                top.annotate("0", (i + (k - 1) * width, 1), ha="center", fontsize=7, color=colour)
    for i, g in enumerate(genres):
        h = per_genre[g]["headline"]
        if h["tool_answers"]:
            top.annotate(
                f"tool {h['tool_exact']}/{h['tool_answers']}",
                (i, 102),
                ha="center",
                fontsize=7,
                color="darkred" if h["tool_wrong"] else "darkgreen",
            )
    top.set_ylim(0, 112)
    top.set_ylabel("evidence recall (%)")
    top.axhline(95, color="tab:green", lw=0.8, ls="--")
    top.legend(fontsize=7, loc="lower left")
    top.set_title(f"{split} split, per genre: is the gold answer readable in what the VLM gets?")
    shares = (
        ("tokens_share_of_full_res", "cascade", "tab:blue", -0.18),
        ("hint_tokens_share_of_full_res", "cascade [hint]", "tab:cyan", 0.18),
    )
    for key, label, colour, dx in shares:
        vals = [per_genre[g]["headline"][key] for g in genres]
        bottom.bar(
            x + dx,
            [100 * max(v, 1e-4) if v is not None else 0 for v in vals],
            0.36,
            label=label,
            color=colour,
        )
        for i, v in enumerate(vals):
            if v == 0:  # every question answered by a tool: no pixels sent
                bottom.annotate("0", (i + dx, 0.012), ha="center", fontsize=7, color=colour)
    bottom.axhline(10, color="tab:red", lw=0.8, ls="--", label="10 % budget")
    bottom.set_yscale("log")
    bottom.set_ylabel("visual tokens, % of full_res")
    bottom.legend(fontsize=7)
    bottom.set_xticks(x, genres, rotation=35, ha="right", fontsize=8)
    for ax in (top, bottom):
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
