"""fold_constants: a node whose inputs are all constant is replaced by its value.

Identity: `op(c1, ..., cn) = value` where `value` is what ONNX Runtime computes for the node
(ORT, with graph optimizations off, evaluates all foldable nodes in one session, so a folded
value is bit for bit what the unfolded graph computes). `Shape(x)` and `Size(x)` fold when
x's shape is static even if x is not constant. Not folded: non-deterministic ops, ops with
subgraphs, ops of other domains, nodes producing graph outputs, and values that grow the file:
larger than `max_elements` and larger than the node's constant inputs together (a Concat of two
weights folds whatever its size; an Expand or ConstantOfShape into a big tensor does not).
Initializers that only folded nodes read are dropped with them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from rewrite.onnx_io.graph import Graph, Node
from rewrite.onnx_io.save import light_model
from rewrite.onnx_io.shapes import conflict, infer_types
from rewrite.ops.base import TensorType, onnx_dtype
from rewrite.ops.registry import NONDETERMINISTIC, lookup

MAX_ELEMENTS = 1 << 20
MAX_ROUNDS = 4


@dataclass
class FoldStats:
    folded: dict[str, int] = field(default_factory=dict)
    """op type -> nodes folded."""
    skipped: str = ""

    @property
    def total(self) -> int:
        return sum(self.folded.values())


def fold_constants(graph: Graph, *, max_elements: int = MAX_ELEMENTS) -> tuple[Graph, FoldStats]:
    """A graph with every foldable node replaced by an initializer holding its value."""
    stats = FoldStats()
    const = {n for n in graph.initializers if graph.is_constant(n)}
    outputs = set(graph.outputs)
    shape_values: dict[str, np.ndarray] = {}
    foldable: list[Node] = []
    for n in graph.nodes:
        if n.op_type in ("Shape", "Size") and n.domain in ("", "ai.onnx"):
            value = _shape_value(n, graph)
            if value is not None and not set(n.outputs) & outputs:
                shape_values[n.outputs[0]] = value
                const.add(n.outputs[0])
                stats.folded[n.op_type] = stats.folded.get(n.op_type, 0) + 1
            continue
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            const.update(o for o in n.outputs if o)  # a constant: it feeds folds, stays itself
            continue
        if not _can_fold(n, graph, const, outputs, max_elements):
            continue
        foldable.append(n)
        const.update(o for o in n.outputs if o)
    if not foldable and not shape_values:
        return graph, stats
    values: dict[str, np.ndarray] = dict(shape_values)
    if foldable:
        try:
            values.update(_evaluate(graph, foldable, shape_values))
        except Exception as e:  # ORT refusing to fold is not an error: the nodes stay
            stats.skipped = f"constant folding skipped: ORT: {e}".splitlines()[0]
            foldable = []
            values = dict(shape_values)
    removed: set[int] = set()
    for n in foldable:
        given = sum(values[i].size if i in values else _numel(graph, i) for i in n.inputs if i)
        if all(o in values and values[o].size <= max(max_elements, given) for o in n.outputs if o):
            removed.add(id(n))
            stats.folded[n.op_type] = stats.folded.get(n.op_type, 0) + 1
    removed |= {id(n) for n in graph.nodes if n.outputs and n.outputs[0] in shape_values}
    kept = [n for n in graph.nodes if id(n) not in removed]
    inits = _without_dead_inputs(graph, kept, [n for n in foldable if id(n) in removed])
    types = dict(graph.types)
    produced = {o for n in kept for o in n.outputs}
    for name, arr in values.items():
        if name in produced:
            continue
        inits[name] = numpy_helper.from_array(np.asarray(arr), name)
        types[name] = TensorType(onnx_dtype(np.asarray(arr)), tuple(np.asarray(arr).shape))
    out = Graph(
        graph.header, kept, list(graph.inputs), list(graph.outputs), inits, types, graph.path
    )
    out._arrays.update(graph._arrays)
    return out, stats


def fold_to_fixpoint(
    graph: Graph, *, max_elements: int = MAX_ELEMENTS, rounds: int = MAX_ROUNDS
) -> tuple[Graph, FoldStats]:
    """`fold_constants` repeated while folding makes shapes static, at most `rounds` times.

    Shape inference at load cannot see through values computed at run time (a Pad whose pads
    come from Shape/Slice/Concat arithmetic has an output of unknown size, and so has
    everything after it). Once such a chain is folded, ONNX shape inference runs again on the
    folded graph; a value whose inferred shape is more static than before (same rank, no dim
    that contradicts) takes it, and the next round folds the `Shape`/`Size` of it.
    """
    stats = FoldStats()
    for _ in range(rounds):
        graph, step = fold_constants(graph, max_elements=max_elements)
        for op, k in step.folded.items():
            stats.folded[op] = stats.folded.get(op, 0) + k
        stats.skipped = stats.skipped or step.skipped
        if not step.total:
            break
        types = _refined_types(graph)
        if types is None:
            break
        graph = replace(graph, types=types)
    return graph, stats


def _refined_types(graph: Graph) -> dict[str, TensorType] | None:
    """`graph.types` with the more static shapes ONNX shape inference now finds; None if none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a failure here was already reported at load
        inferred = infer_types(light_model(graph), str(graph.path or "model"), [])
    types = dict(graph.types)
    changed = False
    for name, t in inferred.items():
        old = types.get(name)
        if t.shape is None or not t.dtype:
            continue
        if old is not None and old.shape is not None:
            if old.dtype != t.dtype or len(old.shape) != len(t.shape) or conflict(old, t):
                continue
            if _static_dims(t) <= _static_dims(old):
                continue
        types[name] = t
        changed = True
    return types if changed else None


