"""Count the FLOPs the specialists actually spend in a run: ONNX sessions (OCR, layout, YOLO) and
torch models (CLIP, sentence encoders), outside the VLM, whose FLOPs the cost model prices.

Inside `count_specialist_flops()` every `onnxruntime.InferenceSession.run` records its model and
its inputs' shapes, and every outermost torch module call outside a `vlm_answer` stage records
its module and arguments; both cost microseconds, so a timed run can be counted. `SpecialistFlops.
total()` then counts, after the run:

- ONNX: the graph's shapes inferred at each call's input shapes (onnxruntime's symbolic shape
  inference), then 2 x multiply-adds of every Conv, ConvTranspose, MatMul and Gemm;
- torch: each recorded call replayed under `torch.utils.flop_counter.FlopCounterMode` (matmuls,
  convolutions, attention). Torch calls outside any stage are the VLM's (its batcher thread):
  named in `not_counted_outside_stages`, not counted.

Where the static shape inference leaves a node's shape open (a Reshape whose target is computed
from the data), the model runs once on zeros of the call's input shapes with those tensors made
outputs, and their shapes are read.

Element-wise operations, resizes, NMS and FAISS searches are not counted (the cost model does
not count the VLM's either), nor is the body of a control-flow node (the table model's decoder
loop, one step per structure token), which is reported in `uncounted`. A node whose shapes
cannot be inferred, or a call that cannot be replayed, is counted as such in `uncounted`, never
guessed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from .trace import current_stage

__all__ = ["SpecialistFlops", "count_specialist_flops", "onnx_flops"]

MATMUL_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
CONTROL_FLOW = ("Loop", "Scan", "If")


@dataclass
class SpecialistFlops:
    """What the specialists ran inside `count_specialist_flops()`, counted by `total()`."""

    onnx_calls: list[tuple[str, tuple[tuple[str, tuple[int, ...]], ...], str]] = field(
        default_factory=list
    )
    torch_calls: list[tuple[Any, tuple[Any, ...], str]] = field(default_factory=list)
    # torch modules called outside any stage: the VLM's batcher thread, priced by the cost model
    outside_stages: set[str] = field(default_factory=set)

    def total(self) -> dict[str, Any]:
        """FLOPs per stage type, their sum, and what could not be counted."""
        per_stage: dict[str, float] = {}
        uncounted: list[str] = []
        for model, shapes, where in self.onnx_calls:
            flops, missing = onnx_flops(model, shapes)
            per_stage[where] = per_stage.get(where, 0.0) + flops
            if missing:
                uncounted.append(f"{where}: {missing} node(s) of {model.split('/')[-1]}")
        for module, args, where in self.torch_calls:
            try:
                flops = _replay(module, args)
            except Exception as e:  # a call that cannot be replayed is reported, not guessed
                uncounted.append(f"{where}: {type(module).__name__} not replayable ({e})")
                continue
            per_stage[where] = per_stage.get(where, 0.0) + flops
        return {
            "flops": sum(per_stage.values()),
            "per_stage": per_stage,
            "uncounted": sorted(set(uncounted)),
            "not_counted_outside_stages": sorted(self.outside_stages),
        }


@contextlib.contextmanager
def count_specialist_flops() -> Iterator[SpecialistFlops]:
    """Record the specialists' ONNX and torch calls inside the block (the VLM's are excluded)."""
    import onnxruntime

    seen = SpecialistFlops()
    depth = threading.local()
    original_run = onnxruntime.InferenceSession.run

    def where() -> str:
        rec = current_stage()
        return rec.type if rec is not None else "outside a stage"

    def run(session: Any, output_names: Any, feed: dict[str, Any], *a: Any, **k: Any) -> Any:
        model = getattr(session, "_model_path", None)
        if model is not None:  # a session built from bytes has no path: reported by total()
            shapes = tuple(sorted((n, tuple(np.shape(v))) for n, v in feed.items()))
            seen.onnx_calls.append((str(model), shapes, where()))
        return original_run(session, output_names, feed, *a, **k)

    def pre(module: Any, args: tuple[Any, ...]) -> None:
        d = getattr(depth, "n", 0)
        depth.n = d + 1
        rec = current_stage()
        if d > 0:
            return
        if rec is None:  # the VLM's own thread (its batcher) runs outside any stage
            seen.outside_stages.add(type(module).__name__)
        elif rec.type != "vlm_answer":
            seen.torch_calls.append((module, _detached(args), rec.type))

    def post(module: Any, args: tuple[Any, ...], out: Any) -> None:
        depth.n = getattr(depth, "n", 1) - 1

    from torch.nn.modules import module as nn_module

    onnxruntime.InferenceSession.run = run
    h_pre = nn_module.register_module_forward_pre_hook(pre)
    h_post = nn_module.register_module_forward_hook(post)
    try:
        yield seen
    finally:
        onnxruntime.InferenceSession.run = original_run
        h_pre.remove()
        h_post.remove()


def _detached(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The call's arguments, dicts copied (sentence-transformers modules add keys in place)."""
    return tuple(dict(a) if isinstance(a, dict) else a for a in args)


