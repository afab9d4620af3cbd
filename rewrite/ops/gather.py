"""Gather, GatherND, GatherElements (opset 13-21): indexing by an int32/int64 index tensor.

Negative indices count from the end of the indexed axis; out-of-range ones are an error.
- Gather(data, indices, axis=0): out = data.shape[:axis] + indices.shape + data.shape[axis+1:],
  out[..., j, ...] = data[..., indices[j], ...] (numpy `take`).
- GatherND(data, indices, batch_dims=0): the last dim k of `indices` indexes data's dims
  batch_dims .. batch_dims+k; out = indices.shape[:-1] + data.shape[batch_dims + k:].
- GatherElements(data, indices, axis=0): out has indices' shape,
  out[i][j][k] = data[indices[i][j][k]][j][k] for axis 0 (numpy `take_along_axis`).

The output has data's dtype; the ops copy data (bytes read + written), no FLOPs.

Typed form: `Gather(axis, data, indices)`, indices int64 or int32 (`input_dtypes`). Its Z3
semantics selects with an `If` chain over the index value (index k or k - d picks slice k);
an index outside [-d, d) is undefined (`_z3.require`: ORT fails the run).
`GatherND(batch_dims, data, indices)`, indices int64: each index tuple selects with nested
`If` chains, one per indexed dim, under the same range requirement.
`GatherElements(axis, data, indices)`, indices int64 or int32: out[p] selects among data's
elements on p's line along `axis` with the same `If` chain and range requirement (ORT 1.32's
CPU kernel fails the run on an index outside [-d, d)); data's other dims must be at least
indices' (ONNX: the same rank, indices' dims no larger).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops import _z3
from rewrite.ops._dims import norm_axis
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.registry import register


def infer_gather(call: OpCall) -> list[TensorType]:
    data, idx = call.input(0), call.input(1)
    if data.shape is None or idx.shape is None:
        return [TensorType(data.dtype, None)]
    axis = norm_axis(call, call.attr("axis", 0), len(data.shape))
    shape = (*data.shape[:axis], *idx.shape, *data.shape[axis + 1 :])
    return [TensorType(data.dtype, shape)]


def ref_gather(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    data, idx = arrays[0], arrays[1]
    assert data is not None and idx is not None
    return [np.take(data, idx.astype(np.int64), axis=int(call.attr("axis", 0)))]


def z3_gather(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """out[pre, j, post] = data[pre, k, post] where indices[j] is k or k - d (d: the axis dim);
    undefined (`require`) unless -d <= indices[j] < d."""
    data, idx = arrays[0], arrays[1]
    assert data is not None and idx is not None
    axis = norm_axis(call, call.attr("axis", 0), data.ndim)
    d = data.shape[axis]
    pre, post = data.shape[:axis], data.shape[axis + 1 :]
    out = np.empty((*pre, *idx.shape, *post), dtype=object)
    for j in np.ndindex(*idx.shape):
        i = idx[j]
        for p in np.ndindex(*pre):
            for q in np.ndindex(*post):
                out[(*p, *j, *q)] = _select(call, i, [data[(*p, k, *q)] for k in range(d)])
    return [out]


def _select(call: OpCall, i: Any, items: list[Any]) -> Any:
    """items[i] for an index term i (negative from the end); out of range is undefined."""
    d = len(items)
    if not z3.is_expr(i):
        k = int(i)
        if not -d <= k < d:
            raise fail(call, f"index {k} out of range for a dim of {d}")
        return items[k]
    _z3.require(z3.And(i >= -d, i < d))
    if d == 0:
        return _z3.zero_like(i)  # never defined: any value
    out = items[d - 1]
    for k in range(d - 2, -1, -1):
        out = z3.If(z3.Or(i == k, i == k - d), items[k], out)
    return out


def infer_gather_nd(call: OpCall) -> list[TensorType]:
    data, idx = call.input(0), call.input(1)
    b = int(call.attr("batch_dims", 0))
    if idx.shape is not None and len(idx.shape) < 1:
        raise fail(call, "indices must have rank >= 1")
    if data.shape is None or idx.shape is None or not isinstance(idx.shape[-1], int):
        return [TensorType(data.dtype, None)]
    k = idx.shape[-1]
    if b < 0 or b + k > len(data.shape) or b >= len(idx.shape):
        raise fail(call, f"batch_dims={b} and index depth {k} do not fit data")
    return [TensorType(data.dtype, (*idx.shape[:-1], *data.shape[b + k :]))]


def ref_gather_nd(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    data, idx = arrays[0], arrays[1]
    assert data is not None and idx is not None
    b = int(call.attr("batch_dims", 0))
    k = idx.shape[-1]
    batch = data.shape[:b]
    nb = int(np.prod(batch))
    d = data.reshape(nb, *data.shape[b:])
    i = idx.astype(np.int64).reshape(nb, -1, k)
    i = np.where(i < 0, i + np.array(data.shape[b : b + k]), i)
    out = np.stack([d[n][tuple(i[n].T)] for n in range(nb)]) if nb else None
    shape = (*idx.shape[:-1], *data.shape[b + k :])
    if out is None:
        return [np.zeros(shape, data.dtype)]
    return [out.reshape(shape)]


def z3_gather_nd(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """out[i..., q...] = data[i[:b]..., t_0, ..., t_k-1, q...] where (t_0..t_k-1) is the
    index tuple indices[i..., :] (each t in [-d, d) of its dim, negative from the end)."""
    data, idx = arrays[0], arrays[1]
    assert data is not None and idx is not None
    (out_t,) = infer_gather_nd(call)
    b, k = int(call.attr("batch_dims", 0)), idx.shape[-1]
    out = np.empty(tuple(out_t.shape or ()), dtype=object)
    rest = data.shape[b + k :]
    for pos in np.ndindex(*idx.shape[:-1]):
        sub = data[pos[:b]]
        tup = [idx[(*pos, t)] for t in range(k)]
        for q in np.ndindex(*rest):
            out[(*pos, *q)] = _pick(call, sub, tup, q)
    return [out]


def _pick(call: OpCall, sub: np.ndarray, tup: list[Any], q: tuple[int, ...]) -> Any:
    """sub[tup..., q...] for index terms `tup` (one `_select` per indexed dim)."""
    if not tup:
        return sub[q]
    return _select(call, tup[0], [_pick(call, sub[m], tup[1:], q) for m in range(sub.shape[0])])


def gather_nd_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """GatherND's `batch_dims`: 0, and 1 where both inputs have a leading batch dim to spare."""
    if name != "batch_dims":
        return None
    ranks = [t.rank for t in inputs[:2]]
    if len(ranks) == 2 and all(r is not None and r >= 2 for r in ranks):
        return [0, 1]
    return [0]


