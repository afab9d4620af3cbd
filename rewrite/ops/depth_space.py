"""DepthToSpace and SpaceToDepth (opset 13): moving blocks between channels and space.

Contract (X of shape (N, C, H, W), b = blocksize >= 1), as the ONNX definitions state them:
- DepthToSpace(X, b, mode="DCR"): reshape to (N, b, b, C/b², H, W), transpose
  (0, 3, 4, 1, 5, 2), reshape to (N, C/b², H·b, W·b); mode "CRD": reshape to
  (N, C/b², b, b, H, W), transpose (0, 1, 4, 2, 5, 3). C must be a multiple of b².
- SpaceToDepth(X, b): reshape to (N, C, H/b, b, W/b, b), transpose (0, 3, 5, 1, 2, 4),
  reshape to (N, C·b², H/b, W/b). H and W must be multiples of b.
Both keep X's dtype and copy elements (no FLOPs): ORT 1.32's CPU kernels do exactly this
permutation (checked bit for bit on every mode).

Typed forms: `(DepthToSpace blocksize mode X)`, `(SpaceToDepth blocksize X)`. Z3 semantics: the
same reshapes and transpose moving the terms (exact: NaN, ±0 and every bit kept).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.registry import register

Array = np.ndarray
MODES = ("DCR", "CRD")


def _block(call: OpCall) -> int:
    b = int(call.attr("blocksize", 0))
    if b < 1:
        raise fail(call, f"blocksize {b} must be >= 1")
    return b


def infer_depth_to_space(call: OpCall) -> list[TensorType]:
    """(N, C/b², H·b, W·b) in X's dtype; C a multiple of b², mode DCR or CRD."""
    x, b = call.input(0), _block(call)
    if str(call.attr("mode", "DCR")) not in MODES:
        raise fail(call, f"mode must be one of {MODES}")
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if len(x.shape) != 4:
        raise fail(call, "X must have rank 4")
    n, c, h, w = x.shape
    if isinstance(c, int) and c % (b * b):
        raise fail(call, f"C={c} is not a multiple of blocksize² = {b * b}")
    out_c = c // (b * b) if isinstance(c, int) else None
    return [TensorType(x.dtype, (n, out_c, _times(h, b), _times(w, b)))]


def infer_space_to_depth(call: OpCall) -> list[TensorType]:
    """(N, C·b², H/b, W/b) in X's dtype; H and W multiples of b."""
    x, b = call.input(0), _block(call)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if len(x.shape) != 4:
        raise fail(call, "X must have rank 4")
    n, c, h, w = x.shape
    for d in (h, w):
        if isinstance(d, int) and d % b:
            raise fail(call, f"spatial dim {d} is not a multiple of blocksize {b}")
    dims = [d // b if isinstance(d, int) else None for d in (h, w)]
    return [TensorType(x.dtype, (n, _times(c, b * b), *dims))]


def _times(d: Any, b: int) -> Any:
    return d * b if isinstance(d, int) else (d if b == 1 else None)


def ref_depth_to_space(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The ONNX definition's reshape-transpose-reshape (numbers or Z3 terms)."""
    x = arrays[0]
    assert x is not None
    infer_depth_to_space(call)
    b = _block(call)
    n, c, h, w = x.shape
    if str(call.attr("mode", "DCR")) == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [t.reshape(n, c // (b * b), h * b, w * b).copy()]


def ref_space_to_depth(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The ONNX definition's reshape-transpose-reshape (numbers or Z3 terms)."""
    x = arrays[0]
    assert x is not None
    if x.ndim != 4:
        raise fail(call, "X must have rank 4")
    b = _block(call)
    n, c, h, w = x.shape
    if h % b or w % b:
        raise fail(call, f"spatial dims {h}, {w} are not multiples of blocksize {b}")
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return [t.reshape(n, c * b * b, h // b, w // b).copy()]


def _blocks(inputs: list[TensorType], fits: Any) -> list[int] | None:
    """blocksize 1 and 2 where `fits(shape, b)`: proof/self-test values."""
    shape = inputs[0].shape if inputs else None
    if shape is None or len(shape) != 4 or not all(isinstance(d, int) for d in shape):
        return None
    return [b for b in (1, 2) if fits(shape, b)]


def _d2s_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """blocksize 1, and 2 where C is a multiple of 4; both modes."""
    if name == "mode":
        return list(MODES)
    if name == "blocksize":
        return _blocks(inputs, lambda s, b: s[1] % (b * b) == 0)
    return None


def _s2d_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """blocksize 1, and 2 where H and W are even."""
    if name == "blocksize":
        return _blocks(inputs, lambda s, b: s[2] % b == 0 and s[3] % b == 0)
    return None


DEPTH_TO_SPACE = register(
    OpSpec(
        name="DepthToSpace",
        infer=infer_depth_to_space,
        reference=ref_depth_to_space,
        flops=no_flops,
        egg=EggSig(attrs=(("blocksize", "i64", None), ("mode", "String", "DCR"))),
        z3=ref_depth_to_space,  # moves Z3 terms like numbers
        attr_values=_d2s_values,
        doc="DepthToSpace(X, blocksize, mode): channel blocks moved into space.",
    )
)
SPACE_TO_DEPTH = register(
    OpSpec(
        name="SpaceToDepth",
        infer=infer_space_to_depth,
        reference=ref_space_to_depth,
        flops=no_flops,
        egg=EggSig(attrs=(("blocksize", "i64", None),)),
        z3=ref_space_to_depth,  # moves Z3 terms like numbers
        attr_values=_s2d_values,
        doc="SpaceToDepth(X, blocksize): spatial blocks moved into channels.",
    )
)
