"""Draw the shipped `video_qa` and `doc_qa` pipelines as one PNG: the README's cascade diagram.

    python docs/diagram.py                 # writes docs/img/cascade.png
    python docs/diagram.py --out x.png

The picture is drawn from the pipelines as loaded (`Pipeline.load(name).graph`): one box per
stage, coloured by its role in the cascade, placed in columns by data-flow depth, an arrow for
every stage-to-stage edge that no longer path already implies (the transitive reduction: the
question's `understand` feeds most stages, and drawing each of those edges hides the flow), and
every `when:` edge, dashed with its branch name. The PNG carries a
fingerprint of the graphs it shows (`fingerprint()`, in its `cascade-graphs` text chunk), so
`tests/docs/test_diagram.py` fails when a pipeline changes and the picture was not redrawn.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch  # noqa: E402

from cascade import Pipeline  # noqa: E402
from cascade.graph import Graph  # noqa: E402

PIPELINES = ("video_qa", "doc_qa")
OUT = Path(__file__).parent / "img" / "cascade.png"
METADATA_KEY = "cascade-graphs"

# Role of each stage type in the cascade: look cheaply, route, read with specialists, then the VLM.
ROLES = {
    "media": ("media in", "#d9d9d9", ("load_image", "images", "video_frames")),
    "question": ("question understood once", "#f6e8a6", ("understand",)),
    "cheap": (
        "cheap look: thumbnails, CLIP, retrieval",
        "#a6d3f6",
        (
            "thumbnail",
            "thumbnails",
            "clip_embed",
            "text_embed",
            "retrieve",
        ),
    ),
    "router": (
        "routers: which path, which branch runs",
        "#f6b26b",
        ("resolution_router", "edge_density_router", "path_route"),
    ),
    "specialist": (
        "specialists: OCR, detector, layout, tool answer",
        "#b6e3a8",
        (
            "ocr",
            "detect",
            "layout",
            "find_evidence",
            "tool_answer",
            "fetch_frames",
        ),
    ),
    "tiles": ("high-res crops", "#c9b3e6", ("select_tiles", "tiles", "crop_regions")),
    "vlm": ("VLM (reduced visual tokens, KV cache)", "#e88a8a", ("vlm_answer",)),
    "answer": ("answer + evidence + bill", "#ffffff", ("compose_answer",)),
}
ROLE_OF = {t: role for role, (_, _, types) in ROLES.items() for t in types}


def stage_edges(graph: Graph) -> list[tuple[str, str, str]]:
    """(source, target, branch) between stages, one per pair; branch is '' for a data edge."""
    seen: dict[tuple[str, str], str] = {}
    for src, dst, label, is_branch in graph.edges():
        if src in graph.deps and dst in graph.deps:
            key = (src, dst)
            if is_branch or key not in seen:
                seen[key] = label if is_branch else seen.get(key, "")
    return [(s, d, b) for (s, d), b in seen.items()]


def drawn_edges(graph: Graph) -> list[tuple[str, str, str]]:
    """`stage_edges` less the data edges that a longer path between the same stages implies."""
    ancestors: dict[str, set[str]] = {}
    for name in graph.topological_order():
        ancestors[name] = set().union(*({d} | ancestors[d] for d in graph.deps[name]))
    return [
        (src, dst, branch)
        for src, dst, branch in stage_edges(graph)
        if branch or not any(src in ancestors[d] for d in graph.deps[dst] if d != src)
    ]


def fingerprint(graphs: dict[str, Graph]) -> str:
    """A hash of what the picture shows: each pipeline's stages with their types and its edges."""
    shown = {
        name: {
            "stages": {s: st.type for s, st in g.spec.stages.items()},
            "edges": sorted(stage_edges(g)),
        }
        for name, g in graphs.items()
    }
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:16]


def columns(graph: Graph) -> dict[str, int]:
    """Each stage's column: the length of the longest dependency path leading to it."""
    col: dict[str, int] = {}
    for name in graph.topological_order():
        col[name] = max((col[d] + 1 for d in graph.deps[name]), default=0)
    return col


