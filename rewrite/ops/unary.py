"""Unary elementwise math ops, Cast/CastLike and inference-mode Dropout.

Contract: each op maps X to an output of X's shape. Math ops keep X's dtype; IsNaN, IsInf
and Not give BOOL; Cast gives the `to` dtype, CastLike the dtype of its second input.
Dropout is modelled at inference (training_mode false or ratio 0): output = X, and the
optional mask output is all-true BOOL of X's shape. Parametric activations (LeakyRelu, Elu,
Gelu, Clip, ...) live in `activation.py`; Tan, the inverse trigonometric and the hyperbolic
functions in `trig.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._cast import cast
from rewrite.ops._unary_z3 import (
    abs_fn,
    detects,
    isinf_fn,
    sign_fn,
    z3_by_call,
    z3_ceil,
    z3_cos,
    z3_floor,
    z3_isnan,
    z3_log,
    z3_round,
    z3_sin,
)
from rewrite.ops._z3 import UF, const, divide, square_root, unary, vmap
from rewrite.ops._z3 import relu as z3_relu
from rewrite.ops.base import (
    EggSig,
    FlopsFn,
    OpCall,
    OpSpec,
    ReferenceFn,
    TensorType,
    elementwise_flops,
    fail,
    no_flops,
    np_dtype,
    per_element,
    same_type,
)
from rewrite.ops.registry import register

Array = np.ndarray
BOOL = TensorProto.BOOL

# Cost of a transcendental (exp, log, tanh, erf, sin) relative to an add, in FLOPs.
TRANSCENDENTAL = 4.0

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf(x: Array) -> Array:
    """erf(x), relative error < 2e-7 (float32-exact); float64 inputs use math.erf exactly.

    |x| < 0.5: Taylor series (12 terms, error < 1e-15); otherwise 1 - erfc(|x|) with the
    Chebyshev-fitted erfc of Numerical Recipes (fractional error < 1.2e-7), so erf is never
    computed as a difference of nearly equal numbers.
    """
    if x.dtype == np.float64:
        return np.asarray(np.frompyfunc(math.erf, 1, 1)(x), dtype=np.float64)
    z = np.abs(x.astype(np.float64))
    small = np.minimum(z, 0.5)
    z2 = small * small
    term, series = small.copy(), small.copy()
    for n in range(1, 13):
        term = term * -z2 / n
        series = series + term / (2 * n + 1)
    taylor = _TWO_OVER_SQRT_PI * series
    t = 1.0 / (1.0 + 0.5 * z)
    coeffs = (
        -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
        0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277,
    )  # fmt: skip
    poly = np.full_like(t, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        poly = c + t * poly
    erfc = t * np.exp(-z * z + poly)
    out = np.where(z < 0.5, taylor, 1.0 - erfc)
    return (np.sign(x) * out).astype(x.dtype)


def relu(x: Array) -> Array:
    """max(x, 0) in X's dtype."""
    return np.maximum(x, x.dtype.type(0))


def sigmoid(x: Array) -> Array:
    """1 / (1 + exp(-x)), computed without overflow for large |x|, in X's dtype."""
    x64 = x.astype(np.float64)
    e = np.exp(-np.abs(x64))
    return np.where(x64 >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype)


def elementwise_ref(fn: Callable[[Array], Array]) -> ReferenceFn:
    """A reference that applies `fn` to input 0 and keeps its dtype (warnings silenced)."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        with np.errstate(all="ignore"):
            return [np.asarray(fn(x)).astype(x.dtype, copy=False)]

    return reference


def sign(x: Array) -> Array:
    """-1, 0 or 1 (Sign(±0) = +0); NaN stays NaN, except in float16, where ORT gives 0."""
    out = np.sign(x)
    return np.where(np.isnan(out), 0, out).astype(x.dtype) if x.dtype == np.float16 else out


def _bool_out(call: OpCall) -> list[TensorType]:
    return [TensorType(BOOL, call.input(0).shape)]


def _bool_ref(fn: Callable[[Array], Array]) -> ReferenceFn:
    """A reference that applies a BOOL-valued `fn` to input 0."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        return [np.asarray(fn(x), dtype=np.bool_)]

    return reference


