"""TopK: the k largest (or smallest) elements along an axis, and their indices.

Contract: TopK(X, K; axis=-1, largest=1, sorted=1) (opset 10+: K a one-element int64 input;
opset 1-9: the attribute k, largest only). Both outputs have X's shape with the `axis` dim
replaced by k: Values (X's dtype) and Indices (int64, positions along the axis). ORT 1.32's
CPU kernel orders each line by a strict total order (checked against ORT on random lines with
NaN, ±inf, ±0, k from 1 to the line length, its heap, selection and single-pass paths):
element a precedes element b when a's value is greater (largest=1) or less (largest=0) than
b's, NaN counting as greater than every number, and, of equal values (-0 == +0, NaN == NaN),
the one of lower index comes first. Output slot j holds the element of rank j (the number of
line elements that precede it). With sorted=0 the kernel leaves the k chosen in the order its
heap or `nth_element` leaves them: not modelled (k = 1 excepted: one element, one order).

Typed form (the tensat encoding, as `split.SplitPart`): output `index` (0: Values, 1:
Indices) of a TopK whose K is a constant is `(TopKPart axis largest k index X)`; encode makes
one term per output (`topk_plan`), decode writes every chosen part of one (X, axis, largest,
k) as one TopK node (`topk_node`). No ONNX op is called TopKPart. A TopK with a computed K,
or sorted=0 and k > 1, stays opaque.

Z3 semantics (exact, every dtype; both models): rank_i = Σ_m [m precedes i]; slot j is the
If chain over i of (rank_i == j ? x_i : ...), Values X's terms (copied: NaN, ±0 kept),
Indices 64-bit numerals. Comparisons are IEEE's (fpGT/fpLT/fpEQ, NaN by fpIsNaN) in the IEEE
model, exact in reals (no NaN there), signed or unsigned on bit-vectors by dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto as P
from onnx import helper

from rewrite.errors import ShapeError
from rewrite.ops._dims import norm_axis
from rewrite.ops._z3 import SIGNED
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.registry import register

Array = np.ndarray


def topk_plan(call: OpCall) -> tuple[int, int, int] | None:
    """(axis in [0, rank), largest, k) of an ONNX TopK call with a typed form, or None: K not
    a constant one-element int vector, sorted=0 with k > 1, or X's rank unknown."""
    shape = call.input(0).shape
    if shape is None or not shape:
        return None
    if call.opset >= 10:
        kc = call.const(1)
        if kc is None or kc.dtype.kind not in "iu" or kc.size != 1 or kc.ndim != 1:
            return None
        k = int(kc.reshape(-1)[0])
    else:
        k = int(call.attr("k", -1))
    largest, is_sorted = int(call.attr("largest", 1)), int(call.attr("sorted", 1))
    try:
        axis = norm_axis(call, call.attr("axis", -1), len(shape))
    except ShapeError:
        return None
    d = shape[axis]
    if k < 0 or (isinstance(d, int) and k > d) or (not is_sorted and k > 1):
        return None
    return axis, largest, k


def _part(call: OpCall, rank: int) -> tuple[int, bool, int, int]:
    """(axis, largest, k, index) of a TopKPart call, checked."""
    axis = norm_axis(call, int(call.attr("axis", -1)), rank)
    k, index = int(call.attr("k", 0)), int(call.attr("index", 0))
    if k < 0 or index not in (0, 1):
        raise fail(call, f"k={k} must be >= 0 and index={index} 0 or 1")
    return axis, bool(int(call.attr("largest", 1))), k, index


def infer_topk_part(call: OpCall) -> list[TensorType]:
    """X's shape with the axis dim k; X's dtype (Values) or INT64 (Indices)."""
    x = call.input(0)
    if x.shape is None:
        index = int(call.attr("index", 0))
        return [TensorType(x.dtype if index == 0 else P.INT64, None)]
    axis, _, k, index = _part(call, len(x.shape))
    d = x.shape[axis]
    if isinstance(d, int) and k > d:
        raise fail(call, f"k={k} exceeds the axis dim {d}")
    shape = (*x.shape[:axis], k, *x.shape[axis + 1 :])
    return [TensorType(x.dtype if index == 0 else P.INT64, shape)]


def _precedes(a: Any, b: Any, largest: bool, a_first: bool, signed: bool) -> Any:
    """Whether element a (value a) precedes element b (value b) in the kernel's order;
    `a_first`: a's index is the lower. Terms or numbers."""
    if not z3.is_expr(a) and not z3.is_expr(b):
        an, bn = bool(a != a), bool(b != b)
        if an or bn:
            more = an and not bn
            less = bn and not an
            return (more if largest else less) or (an and bn and a_first)
        beats = a > b if largest else a < b
        return bool(beats or (a == b and a_first))
    if z3.is_fp(a):
        an, bn = z3.fpIsNaN(a), z3.fpIsNaN(b)
        gt = z3.Or(z3.And(an, z3.Not(bn)), a > b)
        lt = z3.Or(z3.And(bn, z3.Not(an)), a < b)
        eq = z3.Or(z3.And(an, bn), z3.fpEQ(a, b))
    elif z3.is_bv(a) and not signed:
        gt, lt, eq = z3.UGT(a, b), z3.ULT(a, b), a == b
    else:
        gt, lt, eq = a > b, a < b, a == b
    beats = gt if largest else lt
    return z3.Or(beats, eq) if a_first else beats


