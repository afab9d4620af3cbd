"""Each candidate's error, measured: the model with that op alone lowered, on calibration
inputs, against the exact model's outputs (`metrics.errors`, per output). Also the runner the
pass shares: a model in ORT on a list of feed sets, and the shapes of the candidates'
activations read from one run of the exact model."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewrite.precision.forms import MS, Candidate, all_names, build, name_maker
from rewrite.precision.kernels import session
from rewrite.precision.metrics import errors
from rewrite.precision.static import FORM, QDQ, Ranges, static_nodes

Outputs = list[dict[str, np.ndarray]]


def run(model: onnx.ModelProto, feed_sets: list[Mapping[str, Any]], **kw: Any) -> Outputs:
    """Every graph output of `model` on each feed set."""
    s = session(model, **kw)
    names = [o.name for o in s.get_outputs()]
    fed = {i.name for i in s.get_inputs()}
    return [
        dict(zip(names, s.run(None, {k: v for k, v in f.items() if k in fed}), strict=True))
        for f in feed_sets
    ]


def activation_stats(
    model: onnx.ModelProto,
    cands: list[Candidate],
    feed_sets: list[Mapping[str, Any]],
    ranges: dict[str, tuple[float, float]] | None = None,
    **kw: Any,
) -> tuple[dict[str, tuple[int, ...]], dict[str, np.ndarray]]:
    """Per candidate activation (and operand and output of an `int8_static` candidate): its
    concrete shape on the first feed set, and the largest |value| of each of its last-axis
    channels over all sets (one run of `model` per set with those values added as outputs).
    `ranges`, when given, receives the (min, max) over all sets of the activation, operand
    and output of every `int8_static` candidate."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {o.name for o in probe.graph.output}
    acts = list(dict.fromkeys(c.activation for c in cands))
    static_values = [
        v for c in cands if c.form == FORM for v in (c.activation, c.operand, c.output) if v
    ]
    for name in dict.fromkeys([*acts, *static_values]):
        if name not in have:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    got = run(probe, feed_sets, **kw)
    acts = list(dict.fromkeys([*acts, *static_values]))
    if ranges is not None:
        for v in dict.fromkeys(static_values):
            ranges[v] = (
                min(float(np.min(g[v])) for g in got),
                max(float(np.max(g[v])) for g in got),
            )
    shapes = {a: tuple(int(d) for d in np.shape(got[0][a])) for a in acts}
    amax: dict[str, np.ndarray] = {}
    for a in acts:
        for g in got:
            v = np.asarray(g[a], np.float32)
            if v.ndim == 0 or v.size == 0:
                continue
            m = np.max(np.abs(v.reshape(-1, v.shape[-1])), axis=0)
            amax[a] = m if a not in amax else np.maximum(amax[a], m)
    return shapes, amax