def _is_inf(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    detect_pos, detect_neg = detects(call)
    pos = np.isposinf(x) if detect_pos else np.zeros(x.shape, bool)
    neg = np.isneginf(x) if detect_neg else np.zeros(x.shape, bool)
    return [pos | neg]


def _cast_infer(call: OpCall) -> list[TensorType]:
    """Cast(X, to): X's shape in dtype `to` (a required attribute)."""
    to = call.attr("to")
    if to is None:
        raise fail(call, "attribute 'to' is required")
    return [TensorType(int(to), call.input(0).shape)]


def _cast_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    with np.errstate(all="ignore"):
        return [x.astype(np_dtype(int(call.attr("to"))))]


def _castlike_infer(call: OpCall) -> list[TensorType]:
    """CastLike(X, T): X's shape in T's dtype."""
    return [TensorType(call.input(1).dtype, call.input(0).shape)]


def _castlike_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x, like = arrays[0], arrays[1]
    assert x is not None and like is not None
    with np.errstate(all="ignore"):
        return [x.astype(like.dtype)]


def _dropout_infer(call: OpCall) -> list[TensorType]:
    """Dropout(X[, ratio, training_mode]) -> X's type, and a BOOL mask of X's shape."""
    x = call.input(0)
    return [x, TensorType(BOOL, x.shape)][: max(1, call.n_outputs)]


def _dropout_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Inference semantics only: training mode with a non-zero ratio is random."""
    x = arrays[0]
    assert x is not None
    training = len(arrays) > 2 and arrays[2] is not None and bool(np.asarray(arrays[2]))
    ratio = float(np.asarray(arrays[1])) if len(arrays) > 1 and arrays[1] is not None else 0.5
    if training and ratio != 0.0:
        raise ValueError("Dropout: training_mode=True with ratio > 0 is random; no reference")
    outs = [x.copy(), np.ones(x.shape, dtype=np.bool_)]
    return outs[: max(1, call.n_outputs)]


# -- Z3 semantics -----------------------------------------------------------------------------
# Exp, Erf, Tanh and Sqrt are uninterpreted; each axiom is a fact about f(t) for an argument t,
# true of the real function (tests/ops/test_semantics.py checks every axiom numerically).


def _safe(fn: Callable[[float], float]) -> Callable[[float], float]:
    """`fn` with float semantics at the edges: overflow -> inf, outside the domain -> nan."""

    def f(x: float) -> float:
        try:
            return float(fn(x))
        except OverflowError:
            return math.inf
        except ValueError:
            return math.nan

    f.__name__ = fn.__name__
    return f


def _odd_bounded(f: Callable[[Any], Any]) -> tuple[Callable[[Any], Any], ...]:
    """Axioms of an odd, strictly increasing function into (-1, 1) (tanh, erf)."""
    return (
        lambda t: z3.And(f(t) > -1, f(t) < 1),
        lambda t: f(-t) == -f(t),
        lambda t: (t > 0) == (f(t) > 0),
    )


def _fp_odd_bounded(f: Callable[[Any], Any]) -> tuple[Callable[[Any], Any], ...]:
    """IEEE axioms of tanh and erf: NaN in, NaN out; else within [-1, 1], odd, sign kept."""
    return (
        lambda t: z3.fpIsNaN(t) == z3.fpIsNaN(f(t)),
        lambda t: z3.Implies(
            z3.Not(z3.fpIsNaN(t)),
            z3.And(z3.fpGEQ(f(t), const(-1, t)), z3.fpLEQ(f(t), const(1, t))),
        ),
        lambda t: f(z3.fpNeg(t)) == z3.fpNeg(f(t)),
        lambda t: z3.Implies(z3.fpGT(t, const(0, t)), z3.fpGEQ(f(t), const(0, t))),
    )


def _fp_exp_axioms(f: Callable[[Any], Any]) -> tuple[Callable[[Any], Any], ...]:
    """IEEE axioms of exp: NaN in, NaN out; never negative (nor -0); exp(±0) = 1."""
    return (
        lambda t: z3.fpIsNaN(t) == z3.fpIsNaN(f(t)),
        lambda t: z3.Implies(z3.Not(z3.fpIsNaN(t)), z3.Not(z3.fpIsNegative(f(t)))),
        lambda t: z3.Implies(z3.fpIsZero(t), f(t) == const(1, t)),
    )


EXP: UF = UF(
    "exp",
    _safe(math.exp),
    (lambda t: EXP(t) > 0, lambda t: z3.Implies(t == 0, EXP(t) == 1)),
    _fp_exp_axioms(lambda t: EXP(t)),
    monotone=True,
)
TANH: UF = UF(
    "tanh",
    _safe(math.tanh),
    (),
    _fp_odd_bounded(lambda t: TANH(t)),
    real_def=lambda t: 2 / (1 + EXP(-2 * t)) - 1,  # type: ignore[operator]
    monotone=True,
)
ERF: UF = UF(
    "erf",
    _safe(math.erf),
    _odd_bounded(lambda t: ERF(t)),
    _fp_odd_bounded(lambda t: ERF(t)),
    monotone=True,
)
SQRT: UF = UF(
    "sqrt",
    _safe(math.sqrt),
    (lambda t: z3.Implies(t >= 0, z3.And(SQRT(t) >= 0, SQRT(t) * SQRT(t) == t)),),
    monotone=True,
)


def z3_sigmoid(t: object) -> object:
    """sigmoid(t) = 1 / (1 + exp(-t)) (ONNX's definition)."""
    return 1 / (1 + EXP(-t))  # type: ignore[operator]


def _z3_reciprocal(t: object) -> object:
    return divide(const(1, t), t)


def _z3_sqrt(t: object) -> object:
    return square_root(t, SQRT)


def _z3_cast(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Cast as ORT computes it, every dtype pair (`rewrite.ops._cast`)."""
    return _z3_cast_to(call, arrays, int(call.attr("to")))


def _z3_castlike(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """CastLike(X, T) = Cast(X, to=T's dtype) (T's values are not read)."""
    return _z3_cast_to(call, arrays, call.input(1).dtype)


def _z3_cast_to(call: OpCall, arrays: list[Array | None], to: int) -> list[Array]:
    x = arrays[0]
    assert x is not None
    src = call.input(0).dtype
    return [vmap(lambda t: cast(t, src, to), x)]


_EGG1 = EggSig(n_inputs=1)
_Z3 = {
    "Neg": elementwise_ref(np.negative),
    "Relu": unary(z3_relu),
    "Sigmoid": unary(z3_sigmoid, floats=True),
    "Tanh": unary(TANH, floats=True),
    "Erf": unary(ERF, floats=True),
    "Exp": unary(EXP, floats=True),
    "Sqrt": unary(_z3_sqrt, floats=True),
    "Reciprocal": unary(_z3_reciprocal, floats=True),
    "Abs": z3_by_call(abs_fn),
    "Sign": z3_by_call(sign_fn),
    "Log": unary(z3_log, floats=True),
    "Sin": unary(z3_sin, floats=True),
    "Cos": unary(z3_cos, floats=True),
    "Floor": unary(z3_floor, floats=True),
    "Ceil": unary(z3_ceil, floats=True),
    "Round": unary(z3_round, floats=True),
}
_T = per_element(TRANSCENDENTAL)
_MATH: tuple[tuple[str, Callable[[Array], Array], FlopsFn, EggSig | None], ...] = (
    ("Neg", np.negative, elementwise_flops, _EGG1),
    ("Abs", np.abs, elementwise_flops, _EGG1),
    ("Relu", relu, elementwise_flops, _EGG1),
    ("Sigmoid", sigmoid, _T, _EGG1),
    ("Tanh", np.tanh, _T, _EGG1),
    ("Erf", erf, _T, _EGG1),
    ("Exp", np.exp, _T, _EGG1),
    ("Log", np.log, _T, _EGG1),
    ("Sqrt", np.sqrt, per_element(2), _EGG1),
    ("Reciprocal", np.reciprocal, elementwise_flops, _EGG1),
    ("Floor", np.floor, elementwise_flops, _EGG1),
    ("Ceil", np.ceil, elementwise_flops, _EGG1),
    ("Round", np.round, elementwise_flops, _EGG1),  # half to even, as ONNX specifies
    ("Sign", sign, elementwise_flops, _EGG1),
    ("Sin", np.sin, _T, _EGG1),
    ("Cos", np.cos, _T, _EGG1),
)  # Tan, Asin, Acos, Atan, Sinh, Cosh: `trig.py`
for _name, _fn, _flops, _egg in _MATH:
    register(OpSpec(_name, same_type, elementwise_ref(_fn), _flops, egg=_egg, z3=_Z3.get(_name)))

_COPY = elementwise_ref(np.copy)
register(OpSpec("Identity", same_type, _COPY, no_flops, egg=_EGG1, z3=_COPY))
_IS_NAN_Z3 = unary(z3_isnan, floats=True)
register(
    OpSpec("IsNaN", _bool_out, _bool_ref(np.isnan), elementwise_flops, egg=_EGG1, z3=_IS_NAN_Z3)
)
_DETECT = (("detect_negative", "i64", 1), ("detect_positive", "i64", 1))
register(
    OpSpec(
        "IsInf",
        _bool_out,
        _is_inf,
        elementwise_flops,
        egg=EggSig(attrs=_DETECT, n_inputs=1),
        z3=z3_by_call(isinf_fn, floats=True),
    )
)
register(
    OpSpec(
        "Not",
        _bool_out,
        _bool_ref(np.logical_not),
        elementwise_flops,
        egg=_EGG1,
        z3=unary(z3.Not),
        input_dtypes=((BOOL,),),
    )
)
register(
    OpSpec(
        "Cast",
        _cast_infer,
        _cast_ref,
        no_flops,
        egg=EggSig(attrs=(("to", "i64", None),), n_inputs=1),
        z3=_z3_cast,
    )
)
register(
    OpSpec(
        "CastLike",
        _castlike_infer,
        _castlike_ref,
        no_flops,
        egg=EggSig(n_inputs=2),
        z3=_z3_castlike,
        doc="CastLike(X, T) = Cast(X, to=T's dtype)",
    )
)
register(OpSpec("Dropout", _dropout_infer, _dropout_ref, no_flops, egg=_EGG1, z3=_dropout_ref))
