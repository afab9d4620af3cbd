"""Value types at concrete input sizes: what the cost model prices when the user names them.

`observed_types(path, dims)` runs the model once in ONNX Runtime (optimizations off, every
main-graph value an output) on seeded inputs whose symbolic dims take the sizes in `dims`
(`onnx_io.inputs.make_inputs`), and returns each value's dtype and shape as the run shows them.
ONNX shape inference cannot do this: it loses sizes in the `Shape -> Gather -> Range/Slice`
chains exporters write for dynamic axes (on bert_dynamic it resolves 8 of 506 symbolic
values; this run resolves all of them), and in the `Pad` sizes vision exporters compute
(mobilenetv2, efficientnet: static inputs, symbolic values inside).

`sizing_types(graph, dims)` decides when the run is worth it: some value's type is not static,
and the inputs' sizes are known (all static, or `optimize --dim` names sizes). The run holds
every intermediate value at once and a second copy of the weights; models over protobuf's
2 GB limit are skipped. Never raises: where the run fails, the result is empty and the
returned note says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx

from rewrite.onnx_io.graph import Graph
from rewrite.onnx_io.inputs import Feed, make_inputs
from rewrite.onnx_io.shapes import PROTO_LIMIT, first_line
from rewrite.ops.base import TensorType

AUTO_SIZING_ELEMENTS = 256 * 2**20
"""Weights (elements, ~1 GB of float32) above which the sizing run needs `--dim` to happen."""


def observed_types(
    path: str | Path,
    dims: Mapping[str, int],
    feeds: Mapping[str, Feed] | None = None,
) -> tuple[dict[str, TensorType], str]:
    """(value name -> static type seen in one ORT run at `dims`, note); see the module doc.
    `feeds`: run on these inputs instead of seeded ones at `dims`."""
    import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints

    why = "--dim: " if dims else ""  # static inputs: the run happens without --dim
    try:
        model = onnx.load(str(path))
        if model.ByteSize() >= PROTO_LIMIT:
            return {}, f"{why}the model is over 2 GB; priced with symbolic dims as 1"
        have = {o.name for o in model.graph.output}
        extra = [o for n in model.graph.node for o in n.output if o and o not in have]
        model.graph.output.extend(onnx.ValueInfoProto(name=o) for o in dict.fromkeys(extra))
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.log_severity_level = 3
        sess = ort.InferenceSession(
            model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
        del model
        names = [o.name for o in sess.get_outputs()]
        if feeds is None:
            feeds = make_inputs(str(path), dims=dict(dims))
        values = sess.run(names, dict(feeds))
    except Exception as e:  # pricing at symbolic sizes is the fallback, never an error
        return {}, f"{why}the sizing run failed ({first_line(e)}); symbolic dims priced as 1"
    out: dict[str, TensorType] = {}
    for name, value in zip(names, values, strict=True):
        if isinstance(value, np.ndarray):
            try:
                dtype = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
            except (KeyError, ValueError, TypeError):
                continue
            out[name] = TensorType(int(dtype), tuple(int(d) for d in value.shape))
    return out, ""


def sizing_types(graph: Graph, dims: Mapping[str, int]) -> tuple[dict[str, TensorType], str]:
    """`observed_types` of the graph's file when some value is not static and the input sizes
    are known (all static, or `dims` given); else nothing to do: ({}, "")."""
    if graph.path is None or all(t.is_static for t in graph.types.values()):
        return {}, ""
    inputs = [graph.types.get(i) for i in graph.inputs if i not in graph.initializers]
    if not dims and not all(t is not None and t.is_static for t in inputs):
        return {}, ""
    weights = sum(math.prod(t.dims) for t in graph.initializers.values())
    if not dims and weights > AUTO_SIZING_ELEMENTS:
        return {}, "values with symbolic sizes priced as 1 (model too big to size without --dim)"
    return observed_types(graph.path, dims)
