"""Upsample (opsets 7-9) and Resize-10 through the version converter, keeping what they compute.

onnx's version converter writes these nodes as a Resize with `mode` only: half_pixel
coordinates and round_prefer_floor, which is not what ONNX Runtime computes for them
(asymmetric coordinates, SIMPLE rounding: `rewrite.ops.upsample`). `keep_resize_meaning`
sets, in place, on each Resize the converter made from such a node (matched by output name,
in the main graph and every subgraph) the attributes `ops.upsample.resize_attributes` gives.
A node with no opset-11 form (a nearest Resize-10 that scales some axes up and others down,
or whose scales are computed at run time) is refused with a ModelError naming it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewrite.errors import ModelError
from rewrite.ops.upsample import resize_attributes


def keep_resize_meaning(
    original: onnx.ModelProto, converted: onnx.ModelProto, opset: int, where: str
) -> None:
    """Give every converted Upsample / Resize-10 node its ORT meaning (module docstring)."""
    if opset > 10:
        return
    consts = _constants(original.graph)
    wanted: dict[str, dict[str, object]] = {}
    for n in _nodes(original.graph):
        if n.domain not in ("", "ai.onnx") or not n.output:
            continue
        if not ((n.op_type == "Upsample" and opset >= 7) or (n.op_type, opset) == ("Resize", 10)):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        scales = attrs.get("scales") if opset < 9 else consts.get(_at(n.input, 1))
        listed = None if scales is None else [float(s) for s in np.ravel(scales)]
        fixed = resize_attributes(n.op_type, opset, attrs, listed)
        if fixed is None:
            label = n.name or n.output[0]
            raise ModelError(
                f"{where}: node {label!r} ({n.op_type}, opset {opset}, nearest) scales some "
                "axes up and others down or has run-time scales: no Resize of opset 11+ "
                "computes what ONNX Runtime computes for it, so its opset cannot be converted"
            )
        wanted[n.output[0]] = fixed
    for n in _nodes(converted.graph):
        fixed = wanted.get(n.output[0]) if n.op_type == "Resize" and n.output else None
        if fixed is None:
            continue
        keep = [a for a in n.attribute if a.name not in fixed]
        del n.attribute[:]
        n.attribute.extend(keep)
        n.attribute.extend(helper.make_attribute(k, v) for k, v in sorted(fixed.items()))


def _at(names: object, i: int) -> str:
    seq = list(names)  # type: ignore[call-overload]
    return seq[i] if len(seq) > i else ""


def _nodes(g: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `g` and of its subgraphs, depth first."""
    for n in g.node:
        yield n
        for a in n.attribute:
            for sub in [a.g] if a.HasField("g") else list(a.graphs):
                yield from _nodes(sub)


def _constants(g: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Initializers and Constant-node values of `g` and its subgraphs, by name."""
    out: dict[str, np.ndarray] = {}

    def visit(graph: onnx.GraphProto) -> None:
        for t in graph.initializer:
            if t.data_location != onnx.TensorProto.EXTERNAL:
                out[t.name] = numpy_helper.to_array(t)
        for n in graph.node:
            if n.op_type == "Constant" and n.output:
                for a in n.attribute:
                    if a.name == "value":
                        out[n.output[0]] = numpy_helper.to_array(a.t)
            for a in n.attribute:
                for sub in [a.g] if a.HasField("g") else list(a.graphs):
                    visit(sub)

    visit(g)
    return out
