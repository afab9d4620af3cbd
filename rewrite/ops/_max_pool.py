"""MaxPool's Y as ORT 1.32's CPU kernels compute it (not an op module; `pool.py` registers the
op): the kernel's scan order and comparisons decide which of NaN, ±0 and the padding value
wins, so the result is built by replaying the kernel on numpy scalars or Z3 terms.

Two comparisons: `keep(a, b)` = a > b ? a : b (SSE `maxps(a, b)`: a NaN on either side, or
equal values, give b) and `take(m, v)` = v > m ? v : m (`std::max(m, v)` and ORT's loops:
a NaN v never replaces m, a NaN m is kept). "lowest" is the dtype's most negative finite
value (-FLT_MAX for float, -128 / 0 for int8 / uint8): MLAS's kernels start from it (all but
the 2-D vector kernel's columns) and fill their row buffer's padding with it, so there a window
of -inf (and NaN) values can give -FLT_MAX, not -inf; ORT's tasks start from the first tap.

Paths (float32 with one output, storage_order 0 and no dilation > 1 go to MLAS's `MlasPool`;
everything else, double, int8, uint8, dilated float, to ORT's `MaxPool{1,2,3}DTask`):
- tasks: m = the window's first tap inside the input, then `take` over the others in row-major
  kernel order (so a NaN first wins, a later NaN never does, -inf stays -inf);
- generic (MLAS's 1-D/2-D/3-D generic kernels, and the vector kernels' fallback): m = lowest,
  then `take` over the window's taps inside the input, in row-major kernel order;
- global (MLAS, kernel = the spatial dims, strides 1, no pads): four lanes from lowest, lane j
  `keep`s elements j, j + 4, ... of each whole block of 4; then `keep(keep(l0, l2),
  keep(l1, l3))`; the remaining elements by `take`;
- vector (MLAS, 2 or 3 spatial axes, last stride <= 2, every kernel <= 32, the padded width
  within the 2048-float stack buffer): per output row, each input column is first reduced
  over the window's rows (and planes) inside the input, then a row buffer [lowest × left pad,
  the column maxima, lowest × (right pad + 3)] is reduced over each output's KW entries,
  `keep(acc, next)` from the first. 2-D: the columns of whole blocks of 4 start from their
  first row and `keep` the next rows; the last W mod 4 columns start from their first row
  and `take`. 3-D: the block columns start from lowest and `keep`, the others from lowest
  and `take`. A window that would read the buffer past its filled end (uninitialized stack
  memory) is refused.
Refused (no typed meaning): float16 (ORT's float16 kernels treat padding and NaN differently
between 1-D and 2-D), more than 3 spatial axes (MLAS and the tasks support 1 to 3), SAME_UPPER /
SAME_LOWER with dilations (ORT sizes them otherwise) or where the SAME padding would be
negative (ORT's float kernel fails, the others shift the windows). Checked against ORT 1.32
on every combination of kernel 1/2/3/whole, strides 1/2/3, pads none/end/both, dilations 1/2,
ceil_mode and auto_pad over 1-D, 2-D and 3-D inputs of ±0, ±inf, NaN, ±lowest, subnormals.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._z3 import const
from rewrite.ops.base import OpCall, fail

Array = np.ndarray
P = TensorProto
BUFFER = 2048
"""MLAS_POOL_REDUCTION_BUFFER_STACK (floats); 3 of them are reserved for over-reading."""
LOWEST = {
    P.FLOAT: float(np.finfo(np.float32).min),
    P.DOUBLE: float(np.finfo(np.float64).min),
    P.INT8: -128,
    P.UINT8: 0,
}


def _ops(dtype: int, like: Any) -> tuple[Callable, Callable, Any]:
    """keep, take and lowest for values like `like` (a numpy scalar or a Z3 term)."""
    if isinstance(like, np.generic | float | int):

        def gt(a: Any, b: Any) -> Any:
            return a > b

        def pick(c: Any, a: Any, b: Any) -> Any:
            return a if c else b

        low: Any = type(like)(LOWEST[dtype]) if isinstance(like, np.generic) else LOWEST[dtype]
    else:
        if dtype == P.UINT8 and z3.is_bv(like):
            gt = z3.UGT
        else:

            def gt(a: Any, b: Any) -> Any:
                return a > b

        pick = z3.If
        low = const(LOWEST[dtype], like)

    def keep(a: Any, b: Any) -> Any:
        return pick(gt(a, b), a, b)

    def take(m: Any, v: Any) -> Any:
        return pick(gt(v, m), v, m)

    return keep, take, low


@dataclass(frozen=True)
class Geometry:
    """A node's windows over concrete input sizes: per spatial axis the kernel, stride,
    dilation, (begin, end) pads with auto_pad resolved, and the output size."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: list[tuple[int, int]]
    out_sp: tuple[int, ...]


def max_pool(call: OpCall, x: Array, geo: Geometry) -> Array:
    """Y (N, C, out_sp...) as an object array of `x`'s element kind (module docstring)."""
    dtype = call.input(0).dtype
    in_sp = tuple(x.shape[2:])
    _check(call, dtype, in_sp, geo)
    keep, take, low = _ops(dtype, x.reshape(-1)[0])
    path = _path(call, dtype, in_sp, geo)
    y = np.empty((*x.shape[:2], *geo.out_sp), dtype=object)
    for nc in np.ndindex(*x.shape[:2]):
        plane = x[nc]
        if path == "global":
            m = _global(list(plane.reshape(-1)), keep, take, low)
            y[nc] = np.full(geo.out_sp, m, dtype=object)
        elif path == "vector":
            y[nc] = _vector(call, plane, geo, keep, take, low)
        else:
            y[nc] = _generic(plane, geo, take, low, from_lowest=path == "generic")
    return y


