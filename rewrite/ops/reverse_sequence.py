"""ReverseSequence (opset 10+): reverse the first lens[b] time steps of every batch entry.

Contract: ReverseSequence(X, sequence_lens; batch_axis=1, time_axis=0): X of rank >= 2 whose
dims batch_axis and time_axis are {0, 1} (distinct), sequence_lens int64 of shape (B,) with B
X's batch dim. With T X's time dim: out[.., b, t, ..] = X[.., b, L-1-t, ..] for t < L, else
X[.., b, t, ..], where L = sequence_lens[b]. ORT 1.32's CPU kernel fails the run unless
0 <= L <= T (L = 0 copies the entry). Output: X's dtype and shape; elements copied, no FLOPs.

Typed form: `(ReverseSequence batch_axis time_axis X sequence_lens)`, sequence_lens int64
(`input_dtypes`). Z3 semantics: each element is the `If` chain over L in [0, T] of the element
it copies, defined (`_z3.require`) only where 0 <= L <= T; exact (elements moved, every bit
kept).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops import _z3
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.registry import register

Array = np.ndarray


def _axes(call: OpCall, rank: int | None) -> tuple[int, int]:
    """(batch_axis, time_axis), checked: {0, 1}, distinct, X of rank >= 2."""
    b, t = int(call.attr("batch_axis", 1)), int(call.attr("time_axis", 0))
    if {b, t} != {0, 1}:
        raise fail(call, f"batch_axis={b} and time_axis={t} must be 0 and 1")
    if rank is not None and rank < 2:
        raise fail(call, "X must have rank >= 2")
    return b, t


def infer_reverse_sequence(call: OpCall) -> list[TensorType]:
    """X's type; sequence_lens 1-D of X's batch dim."""
    x, lens = call.input(0), call.input(1)
    b, _ = _axes(call, x.rank)
    if lens.shape is not None and len(lens.shape) != 1:
        raise fail(call, "sequence_lens must be 1-D")
    batch = x.shape[b] if x.shape is not None else None
    n_lens = lens.shape[0] if lens.shape is not None else None
    if isinstance(batch, int) and isinstance(n_lens, int) and batch != n_lens:
        raise fail(call, "sequence_lens must have X's batch dim")
    return [x]


def _source(t: int, length: int) -> int:
    """The time step that out step t copies when the entry's length is `length`."""
    return length - 1 - t if t < length else t


def ref_reverse_sequence(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x, lens = arrays[0], arrays[1]
    assert x is not None and lens is not None
    infer_reverse_sequence(call)
    b, _ = _axes(call, x.ndim)
    xb = x if b == 0 else np.swapaxes(x, 0, 1)  # (batch, time, ...)
    out = xb.copy()
    n_t = xb.shape[1]
    for i, length in enumerate(int(v) for v in lens.reshape(-1)):
        if not 0 <= length <= n_t:
            raise fail(call, f"sequence length {length} outside [0, {n_t}]")
        out[i] = xb[i][[_source(t, length) for t in range(n_t)]]
    return [out if b == 0 else np.swapaxes(out, 0, 1).copy()]


def z3_reverse_sequence(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The module docstring's If chains under 0 <= L <= T."""
    x, lens = arrays[0], arrays[1]
    assert x is not None and lens is not None
    if not any(z3.is_expr(v) for v in np.asarray(lens, dtype=object).reshape(-1)):
        return ref_reverse_sequence(call, [x, np.asarray(lens, dtype=np.int64)])
    infer_reverse_sequence(call)
    b, _ = _axes(call, x.ndim)
    xb = x if b == 0 else np.swapaxes(x, 0, 1)
    out = np.empty(xb.shape, dtype=object)
    n_t = xb.shape[1]
    for i in range(xb.shape[0]):
        length: Any = lens[i]
        _z3.require(z3.And(length >= 0, length <= n_t))
        for t in range(n_t):
            for rest in np.ndindex(*xb.shape[2:]):
                cell = xb[(i, _source(t, n_t), *rest)]  # L = T
                for m in range(n_t - 1, -1, -1):
                    cell = z3.If(length == m, xb[(i, _source(t, m), *rest)], cell)
                out[(i, t, *rest)] = cell
    return [out if b == 0 else np.swapaxes(out, 0, 1)]


def _values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """batch-major and time-major layouts."""
    if name == "batch_axis":
        return [1, 0]
    if name == "time_axis":
        return [0, 1]
    return None


REVERSE_SEQUENCE = register(
    OpSpec(
        name="ReverseSequence",
        infer=infer_reverse_sequence,
        reference=ref_reverse_sequence,
        flops=no_flops,
        egg=EggSig(attrs=(("batch_axis", "i64", 1), ("time_axis", "i64", 0)), n_inputs=2),
        z3=z3_reverse_sequence,
        input_dtypes=(None, (TensorProto.INT64,)),
        attr_values=_values,
        doc="ReverseSequence(X, lens): the first lens[b] time steps of entry b reversed.",
    )
)
