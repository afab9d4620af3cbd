"""BitShift (opset 11+): elementwise logical shift of unsigned integers, numpy broadcasting.

Contract: BitShift(X, Y, direction): X and Y of one unsigned dtype (uint8, uint16, uint32,
uint64 of width w) broadcast together; out = X << Y ("LEFT", bits shifted past w dropped) or
X >> Y ("RIGHT", zeros shifted in). A shift amount Y >= w gives 0 in either direction: ORT
1.32's CPU kernel (checked on every dtype, vector and scalar-broadcast paths) and numpy agree.

Typed form: `(BitShift direction X Y)` (direction "LEFT" or "RIGHT"; a node without it stays
opaque). Z3 semantics (exact, total): `bvshl` / `bvlshr` on w-bit vectors, which are 0 for
an amount >= w, as the kernel (written as an `If` chain of multiplications / unsigned
divisions by 2^k, which the numeric interpreter of `verify.semantics` evaluates). Outside:
signed and float dtypes (ONNX has no such BitShift).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto as P

from rewrite.ops._z3 import vmap
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, elementwise_flops, fail
from rewrite.ops.elementwise import broadcast_inputs, common_dtype
from rewrite.ops.registry import register

Array = np.ndarray
UNSIGNED = (P.UINT8, P.UINT16, P.UINT32, P.UINT64)
DIRECTIONS = ("LEFT", "RIGHT")


def _direction(call: OpCall) -> str:
    d = call.attr("direction")
    if d not in DIRECTIONS:
        raise fail(call, f"direction must be LEFT or RIGHT, not {d!r}")
    return str(d)


def infer_bitshift(call: OpCall) -> list[TensorType]:
    """One unsigned dtype in and out; the broadcast shape."""
    dtype = common_dtype(call)
    if dtype and dtype not in UNSIGNED:
        raise fail(call, "X and Y must be unsigned integers")
    _direction(call)
    return [TensorType(dtype, broadcast_inputs(call))]


def ref_bitshift(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """numpy's shifts (0 for an amount >= the width, as ORT)."""
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    fn = np.left_shift if _direction(call) == "LEFT" else np.right_shift
    return [np.asarray(fn(a, b.astype(a.dtype))).astype(a.dtype, copy=False)]


def z3_bitshift(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """bvshl / bvlshr per broadcast element pair (module docstring)."""
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    left = _direction(call) == "LEFT"

    return [vmap(lambda x, y: shift_term(x, y, left), a, b)]


def shift_term(x: Any, y: Any, left: bool) -> Any:
    """bvshl(x, y) (`left`) or bvlshr(x, y) on w-bit vectors, spelled as an `If` chain over
    the amounts 0 .. w-1 of x·2^k or x udiv 2^k (0 past the chain): the same function, in the
    operations `verify.semantics.interpret` evaluates."""
    w = x.size()
    out = z3.BitVecVal(0, w)
    for k in range(w - 1, -1, -1):
        p = z3.BitVecVal(1 << k, w)
        out = z3.If(y == k, x * p if left else z3.UDiv(x, p), out)
    return out


def bitshift_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """direction: both."""
    return list(DIRECTIONS) if name == "direction" else None


BITSHIFT = register(
    OpSpec(
        name="BitShift",
        infer=infer_bitshift,
        reference=ref_bitshift,
        flops=elementwise_flops,
        egg=EggSig(attrs=(("direction", "String", None),), n_inputs=2),
        z3=z3_bitshift,
        attr_values=bitshift_values,
        input_dtypes=(UNSIGNED, UNSIGNED),
        doc="BitShift(X, Y, direction): unsigned X << Y or X >> Y; 0 past the width.",
    )
)