def _check(call: OpCall, dtype: int, in_sp: tuple[int, ...], geo: Geometry) -> None:
    """Refuse the forms the module docstring lists."""
    if dtype not in LOWEST:
        raise fail(call, "ORT's CPU MaxPool runs float, double, int8 and uint8 only")
    if not 1 <= len(geo.kernel) <= 3:
        raise fail(call, "ORT's MaxPool supports 1 to 3 spatial axes")
    if not str(call.attr("auto_pad", "NOTSET")).startswith("SAME"):
        return
    if any(d > 1 for d in geo.dilations):
        raise fail(call, "ORT sizes SAME_UPPER / SAME_LOWER with dilations differently")
    axes = zip(geo.out_sp, geo.strides, geo.kernel, in_sp, strict=True)
    if any((o - 1) * s + k < d for o, s, k, d in axes):
        raise fail(call, "ORT pads SAME negatively here (float refuses, others shift)")


def _path(call: OpCall, dtype: int, in_sp: tuple[int, ...], geo: Geometry) -> str:
    """ "global", "vector" or "generic" (MLAS's kernels), or "tasks" (ORT's)."""
    if (
        dtype != P.FLOAT
        or call.n_outputs > 1
        or call.attr("storage_order", 0)
        or any(d != 1 for d in geo.dilations)
    ):
        return "tasks"
    pads, strides = geo.pads, geo.strides
    if geo.kernel == in_sp and all(s == 1 for s in strides) and all(p == (0, 0) for p in pads):
        return "global"
    if len(in_sp) >= 2 and strides[-1] <= 2 and all(k <= 32 for k in geo.kernel):
        room = BUFFER - 3
        room = room - pads[-1][0] if room >= pads[-1][0] else 0
        room = room - pads[-1][1] if room >= pads[-1][1] else 0
        if room >= in_sp[-1]:
            return "vector"
    return "generic"


def _global(vals: list[Any], keep: Callable, take: Callable, low: Any) -> Any:
    n4 = len(vals) // 4 * 4
    lanes = [low] * 4
    for b in range(0, n4, 4):
        lanes = [keep(lane, v) for lane, v in zip(lanes, vals[b : b + 4], strict=True)]
    m = keep(keep(lanes[0], lanes[2]), keep(lanes[1], lanes[3]))
    for v in vals[n4:]:
        m = take(m, v)
    return m


def _generic(plane: Array, geo: Geometry, take: Callable, low: Any, from_lowest: bool) -> Array:
    """MLAS's generic kernels (`from_lowest`) or ORT's tasks (from the first tap)."""
    out = np.empty(geo.out_sp, dtype=object)
    for o in np.ndindex(*geo.out_sp):
        axes = []
        for i, d in enumerate(plane.shape):
            start = o[i] * geo.strides[i] - geo.pads[i][0]
            pos = (start + k * geo.dilations[i] for k in range(geo.kernel[i]))
            axes.append([p for p in pos if 0 <= p < d])
        vals = [plane[p] for p in itertools.product(*axes)]
        m = low if from_lowest else vals[0]
        for v in vals if from_lowest else vals[1:]:
            m = take(m, v)
        out[o] = m
    return out


def _vector(
    call: OpCall, plane: Array, geo: Geometry, keep: Callable, take: Callable, low: Any
) -> Array:
    """MLAS's Pool2DVectorKernel / Pool3DVectorKernel (module docstring)."""
    kernel, strides, pads, out_sp = geo.kernel, geo.strides, geo.pads, geo.out_sp
    n = plane.ndim
    w, kw, sw = plane.shape[-1], kernel[-1], strides[-1]
    (pl, pr), ow = pads[-1], out_sp[-1]
    filled = pl + w + pr + 3
    if (ow - 1) * sw + kw > filled:
        raise fail(call, "a window reads past MLAS's filled reduction buffer")
    blocks = w // 4 * 4
    out = np.empty(out_sp, dtype=object)
    for lead in np.ndindex(*out_sp[:-1]):  # each output row (and plane)
        ranges = []
        for i in range(n - 1):
            start = lead[i] * strides[i] - pads[i][0]
            ranges.append(range(max(start, 0), min(start + kernel[i], plane.shape[i])))
        rows = list(itertools.product(*ranges))
        cols = []
        for c in range(w):
            vals = [plane[(*r, c)] for r in rows]
            if n == 2:
                m = vals[0]
                for v in vals[1:]:
                    m = keep(m, v) if c < blocks else take(m, v)
            else:
                m = low
                for v in vals:
                    m = keep(m, v) if c < blocks else take(m, v)
            cols.append(m)
        buf = [low] * pl + cols + [low] * (pr + 3)
        for j in range(ow):
            acc = buf[j * sw]
            for k in range(1, kw):
                acc = keep(acc, buf[j * sw + k])
            out[(*lead, j)] = acc
    return out
