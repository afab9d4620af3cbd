"""Checks that a tensor's stored values fit what its dims and dtype declare (inline and
external), before shape inference or numpy would try to materialize them."""

from __future__ import annotations

from math import prod

import numpy as np
import onnx
from onnx import external_data_helper

from rewrite.errors import ModelError
from rewrite.onnx_io.graph import has_data

_SUB_BYTE = {
    getattr(onnx.TensorProto, n)
    for n in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
    if hasattr(onnx.TensorProto, n)
}


def check_inline_sizes(model: onnx.ModelProto, where: str) -> None:
    """Refuse tensors whose data cannot hold the elements their dims declare.

    Shape inference and numpy would otherwise try to materialize them: a 400-byte file whose
    tensor declares dims [2**31] makes onnx's shape inference allocate 16 GB. Every element
    takes at least half a byte (raw or typed fields), so numel > 2 * ByteSize is impossible.
    Tensors with no data at all (hollow corpus stubs) load: `Graph.require_data` refuses them.
    """
    for t in all_tensors(model.graph):
        if external_data_helper.uses_external_data(t) or not has_data(t):
            continue
        if any(d < 0 for d in t.dims):
            raise ModelError(f"{where}: tensor '{t.name}' has a negative dim {list(t.dims)}")
        numel = prod(t.dims)
        if numel > 2 * t.ByteSize() + 16:
            raise ModelError(
                f"{where}: tensor '{t.name}' declares dims {list(t.dims)} ({numel} elements) "
                f"but holds only {t.ByteSize()} bytes"
            )
        _check_inline_count(t, numel, where)


_EXACT_RAW_LIMIT = 64 << 20
"""Inline raw data up to this many bytes is measured exactly at load (protobuf copies
`raw_data` on every read: ~1.3 s/GB); bigger inline tensors keep the half-byte bound only."""


def _check_inline_count(t: onnx.TensorProto, numel: int, where: str) -> None:
    """Refuse an inline tensor whose values do not number what its dims and dtype declare
    (numpy would fail to reshape it deep inside folding or encoding)."""
    if t.data_type in _SUB_BYTE or t.data_type == onnx.TensorProto.UNDEFINED:
        return
    try:
        np_dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
    except (KeyError, TypeError, ValueError):
        return
    per = 2 if np_dtype.kind == "c" else 1
    if t.HasField("raw_data"):
        if t.data_type == onnx.TensorProto.STRING:
            return
        want = numel * np_dtype.itemsize
        if want > _EXACT_RAW_LIMIT:
            return
        have, unit = len(t.raw_data), "bytes"
    else:
        fields = [f for f in _TYPED_FIELDS if len(getattr(t, f))]
        if not fields:
            return
        want, have, unit = numel * per, len(getattr(t, fields[0])), "values"
    if have != want:
        raise ModelError(
            f"{where}: tensor '{t.name}' declares dims {list(t.dims)} "
            f"({onnx.TensorProto.DataType.Name(t.data_type)}), which need {want} {unit}, "
            f"but holds {have}"
        )


_TYPED_FIELDS = (
    "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data"
)  # fmt: skip


def check_data_size(t: onnx.TensorProto, length: int, where: str) -> None:
    """The `length` bytes loaded match the tensor's dims and dtype (fixed-size dtypes only)."""
    if t.data_type in _SUB_BYTE or t.data_type == onnx.TensorProto.STRING:
        return
    try:
        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except (KeyError, TypeError, ValueError):
        return
    want = prod(t.dims) * itemsize
    if length != want:
        raise ModelError(
            f"{where}: tensor '{t.name}': external data has {length} bytes, "
            f"dims {list(t.dims)} need {want}"
        )


def all_tensors(graph: onnx.GraphProto) -> list[onnx.TensorProto]:
    """Every TensorProto of a graph: initializers, sparse parts, attributes, subgraphs."""
    out = list(graph.initializer)
    for sp in graph.sparse_initializer:
        out += [sp.values, sp.indices]
    for n in graph.node:
        for a in n.attribute:
            if a.HasField("t"):
                out.append(a.t)
            out.extend(a.tensors)
            if a.HasField("g"):
                out += all_tensors(a.g)
            for g in a.graphs:
                out += all_tensors(g)
    return out