def rows(graph: Graph, col: dict[str, int]) -> dict[str, float]:
    """Each stage's row in its column: ordered by the mean row of its inputs (a few sweeps of the
    barycentre heuristic, which keeps crossing edges few), centred on the middle row."""
    by_col: dict[int, list[str]] = {}
    for name in graph.topological_order():
        by_col.setdefault(col[name], []).append(name)
    row = {n: float(i) for names in by_col.values() for i, n in enumerate(names)}
    for _ in range(4):
        for c in sorted(by_col)[1:]:
            names = by_col[c]
            names.sort(
                key=lambda n: sum(row[d] for d in graph.deps[n]) / max(len(graph.deps[n]), 1)
            )
            for i, n in enumerate(names):
                row[n] = float(i)
    tallest = max(len(v) for v in by_col.values())
    return {n: row[n] + (tallest - len(by_col[col[n]])) / 2 for n in row}


def draw(ax: plt.Axes, title: str, graph: Graph, n_columns: int) -> None:
    """One pipeline on one axes: boxes in columns, arrows between them."""
    col = columns(graph)
    row = rows(graph, col)
    dx, dy, w, h = 2.1, 1.0, 1.7, 0.62
    pos = {n: (col[n] * dx, -row[n] * dy) for n in col}
    for src, dst, branch in drawn_edges(graph):
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        span = col[dst] - col[src]
        arrow = FancyArrowPatch(
            (x0 + w / 2, y0),
            (x1 - w / 2, y1),
            arrowstyle="-|>",
            mutation_scale=9,
            lw=0.9 if not branch else 1.3,
            color="#444444" if not branch else "#c45f00",
            linestyle="--" if branch else "-",
            connectionstyle=f"arc3,rad={0.0 if span <= 1 else 0.18}",
            zorder=1,
        )
        ax.add_patch(arrow)
        if branch:
            lx, ly = x0 + w / 2 + 0.3 * (x1 - x0 - w), y0 + 0.3 * (y1 - y0)  # near the router
            ax.text(
                lx,
                ly + 0.05,
                branch,
                fontsize=7,
                color="#c45f00",
                ha="center",
                va="bottom",
                zorder=3,
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
            )
    for name, st in graph.spec.stages.items():
        x, y = pos[name]
        colour = ROLES.get(ROLE_OF.get(st.type, ""), ("", "#eeeeee", ()))[1]
        ax.add_patch(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0.02,rounding_size=0.12",
                fc=colour,
                ec="#333333",
                lw=0.8,
                zorder=2,
            )
        )
        ax.text(x, y + 0.1, name, ha="center", va="center", fontsize=8.5, weight="bold", zorder=3)
        ax.text(
            x,
            y - 0.17,
            st.type,
            ha="center",
            va="center",
            fontsize=6.8,
            style="italic",
            color="#333333",
            zorder=3,
        )
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - w, (n_columns - 1) * dx + w)  # one scale for every pipeline
    ax.set_ylim(min(ys) - 0.8, max(ys) + 0.8)
    ax.set_title(title, loc="left", fontsize=11, weight="bold")
    ax.axis("off")


def main(argv: list[str] | None = None) -> Path:
    """Draw the pipelines into `--out`; returns the path."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    graphs = {name: Pipeline.load(name).graph for name in PIPELINES}
    heights = [max(len(v) for v in _by_column(g).values()) for g in graphs.values()]
    fig, axes = plt.subplots(
        len(graphs),
        1,
        figsize=(15, 0.85 * sum(heights) + 2.2),
        gridspec_kw={"height_ratios": heights},
    )
    n_columns = max(len(_by_column(g)) for g in graphs.values())
    for ax, (name, g) in zip(axes, graphs.items(), strict=True):
        draw(ax, f"{name}  (pipelines/{name}.yaml)", g, n_columns)
    fig.legend(
        handles=[Patch(fc=c, ec="#333333", label=label) for label, c, _ in ROLES.values()],
        loc="lower center",
        ncol=4,
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110, metadata={METADATA_KEY: fingerprint(graphs)})
    plt.close(fig)
    print(args.out)
    return args.out


def _by_column(graph: Graph) -> dict[int, list[str]]:
    col = columns(graph)
    out: dict[int, list[str]] = {}
    for n, c in col.items():
        out.setdefault(c, []).append(n)
    return out


if __name__ == "__main__":
    main()