def _replay(module: Any, args: tuple[Any, ...]) -> float:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        module(*args)
    return float(counter.get_total_flops())


@lru_cache(maxsize=4096)
def onnx_flops(model: str, shapes: tuple[tuple[str, tuple[int, ...]], ...]) -> tuple[float, int]:
    """(FLOPs, nodes that could not be counted) of one call of the ONNX model at file `model`
    with inputs of `shapes` ((name, shape) pairs): 2 x multiply-adds of its Conv, ConvTranspose,
    MatMul and Gemm nodes, on shapes inferred for exactly these inputs; a control-flow node's
    body is not counted (one more uncounted node)."""
    import onnx
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    graph_model = _loaded(model)
    fixed = onnx.ModelProto()
    fixed.CopyFrom(graph_model)
    given = dict(shapes)
    for inp in fixed.graph.input:
        if inp.name in given:
            dims = inp.type.tensor_type.shape.dim
            for d, v in zip(dims, given[inp.name], strict=True):
                d.ClearField("dim_param")
                d.dim_value = int(v)
    inferred = SymbolicShapeInference.infer_shapes(fixed, auto_merge=True)
    g = inferred.graph
    shape: dict[str, tuple[int, ...] | None] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        dims = vi.type.tensor_type.shape.dim
        concrete = all(d.HasField("dim_value") for d in dims)
        shape[vi.name] = tuple(int(d.dim_value) for d in dims) if concrete else None
    for init in g.initializer:
        shape[init.name] = tuple(int(d) for d in init.dims)
    nodes = [n for n in g.node if n.op_type in MATMUL_OPS]
    unknown = [t for n in nodes for t in (*n.input[:2], n.output[0]) if shape.get(t) is None]
    if unknown:  # a shape computed from data (a Reshape's target): run the model and look
        shape |= _run_shapes(graph_model, given, sorted(set(unknown)))
    # a Loop / Scan / If runs its body a data-dependent number of times (SLANet's table decoder,
    # one step per structure token): its body is not counted, and the node says so
    flops, missing = 0.0, sum(n.op_type in CONTROL_FLOW for n in g.node)
    for node in nodes:
        ins = [shape.get(n) for n in node.input[:2]]
        out = shape.get(node.output[0])
        if out is None or any(s is None for s in ins):
            missing += 1
            continue
        flops += _node_flops(node, ins[0], ins[1], out)  # type: ignore[arg-type]
    return flops, missing


def _run_shapes(
    model: Any, given: dict[str, tuple[int, ...]], names: list[str]
) -> dict[str, tuple[int, ...] | None]:
    """The shapes of tensors `names` in one onnxruntime run of `model` on zeros of `given`
    shapes (each made an output of a copy of the graph)."""
    import onnx
    import onnxruntime

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(probe.SerializeToString(), options)
    dtypes = {"tensor(float)": np.float32, "tensor(int64)": np.int64}
    feed = {
        i.name: np.zeros(given[i.name], dtype=dtypes.get(i.type, np.float32))
        for i in session.get_inputs()
    }
    outs = session.run(names, feed)
    return {n: tuple(int(d) for d in np.shape(o)) for n, o in zip(names, outs, strict=True)}


@lru_cache(maxsize=16)
def _loaded(model: str) -> Any:
    import onnx

    return onnx.load(model)


def _node_flops(node: Any, a: tuple[int, ...], b: tuple[int, ...], out: tuple[int, ...]) -> float:
    """2 x multiply-adds of one Conv / ConvTranspose / MatMul / Gemm node."""
    if node.op_type == "Conv":  # each output element: Cin/groups x kernel multiply-adds
        return 2.0 * float(np.prod(out)) * float(np.prod(b[1:]))
    if node.op_type == "ConvTranspose":  # each input element spreads over Cout/groups x kernel
        return 2.0 * float(np.prod(a)) * float(np.prod(b[1:]))
    if node.op_type == "MatMul":  # each output element: K multiply-adds
        return 2.0 * float(np.prod(out)) * float(a[-1])
    trans_a = next((at.i for at in node.attribute if at.name == "transA"), 0)
    return 2.0 * float(np.prod(out)) * float(a[0] if trans_a else a[-1])  # Gemm
