"""Einsum (opset 12+) in its two-operand contraction forms (attention's "bhqd,bhkd->bhqk").

Contract: Einsum(A, B, equation) with an explicit equation "<a>,<b>-><out>" of letters (no
"...", no repeated letter within one term) in which every letter is a batch letter (in A, B
and the output), a free letter (in one operand and the output) or a contracted letter (in
both operands, not the output); dims of one letter agree. The output has A's dtype and the
output term's dims: out[o] = Σ over the contracted letters of A[a] · B[b]. ORT 1.32's CPU
kernel (einsum_auxiliary_ops) computes such an equation as transposes, reshapes and one
batched MatMul, for float, double, int32, int64 and float16 (products and sums in float32,
the result rounded to float16: checked against ORT).

Typed form: `(Einsum equation A B)`, the equation a String attribute without spaces
(`to_egg`); anything else (one or three operands, implicit output, "...", a diagonal or a
letter summed within one operand) is refused by `to_egg`/`infer` and stays opaque.
Z3 semantics: the same transposes and reshapes, then per output element the chain MLAS's
GEMM kernels compute on x86-64 with FMA (AVX2/AVX-512; checked against ORT here, float32 and
float64): acc = +0, then acc = fma(a_j, b_j, acc) for j = 0 .. K-1 (one rounding per step).
Exact in IEEE float32/float64 for K <= 256 (MLAS's SGEMM K block; a longer K is summed per
block and the blocks added, outside the exact claim), for integers (bit-vector wrap, any
order) and in reals. float16: the terms widened to float32, the chain in float32, each
output rounded to float16, as ORT does (half products are exact in float32, so FMA or not
agree). Outside the proof: CPUs without FMA (MLAS's SSE kernels round each product).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._z3 import RNE, const
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, TensorType, fail
from rewrite.ops.cumsum import to_sort
from rewrite.ops.registry import register

Array = np.ndarray


@dataclass(frozen=True)
class Contraction:
    """A parsed equation: the terms, and the letters by role (in A's order)."""

    a: str
    b: str
    out: str
    batch: str
    free_a: str
    free_b: str
    summed: str


def parse(equation: str) -> Contraction | None:
    """The contraction an equation spells, or None when it is not one of the typed forms."""
    eq = equation.replace(" ", "")
    if eq.count("->") != 1:
        return None
    ins, out = eq.split("->")
    terms = ins.split(",")
    if len(terms) != 2 or not all(t.isalpha() for t in terms) or not (out.isalpha() or not out):
        return None
    a, b = terms
    if any(len(set(t)) != len(t) for t in (a, b, out)) or not set(out) <= set(a) | set(b):
        return None
    if (set(a) ^ set(b)) - set(out):  # a letter summed within one operand
        return None
    batch = "".join(c for c in a if c in b and c in out)
    free_a = "".join(c for c in a if c not in b)
    free_b = "".join(c for c in b if c not in a)
    summed = "".join(c for c in a if c in b and c not in out)
    return Contraction(a, b, out, batch, free_a, free_b, summed)


def _contraction(call: OpCall) -> Contraction:
    eq = call.attr("equation")
    c = parse(eq) if isinstance(eq, str) else None
    if c is None:
        raise fail(call, f"equation {eq!r} is not a two-operand contraction")
    return c


def _letter_dims(call: OpCall, c: Contraction, a: tuple, b: tuple) -> dict[str, Dim]:
    """Each letter's dim (static where either operand knows it); static mismatches fail."""
    if len(a) != len(c.a) or len(b) != len(c.b):
        raise fail(call, f"operand ranks do not fit {c.a},{c.b}")
    dims: dict[str, Dim] = {}
    for letter, d in [*zip(c.a, a, strict=True), *zip(c.b, b, strict=True)]:
        old = dims.get(letter)
        if isinstance(old, int) and isinstance(d, int) and old != d:
            raise fail(call, f"letter {letter!r} has dims {old} and {d}")
        if old is None or (not isinstance(old, int) and isinstance(d, int)):
            dims[letter] = d
    return dims


def infer_einsum(call: OpCall) -> list[TensorType]:
    """The output term's dims, A's dtype (the operands' dtypes must agree)."""
    a, b = call.input(0), call.input(1)
    if call.has_input(2) or not call.has_input(1):
        raise fail(call, "only two operands are typed")
    if a.dtype and b.dtype and a.dtype != b.dtype:
        raise fail(call, "operand dtypes differ")
    c = _contraction(call)
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype or b.dtype, None)]
    dims = _letter_dims(call, c, tuple(a.shape), tuple(b.shape))
    return [TensorType(a.dtype or b.dtype, tuple(dims[x] for x in c.out))]


