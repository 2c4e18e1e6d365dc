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
        lines += [f"    in_{name}([\"${name}\"])" for name in self.spec.inputs]
        lines += [f"    {name}[\"{name}<br/><i>{st.type}</i>\"]" for name, st in self.spec.stages.items()]
        lines += [f"    out_{name}[/\"{name}\"/]" for name in self.spec.outputs]
        for src, dst, label, branch in self.edges():
            arrow = "-.->" if branch else "-->"
            lines.append(f"    {node(src)} {arrow}{f'|{label}|' if label else ''} {node(dst)}")
        return "\n".join(lines)

    def to_dot(self) -> str:
        lines = [f'digraph "{self.spec.name}" {{', "    rankdir=TB;"]
        lines += [f'    "${name}" [shape=ellipse];' for name in self.spec.inputs]
        lines += [f'    "{name}" [shape=box, label="{name}\\n({st.type})"];'
                  for name, st in self.spec.stages.items()]
        lines += [f'    "out:{name}" [shape=parallelogram];' for name in self.spec.outputs]
        for src, dst, label, branch in self.edges():
            attrs = ", ".join(a for a in ("style=dashed" if branch else "",
                                          f'label="{label}"' if label else "") if a)
            lines.append(f'    "{src}" -> "{dst}"' + (f" [{attrs}]" if attrs else "") + ";")
        lines.append("}")
        return "\n".join(lines)

