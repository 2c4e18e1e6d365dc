"""The dependency graph of a pipeline: topological order and cycles (`graphlib`), Mermaid/DOT
drawings."""

from __future__ import annotations

from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter

from .spec import PipelineSpec, flatten_refs, parse_ref


@dataclass
class Graph:
    """Stages as nodes; an edge a -> b when b reads an output of a or runs `when: a.branch`."""

    spec: PipelineSpec
    deps: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: PipelineSpec) -> Graph:
        deps: dict[str, set[str]] = {}
        for name, st in spec.stages.items():
            d = {parse_ref(r)[0] for r in flatten_refs(st.inputs.values())} - {None}
            if st.when:
                d.add(st.when.partition(".")[0])
            deps[name] = {x for x in d if x in spec.stages}
        return cls(spec, deps)

    def sorter(self) -> TopologicalSorter:
        """A `graphlib.TopologicalSorter` over the stages; ready stages come out in YAML order."""
        ts: TopologicalSorter = TopologicalSorter()
        for n in self.deps:  # every node first, so insertion (and so readiness) order is YAML order
            ts.add(n)
        for n, deps in self.deps.items():
            ts.add(n, *sorted(deps))
        return ts

    def find_cycle(self) -> list[str] | None:
        """One cycle as a list of stage names in data-flow order (first repeated at the end), or
        None."""
        try:
            self.sorter().prepare()
        except CycleError as e:
            return list(e.args[1])
        return None

    def topological_order(self) -> list[str]:
        """Stages in an order where every stage comes after what it depends on (YAML order kept
        among stages that are ready together)."""
        ts = self.sorter()
        ts.prepare()
        order: list[str] = []
        while ts.is_active():
            ready = list(ts.get_ready())
            order += ready
            ts.done(*ready)
        return order

    def edges(self) -> list[tuple[str, str, str, bool]]:
        """(source, target, label, is_branch) for every data edge and `when:` edge. Sources are
        stage names or `$input`; targets are stage names or `out:name` for pipeline outputs."""
        out = []
        for name, st in self.spec.stages.items():
            for port, ref in st.inputs.items():
                out += [(parse_ref(r)[0] or r, name, port, False) for r in flatten_refs([ref])]
            if st.when:
                router, _, branch = st.when.partition(".")
                out.append((router, name, branch, True))
        for name, ref in self.spec.outputs.items():
            out += [(parse_ref(r)[0] or r, f"out:{name}", "", False) for r in flatten_refs([ref])]
        return out

    def to_mermaid(self) -> str:
        def node(n: str) -> str:
            return "in_" + n[1:] if n.startswith("$") else n.replace("out:", "out_", 1)

        lines = ["flowchart TD"]
        lines += [f'    in_{name}(["${name}"])' for name in self.spec.inputs]
        lines += [
            f'    {name}["{name}<br/><i>{st.type}</i>"]' for name, st in self.spec.stages.items()
        ]
        lines += [f'    out_{name}[/"{name}"/]' for name in self.spec.outputs]
        for src, dst, label, branch in self.edges():
            arrow = "-.->" if branch else "-->"
            lines.append(f"    {node(src)} {arrow}{f'|{label}|' if label else ''} {node(dst)}")
        return "\n".join(lines)

    def to_dot(self) -> str:
        lines = [f'digraph "{self.spec.name}" {{', "    rankdir=TB;"]
        lines += [f'    "${name}" [shape=ellipse];' for name in self.spec.inputs]
        lines += [
            f'    "{name}" [shape=box, label="{name}\\n({st.type})"];'
            for name, st in self.spec.stages.items()
        ]
        lines += [f'    "out:{name}" [shape=parallelogram];' for name in self.spec.outputs]
        for src, dst, label, branch in self.edges():
            attrs = ", ".join(
                a
                for a in ("style=dashed" if branch else "", f'label="{label}"' if label else "")
                if a
            )
            lines.append(f'    "{src}" -> "{dst}"' + (f" [{attrs}]" if attrs else "") + ";")
        lines.append("}")
        return "\n".join(lines)