def contract(c: Contraction, a: Array, b: Array, mm: Any = np.matmul) -> Array:
    """A·B as ORT computes it: A to (batch, free_a, summed), B to (batch, summed, free_b),
    one batched matmul `mm`, then the output term's order (numbers or Z3 terms)."""
    dims = {x: a.shape[i] for i, x in enumerate(c.a)} | {x: b.shape[i] for i, x in enumerate(c.b)}
    at = a.transpose([c.a.index(x) for x in c.batch + c.free_a + c.summed])
    bt = b.transpose([c.b.index(x) for x in c.batch + c.summed + c.free_b])

    def size(s: str) -> int:
        return prod(dims[x] for x in s)

    nb, m, k, n = size(c.batch), size(c.free_a), size(c.summed), size(c.free_b)
    y = mm(at.reshape(nb, m, k), bt.reshape(nb, k, n))
    order = c.batch + c.free_a + c.free_b
    y = y.reshape([dims[x] for x in order])
    return y.transpose([order.index(x) for x in c.out])


def ref_einsum(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    if a.dtype == np.float16:  # ORT's float16 kernel computes in float32
        a, b = a.astype(np.float32), b.astype(np.float32)
    with np.errstate(all="ignore"):
        y = np.asarray(contract(_contraction(call), a, b))
    return [y.astype(np.float16) if arrays[0].dtype == np.float16 else y]


def z3_einsum(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """`contract` over object arrays of terms (module docstring)."""
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    c = _contraction(call)
    _letter_dims(call, c, a.shape, b.shape)
    first = a.reshape(-1)[0] if a.size else None
    if z3.is_fp(first) and first.sort() == z3.Float16():  # computed in float32
        y = contract(c, to_sort(a, z3.Float32()), to_sort(b, z3.Float32()), fma_matmul)
        return [to_sort(np.asarray(y, dtype=object), z3.Float16())]
    return [np.asarray(contract(c, a, b, fma_matmul), dtype=object)]


def fma_matmul(a: Array, b: Array) -> Array:
    """(nb, m, k) @ (nb, k, n) over terms: per element acc = 0, then acc = fma(a, b, acc) in
    k order (IEEE: one rounding per step; reals and bit-vectors: acc + a·b)."""
    nb, m, k = a.shape
    n = b.shape[2]
    out = np.empty((nb, m, n), dtype=object)
    for t, i, j in np.ndindex(nb, m, n):
        acc: Any = None
        for s in range(k):
            x, y = a[t, i, s], b[t, s, j]
            if acc is None:
                acc = const(0, x)
            acc = z3.fpFMA(RNE, x, y, acc) if z3.is_fp(x) else acc + x * y
        out[t, i, j] = acc if acc is not None else 0
    return out


def einsum_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """2 per output element per contracted element (0 when a dim is not static)."""
    a, n = call.input(0), outputs[0].numel if outputs else None
    eq = call.attr("equation")
    c = parse(eq) if isinstance(eq, str) else None
    if c is None or a.shape is None or n is None:
        return 0.0
    k = [a.shape[c.a.index(x)] for x in c.summed]
    return 2.0 * n * prod(k) if all(isinstance(d, int) for d in k) else 0.0  # type: ignore[arg-type]


def einsum_attrs(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """The equation without spaces when it is a typed form, else None (opaque)."""
    eq = attrs.get("equation")
    eq = eq.decode() if isinstance(eq, bytes) else eq
    if not isinstance(eq, str) or parse(eq) is None:
        return None
    return {**attrs, "equation": eq.replace(" ", "")}


_EQUATIONS = {
    (4, 4): ["bhqd,bhkd->bhqk", "bhqk,bhkd->bhqd"],
    (3, 3): ["bij,bjk->bik", "bik,bjk->bij"],
    (2, 2): ["ij,jk->ik", "ij,kj->ik"],
    (3, 2): ["bsd,dh->bsh"],
}


def einsum_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Attention's and batched matmul's equations that fit the operands' ranks."""
    if name != "equation":
        return None
    ranks = tuple(t.rank for t in inputs[:2])
    return list(_EQUATIONS.get(ranks, []))  # type: ignore[arg-type]


EINSUM = register(
    OpSpec(
        name="Einsum",
        infer=infer_einsum,
        reference=ref_einsum,
        flops=einsum_flops,
        egg=EggSig(attrs=(("equation", "String", None),), n_inputs=2, to_egg=einsum_attrs),
        z3=z3_einsum,
        attr_values=einsum_values,
        doc="Einsum(A, B, equation): two-operand contractions (batched matmul forms).",
    )
)
