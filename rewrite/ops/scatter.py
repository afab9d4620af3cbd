"""ScatterND (opset 11+, reduction="none"): data with index tuples' slices replaced.

Contract: ScatterND(data, indices, updates): data of rank r, INT64 indices of rank q >= 1
whose last dim k <= r holds index tuples into data's first k dims (negative from the end),
updates of shape indices.shape[:-1] + data.shape[k:]. The output is data's copy with
out[indices[j]] = updates[j] for every j of indices.shape[:-1] in row-major order; it has
data's dtype and shape. ORT 1.32's CPU kernel (tensor/scatter_nd.cc) adds d to a negative
index, fails the run on one outside [-d, d) ("invalid indice found") and, with duplicate
tuples, leaves the last update written (checked with one intra-op thread).

Typed form: `(ScatterND data indices updates)`, indices INT64 (`input_dtypes`), constant or
computed; a node with reduction other than "none" stays opaque (`to_egg`).
Z3 semantics (exact, every dtype, both models): for every update j in order and every
target tuple t, out[t, q] = If(indices[j] names t, updates[j, q], out[t, q]) (a numeral
tuple writes its slice directly), so the last matching update wins; each index component
outside [-d, d) is undefined (`_z3.require`: ORT fails). Values are copied, never combined,
so NaN, ±inf and -0 pass unchanged. Outside the proof: the order among duplicate tuples when
ORT splits the updates across several threads.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops import _z3
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.registry import register

Array = np.ndarray


def infer_scatter_nd(call: OpCall) -> list[TensorType]:
    """data's type; indices of rank >= 1 with a last dim <= rank(data), updates of the
    shape indices.shape[:-1] + data.shape[k:] (checked where dims are static)."""
    data, idx, upd = call.input(0), call.input(1), call.input(2)
    if idx.shape is not None and len(idx.shape) < 1:
        raise fail(call, "indices must have rank >= 1")
    reduction = call.attr("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise fail(call, f"unknown reduction {reduction!r}")
    if data.shape is None or idx.shape is None or not isinstance(idx.shape[-1], int):
        return [data]
    k = idx.shape[-1]
    if k > len(data.shape):
        raise fail(call, f"index depth {k} exceeds the rank of data")
    if upd.shape is not None:
        want = (*idx.shape[:-1], *data.shape[k:])
        if len(upd.shape) != len(want) or any(
            isinstance(a, int) and isinstance(b, int) and a != b
            for a, b in zip(upd.shape, want, strict=True)
        ):
            raise fail(call, f"updates must have shape {want}")
    return [data]


def ref_scatter_nd(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    data, idx, upd = arrays
    assert data is not None and idx is not None and upd is not None
    if call.attr("reduction", "none") != "none":
        raise fail(call, "only reduction='none' has a reference")
    out = data.copy()
    k = idx.shape[-1]
    dims = np.array(data.shape[:k], dtype=np.int64)
    for j in np.ndindex(*idx.shape[:-1]):
        t = idx[j].astype(np.int64)
        if np.any((t < -dims) | (t >= dims)):
            raise fail(call, f"index {t.tolist()} out of range")
        out[tuple(np.where(t < 0, t + dims, t))] = upd[j]
    return [out]


def _names(tup: list[Any], target: tuple[int, ...], dims: tuple[int, ...]) -> Any:
    """Whether the index terms `tup` name `target` (each t or t - d)."""
    conds = [
        z3.Or(i == t, i == t - d) if z3.is_expr(i) else int(i) in (t, t - d)
        for i, t, d in zip(tup, target, dims, strict=True)
    ]
    return z3.And(*conds) if any(z3.is_expr(c) for c in conds) else all(conds)


def _in_range(call: OpCall, tup: list[Any], dims: tuple[int, ...]) -> None:
    """Require every index term in [-d, d); a numeral outside is an error."""
    for i, d in zip(tup, dims, strict=True):
        if z3.is_expr(i):
            _z3.require(z3.And(i >= -d, i < d))
        elif not -d <= int(i) < d:
            raise fail(call, f"index {int(i)} out of range for a dim of {d}")


def z3_scatter_nd(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The updates written in order over data's terms (module docstring)."""
    data, idx, upd = arrays
    assert data is not None and idx is not None and upd is not None
    infer_scatter_nd(call)
    if call.attr("reduction", "none") != "none":
        raise fail(call, "only reduction='none' is typed")
    k = idx.shape[-1]
    dims = tuple(data.shape[:k])
    out = np.array(data, dtype=object, copy=True)
    for j in np.ndindex(*idx.shape[:-1]):
        tup = [idx[(*j, m)] for m in range(k)]
        tup = [_numeral(i) for i in tup]
        _in_range(call, tup, dims)
        if all(not z3.is_expr(i) for i in tup):
            t = tuple(int(i) % d for i, d in zip(tup, dims, strict=True))
            out[t] = upd[j]
            continue
        for t in itertools.product(*(range(d) for d in dims)):
            hit = _names(tup, t, dims)
            for q in np.ndindex(*data.shape[k:]):
                out[(*t, *q)] = z3.If(hit, upd[(*j, *q)], out[(*t, *q)])
    return [out]


def _numeral(i: Any) -> Any:
    """A bit-vector numeral as a Python int (signed); anything else as it is."""
    if z3.is_bv_value(i):
        return i.as_signed_long()
    return i


def scatter_nd_attrs(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """reduction "none" (or absent) fits the typed form (which has no attributes)."""
    red = attrs.pop("reduction", "none")
    red = red.decode() if isinstance(red, bytes) else red
    return attrs if red == "none" else None


SCATTER_ND = register(
    OpSpec(
        name="ScatterND",
        infer=infer_scatter_nd,
        reference=ref_scatter_nd,
        flops=no_flops,
        egg=EggSig(attrs=(), n_inputs=3, to_egg=scatter_nd_attrs),
        z3=z3_scatter_nd,
        input_dtypes=(None, (TensorProto.INT64,), None),
        doc="ScatterND(data, indices, updates): slices replaced in order (last wins).",
    )
)