def infer_gather_elements(call: OpCall) -> list[TensorType]:
    data, idx = call.input(0), call.input(1)
    if data.shape is not None and idx.shape is not None:
        if len(data.shape) != len(idx.shape):
            raise fail(call, "data and indices must have the same rank")
        norm_axis(call, call.attr("axis", 0), len(data.shape))
    shape = idx.shape if idx.shape is not None else None
    return [TensorType(data.dtype, shape)]


def ref_gather_elements(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    data, idx = arrays[0], arrays[1]
    assert data is not None and idx is not None
    axis = norm_axis(call, call.attr("axis", 0), data.ndim)
    i = idx.astype(np.int64)
    i = np.where(i < 0, i + data.shape[axis], i)
    window = tuple(slice(None) if a == axis else slice(n) for a, n in enumerate(idx.shape))
    return [np.take_along_axis(data[window], i, axis=axis)]


def z3_gather_elements(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """out[p] = data[p with p[axis] := k] where indices[p] is k or k - d (d: data's axis dim);
    undefined (`require`) unless -d <= indices[p] < d."""
    data, idx = arrays[0], arrays[1]
    assert data is not None and idx is not None
    infer_gather_elements(call)
    axis = norm_axis(call, call.attr("axis", 0), data.ndim)
    if any(i > d for a, (i, d) in enumerate(zip(idx.shape, data.shape, strict=True)) if a != axis):
        raise fail(call, "indices' dims must not exceed data's off the axis")
    out = np.empty(idx.shape, dtype=object)
    for p in np.ndindex(*idx.shape):
        line = [data[(*p[:axis], k, *p[axis + 1 :])] for k in range(data.shape[axis])]
        out[p] = _select(call, idx[p], line)
    return [out]


def gather_bytes(call: OpCall, outputs: list[TensorType]) -> float:
    """Indices read plus the gathered rows read and written: the data tensor is not streamed."""
    idx = call.input(1)
    out = sum((t.numel or 0) * t.itemsize for t in outputs)
    return float((idx.numel or 0) * idx.itemsize + 2 * out)


GATHER = register(
    OpSpec(
        name="Gather",
        infer=infer_gather,
        reference=ref_gather,
        flops=no_flops,
        bytes=gather_bytes,
        egg=EggSig(attrs=(("axis", "i64", 0),), n_inputs=2),
        z3=z3_gather,
        input_dtypes=(None, (TensorProto.INT64, TensorProto.INT32)),
        doc="Gather(data, indices, axis): numpy take along axis; indices in [-d, d).",
    )
)
GATHER_ND = register(
    OpSpec(
        name="GatherND",
        infer=infer_gather_nd,
        reference=ref_gather_nd,
        flops=no_flops,
        bytes=gather_bytes,
        egg=EggSig(attrs=(("batch_dims", "i64", 0),), n_inputs=2),
        z3=z3_gather_nd,
        input_dtypes=(None, (TensorProto.INT64,)),
        attr_values=gather_nd_values,
        doc="GatherND(data, indices, batch_dims): index tuples in indices' last dim.",
    )
)
GATHER_ELEMENTS = register(
    OpSpec(
        name="GatherElements",
        infer=infer_gather_elements,
        reference=ref_gather_elements,
        flops=no_flops,
        bytes=gather_bytes,
        egg=EggSig(attrs=(("axis", "i64", 0),), n_inputs=2),
        z3=z3_gather_elements,
        input_dtypes=(None, (TensorProto.INT64, TensorProto.INT32)),
        doc="GatherElements(data, indices, axis): numpy take_along_axis.",
    )
)
