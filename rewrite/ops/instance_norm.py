"""InstanceNormalization (opset 6+): per (n, c) normalization over the spatial dims.

Contract: InstanceNormalization(X, scale, B, epsilon=1e-5): X (N, C, ...) of rank >= 3,
scale and B of shape (C,); Y = (X - mean) / sqrt(var + epsilon) · scale + B with the mean and
the (biased) variance of each (n, c) over its W spatial elements. The output has X's type.

ORT 1.32's float32 CPU kernel (nn/instance_norm.cc) computes, per row i = n·C + c of W
contiguous elements at offset W·i (checked bit for bit against ORT here):
- mean = Eigen `sum()` of the row / W (packets from the row's first 16-byte aligned element:
  `_reduce_order.eigen_tree` with the buffer's base aligned, as ORT allocates it);
- sq = Eigen `squaredNorm()` of (x - mean): the same packets but from element 0 (an
  expression has no address, so Eigen takes no aligned head);
- inv = 1 / sqrt(sq / W + eps), cs = inv · scale[c], sh = B[c] - mean · cs, y = x · cs + sh;
each operation rounded to float32, eps = float32(epsilon). ORT has a float16 kernel too and
no double one.

Typed form: `(InstanceNormalization epsilon X scale B)`. Z3 semantics (float32 only;
`input_dtypes` keeps the prover and the self-test there): the steps above in that order,
exact in IEEE float32 (sqrt and division correctly rounded); in reals the same formula (sqrt
a UF, sq / W + eps > 0 the real domain). The reference computes float32 exactly so, float16
in float64 rounded once (not ORT's float16 path). Outside the proof: float16; a buffer not
16-byte aligned (numpy's arrays fed to ORT are).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from rewrite.ops._reduce_order import ZERO, Tree, eigen_tree
from rewrite.ops._z3 import const, divide, square_root
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, per_element
from rewrite.ops.registry import register
from rewrite.ops.unary import SQRT

Array = np.ndarray
F32 = np.float32


def infer_instance_norm(call: OpCall) -> list[TensorType]:
    """X's type; X of rank >= 3, scale and B 1-D of X's channel count (where static)."""
    x = call.input(0)
    if x.shape is None:
        return [x]
    if len(x.shape) < 3:
        raise fail(call, "X must have rank >= 3")
    c = x.shape[1]
    for i in (1, 2):
        t = call.input(i)
        if t.shape is None:
            continue
        d = t.shape[0] if len(t.shape) == 1 else None
        if len(t.shape) != 1 or (isinstance(c, int) and isinstance(d, int) and d != c):
            raise fail(call, f"scale and B must have shape ({c},)")
    return [x]


def evaluate(tree: Tree, leaves: list[Any], zero: Any) -> Any:
    """The additions of `tree` over `leaves` (numbers or terms), post-order, no recursion."""
    stack: list[tuple[Tree, bool]] = [(tree, False)]
    done: list[Any] = []
    while stack:
        t, ready = stack.pop()
        if isinstance(t, tuple) and not ready:
            stack += [(t, True), (t[1], False), (t[0], False)]
        elif isinstance(t, tuple):
            b, a = done.pop(), done.pop()
            done.append(a + b)
        else:
            done.append(zero if t is ZERO else leaves[t])
    return done[0]


def _row(row: list[Any], offset: int, num: Any, scale: Any, bias: Any) -> list[Any]:
    """ORT's kernel on one row (module docstring); `num(v)` is the number v in the row's
    kind, `num("eps")` epsilon, `num("sqrt", t)` and `num("div", (a, b))` its operations."""
    w = len(row)
    idx = list(range(w))
    aligned = (4 - offset % 4) % 4
    mean = num("div", (evaluate(eigen_tree(idx, 4, aligned), row, num(0)), num(w)))
    dev = [x - mean for x in row]
    sq = evaluate(eigen_tree(idx, 4, 0), [d * d for d in dev], num(0))
    inv = num("div", (num(1), num("sqrt", num("div", (sq, num(w))) + num("eps"))))
    cs = inv * scale
    sh = bias - mean * cs
    return [x * cs + sh for x in row]


def _rows(call: OpCall, x: Array, scale: Array, bias: Array, num: Any) -> Array:
    n, c = x.shape[:2]
    w = int(np.prod(x.shape[2:]))
    flat = list(np.asarray(x).reshape(-1))
    out: list[Any] = []
    for i in range(n * c):
        out += _row(flat[w * i : w * (i + 1)], w * i, num, scale[i % c], bias[i % c])
    res = np.empty(len(out), dtype=object)
    res[:] = out
    return res.reshape(x.shape)


def _epsilon(call: OpCall) -> float:
    return float(F32(call.attr("epsilon", 1e-5)))


def ref_instance_norm(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """float32: the kernel's steps in float32; other dtypes: float64, rounded once."""
    x, scale, bias = arrays[:3]
    assert x is not None and scale is not None and bias is not None
    if x.dtype != F32:
        return [_wide_reference(call, x, scale, bias)]
    eps = F32(_epsilon(call))

    def num(v: Any, arg: Any = None) -> Any:
        if v == "sqrt":
            return np.sqrt(arg)
        if v == "div":
            return arg[0] / arg[1]
        return eps if v == "eps" else F32(v)

    with np.errstate(all="ignore"):
        y = _rows(call, x, scale, bias, num)
    return [np.asarray(y.tolist(), dtype=F32).reshape(x.shape)]


def _wide_reference(call: OpCall, x: Array, scale: Array, bias: Array) -> Array:
    axes = tuple(range(2, x.ndim))
    x64 = x.astype(np.float64)
    shape = (-1, *[1] * (x.ndim - 2))
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + _epsilon(call)) * scale.astype(np.float64).reshape(shape)
    return (y + bias.astype(np.float64).reshape(shape)).astype(x.dtype)


def z3_instance_norm(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The kernel's steps over float32 (or real) terms (module docstring)."""
    if call.input(0).dtype not in (TensorProto.FLOAT, 0):
        raise fail(call, "modelled for float32 X only")
    x, scale, bias = arrays[:3]
    assert x is not None and scale is not None and bias is not None
    like = np.asarray(x).reshape(-1)[0]

    def num(v: Any, arg: Any = None) -> Any:
        if v == "sqrt":
            return square_root(arg, SQRT)
        if v == "div":  # reals: the divisor nonzero in the domain
            return divide(*arg)
        return const(_epsilon(call) if v == "eps" else v, like)

    return [_rows(call, np.asarray(x, dtype=object), scale, bias, num)]


INSTANCE_NORM = register(
    OpSpec(
        name="InstanceNormalization",
        infer=infer_instance_norm,
        reference=ref_instance_norm,
        flops=per_element(8),
        egg=EggSig(attrs=(("epsilon", "f64", 1e-5),), n_inputs=3),
        z3=z3_instance_norm,
        input_dtypes=((TensorProto.FLOAT,),) * 3,  # the modelled domain: proofs on float32
        doc="InstanceNormalization(X, scale, B, epsilon): ORT's float32 kernel's order.",
    )
)
