"""ORT's RotaryEmbedding (domain com.microsoft; CPU kernel contrib_ops/cpu/bert/rotary_embedding.cc,
MLAS's `MlasRotaryEmbedOneRow`, AVX2 on x86-64).

RotaryEmbedding(input, position_ids, cos_cache, sin_cache): output has input's type.
input is (batch, seq, hidden) with hidden = num_heads·head_size (head_size = hidden / num_heads
when num_heads is given, else 2·cos_cache.shape[1]) or (batch, heads, seq, head_size).
position_ids is int64, (batch, seq) (position of row (b, s): position_ids[b, s]) or one
element p0 (position p0 + s). cos_cache and sin_cache are (max_pos, rotary_dim / 2) with
rotary_dim = rotary_embedding_dim, or head_size when that is 0; every position must be in
[0, max_pos) (ORT fails the run otherwise). Per (b, s, head) row x of head_size, with
c = cos_cache[pos], s = sin_cache[pos], for pair k < rotary_dim / 2 whose elements are
(a, b) = (x[k], x[k + rotary_dim/2]) (interleaved = 0) or (x[2k], x[2k+1]) (interleaved = 1):
    fma form:   o1 = fma(a, c[k], -(b·s[k])),  o2 = fma(a, s[k], b·c[k])
    plain form: o1 = a·c[k] - b·s[k],           o2 = a·s[k] + b·c[k]   (every product rounded)
written back where (a, b) came from; x[rotary_dim:] is copied. Which form (float32, measured
against ORT 1.32's CPU kernel here, AVX2 + FMA): every pair when interleaved = 0; when
interleaved = 1, the pairs of the 16-element blocks and the first pair after them use the
fma form, the later pairs of the tail the plain form. `scale` and `is_packed_batching` only
matter where ORT refuses (seq > max_pos without packed batching) or on other providers.

Typed: float32 (the reference and the Z3 semantics are that order, bit for bit; ORT's schema
refuses float64: the reference's float64 inputs, which only the self-test gives, use the plain
form in float64); position_ids may be a computed input: the Z3 semantics selects each cache
row with an `If` chain over the position term, defined only for positions in range
(`_z3.require`). A float16 node is encoded typed and written back as it was, but has no
reference or Z3 semantics (both refuse it: its order is not checked against ORT).
Outside the bit-exact claim: CPUs without AVX2/FMA (MLAS's other kernels).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.errors import ShapeError
from rewrite.ops import _z3
from rewrite.ops._z3 import RNE
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail
from rewrite.ops.registry import register
from rewrite.ops.rotary_shapes import Layout, check, layout

MS = "com.microsoft"
Array = np.ndarray
_KERNELS = (0, TensorProto.FLOAT, TensorProto.FLOAT16)
"""Data dtypes ORT's CPU kernel has."""
BLOCK = 16
"""Elements per interleaved AVX2 block (8 pairs): the fma form's extent before the tail."""


