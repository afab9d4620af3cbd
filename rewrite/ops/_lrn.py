"""LRN as ORT 1.32's CPU kernel computes it (not an op module: `global_pool.py` registers the
op with these).

ORT (nn/lrn.cc, float32 only, X of rank 4, odd `size`, alpha > 0, beta > 0; anything else is
refused when the session is built) computes, per image n and pixel, with a = fl(alpha / size)
and sq = the squares x·x with (size - 1) / 2 zero channels before and the rest after:
- scale[0] = bias, then `scale += a·sq[j]` for j = 0 .. size - 1 (Eigen's Axpy: the product
  rounded, then the sum; no FMA);
- a running sum: scale[c] = (scale[c - 1] + a·sq[c + size - 1]) + (-a)·sq[c - 1], so an inf
  square poisons every later channel (inf - inf = NaN) and cancellation can leave a scale far
  from the exact one (even 0 or negative when bias is small);
- Y = x · pow(scale, -beta) with Eigen's vectorised pow (`generic_pow`).

Modelled: all of the above bit for bit on float32 (IEEE terms, `lrn_terms`), except Eigen's pow
on a finite positive scale, which is an uninterpreted function of the scale per beta (`pow_uf`,
concrete meaning: float64 pow rounded to float32; Eigen's vectorised pow differs from it by up
to 2 ulps on a good part of the values (up to a third in the tests), its scalar tail on about
0.3%; the real axiom: positive on positive arguments). Its
special cases are explicit, as C99 and Eigen give them (checked on ORT): NaN -> NaN, 1 -> 1,
+inf -> +0, -inf -> ∓0 (odd integer beta: -0), ±0 -> +inf (odd integer beta: ±inf), a negative
scale -> NaN for a non-integer beta, ±|s|^-beta for an integer one. On numerals (every input a
value) the whole kernel is replayed in numpy (`lrn_f32`) and the result is a numeral. In reals
the running sum is exact and the pow's argument must be positive (`domain`).
Outside the proof: float16 and double (ORT has no kernel), other ranks, even sizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._z3 import UF, const, domain, fp_number
from rewrite.ops.base import OpCall, TensorType, fail

Array = np.ndarray
F32 = np.float32
_UFS: dict[float, UF] = {}


def lrn_params(call: OpCall) -> tuple[int, float, float, float]:
    """size, alpha, beta, bias as ORT reads them (float32 attributes)."""
    size = int(call.attr("size"))
    alpha = float(F32(call.attr("alpha", 1e-4)))
    beta = float(F32(call.attr("beta", 0.75)))
    return size, alpha, beta, float(F32(call.attr("bias", 1.0)))


def check_ort_form(call: OpCall) -> None:
    """Refuse what ORT's kernel refuses: not float32, not rank 4, an even or non-positive size,
    alpha <= 0 or beta <= 0."""
    x: TensorType = call.input(0)
    if x.dtype != TensorProto.FLOAT:
        raise fail(call, "ORT's LRN runs float32 only")
    if x.shape is not None and len(x.shape) != 4:
        raise fail(call, "ORT's LRN takes X of rank 4")
    size, alpha, beta, _ = lrn_params(call)
    if size <= 0 or size % 2 == 0 or not alpha > 0 or not beta > 0:
        raise fail(call, "ORT's LRN needs an odd size > 0, alpha > 0 and beta > 0")


def running_scale(x: Array, size: int, a: Any, bias: Any, zero: Any) -> Array:
    """ORT's scale (module docstring) for X (N, C, ...) of numbers or terms; `a`, `bias` and
    `zero` of the same kind. Products are written sq·a (IEEE multiplication commutes)."""
    c, pre = x.shape[1], (size - 1) // 2
    plane = x[:, 0]
    pad = np.full(plane.shape, zero, dtype=plane.dtype)
    sq = [pad] * pre + [x[:, j] * x[:, j] for j in range(c)] + [pad] * (size - 1 - pre)
    s = np.full(plane.shape, bias, dtype=plane.dtype)
    for j in range(size):
        s = s + sq[j] * a
    scales = [s]
    for ch in range(1, c):
        s = s + sq[ch + size - 1] * a
        s = s + sq[ch - 1] * (-a)
        scales.append(s)
    return np.stack(scales, axis=1)


def lrn_f32(x: Array, size: int, alpha: float, beta: float, bias: float) -> Array:
    """ORT's kernel on a float32 array (pow: float64 pow rounded, see the module docstring)."""
    a = F32(F32(alpha) / F32(size))
    with np.errstate(all="ignore"):
        s = running_scale(x, size, a, F32(bias), F32(0))
        p = np.power(s.astype(np.float64), -np.float64(F32(beta))).astype(F32)
        return x * p


