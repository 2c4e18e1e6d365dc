"""The README's cascade diagram (docs/img/cascade.png) is drawn from the shipped pipelines by
docs/diagram.py and stays true to them."""

from __future__ import annotations

from PIL import Image

from cascade import Pipeline

from ._load import ROOT, load

diagram = load("docs/diagram.py")


def _graphs():
    return {name: Pipeline.load(name).graph for name in diagram.PIPELINES}


def test_committed_diagram_shows_the_current_pipelines():
    committed = Image.open(ROOT / "docs" / "img" / "cascade.png").info.get(diagram.METADATA_KEY)
    assert committed == diagram.fingerprint(_graphs()), (
        "docs/img/cascade.png was drawn from other pipelines: run `python docs/diagram.py`"
    )


def test_script_draws_a_png_carrying_the_fingerprint(tmp_path):
    out = diagram.main(["--out", str(tmp_path / "c.png")])
    with Image.open(out) as im:
        assert im.format == "PNG" and im.width > 1000
        assert im.info[diagram.METADATA_KEY] == diagram.fingerprint(_graphs())


def test_every_stage_type_of_the_drawn_pipelines_has_a_role_colour():
    for g in _graphs().values():
        assert {st.type for st in g.spec.stages.values()} <= set(diagram.ROLE_OF)


def test_drawn_edges_leave_out_only_edges_a_longer_path_implies():
    for g in _graphs().values():
        all_edges = diagram.stage_edges(g)
        drawn = set(diagram.drawn_edges(g))
        assert all(branch for _, _, branch in all_edges if branch)  # branch edges all kept
        assert {e for e in all_edges if e[2]} <= drawn
        kept = {(s, d) for s, d, _ in drawn}
        reach: dict[str, set[str]] = {}  # what each stage reaches through the drawn edges alone
        for name in reversed(g.topological_order()):
            reach[name] = set().union(*({d} | reach[d] for s, d in kept if s == name))
        for src, dst, _ in all_edges:  # nothing is lost: every edge is drawn or implied
            assert dst in reach[src], (src, dst)
        assert len(drawn) < len(all_edges)  # the reduction does something on these pipelines