def fma_pair(k: int, rotary_dim: int, interleaved: bool) -> bool:
    """Whether pair k is computed in the fma form (module docstring)."""
    if not interleaved:
        return True
    return k <= (rotary_dim // BLOCK) * (BLOCK // 2)


def infer(call: OpCall) -> list[TensorType]:
    """Output: input's type; the checks ORT makes (`rotary_shapes.check`, the kernels'
    dtypes)."""
    if any(call.input(i).dtype not in _KERNELS for i in (0, 2, 3)):
        raise fail(call, "ORT's kernel takes float32 or float16 data")
    check(call)
    return [call.input(0)]


def _rows(x: Array, lay: Layout) -> Array:
    """input as (batch, seq, heads, head_size) (a view)."""
    if len(x.shape) == 4:
        return x.transpose(0, 2, 1, 3)
    return x.reshape(lay.batch, lay.seq, lay.heads, lay.head_size)


def _unrows(y: Array, shape: tuple[int, ...]) -> Array:
    return y.transpose(0, 2, 1, 3) if len(shape) == 4 else y.reshape(shape)


def _positions(call: OpCall, pos: Array, lay: Layout) -> list[list[Any]]:
    """The position of each (b, s): numbers or Z3 terms, as ORT reads position_ids."""
    if pos.size == 1 and pos.ndim < 2:
        p0 = pos.reshape(-1)[0]
        return [[p0 + s for s in range(lay.seq)] for _ in range(lay.batch)]
    return [[pos[b, s] for s in range(lay.seq)] for b in range(lay.batch)]


def _pair_index(k: int, half: int, interleaved: bool) -> tuple[int, int]:
    return (2 * k, 2 * k + 1) if interleaved else (k, k + half)


def _fma32(a: Array, b: Array, c: Array) -> Array:
    """float32 fma(a, b, c), correctly rounded: the float64 product is exact, the float64 sum
    is corrected (TwoSum) where rounding it twice could differ from rounding it once."""
    p = a.astype(np.float64) * b.astype(np.float64)
    cc = c.astype(np.float64)
    with np.errstate(all="ignore"):
        s = p + cc
        bb = s - p
        err = (p - (s - bb)) + (cc - bb)
        down = s.astype(np.float32).astype(np.float64)
        up = np.nextafter(s.astype(np.float32), np.where(s > down, np.inf, -np.inf))
        tie = np.isfinite(err) & (err != 0) & (s - down == up.astype(np.float64) - s)
        s = np.where(tie, np.nextafter(s, s + err), s)
        return s.astype(np.float32)


def _rotate_ref(a: Array, b: Array, c: Array, s: Array, fma: bool) -> tuple[Array, Array]:
    with np.errstate(all="ignore"):
        if fma and a.dtype == np.float32:
            return _fma32(a, c, -(b * s)), _fma32(a, s, b * c)
        return a * c - b * s, a * s + b * c


def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x, pos, cos, sin = arrays[0], arrays[1], arrays[2], arrays[3]
    assert x is not None and pos is not None and cos is not None and sin is not None
    if x.dtype not in (np.float32, np.float64):
        raise fail(call, f"{x.dtype} is not typed (float32 only)")
    lay = layout(call)
    rows = _rows(x, lay)
    out = rows.copy()
    half = lay.rotary_dim // 2
    for b, line in enumerate(_positions(call, np.asarray(pos), lay)):
        for s, p in enumerate(line):
            if not 0 <= int(p) < cos.shape[0]:
                raise fail(call, f"position {int(p)} outside the cache's {cos.shape[0]} rows")
            c, sn = cos[int(p)].astype(x.dtype), sin[int(p)].astype(x.dtype)
            for k in range(half):
                i, j = _pair_index(k, half, lay.interleaved)
                fma = fma_pair(k, lay.rotary_dim, lay.interleaved)
                o1, o2 = _rotate_ref(rows[b, s, :, i], rows[b, s, :, j], c[k], sn[k], fma)
                out[b, s, :, i], out[b, s, :, j] = o1, o2
    return [np.ascontiguousarray(_unrows(out, x.shape))]


def _cache_row(call: OpCall, cache: Array, p: Any) -> Array:
    """cache[p] for a number or an int64 term p (an `If` chain; p outside the rows is
    undefined: ORT fails the run)."""
    n = cache.shape[0]
    if not z3.is_expr(p):
        if not 0 <= int(p) < n:
            raise fail(call, f"position {int(p)} outside the cache's {n} rows")
        return cache[int(p)]
    _z3.require(z3.And(p >= 0, p < n))
    out = np.empty(cache.shape[1:], dtype=object)
    for k in range(cache.shape[1]):
        term = cache[n - 1, k]
        for r in range(n - 2, -1, -1):
            term = z3.If(p == r, cache[r, k], term)
        out[k] = term
    return out


def _rotate_z3(a: Any, b: Any, c: Any, s: Any, fma: bool) -> tuple[Any, Any]:
    if not z3.is_fp(a):
        return a * c - b * s, a * s + b * c
    if fma:
        o1 = z3.fpFMA(RNE, a, c, z3.fpNeg(z3.fpMul(RNE, b, s)))
        return o1, z3.fpFMA(RNE, a, s, z3.fpMul(RNE, b, c))
    o1 = z3.fpSub(RNE, z3.fpMul(RNE, a, c), z3.fpMul(RNE, b, s))
    return o1, z3.fpAdd(RNE, z3.fpMul(RNE, a, s), z3.fpMul(RNE, b, c))


def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The reference's order over Z3 terms (IEEE: fpFMA / rounded products; reals: exact)."""
    x, pos, cos, sin = arrays[0], arrays[1], arrays[2], arrays[3]
    assert x is not None and pos is not None and cos is not None and sin is not None
    if any(call.input(i).dtype not in (0, TensorProto.FLOAT) for i in (0, 2, 3)):
        raise fail(call, "only float32 is typed")
    lay = layout(call)
    rows = _rows(np.asarray(x, dtype=object), lay)
    out = rows.copy()
    half = lay.rotary_dim // 2
    for b, line in enumerate(_positions(call, np.asarray(pos, dtype=object), lay)):
        for s, p in enumerate(line):
            c, sn = _cache_row(call, cos, p), _cache_row(call, sin, p)
            for k in range(half):
                i, j = _pair_index(k, half, lay.interleaved)
                fma = fma_pair(k, lay.rotary_dim, lay.interleaved)
                for h in range(lay.heads):
                    o1, o2 = _rotate_z3(rows[b, s, h, i], rows[b, s, h, j], c[k], sn[k], fma)
                    out[b, s, h, i], out[b, s, h, j] = o1, o2
    return [_unrows(out, x.shape)]


def flops(call: OpCall, outputs: list[TensorType]) -> float:
    """6 per rotated pair (4 products, 2 sums): 3 per rotated element."""
    n = outputs[0].numel if outputs else None
    try:
        lay = layout(call)
    except ShapeError:  # a shape ORT refuses, or not static: no count
        return 0.0
    if n is None or not lay.head_size:
        return 0.0
    return 3.0 * n * lay.rotary_dim / lay.head_size


def attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """The layouts the typed form covers: both pairings, heads from the input."""
    if name == "interleaved":
        return [0, 1]
    if name in ("rotary_embedding_dim", "is_packed_batching"):
        return [0]
    if name == "scale":
        return [1.0]
    return None


_INT64 = (TensorProto.INT64,)

register(
    OpSpec(
        "RotaryEmbedding",
        infer,
        reference,
        flops,
        domain=MS,
        egg=EggSig(
            attrs=(
                ("interleaved", "i64", 0),
                ("is_packed_batching", "i64", 0),
                ("num_heads", "i64", 0),
                ("rotary_embedding_dim", "i64", 0),
                ("scale", "f64", 1.0),
            ),
            n_inputs=4,
        ),
        z3=semantics,
        input_dtypes=(None, _INT64, None, None),
        attr_values=attr_values,
        doc="RotaryEmbedding(x, position_ids, cos, sin): rotate pairs by the cached angles",
    )
)


def _self_test_values() -> list[tuple[dict[str, Any], list[Array | None]]]:
    """Input sets whose shapes agree (`verify.selftest_listed`): both pairings, 3-D and 4-D
    input, a partial rotary dim, both position_ids forms, normal values."""
    rng = np.random.default_rng(11)

    def f(*shape: int) -> Array:
        return rng.standard_normal(shape).astype(np.float32)

    rows = np.array([[3, 0, 4]], dtype=np.int64)
    out: list[tuple[dict[str, Any], list[Array | None]]] = []
    for inter in (0, 1):
        out.append(({"num_heads": 2, "interleaved": inter}, [f(1, 3, 8), rows, f(5, 2), f(5, 2)]))
        out.append(
            (
                {"interleaved": inter},
                [f(1, 2, 3, 18), np.array([1], dtype=np.int64), f(5, 9), f(5, 9)],
            )
        )
        attrs = {"num_heads": 1, "rotary_embedding_dim": 4, "interleaved": inter}
        out.append((attrs, [f(1, 3, 6), rows, f(5, 2), f(5, 2)]))
    return out


SELF_TEST_VALUES = {(MS, "RotaryEmbedding"): _self_test_values()}