def _line_topk(line: list[Any], largest: bool, k: int, signed: bool) -> tuple[list, list]:
    """(values, indices) of slots 0 .. k-1 of one line: numbers, or If chains over terms."""
    n = len(line)
    if not any(z3.is_expr(t) for t in line):
        ranks = [
            sum(_precedes(line[m], line[i], largest, m < i, signed) for m in range(n) if m != i)
            for i in range(n)
        ]
        order = sorted(range(n), key=lambda i: ranks[i])[:k]
        return [line[i] for i in order], order
    rank = [
        z3.Sum(
            [z3.IntVal(0)]
            + [
                z3.If(_precedes(line[m], line[i], largest, m < i, signed), 1, 0)
                for m in range(n)
                if m != i
            ]
        )
        for i in range(n)
    ]
    values, indices = [], []
    for j in range(k):
        v, ix = line[n - 1], z3.BitVecVal(n - 1, 64)
        for i in range(n - 2, -1, -1):
            hit = rank[i] == j
            v, ix = z3.If(hit, line[i], v), z3.If(hit, z3.BitVecVal(i, 64), ix)
        values.append(v)
        indices.append(ix)
    return values, indices


def _topk(call: OpCall, x: Array, signed: bool) -> Array:
    """The TopKPart's output (object array) over numbers or terms (module docstring)."""
    axis, largest, k, index = _part(call, x.ndim)
    if k > x.shape[axis]:
        raise fail(call, f"k={k} exceeds the axis dim {x.shape[axis]}")
    moved = np.moveaxis(np.asarray(x, dtype=object), axis, -1)
    out = np.empty((*moved.shape[:-1], k), dtype=object)
    for p in np.ndindex(*moved.shape[:-1]):
        values, indices = _line_topk(list(moved[p]), largest, k, signed)
        out[p] = values if index == 0 else indices
    return np.moveaxis(out, -1, axis)


def ref_topk_part(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    index = int(call.attr("index", 0))
    out = _topk(call, x, signed=x.dtype.kind != "u")
    return [np.asarray(out.tolist(), dtype=x.dtype if index == 0 else np.int64).reshape(out.shape)]


def z3_topk_part(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The module docstring's semantics over terms."""
    x = arrays[0]
    assert x is not None
    return [_topk(call, x, signed=call.input(0).dtype in SIGNED)]


def part_bytes(call: OpCall, outputs: list[TensorType]) -> float:
    """Half of X read (the two parts of one TopK share one read) plus the part written."""
    x = call.input(0)
    out = sum((t.numel or 0) * t.itemsize for t in outputs)
    return float((x.numel or 0) * x.itemsize / 2 + out)


def topk_node(
    x: str, outs: list[str], attrs: dict[str, Any], k_name: str, opset: int
) -> tuple[onnx.NodeProto, onnx.TensorProto | None]:
    """A TopKPart as ONNX: the TopK of `x` with outputs `outs` (Values, Indices), and, from
    opset 10, its K initializer `k_name` (before: the attribute k, largest only)."""
    axis, largest, k = int(attrs["axis"]), int(attrs["largest"]), int(attrs["k"])
    if opset < 10:
        return helper.make_node("TopK", [x], outs, axis=axis, k=k), None
    init = helper.make_tensor(k_name, P.INT64, [1], [k])
    node = helper.make_node("TopK", [x, k_name], outs, axis=axis, largest=largest)
    return node, init


def part_outputs(out: str, index: int) -> list[str]:
    """TopK's two output names when a one-output form writes output `index` as `out`."""
    return [out, f"{out}/indices"] if index == 0 else [f"{out}/values", out]


def _attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Proof/self-test values: the last axis (and 0), both directions, k of 1, 2 and the
    whole axis, both outputs."""
    shape = inputs[0].shape if inputs else None
    if shape is None or not shape or not all(isinstance(d, int) for d in shape):
        return None
    if name == "axis":
        return [-1, 0] if len(shape) > 1 else [0]
    if name == "largest":
        return [1, 0]
    if name == "index":
        return [0, 1]
    if name == "k":
        dims = [int(d) for d in shape]  # type: ignore[arg-type]  # static: checked above
        return list(dict.fromkeys(v for v in (1, 2, dims[-1]) if v <= min(dims)))
    return None


TOPK_PART = register(
    OpSpec(
        name="TopKPart",
        infer=infer_topk_part,
        reference=ref_topk_part,
        flops=no_flops,
        bytes=part_bytes,
        egg=EggSig(
            attrs=(
                ("axis", "i64", None),
                ("largest", "i64", None),
                ("k", "i64", None),
                ("index", "i64", None),
            )
        ),
        z3=z3_topk_part,
        attr_values=_attr_values,
        doc="TopKPart(X, axis, largest, k, index): output `index` of a sorted TopK(X, k).",
    )
)