def switchable(
    model: onnx.ModelProto,
    cands: list[Candidate],
    smooth: dict[str, np.ndarray] | None = None,
    ranges: Ranges | None = None,
) -> tuple[onnx.ModelProto, dict[tuple[int, str], str]]:
    """`model` with every candidate op replaced by a chain of `If`s over boolean scalar inputs,
    one per (op, form): with every switch off it computes the exact op, with one on that form.
    One session then measures every candidate (session creation, not running, dominates
    the cost of a large model). Returns the model and the switch input of each candidate."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    inits = {t.name: t for t in g.initializer}
    fresh = name_maker(all_names(g))
    smooth = smooth or {}

    def graph(nodes: list[onnx.NodeProto], y: str) -> onnx.GraphProto:
        vi = helper.make_tensor_value_info(y, onnx.TensorProto.FLOAT, None)
        return helper.make_graph(nodes, fresh("branch"), [], [vi])

    by_index: dict[int, list[Candidate]] = {}
    for c in cands:
        by_index.setdefault(c.index, []).append(c)
    switches: dict[tuple[int, str], str] = {}
    nodes: list[onnx.NodeProto] = []
    for index, node in enumerate(g.node):
        forms = by_index.get(index)
        if not forms:
            nodes.append(node)
            continue
        exact = onnx.NodeProto()
        exact.CopyFrom(node)
        exact.output[0] = fresh(f"{node.output[0]}_exact")
        current, y = [exact], exact.output[0]
        w0 = numpy_helper.to_array(inits[forms[0].weight]) if forms[0].weight else None
        for c in forms:
            if c.form == FORM:
                low, y_low = _static_branch(node, c, ranges or {}, inits, fresh, g)
            else:
                assert w0 is not None
                low, y_low = _matmul_branch(node, c, w0, smooth.get(c.activation), fresh, g)
            switches[c.key] = fresh(f"switch_{index}_{c.form}")
            y_if = fresh(f"{node.output[0]}_if")
            cond = helper.make_node(
                "If",
                [switches[c.key]],
                [y_if],
                then_branch=graph(low, y_low),
                else_branch=graph(current, y),
            )
            current, y = [cond], y_if
        current[0].output[0] = node.output[0]
        nodes.extend(current)
    del g.node[:]
    g.node.extend(nodes)
    for sw in switches.values():
        g.input.append(helper.make_tensor_value_info(sw, onnx.TensorProto.BOOL, []))
    if not any(o.domain == MS for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(MS, 1))
    return out, switches


def _matmul_branch(
    node: onnx.NodeProto,
    c: Candidate,
    w0: np.ndarray,
    f: np.ndarray | None,
    fresh: Callable[[str], str],
    g: onnx.GraphProto,
) -> tuple[list[onnx.NodeProto], str]:
    """(the nodes of MatMul/Gemm `node` in form `c.form` writing a fresh output, smoothed by
    factors `f` when given, that output); their constants are added to `g`'s initializers."""
    w = w0.T if c.transposed else w0
    low: list[onnx.NodeProto] = []
    a = c.activation
    if f is not None:
        inv, a = fresh(f"{a}_smooth_inv"), fresh(f"{a}_smoothed")
        g.initializer.append(numpy_helper.from_array((1 / f).astype(np.float32), inv))
        low.append(helper.make_node("Mul", [c.activation, inv], [a]))
        w = w * f[:, None]
    bias = node.input[2] if c.op == "Gemm" and len(node.input) > 2 else None
    y_low = fresh(f"{node.output[0]}_{c.form}")
    new, tensors = build(c, a, w, bias or None, y_low, y_low, fresh)
    g.initializer.extend(tensors)
    return [*low, new], y_low


def _static_branch(
    node: onnx.NodeProto,
    c: Candidate,
    ranges: Ranges,
    inits: dict[str, onnx.TensorProto],
    fresh: Callable[[str], str],
    g: onnx.GraphProto,
) -> tuple[list[onnx.NodeProto], str]:
    """(the nodes of `node` (Conv or Add) in its `int8_static` form writing a fresh output,
    that output); their constants are added to `g`'s initializers. A Relu folded into the
    form stays after the If (on values the form already clipped: it changes nothing)."""
    y_low = fresh(f"{node.output[0]}_{c.form}")
    known = {v: ranges[v] for v in (c.activation, c.operand) if v}
    qdq = QDQ({**known, y_low: ranges[c.output]}, fresh)
    nodes = static_nodes(qdq, node, y_low, inits)
    g.initializer.extend(qdq.tensors)
    return nodes, y_low


def sensitivities(
    model: onnx.ModelProto,
    cands: list[Candidate],
    feed_sets: list[Mapping[str, Any]],
    reference: Outputs,
    metric: str,
    *,
    smooth: dict[str, np.ndarray] | None = None,
    ranges: Ranges | None = None,
    deadline: float | None = None,
    **kw: Any,
) -> dict[tuple[int, str], dict[str, float]]:
    """Per candidate (by its (node index, form) key), its error per output when lowered
    alone, from one session of `switchable(model)` per form. Candidates not reached before
    `deadline` (a `time.monotonic()` value) are left out (they stay exact)."""
    out: dict[tuple[int, str], dict[str, float]] = {}
    by_form: dict[str, list[Candidate]] = {}
    for c in cands:
        by_form.setdefault(c.form, []).append(c)
    for group in by_form.values():  # one If per op: ORT 1.32 mixes up nested MatMulNBits forms
        if deadline is not None and time.monotonic() > deadline:
            break
        probe, switches = switchable(model, group, smooth, ranges)
        s = session(probe, **kw)
        names = [o.name for o in s.get_outputs()]
        fed = {i.name for i in s.get_inputs()}
        off = {sw: np.array(False) for sw in switches.values()}
        for c in group:
            if deadline is not None and time.monotonic() > deadline:
                break
            on = {**off, switches[c.key]: np.array(True)}
            got = [
                dict(zip(names, s.run(None, {**{k: v for k, v in f.items() if k in fed}, **on}),
                         strict=True))
                for f in feed_sets
            ]  # fmt: skip
            out[c.key] = errors(metric, reference, got)
    return out
