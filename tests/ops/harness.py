"""Checks one op against ONNX Runtime and ONNX shape inference on concrete inputs.

`check_op` builds a one-node model, runs it in ORT, and asserts that the op's numpy
reference gives the same outputs and that its `infer` gives the outputs' real dtypes and
shapes (and agrees with `onnx.shape_inference` where that knows the shape).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from rewrite.ops import OpCall, TensorType, lookup
from rewrite.ops.base import onnx_dtype


def check_op(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    attrs: dict[str, Any] | None = None,
    *,
    n_outputs: int = 1,
    const_inputs: Sequence[int] = (),
    opset: int = 17,
    domain: str = "",
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> list[np.ndarray]:
    """Run `op_type` in ORT and compare reference + infer; returns ORT's outputs.

    Inputs at indices in `const_inputs` become initializers (and `OpCall.consts`); None is an
    omitted optional input.
    """
    attrs = attrs or {}
    spec = lookup(op_type, domain)
    assert spec is not None, f"{op_type} is not registered"
    names = [f"in{i}" if a is not None else "" for i, a in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, domain=domain, **attrs)
    graph_inputs, inits = [], []
    for name, a in zip(names, inputs, strict=True):
        if a is None:
            continue
        if names.index(name) in const_inputs:
            inits.append(onnx.numpy_helper.from_array(a, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, onnx_dtype(a), a.shape))
    graph = helper.make_graph(
        [node], "g", graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outs], inits
    )
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {
        n: a
        for i, (n, a) in enumerate(zip(names, inputs, strict=True))
        if a is not None and i not in const_inputs
    }
    got = sess.run(outs, feed)

    call = OpCall(
        op_type,
        [None if a is None else TensorType(onnx_dtype(a), a.shape) for a in inputs],
        [a if i in const_inputs else None for i, a in enumerate(inputs)],
        onnx_node_attrs(node),
        n_outputs=n_outputs,
        opset=opset,
    )
    if spec.reference is not None:
        ref = spec.reference(call, list(inputs))
        assert len(ref) == n_outputs, f"{op_type}: reference gave {len(ref)} outputs"
        for i, (r, g) in enumerate(zip(ref, got, strict=True)):
            r = np.asarray(r)
            assert r.dtype == g.dtype, f"{op_type} out{i}: dtype {r.dtype} != ORT {g.dtype}"
            assert r.shape == g.shape, f"{op_type} out{i}: shape {r.shape} != ORT {g.shape}"
            np.testing.assert_allclose(r, g, rtol=rtol, atol=atol, err_msg=f"{op_type} out{i}")
    types = spec.infer(call)
    assert len(types) == n_outputs, f"{op_type}: infer gave {len(types)} outputs"
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    by_name = {v.name: v for v in inferred.graph.output}
    for i, (t, g) in enumerate(zip(types, got, strict=True)):
        assert t.dtype == onnx_dtype(g), f"{op_type} out{i}: infer dtype {t.dtype}"
        assert t.shape == g.shape, f"{op_type} out{i}: infer shape {t.shape} != {g.shape}"
        vi = by_name.get(outs[i])
        if vi is not None and vi.type.tensor_type.HasField("shape"):
            dims = [
                d.dim_value if d.HasField("dim_value") else None
                for d in vi.type.tensor_type.shape.dim
            ]
            if all(d is not None for d in dims):
                assert tuple(dims) == t.shape, f"{op_type}: onnx infers {dims}, we {t.shape}"
    return got


def onnx_node_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out
