"""The dependency graph of a pipeline: topological order, cycle detection, Mermaid/DOT drawings."""
from __future__ import annotations

from dataclasses import dataclass, field

from .spec import PipelineSpec, flatten_refs, parse_ref


@dataclass
class Graph:
    """Stages as nodes; an edge a -> b when b reads an output of a or runs `when: a.branch`."""

    spec: PipelineSpec
    deps: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: PipelineSpec) -> "Graph":
        deps: dict[str, set[str]] = {}
        for name, st in spec.stages.items():
            d = {parse_ref(r)[0] for r in flatten_refs(st.inputs.values())} - {None}
            if st.when:
                d.add(st.when.partition(".")[0])
            deps[name] = {x for x in d if x in spec.stages}
        return cls(spec, deps)

    def find_cycle(self) -> list[str] | None:
        """One cycle as a list of stage names (first repeated at the end), or None."""
        color: dict[str, int] = {}
        stack: list[str] = []

        def visit(n: str) -> list[str] | None:
            color[n] = 1
            stack.append(n)
            for d in sorted(self.deps[n]):
                if color.get(d) == 1:
                    return stack[stack.index(d):] + [d]
                if d not in color and (found := visit(d)):
                    return found
            stack.pop()
            color[n] = 2
            return None

        for n in self.deps:
            if n not in color and (found := visit(n)):
                return list(reversed(found))
        return None

    def topological_order(self) -> list[str]:
        """Stages in an order where every stage comes after what it depends on (YAML order kept)."""
        order, placed = [], set()
        pending = list(self.deps)
        while pending:
            ready = [n for n in pending if self.deps[n] <= placed]
            if not ready:
                raise ValueError(f"cycle among {pending}")
            for n in ready:
                order.append(n)
                placed.add(n)
            pending = [n for n in pending if n not in placed]
        return order

    def to_mermaid(self) -> str:
        lines = ["flowchart TD"]
        for name in self.spec.inputs:
            lines.append(f"    in_{name}([\"${name}\"])")
        for name, st in self.spec.stages.items():
            lines.append(f"    {name}[\"{name}<br/><i>{st.type}</i>\"]")
        for name, st in self.spec.stages.items():
            for port, ref in st.inputs.items():
                for r in flatten_refs([ref]):
                    src, out_port = parse_ref(r)
                    lines.append(f"    {src or 'in_' + out_port} -->|{port}| {name}")
            if st.when:
                router, _, branch = st.when.partition(".")
                lines.append(f"    {router} -.->|{branch}| {name}")
        for out, ref in self.spec.outputs.items():
            lines.append(f"    out_{out}[/\"{out}\"/]")
            for r in flatten_refs([ref]):
                src, _ = parse_ref(r)
                lines.append(f"    {src or 'in_' + r[1:]} --> out_{out}")
        return "\n".join(lines)

    def to_dot(self) -> str:
        lines = [f'digraph "{self.spec.name}" {{', "    rankdir=TB;"]
        for name in self.spec.inputs:
            lines.append(f'    "${name}" [shape=ellipse];')
        for name, st in self.spec.stages.items():
            lines.append(f'    "{name}" [shape=box, label="{name}\\n({st.type})"];')
            for port, ref in st.inputs.items():
                for r in flatten_refs([ref]):
                    src, _ = parse_ref(r)
                    lines.append(f'    "{src or r}" -> "{name}" [label="{port}"];')
            if st.when:
                router, _, branch = st.when.partition(".")
                lines.append(f'    "{router}" -> "{name}" [style=dashed, label="{branch}"];')
        for out, ref in self.spec.outputs.items():
            lines.append(f'    "out:{out}" [shape=parallelogram];')
            for r in flatten_refs([ref]):
                src, _ = parse_ref(r)
                lines.append(f'    "{src or r}" -> "out:{out}";')
        lines.append("}")
        return "\n".join(lines)

