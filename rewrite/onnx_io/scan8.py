"""Scan from opset 8 to opset 9+, keeping what the model computes and its interface.

Scan-8 has a batch axis on every state and scan input and output; Scan-9 has none. onnx's
version converter (`Scan_8_9`) drops the batch axis from the declared shapes of the Scan's
inputs and outputs but not from the values: the converted graph declares graph inputs and
outputs of a lower rank than the model it came from (ONNX Runtime then refuses the original
inputs: "Invalid rank for input"). `keep_scan_batch(original, converted, where)` repairs the
converted model for a batch of 1: each Scan input goes through Squeeze(axis 0), each output
through Unsqueeze(axis 0) back to its own name, and the original declarations of the graph's
inputs, outputs and values around the Scan come back. A batch known to be larger than 1 is
refused (ModelError): opset 9's Scan cannot express it without a loop. An unknown batch is
converted as if 1: a larger one then fails loudly in ONNX Runtime (Squeeze of a dim > 1).
"""

from __future__ import annotations

import onnx
from onnx import helper

from rewrite.errors import ModelError

_AXIS0 = "rewrite_scan8_axis0"


def keep_scan_batch(original: onnx.ModelProto, converted: onnx.ModelProto, where: str) -> None:
    """Repair, in place, the main-graph Scans `converted` got from opset-8 Scans (module doc)."""
    g = converted.graph
    if not any(n.op_type == "Scan" and n.domain in ("", "ai.onnx") for n in g.node):
        return
    declared = _declared(original)
    touched: set[str] = set()
    nodes: list[onnx.NodeProto] = []
    for proto in g.node:
        node = onnx.NodeProto()
        node.CopyFrom(proto)
        if node.op_type != "Scan" or node.domain not in ("", "ai.onnx"):
            nodes.append(node)
            continue
        for name in [*node.input, *node.output]:
            dims = declared.get(name)
            if dims and isinstance(dims[0], int) and dims[0] != 1:
                raise ModelError(
                    f"{where}: Scan {node.name or node.output[0]!r} (opset 8) has batch size "
                    f"{dims[0]} on '{name}'; opset 9+ Scan has no batch axis, so the model "
                    "cannot be converted (export it at opset 9 or later)"
                )
        nodes += _squeezed(node, touched)
    axis0 = helper.make_tensor(_AXIS0, onnx.TensorProto.INT64, [1], [0])
    del g.node[:]
    g.node.append(helper.make_node("Constant", [], [_AXIS0], value=axis0))
    g.node.extend(nodes)
    _restore_declarations(original, converted, touched)


def _squeezed(node: onnx.NodeProto, touched: set[str]) -> list[onnx.NodeProto]:
    """Squeeze(0) -> `node` (renamed inputs and outputs) -> Unsqueeze(0) to the old names."""
    before, after = [], []
    for i, name in enumerate(node.input):
        if name:
            touched.add(name)
            node.input[i] = f"{name}_rewrite_unbatched"
            before.append(helper.make_node("Squeeze", [name, _AXIS0], [node.input[i]]))
    for i, name in enumerate(node.output):
        if name:
            touched.add(name)
            node.output[i] = f"{name}_rewrite_unbatched"
            after.append(helper.make_node("Unsqueeze", [node.output[i], _AXIS0], [name]))
    return [*before, node, *after]


def _declared(model: onnx.ModelProto) -> dict[str, list[int | str]]:
    """Declared dims of the main graph's inputs, outputs and values (dim_param as str)."""
    out: dict[str, list[int | str]] = {}
    g = model.graph
    for vi in [*g.input, *g.value_info, *g.output]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            out[vi.name] = [
                d.dim_value if d.HasField("dim_value") else d.dim_param
                for d in vi.type.tensor_type.shape.dim
            ]
    return out


def _restore_declarations(
    original: onnx.ModelProto, converted: onnx.ModelProto, names: set[str]
) -> None:
    """Graph inputs and outputs in `names` get their original declarations back; value_info
    for them is dropped (shape inference finds it again)."""
    g, og = converted.graph, original.graph
    for field, before in (("input", og.input), ("output", og.output)):
        by_name = {vi.name: vi for vi in before}
        for vi in getattr(g, field):
            if vi.name in names and vi.name in by_name:
                vi.CopyFrom(by_name[vi.name])
    kept = [vi for vi in g.value_info if vi.name not in names]
    del g.value_info[:]
    g.value_info.extend(kept)
