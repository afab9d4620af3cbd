"""Conv (1-D, 2-D, 3-D, grouped), plus the sliding-window arithmetic that the pooling ops and
ConvTranspose (`conv_transpose.py`) share.

Contract: Conv(X (N, C, D...), W (M, C/group, k...), [B (M)]) -> Y (N, M, O...) with
O = floor((D + pad_begin + pad_end - ((k - 1)·dilation + 1)) / stride) + 1 for
auto_pad NOTSET (explicit pads) and VALID (no pads), and O = ceil(D / stride) for SAME_UPPER /
SAME_LOWER (the odd pad goes at the end / the beginning). kernel_shape defaults to W's
spatial dims.

Typed form: `(Conv auto_pad dilations group kernel_shape pads strides X W B)` with
B `(Absent)` when omitted. An empty vector attribute stands for the attribute left out (its
ONNX default: kernel_shape from W, pads zeros, strides and dilations ones): it decodes to a
node without it. The Z3 semantics are the sums of products over the zero-padded X, in the
order of the kernel taps, then over input channels (`_z3_conv`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rewrite.ops._z3 import const, float_only
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, Shape, TensorType, fail
from rewrite.ops.registry import register

Array = np.ndarray
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
FLOATS = frozenset({1, 10, 11, 16})  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def float_dtype(call: OpCall, dtype: int, allowed: frozenset[int] = FLOATS) -> None:
    """Fail unless `dtype` (0: unknown) is one the op's ONNX type constraint allows."""
    if dtype and dtype not in allowed:
        raise fail(call, f"element type {dtype} is not allowed")


@dataclass(frozen=True)
class Window:
    """A node's sliding-window attributes, one entry per spatial axis."""

    kernel: tuple[int | None, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]  # (begin, end) per axis; ignored unless auto_pad NOTSET
    auto_pad: str

    def extent(self, i: int) -> int | None:
        """Effective kernel size (k - 1)·dilation + 1 along axis i."""
        k = self.kernel[i]
        return None if k is None else (k - 1) * self.dilations[i] + 1


