"""ORT's DynamicQuantizeMatMul contrib op (domain com.microsoft): A quantized at run time.

Contract (ORT 1.32's CPU kernel, measured: tests/ops/test_typed_dynamic_quant.py):
DynamicQuantizeMatMul(A float32 (..., K), B int8/uint8 (K, N), b_scale float32 (), (1,) or
(N,) [, b_zero_point B's dtype, b_scale's shape] [, bias float32 (N,)]) -> Y float32 (..., N).
A is quantized per tensor to uint8 as DynamicQuantizeLinear does, in float32:
  lo = min(0, min A), hi = max(0, max A), scale_a = (hi - lo) / 255 (1 when hi = lo),
  zp_a = clamp(round(0 - lo / scale_a), 0, 255), q = clamp(round(A / scale_a) + zp_a, 0, 255)
(round: to nearest, ties to even; A / scale_a a division, not a product by a reciprocal).
The product of codes is an exact int32 GEMM, acc = Σ_k (q - zp_a)(B - zp_b), and
  Y = float32(acc) · float32(scale_a · b_scale[n]) (+ bias[n])     (each step float32, RNE).
The numpy reference computes exactly this on float32 A (bit-identical to ORT); on float64
inputs the quantization stays in float32 and the last line is computed in float64.

Typed form: `(ms_DynamicQuantizeMatMul A B b_scale b_zero_point bias)`, the last two
`(Absent)` when omitted. B of another rank stays as it is (`infer` refuses it).

Z3 semantics: IEEE model: the steps above bit for bit (fpRoundToIntegral, the GEMM on 32-bit
vectors, which wrap as ORT's int32 accumulator). Real model: the same decomposition over reals
(min/max as If terms, round half to even over reals through floor, the GEMM over integers):
exact in reals, not bit-exact. Where float32's A / scale_a lands on the other side of a
rounding tie than the real quotient, one code differs by 1 (an error of scale_a·|B - zp_b|·
b_scale in that output); elsewhere the real value is within a few float32 roundings of ORT's
(the tests bound it by rtol 1e-6 of the output's scale). NaN in A is left unspecified.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._cast import cast
from rewrite.ops._z3 import RNE, vmap
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail
from rewrite.ops.registry import register

MS = "com.microsoft"
Array = np.ndarray
F32, I8, U8, I32 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32


def _check_column_input(call: OpCall, i: int, n: Any, what: str) -> None:
    """b_scale, b_zero_point: (), (1,) or (n,); bias: (n,)."""
    if not call.has_input(i) or call.input(i).shape is None:
        return
    shape = call.input(i).shape
    assert shape is not None
    ok = (len(shape) == 1 and shape[0] in (n, None)) if what == "bias" else len(shape) <= 1
    if what != "bias" and shape and isinstance(shape[0], int) and shape[0] not in (1, n):
        ok = False
    if not ok:
        raise fail(call, f"{what} must be per tensor or per column of N (the typed form)")


def _infer(call: OpCall) -> list[TensorType]:
    """Y: (..., N) float32; A (..., K) float32, B (K, N) int8/uint8."""
    a, b = call.input(0), call.input(1)
    if not (call.has_input(1) and call.has_input(2)):
        raise fail(call, "B and b_scale are required")
    if a.dtype not in (0, F32):
        raise fail(call, "A must be float32")
    if b.dtype not in (0, I8, U8):
        raise fail(call, "B must be int8 or uint8")
    if call.has_input(3) and call.input(3).dtype not in (0, b.dtype):
        raise fail(call, "b_zero_point must have B's dtype")
    n: Any = None
    if b.shape is not None:
        if len(b.shape) != 2:
            raise fail(call, "B must be 2-D (the typed form)")
        n = b.shape[1]
        k_a, k_b = a.shape[-1] if a.shape else None, b.shape[0]
        if isinstance(k_a, int) and isinstance(k_b, int) and k_a != k_b:
            raise fail(call, "A's last dim is not B's first")
    for i, what in ((2, "b_scale"), (3, "b_zero_point"), (4, "bias")):
        _check_column_input(call, i, n, what)
    if a.shape is None:
        return [TensorType(F32, None)]
    if not a.shape:
        raise fail(call, "A must have rank >= 1")
    return [TensorType(F32, (*a.shape[:-1], n))]


def quantize(a: Array) -> tuple[Array, np.float32, int]:
    """A's uint8 codes, scale and zero point, as ORT's DynamicQuantizeLinear (float32)."""
    a = np.asarray(a, dtype=np.float32)
    lo = np.float32(min(0.0, float(a.min()))) if a.size else np.float32(0)
    hi = np.float32(max(0.0, float(a.max()))) if a.size else np.float32(0)
    scale = np.float32(1) if hi == lo else np.float32((hi - lo) / np.float32(255))
    zp = int(np.clip(np.round(np.float32(0) - lo / scale), 0, 255))
    q = np.clip(np.round(a / scale) + np.float32(zp), 0, 255).astype(np.int64)
    return q, scale, zp


def _columns(x: Array | None, n: int, default: int = 0) -> Array:
    """A per-tensor or per-column input as n values (int64 or object; `default` if None)."""
    if x is None:
        return np.full(n, default, dtype=np.int64)
    flat = np.asarray(x).reshape(-1)
    return np.broadcast_to(flat, (n,)) if flat.size == 1 else flat


def _reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    _infer(call)
    a, b, s = arrays[0], arrays[1], arrays[2]
    assert a is not None and b is not None and s is not None
    zp_b = arrays[3] if len(arrays) > 3 else None
    bias = arrays[4] if len(arrays) > 4 else None
    n = b.shape[1]
    q, scale, zp = quantize(a)
    codes = b.astype(np.int64) - _columns(zp_b, n).astype(np.int64)
    acc = np.matmul(q - zp, codes)  # exact: the int GEMM
    dt = a.dtype
    mult = (dt.type(scale) * _columns(s, n).astype(dt)).astype(dt)
    y = (acc.astype(dt) * mult).astype(dt)
    if bias is not None:
        y = (y + bias.astype(dt)).astype(dt)
    return [y]


def _rne_int(x: Any) -> Any:
    """x rounded to the nearest integer, ties to even: an Int (real x) or a 32-bit vector."""
    if z3.is_fp(x):
        return z3.fpToSBV(RNE, z3.fpRoundToIntegral(RNE, x), z3.BitVecSort(32))
    f = z3.ToInt(x)
    d = x - z3.ToReal(f)
    half = z3.RealVal("1/2")
    up = z3.If(d > half, True, z3.If(d < half, False, f % 2 == 1))
    return z3.If(up, f + 1, f)


def _clamp(i: Any, lo: int, hi: int) -> Any:
    lo_t, hi_t = _int_like(lo, i), _int_like(hi, i)
    return z3.If(i < lo_t, lo_t, z3.If(i > hi_t, hi_t, i))


def _int_like(v: int, like: Any) -> Any:
    return z3.BitVecVal(v, 32) if z3.is_bv(like) else z3.IntVal(v)


def _fold(pick: Any, xs: list[Any]) -> Any:
    """min or max of `xs` as a balanced tree of If terms (depth log2 n: the interpreter
    recurses on terms)."""
    while len(xs) > 1:
        xs = [pick(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
    return xs[0]


def _tree_sum(x: Array) -> Array:
    """The sum over axis -2 of an object array, added as balanced trees (depth log2 K)."""
    x = np.moveaxis(x, -2, 0)
    while x.shape[0] > 1:
        h = x.shape[0] // 2
        x = np.concatenate([x[:h] + x[h : 2 * h], x[2 * h :]])
    return x[0]


def _params(a: Array) -> tuple[Any, Any]:
    """(scale_a, zp_a) as terms: float (real or FP) and integer (Int or 32-bit vector)."""
    flat = list(np.asarray(a, dtype=object).reshape(-1))
    fp = z3.is_fp(flat[0])
    zero = z3.FPVal(0.0, flat[0].sort()) if fp else z3.RealVal(0)
    lo = _fold(lambda x, y: z3.If(x < y, x, y), [zero, *flat])
    hi = _fold(lambda x, y: z3.If(x > y, x, y), [zero, *flat])
    same = z3.fpEQ(hi, lo) if fp else hi == lo
    one, top = (z3.FPVal(1.0, zero.sort()), z3.FPVal(255.0, zero.sort())) if fp else (1, 255)
    scale = z3.If(same, one, (hi - lo) / top)
    return scale, _clamp(_rne_int((zero - lo) / scale), 0, 255)


def _b_int(t: Any, dtype: int, like: Any) -> Any:
    """A B element (8-bit vector) as an Int or 32-bit vector."""
    if z3.is_bv(like):
        return z3.SignExt(24, t) if dtype == I8 else z3.ZeroExt(24, t)
    return z3.BV2Int(t, is_signed=dtype == I8)


def _semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    _infer(call)
    a, b, s = arrays[0], arrays[1], arrays[2]
    assert a is not None and b is not None and s is not None
    bdt = call.input(1).dtype or I8
    n = b.shape[1]
    scale, zp = _params(a)
    codes = vmap(lambda x: _clamp(_rne_int(x / scale) + zp, 0, 255) - zp, a)
    zp_b = arrays[3] if len(arrays) > 3 else None
    zps = [_int_like(0, zp) if zp_b is None else _b_int(z, bdt, zp) for z in _columns(zp_b, n)]
    wb = np.empty(b.shape, dtype=object)
    for k, j in np.ndindex(*b.shape):
        wb[k, j] = _b_int(b[k, j], bdt, zp) - zps[j]
    acc = _tree_sum(codes[..., :, None] * wb)  # exact (integers), so any order
    if z3.is_bv(zp):  # IEEE: ORT's float32 steps
        mult = [scale * c for c in _columns(s, n)]
        y = vmap(lambda t: cast(t, I32, F32), acc) * np.asarray(mult, dtype=object)
    else:
        y = vmap(z3.ToReal, acc) * scale * np.asarray(_columns(s, n), dtype=object)
    bias = arrays[4] if len(arrays) > 4 else None
    if bias is not None:
        y = y + np.asarray(bias, dtype=object)
    return [np.asarray(y, dtype=object)]


def _flops(call: OpCall, outputs: list[TensorType]) -> float:
    """2·K per output element, plus quantizing A (4 per element)."""
    a, b = call.input(0), call.input(1)
    numel = outputs[0].numel if outputs else None
    if numel is None or b.shape is None or not isinstance(b.shape[0], int):
        return 0.0
    return 2.0 * b.shape[0] * numel + 4.0 * (a.numel or 0)


DYNAMIC_QUANTIZE_MATMUL = register(
    OpSpec(
        "DynamicQuantizeMatMul",
        _infer,
        _reference,
        _flops,
        domain=MS,
        egg=EggSig(n_inputs=5, optional=2),
        z3=_semantics,
        input_dtypes=(None, (I8, U8), None, (I8, U8), None),
        doc="DynamicQuantizeMatMul: A quantized per tensor to uint8 at run time, times int B",
    )
)


def _self_test_values() -> list[tuple[dict[str, Any], list[Array | None]]]:
    """Input sets (`verify/selftest_listed.py`): B's, b_scale's and bias's shapes follow A's
    K and B's N, which the sampling bound does not know."""
    rng = np.random.default_rng(0)
    out: list[tuple[dict[str, Any], list[Array | None]]] = []
    for lead, k, n, bdt, per_column, with_zp, with_bias in (
        ((2,), 5, 3, np.int8, False, False, False),
        ((1, 3), 7, 2, np.uint8, True, True, True),
        ((), 4, 3, np.int8, True, False, True),
    ):
        info = np.iinfo(bdt)
        a = (rng.standard_normal((*lead, k)) * 2).astype(np.float32)
        b = rng.integers(info.min, info.max + 1, (k, n)).astype(bdt)
        s = np.asarray(rng.random(n if per_column else ()) + 0.05, dtype=np.float32)
        zp = rng.integers(info.min, info.max + 1, s.shape).astype(bdt) if with_zp else None
        bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
        arrays: list[Array | None] = [a, b, s, zp, bias] if with_bias else [a, b, s, zp]
        out.append(({}, arrays if with_zp or with_bias else arrays[:3]))
    return out


SELF_TEST_VALUES = {(MS, "DynamicQuantizeMatMul"): _self_test_values()}
