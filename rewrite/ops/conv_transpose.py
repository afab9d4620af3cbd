"""ConvTranspose (1-D, 2-D, 3-D, grouped): the gradient of Conv with respect to its input.

Contract: ConvTranspose(X (N, C, D...), W (C, M/group, k...), [B (M)]) -> Y (N, M, O...) with
O = stride·(D - 1) + output_padding + (k - 1)·dilation + 1 - pad_begin - pad_end (auto_pad
NOTSET / VALID), D·stride (SAME_UPPER / SAME_LOWER) or the given `output_shape` (n entries:
ONNX's shape inference refuses the (N, M, O...) form that ORT's kernel reads; ORT refuses
O > F + stride - 1). The full extent F = stride·(D - 1) + output_padding + (k - 1)·dilation
+ 1 is cropped to O at a begin offset: the explicit pad_begin (NOTSET / VALID, no
output_shape), else from the total pad T = max(0, F - O) as ONNX Runtime 1.32 distributes
it: T // 2 for SAME_UPPER, T - T // 2 otherwise; output beyond F is 0 (+ B).

Typed form: `(ConvTranspose auto_pad dilations group kernel_shape output_padding output_shape
pads strides X W B)` with B `(Absent)` when omitted; an empty vector is the attribute left
out (ONNX default: kernel_shape from W, output_padding / pads zeros, strides / dilations
ones, no output_shape) and decodes to a node without it.

Z3 semantics, as ORT's CPU kernel (nn/conv_transpose.cc) computes: per image and group a
GEMM col[(m, k), i] = Σ_c W[c, m, k]·X[c, i] (the channel sum, MLAS; modelled in channel
order as Conv's), then col2im into a zeroed Y: each output element is 0 + the taps that reach
it, added in kernel-tap order; then + B[m] (Eigen, after all groups). In the real model the
order is immaterial; in IEEE the channel sum's order is MLAS's, so ORT agrees to a rounding
bound, not bit for bit (as Conv).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rewrite.ops._z3 import const, float_only
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, Shape, TensorType, fail
from rewrite.ops.conv import (
    AUTO_PADS,
    CONV_ATTRS,
    Window,
    _check_channels,
    _kernel,
    _operands,
    _same_or_unknown,
    float_dtype,
    pad_objects,
    taps,
    trailing,
    window,
)
from rewrite.ops.registry import register

Array = np.ndarray


def _output_padding(call: OpCall, n: int) -> list[int]:
    return [int(v) for v in (call.attr("output_padding") or [0] * n)]


def _transpose_out(call: OpCall, w: Window, i: int, d: Dim) -> Dim:
    s, ek = w.strides[i], w.extent(i)
    if w.auto_pad.startswith("SAME"):
        return d * s if isinstance(d, int) else (d if s == 1 else None)
    op = _output_padding(call, len(w.strides))[i]
    if ek is None or not isinstance(d, int):
        return None
    o = s * (d - 1) + op + ek - sum(w.pads[i])
    if o < 1:
        raise fail(call, f"output length {o} < 1 on axis {i}")
    return o


def _full(call: OpCall, w: Window, xs: Shape) -> list[int | None]:
    """The full extent F per axis (None where X's length is unknown)."""
    op = _output_padding(call, len(w.strides))
    return [
        s * (d - 1) + op[i] + (w.extent(i) or 1) if isinstance(d, int) else None
        for i, (s, d) in enumerate(zip(w.strides, xs[2:], strict=True))
    ]


def _transpose_geometry(call: OpCall, n: int, xs: Shape) -> tuple[Window, tuple[Dim, ...]]:
    w = window(call, n, _kernel(call, n))
    given = call.attr("output_shape")
    if given:  # an empty vector is the attribute left out
        if len(given) != n:  # ONNX shape inference refuses other lengths
            raise fail(call, f"output_shape {list(given)} does not fit {n} spatial axes")
        out = tuple(int(v) for v in given)
        for i, (o, f) in enumerate(zip(out, _full(call, w, xs), strict=True)):
            if o < 1 or (f is not None and o > f + w.strides[i] - 1):
                raise fail(call, f"output_shape {o} does not fit the input on axis {i} (ORT)")
        return w, out
    return w, tuple(_transpose_out(call, w, i, d) for i, d in enumerate(xs[2:]))


def _infer(call: OpCall) -> list[TensorType]:
    """Y: (N, W[1]·group, O...) in X's dtype."""
    dtype, n, xs, ws, group = _operands(call)
    float_dtype(call, dtype)
    if n is None:
        return [TensorType(dtype, None)]
    _check_channels(call, xs[1], ws[0], xs[1], 1)  # W is (C, M/group, k...)
    _check_channels(call, None, None, xs[1], group)
    if len(_output_padding(call, n)) != n:
        raise fail(call, f"output_padding does not fit {n} spatial axes")
    m = ws[1] * group if isinstance(ws[1], int) else None
    bias = call.input(2).shape if call.has_input(2) else None
    if bias is not None and (len(bias) != 1 or not _same_or_unknown(bias[0], m)):
        raise fail(call, f"bias shape {bias} is not ({m},)")
    _, spatial = _transpose_geometry(call, n, xs)
    return [TensorType(dtype, (xs[0], m, *spatial))]


def _plan(call: OpCall, x_shape: tuple[int, ...]) -> tuple[Window, list[int], list[int], list[int]]:
    """The window, the output lengths O, the crop begins and the accumulation buffer's
    spatial lengths (max(F, begin + O)) for an X of this shape."""
    n = len(x_shape) - 2
    w, out = _transpose_geometry(call, n, x_shape)
    out_sp = [int(o) for o in out]  # type: ignore[arg-type]
    full = _full(call, w, x_shape)
    begins = []
    for i in range(n):
        total = max(0, int(full[i] or 0) - out_sp[i])
        if not call.attr("output_shape") and w.auto_pad in ("NOTSET", "VALID"):
            begins.append(w.pads[i][0])
        elif w.auto_pad == "SAME_UPPER":  # the odd pad goes at the end (ORT)
            begins.append(total // 2)
        else:  # SAME_LOWER and explicit output_shape: the odd pad goes first (ORT)
            begins.append(total - total // 2)
    buf = [max(int(f or 0), b + o) for f, b, o in zip(full, begins, out_sp, strict=True)]
    return w, out_sp, begins, buf


def _unpack(
    call: OpCall, arrays: list[Array | None]
) -> tuple[Array, Array, Array | None, int, int]:
    """X, W, B (None when omitted), the spatial rank and `group`."""
    x, wt = arrays[0], arrays[1]
    assert x is not None and wt is not None
    b = arrays[2] if len(arrays) > 2 else None
    return x, wt, b, x.ndim - 2, int(call.attr("group", 1))


def _ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x, wt, b, n, g = _unpack(call, arrays)
    w, out_sp, begins, buf_sp = _plan(call, x.shape)
    N, C, Mg = x.shape[0], x.shape[1], wt.shape[1]
    xg = x.astype(np.float64).reshape(N, g, C // g, *x.shape[2:])
    wg = wt.astype(np.float64).reshape(g, C // g, Mg, *wt.shape[2:])
    buf = np.zeros((N, g, Mg, *buf_sp))
    in_window = Window(w.kernel, w.strides, w.dilations, w.pads, "NOTSET")
    for kidx, sl in taps(in_window, x.shape[2:]):
        buf[trailing(sl)] += np.einsum("ngc...,gcm->ngm...", xg, wg[trailing(kidx)])
    crop = tuple(slice(bgn, bgn + o) for bgn, o in zip(begins, out_sp, strict=True))
    y = buf[trailing(crop)].reshape(N, g * Mg, *out_sp)
    if b is not None:
        y = y + b.reshape(g * Mg, *([1] * n))
    return [y.astype(x.dtype)]


def _z3(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Y[n, m, o...] = (0 + Σ_taps Σ_c X[n, c, i]·W[c, m, k]) (+ B[m]) with o = i·s + k·d -
    begin, the taps added in kernel order (col2im) after the channel sums (the GEMM)."""
    float_only(call)
    x, wt, b, n, g = _unpack(call, arrays)
    w, out_sp, begins, buf_sp = _plan(call, x.shape)
    N, C, Mg = x.shape[0], x.shape[1], wt.shape[1]
    cg = C // g
    buf = pad_objects(
        np.empty((N, g * Mg, *([0] * n)), object),
        [(0, 0), (0, 0)] + [(0, s) for s in buf_sp],
        const(0, wt.flat[0]),
    )
    in_window = Window(w.kernel, w.strides, w.dilations, w.pads, "NOTSET")
    for gi in range(g):
        xs = x[:, gi * cg : (gi + 1) * cg]  # (N, C/g, D...)
        for kidx, sl in taps(in_window, x.shape[2:]):
            wk = wt[(slice(gi * cg, (gi + 1) * cg), slice(None), *kidx)]  # (C/g, M/g)
            term = np.moveaxis(np.tensordot(wk, xs, axes=([0], [1])), 0, 1)  # (N, M/g, D...)
            idx = (slice(None), slice(gi * Mg, (gi + 1) * Mg), *sl)
            buf[idx] = buf[idx] + term
    crop = tuple(slice(bgn, bgn + o) for bgn, o in zip(begins, out_sp, strict=True))
    y = buf[trailing(crop)]
    if b is not None:
        y = y + b.reshape(g * Mg, *([1] * n))
    return [y]


def _attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Attribute values consistent with X and W: W's kernel, zero / one pads, strides and
    dilations 1 and 2, every auto_pad, no output_padding / output_shape, the group the
    channels allow."""
    xs = inputs[0].shape if inputs else None
    ws = inputs[1].shape if len(inputs) > 1 else None
    if xs is None or ws is None or len(xs) < 3 or len(ws) != len(xs):
        return []
    n = len(xs) - 2
    values: dict[str, list[Any]] = {
        "auto_pad": list(AUTO_PADS),
        "kernel_shape": [tuple(ws[2:])],
        "pads": [(0,) * 2 * n, (1,) * 2 * n],
        "strides": [(1,) * n, (2,) * n],
        "dilations": [(1,) * n, (2,) * n],
        "output_padding": [()],
        "output_shape": [()],
        "group": [1],
    }
    return values.get(name)


def _flops(call: OpCall, outputs: list[TensorType]) -> float:
    """2·N·C·D...·(M/group)·k... (every input element meets every kernel tap), plus one add
    per output element for the bias."""
    x, ws = call.input(0).numel, call.input(1).shape
    if x is None or ws is None or not all(isinstance(d, int) for d in ws[1:]):
        return 0.0
    y = outputs[0].numel if outputs else None
    bias = (y or 0) if call.has_input(2) else 0
    return 2.0 * x * math.prod(ws[1:]) + bias  # type: ignore[arg-type]


register(
    OpSpec(
        "ConvTranspose",
        _infer,
        _ref,
        _flops,
        egg=EggSig(
            attrs=tuple(  # sorted by name, as Conv's: output_* after kernel_shape
                sorted((*CONV_ATTRS, ("output_padding", "VecI", ()), ("output_shape", "VecI", ())))
            ),
            n_inputs=3,
            optional=1,
        ),
        z3=_z3,
        attr_values=_attr_values,
        doc="ConvTranspose(X, W, B?): GEMM then col2im accumulation in kernel-tap order.",
    )
)