def pow_uf(beta: float) -> UF:
    """pow(s, -beta) for finite s > 0 as an uninterpreted function (one per beta)."""
    if beta not in _UFS:
        b = -np.float64(beta)

        def concrete(s: float) -> float:
            with np.errstate(all="ignore"):
                return float(np.power(np.float64(s), b))

        name = f"lrn_pow_{np.float32(beta).view(np.uint32):08x}"
        concrete.__name__ = name
        made: list[UF] = []  # the axiom names the UF it belongs to
        made.append(UF(name, concrete, axioms=(lambda t: z3.Implies(t > 0, made[0](t) > 0),)))
        _UFS[beta] = made[0]
    return _UFS[beta]


def pow_term(s: Any, beta: float) -> Any:
    """Eigen's pow(s, -beta) on an IEEE term: the special cases explicit, `pow_uf` elsewhere
    (module docstring)."""
    f = pow_uf(beta)
    integer = float(beta).is_integer()
    odd = integer and int(beta) % 2 == 1
    zero, one = const(0, s), const(1, s)
    nan, inf = z3.fpNaN(s.sort()), z3.fpPlusInfinity(s.sort())
    neg = z3.fpNeg(s)
    if not integer:
        negative: Any = nan
    else:
        negative = z3.fpNeg(f(neg)) if odd else f(neg)
    at_zero = z3.If(z3.fpIsNegative(s), z3.fpNeg(inf), inf) if odd else inf
    at_inf = z3.If(z3.fpIsNegative(s), z3.fpNeg(zero), zero) if odd else zero
    return z3.If(
        z3.fpIsNaN(s),
        nan,
        z3.If(
            z3.fpEQ(s, one),
            one,
            z3.If(
                z3.fpIsInf(s),
                at_inf,
                z3.If(z3.fpIsZero(s), at_zero, z3.If(z3.fpIsNegative(s), negative, f(s))),
            ),
        ),
    )


def lrn_terms(call: OpCall, x: Array) -> Array:
    """Y for X (N, C, H, W) of Z3 terms: numerals when every input is an IEEE numeral, else
    IEEE terms (`pow_term`) or, in reals, x·pow(scale) with the scale positive."""
    check_ort_form(call)
    size, alpha, beta, bias = lrn_params(call)
    cells = list(x.reshape(-1))
    like = cells[0]
    if all(z3.is_fp_value(v) for v in cells):
        vals = np.array([fp_number(v) for v in cells], dtype=F32).reshape(x.shape)
        y = lrn_f32(vals, size, alpha, beta, bias)
        out = np.empty(x.shape, dtype=object)
        out.reshape(-1)[:] = [z3.FPVal(float(v), like.sort()) for v in y.reshape(-1)]
        return out
    a = float(F32(F32(alpha) / F32(size)))
    s = running_scale(x, size, const(a, like), const(bias, like), const(0, like))
    if z3.is_fp(like):
        p = np.frompyfunc(lambda t: pow_term(t, beta), 1, 1)(s)
    else:
        f = pow_uf(beta)

        def real_pow(t: Any) -> Any:
            domain(t > 0)
            return f(t)

        p = np.frompyfunc(real_pow, 1, 1)(s)
    return np.asarray(x * p, dtype=object)
