"""ORT's skip normalizations (domain com.microsoft): SkipLayerNormalization and
SkipSimplifiedLayerNormalization.

Contract, per row of the last axis (C = hidden size), as ORT's CPU kernel
(contrib_ops/cpu/skip_layer_norm.cc) states it in the input's dtype (float16: in float32,
rounded once at the end):
  v = input + skip (+ bias); mean = (Σ v) / C; ms = (Σ v·v) / C (both sums left to right)
  SkipLayerNormalization(input, skip, gamma[, beta][, bias]):
      Y = (v - mean) / sqrt(ms - mean·mean + epsilon) · gamma (+ beta)
  SkipSimplifiedLayerNormalization(input, skip, gamma[, bias]):
      Y = v / sqrt(ms + epsilon) · gamma
input and skip have rank 2 or 3, skip input's shape or a trailing part of it (the kernel
reads it at `offset % size`); gamma, beta and bias are (C,). epsilon is a float32 attribute
(schema default 1e-12).

Typed as Y when no extra output is used; with input_skip_bias_sum (output 3) used, as
`(<op>Part epsilon index inputs...)` per output, index 0 or 3 (`ops.parts`): output 3 is
v = (input + skip) (+ bias) in the input's dtype (float16: in float32, rounded once), bit for
bit ORT's. mean and inv_std_var (outputs 1, 2) have no typed form: ORT's CPU kernel never
writes them. SkipSimplifiedLayerNormalization: the reference and the Z3
semantics are that order, bit for bit what ORT 1.32 computes (float16: not checked).
SkipLayerNormalization: ORT 1.32's kernel fits neither the order above in float32 (its
single-pass variance even overflows where ORT's does not) nor a float64 one, nor Eigen's
packet sums; the reference and the Z3 semantics are the formula above in float64, rounded to
the input's dtype once (exact in reals; in floats NOT bit-exact: within 4 + C/256 ulps of
ORT's float32 output at the row's largest |Y|, measured up to C = 4096).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._z3 import IEEE, RNE, current_model, divide, float_only, square_root, vmap
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail
from rewrite.ops.elementwise import per_element
from rewrite.ops.norm import _epsilon
from rewrite.ops.registry import register
from rewrite.ops.unary import SQRT

MS = "com.microsoft"
Array = np.ndarray


def _skip_infer(call: OpCall) -> list[TensorType]:
    """Y: input's type. input and skip have rank 2 or 3 (ORT's kernel); skip is input's shape
    or a trailing part of it (leading 1s allowed); gamma, beta and bias are (C,)."""
    x, skip = call.input(0), call.input(1)
    for name, t in (("input", x), ("skip", skip)):
        if t.shape is not None and len(t.shape) not in (2, 3):
            raise fail(call, f"{name} must have rank 2 or 3 (ORT's kernel)")
    if x.shape is None:
        return [x]
    if skip.shape is not None and not _trailing(skip.shape, x.shape):
        raise fail(call, "skip must have input's shape or a trailing part of it")
    c = x.shape[-1]
    for i in range(2, len(call.inputs)):
        s = call.inputs[i].shape if call.inputs[i] is not None else None  # type: ignore[union-attr]
        if s is not None and (len(s) != 1 or _differ(s[0], c)):
            raise fail(call, f"input {i} of shape {s} is not ({c},)")
    return [x]


def _trailing(s: tuple[Any, ...], x: tuple[Any, ...]) -> bool:
    """Whether `s`, less leading 1s, is a trailing part of `x` (no two static dims differ)."""
    s = s[1:] if len(s) == len(x) and len(s) > 1 and s[0] == 1 else s
    if len(s) > len(x):
        return False
    return not any(_differ(a, b) for a, b in zip(s, x[len(x) - len(s) :], strict=True))


def _differ(a: Any, b: Any) -> bool:
    return isinstance(a, int) and isinstance(b, int) and a != b


def _parts(call: OpCall, arrays: list[Any], simplified: bool) -> tuple[Any, ...]:
    """(input, skip, gamma, beta or None, bias or None) from the call's inputs."""
    padded = [*arrays, None, None, None][:5]
    if simplified:
        return padded[0], padded[1], padded[2], None, padded[3]
    return tuple(padded[:5])


def _stats(v: Any, n: int) -> tuple[Any, Any]:
    """(Σ v) / n and (Σ v·v) / n along the last axis (kept, size 1), summed left to right."""
    total, squares = v[..., 0:1], v[..., 0:1] * v[..., 0:1]
    for i in range(1, n):
        t = v[..., i : i + 1]
        total, squares = total + t, squares + t * t
    return total / n, squares / n


def _normalize(call: OpCall, parts: tuple[Any, ...], simplified: bool, sqrt: Any, div: Any) -> Any:
    """The kernel's formula on arrays of one number type (numpy floats, or Z3 terms with
    `sqrt` and `div` their IEEE / real forms)."""
    x, skip, gamma, beta, bias = parts
    v = x + skip
    if bias is not None:
        v = v + bias
    mean, ms = _stats(v, x.shape[-1])
    eps: Any = float(np.float32(call.attr("epsilon", 1e-12)))  # an ONNX float is float32
    if "epsilon" in call.attrs:  # a number, or a Z3 term a rule's right side gives
        eps = _epsilon(call, np.float32, ms.flat[0])
    if simplified:
        return div(v, sqrt(ms + eps)) * gamma
    y = div(v - mean, sqrt(ms - mean * mean + eps)) * gamma
    return y if beta is None else y + beta