def _static_dims(t: TensorType) -> int:
    return sum(isinstance(d, int) for d in t.shape or ())


def _numel(graph: Graph, name: str) -> int:
    t = graph.types.get(name)
    return t.numel if t is not None and t.numel is not None else 0


def _without_dead_inputs(
    graph: Graph, kept: list[Node], folded: list[Node]
) -> dict[str, onnx.TensorProto]:
    """The graph's initializers less those that only `folded` nodes read."""
    read = {i for n in folded for i in n.inputs if i}
    live = {i for n in kept for i in [*n.inputs, *n.implicit_inputs] if i}
    live |= set(graph.outputs) | graph.input_set
    return {k: v for k, v in graph.initializers.items() if k not in read or k in live}


def _shape_value(n: Node, graph: Graph) -> np.ndarray | None:
    t = graph.types.get(n.inputs[0])
    if t is None or not t.is_static or t.shape is None:
        return None
    dims = [int(d) for d in t.shape]  # type: ignore[arg-type]
    if n.op_type == "Size":
        return np.array(int(np.prod(dims)), dtype=np.int64)
    attrs = n.attrs
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return np.array(dims[slice(start, end)], dtype=np.int64)


def _can_fold(n: Node, graph: Graph, const: set[str], outputs: set[str], limit: int) -> bool:
    if n.domain not in ("", "ai.onnx") or n.has_subgraph or n.op_type in NONDETERMINISTIC:
        return False
    if lookup(n.op_type) is None or set(n.outputs) & outputs:
        return False
    if n.op_type == "Constant":
        return False  # already a constant: encode turns it into a leaf
    if not all(i in const for i in n.inputs if i):
        return False
    ins = [graph.types.get(i) for i in n.inputs if i]
    given = sum(t.numel for t in ins if t is not None and t.numel is not None)
    for o in n.outputs:
        if not o:
            continue
        t = graph.types.get(o)
        if t is None or t.numel is None or t.numel > max(limit, given):
            return False
    return True


def _evaluate(
    graph: Graph, nodes: list[Node], shape_values: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Run `nodes` in one ORT session (optimizations off) and return every output's value."""
    produced = {o for n in nodes for o in n.outputs if o}
    needed = {i for n in nodes for i in n.inputs if i and i not in produced}
    sources = [n for n in graph.nodes if n.op_type == "Constant" and set(n.outputs) & needed]
    inits = [graph.initializers[i] for i in needed if i in graph.initializers]
    inits += [numpy_helper.from_array(shape_values[i], i) for i in needed if i in shape_values]
    outs = [o for n in nodes for o in n.outputs if o]
    run = [*sources, *nodes]
    protos = [
        helper.make_node(n.op_type, n.inputs, n.outputs, name=n.name, domain=n.domain) for n in run
    ]
    for p, n in zip(protos, run, strict=True):
        p.attribute.extend(n.attributes)
    g = helper.make_graph(
        protos, "fold", [], [helper.make_empty_tensor_value_info(o) for o in outs], inits
    )
    model = helper.make_model(g, opset_imports=list(graph.header.opset_import))
    model.ir_version = graph.header.ir_version or onnx.IR_VERSION
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    results = sess.run(outs, {})
    return {o: np.asarray(r) for o, r in zip(outs, results, strict=True)}