def window(call: OpCall, n: int, kernel: tuple[int | None, ...]) -> Window:
    """Read strides/dilations/pads/auto_pad for `n` spatial axes (ONNX defaults filled)."""
    strides = tuple(call.attr("strides") or [1] * n)
    dilations = tuple(call.attr("dilations") or [1] * n)
    pads = list(call.attr("pads") or [0] * (2 * n))
    auto_pad = call.attr("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in AUTO_PADS:
        raise fail(call, f"auto_pad {auto_pad!r} is not one of {AUTO_PADS}")
    if len(strides) != n or len(dilations) != n or len(pads) != 2 * n or len(kernel) != n:
        raise fail(call, f"strides/dilations/pads/kernel_shape do not fit {n} spatial axes")
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise fail(call, "strides and dilations must be >= 1")
    if auto_pad == "VALID":
        pads = [0] * (2 * n)
    return Window(kernel, strides, dilations, tuple(zip(pads[:n], pads[n:], strict=True)), auto_pad)


def out_dim(call: OpCall, w: Window, i: int, d: Dim, ceil_mode: bool = False) -> Dim:
    """Output length along spatial axis i for input length d (symbolic when it stays d)."""
    s, ek = w.strides[i], w.extent(i)
    if w.auto_pad.startswith("SAME"):
        if isinstance(d, int):
            return -(-d // s)
        return d if s == 1 else None
    pb, pe = w.pads[i]
    if ek is None:
        return None
    if not isinstance(d, int):
        return d if s == 1 and pb + pe == ek - 1 else None
    span = d + pb + pe - ek
    if span < 0:
        raise fail(call, f"kernel extent {ek} exceeds padded input {d + pb + pe} on axis {i}")
    if not ceil_mode:
        return span // s + 1
    o = -(-span // s) + 1
    # The last window must start inside the input or its begin padding (ORT, ONNX >= 19).
    return o - 1 if (o - 1) * s >= d + pb else o


def resolved_pads(
    w: Window, in_sp: tuple[int, ...], out_sp: tuple[int, ...]
) -> list[tuple[int, int]]:
    """Concrete (begin, end) pads per axis, SAME auto_pad resolved for these input sizes."""
    if not w.auto_pad.startswith("SAME"):
        return list(w.pads)
    pads = []
    for i, (d, o) in enumerate(zip(in_sp, out_sp, strict=True)):
        total = max(0, (o - 1) * w.strides[i] + (w.extent(i) or 1) - d)
        small = total // 2
        pads.append(
            (small, total - small) if w.auto_pad == "SAME_UPPER" else (total - small, small)
        )
    return pads


def taps(w: Window, out_sp: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """For each kernel position: its index and the strided slices of the padded input it reads."""
    out = []
    for kidx in np.ndindex(*[k or 1 for k in w.kernel]):
        sl = tuple(
            slice(k * dl, k * dl + (o - 1) * s + 1, s)
            for k, dl, o, s in zip(kidx, w.dilations, out_sp, w.strides, strict=True)
        )
        out.append((tuple(kidx), sl))
    return out


def trailing(idx: Sequence[Any]) -> tuple[Any, ...]:
    """An index that applies `idx` to an array's last len(idx) axes."""
    return (Ellipsis, *idx)


def _spatial_rank(call: OpCall) -> int | None:
    for t in (call.input(0), call.input(1)):
        if t.rank is not None:
            return t.rank - 2
    ks = call.attr("kernel_shape")
    return len(ks) if ks else None


def _kernel(call: OpCall, n: int) -> tuple[int | None, ...]:
    ks = call.attr("kernel_shape")
    if ks:  # an empty vector is the attribute left out (the typed form's default)
        return tuple(int(k) for k in ks)
    w = call.input(1).shape
    if w is None:
        return (None,) * n
    return tuple(k if isinstance(k, int) else None for k in w[2:])


def _same_or_unknown(a: Dim, b: Dim) -> bool:
    return not (isinstance(a, int) and isinstance(b, int) and a != b)


def _check_channels(call: OpCall, c: Dim, c_per_group: Dim, m: Dim, group: int) -> None:
    if isinstance(c, int) and isinstance(c_per_group, int) and c != c_per_group * group:
        raise fail(call, f"input channels {c} != {c_per_group} x group {group}")
    if isinstance(m, int) and m % group:
        raise fail(call, f"channels {m} not divisible by group {group}")


def _operands(call: OpCall) -> tuple[int, int | None, Shape, Shape, int]:
    """X's dtype, the spatial rank (None: unknown), X and W shapes (unknown dims where the
    rank is known but the shape is not) and `group`; rank mismatches are refused."""
    x, wt = call.input(0), call.input(1)
    dtype = x.dtype or wt.dtype
    n = _spatial_rank(call)
    if n is None:
        return dtype, None, (), (), 1
    if n < 1 or any(t.rank not in (None, n + 2) for t in (x, wt)):
        raise fail(call, "X and W must have the same rank >= 3")
    xs = x.shape or (None,) * (n + 2)
    ws = wt.shape or (None,) * (n + 2)
    return dtype, n, xs, ws, int(call.attr("group", 1))


def _conv_infer(call: OpCall) -> list[TensorType]:
    """Y: (N, M, O...) in X's dtype (see the module docstring for O)."""
    dtype, n, xs, ws, group = _operands(call)
    float_dtype(call, dtype)
    if (call.attr("auto_pad", "NOTSET") or "NOTSET") != "NOTSET" and call.attr("pads"):
        raise fail(call, "auto_pad and pads together (ORT refuses them)")
    if n is None:
        return [TensorType(dtype, None)]
    _check_channels(call, xs[1], ws[1], ws[0], group)
    bias = call.input(2).shape if call.has_input(2) else None
    if bias is not None and (len(bias) != 1 or not _same_or_unknown(bias[0], ws[0])):
        raise fail(call, f"bias shape {bias} is not ({ws[0]},)")
    w = window(call, n, _kernel(call, n))
    spatial = tuple(out_dim(call, w, i, d) for i, d in enumerate(xs[2:]))
    return [TensorType(dtype, (xs[0], ws[0], *spatial))]


def _conv_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x, wt = arrays[0], arrays[1]
    assert x is not None and wt is not None
    b = arrays[2] if len(arrays) > 2 else None
    n, g = x.ndim - 2, int(call.attr("group", 1))
    w = window(call, n, _kernel(call, n))
    out_sp = tuple(int(out_dim(call, w, i, d)) for i, d in enumerate(x.shape[2:]))  # type: ignore[arg-type]
    pads = resolved_pads(w, x.shape[2:], out_sp)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads])
    N, C, M = x.shape[0], x.shape[1], wt.shape[0]
    xg = xp.reshape(N, g, C // g, *xp.shape[2:])
    wg = wt.astype(np.float64).reshape(g, M // g, C // g, *wt.shape[2:])
    y = np.zeros((N, g, M // g, *out_sp))
    for kidx, sl in taps(w, out_sp):
        y += np.einsum("ngc...,gmc->ngm...", xg[trailing(sl)], wg[trailing(kidx)])
    y = y.reshape(N, M, *out_sp)
    if b is not None:
        y += b.reshape(M, *([1] * n))
    return [y.astype(x.dtype)]


def pad_objects(x: Array, widths: Sequence[tuple[int, int]], fill: Any) -> Array:
    """An object array `x` padded with `fill` by (begin, end) elements per axis."""
    out = np.empty(tuple(d + b + e for d, (b, e) in zip(x.shape, widths, strict=True)), object)
    out.fill(fill)
    out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, widths, strict=True))] = x
    return out


def _z3_conv(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Y[n, m, o...] = Σ_taps Σ_c Xpad[n, c, o·s + k·d] · W[m, c, k] (+ B[m]) over the input
    channels of m's group: the same sums of products as the reference, over Z3 terms."""
    float_only(call)
    x, wt = arrays[0], arrays[1]
    assert x is not None and wt is not None
    b = arrays[2] if len(arrays) > 2 else None
    n, g = x.ndim - 2, int(call.attr("group", 1))
    w = window(call, n, _kernel(call, n))
    out_sp = tuple(int(out_dim(call, w, i, d)) for i, d in enumerate(x.shape[2:]))  # type: ignore[arg-type]
    pads = resolved_pads(w, x.shape[2:], out_sp)
    xp = pad_objects(x, [(0, 0), (0, 0), *pads], const(0, wt.flat[0]))
    N, C, M = x.shape[0], x.shape[1], wt.shape[0]
    cg, mg = C // g, M // g
    y = np.empty((N, M, *out_sp), dtype=object)
    for gi in range(g):
        acc: Array | None = None
        for kidx, sl in taps(w, out_sp):
            xs = xp[(slice(None), slice(gi * cg, (gi + 1) * cg), *sl)]  # (N, C/g, O...)
            wk = wt[(slice(gi * mg, (gi + 1) * mg), slice(None), *kidx)]  # type: ignore[arg-type]
            term = np.tensordot(wk, xs, axes=([1], [1]))  # (M/g, N, O...)
            acc = term if acc is None else acc + term
        assert acc is not None
        y[:, gi * mg : (gi + 1) * mg] = np.moveaxis(acc, 0, 1)
    if b is not None:
        y = y + b.reshape(M, *([1] * n))
    return [y]


def _conv_attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Attribute values consistent with X and W: W's kernel, zero / one / end-only pads,
    strides and dilations 1 and 2, every auto_pad, the one group that fits the channels."""
    xs = inputs[0].shape if inputs else None
    ws = inputs[1].shape if len(inputs) > 1 else None
    if xs is None or ws is None or len(xs) < 3 or len(ws) != len(xs):
        return []
    n = len(xs) - 2
    if name == "auto_pad":
        return list(AUTO_PADS)
    if name == "kernel_shape":
        return [tuple(ws[2:])]
    if name == "pads":
        return [(0,) * 2 * n, (1,) * 2 * n, (0,) * n + (1,) * n]
    if name in ("strides", "dilations"):
        return [(1,) * n, (2,) * n]
    if name == "group":
        c, cg, m = xs[1], ws[1], ws[0]
        fits = isinstance(c, int) and isinstance(cg, int) and isinstance(m, int)
        g = c // cg if fits and cg and c % cg == 0 else 1  # type: ignore[operator]
        return [g if isinstance(m, int) and g and m % g == 0 else 1]
    return None


def _conv_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """2·N·M·O...·(C/group)·k... (plus one add per output element for the bias)."""
    y, ws = outputs[0].numel, call.input(1).shape
    if y is None or ws is None or not all(isinstance(d, int) for d in ws[1:]):
        return 0.0
    return 2.0 * y * math.prod(ws[1:]) + (y if call.has_input(2) else 0)  # type: ignore[arg-type]


CONV_ATTRS: tuple[tuple[str, str, Any], ...] = (
    ("auto_pad", "String", "NOTSET"),
    ("dilations", "VecI", ()),
    ("group", "i64", 1),
    ("kernel_shape", "VecI", ()),
    ("pads", "VecI", ()),
    ("strides", "VecI", ()),
)
"""Conv's attributes in the typed form (name, egglog sort, default), sorted by name; shared by
ConvTranspose and FusedConv."""

register(
    OpSpec(
        "Conv",
        _conv_infer,
        _conv_ref,
        _conv_flops,
        egg=EggSig(
            attrs=CONV_ATTRS,
            n_inputs=3,
            optional=1,
        ),
        z3=_z3_conv,
        attr_values=_conv_attr_values,
        doc="Conv(X, W, B?): sums of products over sliding windows of the padded X.",
    )
)
