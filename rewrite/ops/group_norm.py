"""GroupNormalization (opset 18, and 21 with stash_type): normalization over channel groups.

Contract: GroupNormalization(X, scale, bias, num_groups, epsilon=1e-5): X (N, C, ...) with
C divisible by num_groups = G; each (n, group) is normalized over its C/G channels and the
spatial dims, then scaled and shifted: per group (opset 18: scale and bias of length G) or
per channel (opset 21: length C). The output has X's type.

ORT 1.32 has no CPU kernel for it: it runs the ONNX function body (a context-dependent
function; checked bit for bit against ORT here). With X3 = X reshaped (N, G, L):
mean = ReduceMean(X3, axis 2), var = ReduceMean(X3·X3) - mean·mean, std = sqrt(var + eps),
Y3 = (X3 - mean) / std, then Y = scale·Y3 + bias with scale/bias broadcast per group (18) or,
Y3 reshaped (N, C, L'), per channel (21); eps = float32(epsilon) cast to the compute type.
Opset 21 computes everything up to Y3 in `stash_type` (float32) and casts it back to X's
dtype; opset 18 computes in X's dtype. For float32 X the two agree whenever the scale length
says which broadcast applies (length G: per group; C: per channel; G = C: the same).

Typed form: `(GroupNormalization epsilon num_groups X scale bias)` (stash_type dropped when
it is 1, else opaque: `to_egg`). Z3 semantics (float32 X only; other dtypes raise, as a
missing instantiation): the function body's ops composed in its order, each op's own
semantics (`input_dtypes`: the prover and the self-test take float32 inputs): ReduceMean in
ORT's addition order (`reduce.py`, exact in IEEE float32), IEEE
multiplications, subtraction, correctly rounded sqrt and division. Exact in IEEE float32;
in reals the same formula (sqrt a UF, var + eps > 0 the real domain). Outside the proof:
float16 and double (opset 21 computes through float32 there, opset 18 does not).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from rewrite.ops._z3 import const, divide, square_root
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, per_element
from rewrite.ops.registry import lookup, register
from rewrite.ops.unary import SQRT

Array = np.ndarray
F32 = np.float32


def _groups(call: OpCall) -> int:
    g = call.attr("num_groups")
    if g is None or int(g) <= 0:
        raise fail(call, "num_groups must be a positive integer")
    return int(g)


def infer_group_norm(call: OpCall) -> list[TensorType]:
    """X's type; X of rank >= 2 whose C divides into num_groups, scale and bias of length
    num_groups or C (where static)."""
    x, g = call.input(0), _groups(call)
    if x.shape is None:
        return [x]
    if len(x.shape) < 2:
        raise fail(call, "X must have rank >= 2")
    c = x.shape[1]
    if isinstance(c, int) and c % g:
        raise fail(call, f"{c} channels do not divide into {g} groups")
    lengths = []
    for i in (1, 2):
        t = call.input(i)
        if t.shape is None:
            continue
        if len(t.shape) != 1:
            raise fail(call, "scale and bias must be 1-D")
        d = t.shape[0]
        if isinstance(d, int) and isinstance(c, int) and d not in (g, c):
            raise fail(call, f"scale and bias must have length {g} or {c}")
        lengths.append(d)
    if len(lengths) == 2 and all(isinstance(d, int) for d in lengths) and lengths[0] != lengths[1]:
        raise fail(call, "scale and bias lengths differ")
    return [x]


def _epsilon(call: OpCall) -> float:
    return float(F32(call.attr("epsilon", 1e-5)))


def _mean(x3: Array, reference: bool) -> Array:
    """ReduceMean over axis 2 (kept), by ReduceMean's own reference or Z3 semantics."""
    spec = lookup("ReduceMean")
    assert spec is not None and spec.reference is not None and spec.z3 is not None
    dtype = TensorProto.DOUBLE if reference and x3.dtype == np.float64 else TensorProto.FLOAT
    call = OpCall("ReduceMean", [TensorType(dtype, x3.shape)], [None], {"axes": [2]})
    fn = spec.reference if reference else spec.z3
    return np.asarray(fn(call, [x3])[0])


def _normalized(call: OpCall, x: Array, eps: Any, sqrt: Any, div: Any, ref: bool) -> Array:
    """Y3 = (X3 - mean) / sqrt(mean(X3²) - mean² + eps), X3 = X as (N, G, L)."""
    g = _groups(call)
    x3 = x.reshape(x.shape[0], g, -1)
    mean = _mean(x3, ref)
    var = _mean(x3 * x3, ref) - mean * mean
    std = sqrt(var + eps)
    return div(x3 - mean, std)


def _affine(x_shape: tuple, y3: Array, scale: Array, bias: Array) -> Array:
    """scale·Y + bias, per group (length G) or per channel."""
    n, g = y3.shape[0], y3.shape[1]
    if scale.shape[0] == g:
        y = scale.reshape(1, -1, 1) * y3 + bias.reshape(1, -1, 1)
    else:
        y = scale.reshape(1, -1, 1) * y3.reshape(n, x_shape[1], -1) + bias.reshape(1, -1, 1)
    return y.reshape(x_shape)


def ref_group_norm(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The function body in numpy: float32 (and float64) in X's dtype; float16 through
    float32 (opset 21's stash type)."""
    x, scale, bias = arrays
    assert x is not None and scale is not None and bias is not None
    wide = x.astype(F32) if x.dtype == np.float16 else x
    eps = wide.dtype.type(_epsilon(call))
    with np.errstate(all="ignore"):
        y3 = _normalized(call, wide, eps, np.sqrt, np.divide, True).astype(x.dtype)
        return [_affine(x.shape, y3, scale, bias).astype(x.dtype)]


def z3_group_norm(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The function body over float32 terms (module docstring)."""
    if call.input(0).dtype not in (TensorProto.FLOAT, 0):
        raise fail(call, "modelled for float32 X only")
    x, scale, bias = arrays
    assert x is not None and scale is not None and bias is not None
    x = np.asarray(x, dtype=object)
    eps = const(_epsilon(call), x.reshape(-1)[0])
    sq = np.frompyfunc(lambda t: square_root(t, SQRT), 1, 1)
    div = np.frompyfunc(divide, 2, 1)
    y3 = np.asarray(_normalized(call, x, eps, sq, div, False), dtype=object)
    return [np.asarray(_affine(x.shape, y3, scale, bias), dtype=object)]


def group_norm_attrs(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """stash_type 1 (float32, the default) is dropped; another keeps the node opaque."""
    if int(attrs.pop("stash_type", 1)) != 1:
        return None
    return attrs


def group_norm_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """num_groups: 1, and the channel count of X when it is static (one channel a group)."""
    if name == "epsilon":
        return [1e-5]
    if name != "num_groups":
        return None
    shape = inputs[0].shape if inputs else None
    c = shape[1] if shape is not None and len(shape) >= 2 else None
    return [1, c] if isinstance(c, int) and c > 1 else [1]


GROUP_NORM = register(
    OpSpec(
        name="GroupNormalization",
        infer=infer_group_norm,
        reference=ref_group_norm,
        flops=per_element(8),
        egg=EggSig(
            attrs=(("epsilon", "f64", 1e-5), ("num_groups", "i64", None)),
            n_inputs=3,
            to_egg=group_norm_attrs,
        ),
        z3=z3_group_norm,
        input_dtypes=((TensorProto.FLOAT,),) * 3,  # the modelled domain: proofs on float32
        attr_values=group_norm_values,
        doc="GroupNormalization(X, scale, bias, num_groups, epsilon): the ONNX function body.",
    )
)