def _reference(simplified: bool):  # type: ignore[no-untyped-def]
    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        parts = _parts(call, list(arrays), simplified)
        x = parts[0]
        assert x is not None
        dt = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
        dt = dt if simplified else np.dtype(np.float64)  # the closest model: module docstring
        typed = tuple(None if a is None else np.asarray(a, dtype=dt) for a in parts)
        with np.errstate(all="ignore"):
            y = _normalize(call, typed, simplified, np.sqrt, np.divide)
        return [np.asarray(y, dtype=dt).astype(x.dtype)]

    return reference


def _z3(simplified: bool):  # type: ignore[no-untyped-def]
    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        float_only(call)
        parts = _parts(call, list(arrays), simplified)
        first = parts[0].flat[0]  # type: ignore[union-attr]
        sqrt = lambda a: vmap(lambda t: square_root(t, SQRT), a)  # noqa: E731
        div = lambda a, b: vmap(divide, a, b)  # noqa: E731
        if current_model() != IEEE or not z3.is_fp(first):
            return [_normalize(call, parts, simplified, sqrt, div)]
        sort = first.sort()
        wide = z3.Float32() if simplified and sort == z3.Float16() else sort
        wide = wide if simplified else z3.Float64()
        if wide == sort:
            return [_normalize(call, parts, simplified, sqrt, div)]
        cast = tuple(
            None if a is None else vmap(lambda t: z3.fpToFP(RNE, t, wide), a) for a in parts
        )
        y = _normalize(call, cast, simplified, sqrt, div)
        return [vmap(lambda t: z3.fpToFP(RNE, t, sort), y)]

    return semantics


def _eps_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """epsilon in proofs and the self-test: the exported models' usual values."""
    return [1e-12, 1e-5] if name == "epsilon" else None


def _sum_output(call: OpCall, arrays: list[Any], simplified: bool) -> Array:
    """input + skip (+ bias), in the input's dtype (numpy arrays or Z3 terms; float16 via a
    float32 sum, rounded once, as ORT's kernel)."""
    x, skip, _, _, bias = _parts(call, list(arrays), simplified)
    first = x.flat[0]
    if isinstance(first, z3.ExprRef):
        half = current_model() == IEEE and z3.is_fp(first) and first.sort() == z3.Float16()
        to = (lambda a: vmap(lambda t: z3.fpToFP(RNE, t, z3.Float32()), a)) if half else None
        terms = [a if a is None or to is None else to(a) for a in (x, skip, bias)]
        v = terms[0] + terms[1] if terms[2] is None else terms[0] + terms[1] + terms[2]
        return vmap(lambda t: z3.fpToFP(RNE, t, first.sort()), v) if half else v
    dt = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
    with np.errstate(all="ignore"):
        v = x.astype(dt) + skip.astype(dt)
        v = v if bias is None else v + bias.astype(dt)
    return np.asarray(v, dtype=dt).astype(x.dtype)


def _part(simplified: bool) -> OpSpec:
    """`<op>Part`: output `index` (0: Y, 3: input_skip_bias_sum) of the skip normalization."""
    op = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
    whole = (_reference(simplified), _z3(simplified))

    def index(call: OpCall) -> int:
        i = int(call.attr("index", 0))
        if i not in (0, 3):
            raise fail(call, f"index {i}: ORT's CPU kernel writes outputs 0 and 3 only")
        return i

    def infer(call: OpCall) -> list[TensorType]:
        index(call)
        return _skip_infer(call)

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        return (
            whole[0](call, arrays) if index(call) == 0 else [_sum_output(call, arrays, simplified)]
        )

    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        float_only(call)
        return (
            whole[1](call, arrays) if index(call) == 0 else [_sum_output(call, arrays, simplified)]
        )

    return OpSpec(
        f"{op}Part",
        infer,
        reference,
        per_element(7 if simplified else 10),
        domain=MS,
        egg=EggSig(
            attrs=(*_EPS, ("index", "i64", 0)), n_inputs=5 - simplified, optional=2 - simplified
        ),
        z3=semantics,
        attr_values=_part_values,
        onnx_op=op,
        doc=f"{op}Part(...): output `index` (0: output, 3: input_skip_bias_sum) of an {op}",
    )


def _part_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    return [0, 3] if name == "index" else _eps_values(name, inputs)


_EPS = (("epsilon", "f64", 1e-12),)
_FLOAT = (TensorProto.FLOAT,)

register(
    OpSpec(
        "SkipLayerNormalization",
        _skip_infer,
        _reference(False),
        per_element(10),
        domain=MS,
        # typed with only Y used; beta and bias may be omitted
        egg=EggSig(attrs=_EPS, n_inputs=5, optional=2),
        z3=_z3(False),
        attr_values=_eps_values,
        doc="SkipLayerNormalization = LayerNorm(input + skip + bias)·gamma + beta (not bit-exact)",
    )
)
register(
    OpSpec(
        "SkipSimplifiedLayerNormalization",
        _skip_infer,
        _reference(True),
        per_element(7),
        domain=MS,
        # typed with only Y used; bias may be omitted
        egg=EggSig(attrs=_EPS, n_inputs=4, optional=1),
        z3=_z3(True),
        attr_values=_eps_values,
        doc="SkipSimplifiedLayerNormalization = RMSNorm(input + skip + bias)·gamma",
    )
)
register(_part(False))
register(_part(True))
