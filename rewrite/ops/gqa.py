"""ORT's GroupQueryAttention contrib op (domain com.microsoft), its simplest CPU form.

Contract (ORT 1.32's CPU kernel, float32): GroupQueryAttention(query (B,S,N·H), key
(B,S,Nkv·H), value (B,S,Nkv·H)[, past_key, past_value (B,Nkv,0,H)], seqlens_k (B,) int32,
total_sequence_length (scalar or (1,)) int32) with N = num_heads query heads and
Nkv = kv_num_heads key/value heads, N a multiple of Nkv (query head h reads key/value head
h' = h // (N/Nkv)) and H a multiple of 8 (the kernel's): per batch b, head h, position i,
  out[b, i, h·H:(h+1)·H] = Σ_j softmax_j(scale·Q[b,h,i]·K[b,h',j]) · V[b,h',j],  j in [0, i]
(causal: query i sees the keys up to its own position, the later ones get probability 0;
Q/K/V in BNSH), scale = the `scale` attribute, or 1/sqrt(H) in float32 when it is 0.
A past of P > 0 is not typed: a node without the present_key output does not concatenate the
past (ORT 1.32 reads keys beyond the new ones: garbage, NaN measured). With the present outputs
ORT matches the same formula over concat(past, new) and j in [0, P + i] (measured), but those
nodes have 3 outputs (below); `gqa` is written for that general form and refuses P > 0.

The kernel reads the lengths from seqlens_k (each batch's total length - 1) rather than from
the shapes. The typed contract covers seqlens_k[b] = P + S - 1 for every b and
total_sequence_length = P + S (no padding in the batch); other values (a padded batch) are
recorded as undefined (`_z3.require`) and the numpy reference refuses them, although ORT
computes a padded attention there: a rule may assume its left side's GQA sees consistent lengths.

Typed form: `(ms_GroupQueryAttention num_heads kv_num_heads scale query key value past_key
past_value seqlens_k total_sequence_length)` (past_key/past_value may be `(Absent)`). Only a
node with exactly 7 inputs listed and ONE output is typed: present_key/present_value (outputs 1,
2) have no typed form, so a node declaring them, even unused or with empty names, stays opaque
(the encoder types single-output nodes only). Opaque too: packed QKV (key/value omitted), the
inputs after total_sequence_length (cos/sin caches, position_ids, attention_bias, head_sink,
...), and any attribute off its default: do_rotary (0), local_window_size (-1), softcap (0),
smooth_softmax (-1 or 0), causal (1), qk_output (0), sliding_window_cache (0), k/v_quant_type
("NONE"); rotary_interleaved is ignored when do_rotary is 0.

Z3 semantics: the formula above, exact in reals with exp the `EXP` UF (as MultiHeadAttention's,
sharing `_attention_core`'s scale and softmax). Not bit-exact: ORT runs Q·Kᵀ as a GEMM with
alpha = scale over the first total_seqlen keys, then a softmax per row over the causal prefix,
then probs·V as another GEMM. The tests bound the difference to ORT (rtol 2e-5, atol 1e-6).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops import _z3
from rewrite.ops._attention_core import _scale, _softmax, _split
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, Shape, TensorType, fail
from rewrite.ops.registry import register
from rewrite.ops.unary import TRANSCENDENTAL

MS = "com.microsoft"
Array = np.ndarray
F32, I32 = TensorProto.FLOAT, TensorProto.INT32

_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "do_rotary": (0,),
    "local_window_size": (-1,),
    "softcap": (0.0,),
    "smooth_softmax": (-1, 0),
    "causal": (1,),
    "qk_output": (0,),
    "sliding_window_cache": (0,),
    "k_quant_type": ("NONE",),
    "v_quant_type": ("NONE",),
}


def _heads(call: OpCall) -> tuple[int, int]:
    """(num_heads, kv_num_heads), checked: both positive, the first a multiple of the second."""
    n, nkv = int(call.attr("num_heads", 0)), int(call.attr("kv_num_heads", 0))
    if n <= 0 or nkv <= 0 or n % nkv:
        raise fail(call, f"num_heads {n} must be a positive multiple of kv_num_heads {nkv}")
    return n, nkv


def _agree(call: OpCall, a: Dim, b: Dim, what: str) -> None:
    if isinstance(a, int) and isinstance(b, int) and a != b:
        raise fail(call, f"{what}: {a} != {b}")


def _shape(call: OpCall, i: int, rank: int, what: str) -> Shape | None:
    shape = call.input(i).shape
    if shape is not None and len(shape) != rank:
        raise fail(call, f"{what} must be {rank}-D (the typed form)")
    return shape


def _infer(call: OpCall) -> list[TensorType]:
    """output (B, S, N·H) in query's dtype (float32 only: the typed form)."""
    n, nkv = _heads(call)
    q, k, v = (_shape(call, i, 3, w) for i, w in enumerate(("query", "key", "value")))
    if not (call.has_input(1) and call.has_input(2) and call.has_input(5) and call.has_input(6)):
        raise fail(call, "key, value, seqlens_k and total_sequence_length are required")
    if call.has_input(3) != call.has_input(4):
        raise fail(call, "past_key and past_value must be given together")
    if any(call.input(i).dtype not in (0, F32) for i in range(5) if call.has_input(i)):
        raise fail(call, "float32 only (the typed form)")
    if any(call.input(i).dtype not in (0, I32) for i in (5, 6)):
        raise fail(call, "seqlens_k and total_sequence_length must be int32")
    if q is None or k is None or v is None:
        return [TensorType(call.input(0).dtype, None)]
    if isinstance(q[2], int) and q[2] % n:
        raise fail(call, f"hidden size {q[2]} is not a multiple of num_heads {n}")
    h = q[2] // n if isinstance(q[2], int) else None
    for x, what in ((k, "key"), (v, "value")):
        _agree(call, x[0], q[0], f"{what} batch")
        _agree(call, x[1], q[1], f"{what} sequence length")
        _agree(call, x[2], None if h is None else nkv * h, f"{what} hidden size")
    if isinstance(h, int) and h % 8:
        raise fail(call, f"head size {h} is not a multiple of 8 (ORT's kernel)")
    for i in (3, 4):
        if call.has_input(i) and (p := _shape(call, i, 4, "past")) is not None:
            for got, want, what in zip(
                p, (q[0], nkv, 0, h), ("batch", "heads", "len", "head"), strict=True
            ):
                _agree(call, got, want, f"past {what} (the typed form has no past)")
    if (sl := _shape(call, 5, 1, "seqlens_k")) is not None:
        _agree(call, sl[0], q[0], "seqlens_k length")
    total = call.input(6).shape
    if total is not None and total not in ((), (1,)):
        raise fail(call, "total_sequence_length must be a scalar")
    return [TensorType(call.input(0).dtype, (q[0], q[1], q[2]))]


def _lengths(call: OpCall, seqlens: Array, total: Array, past: int, s: int) -> None:
    """The typed contract's lengths: seqlens_k[b] = P + S - 1, total = P + S (module doc);
    `require`d of terms, checked (a ShapeError otherwise) on numbers."""
    conds = [(x, past + s - 1) for x in seqlens.reshape(-1)]
    conds += [(x, past + s) for x in total.reshape(-1)]
    for x, want in conds:
        if z3.is_expr(x):
            _z3.require(x == _z3.const(want, x))
        elif int(x) != want:
            raise fail(call, f"seqlens_k/total_sequence_length {int(x)} != {want} (padding)")


def gqa(call: OpCall, arrays: list[Array | None], like: Any) -> Array:
    """The output (B, S, N·H) on the 7 inputs (numbers, or object arrays of terms)."""
    q, k, v, pk, pv, seqlens, total = (list(arrays) + [None] * 7)[:7]
    assert q is not None and k is not None and v is not None
    assert seqlens is not None and total is not None
    n, nkv = _heads(call)
    qh, kh, vh = _split(q, n), _split(k, nkv), _split(v, nkv)
    if pk is not None and pv is not None:
        kh, vh = np.concatenate([pk, kh], axis=2), np.concatenate([pv, vh], axis=2)
    b, _, s, h = qh.shape
    past = kh.shape[2] - s
    if past:
        raise fail(call, "a past of P > 0 is not in the typed form (module docstring)")
    _lengths(call, np.asarray(seqlens), np.asarray(total), past, s)
    scale, group = _scale(call, h), n // nkv
    out = np.empty((b, s, n * h), dtype=q.dtype)
    for bi, hi, i in np.ndindex(b, n, s):
        keys, values = kh[bi, hi // group, : past + i + 1], vh[bi, hi // group, : past + i + 1]
        scores = keys @ qh[bi, hi, i]
        scores = _z3.vmap(lambda t: t * scale, scores) if q.dtype == object else scores * scale
        out[bi, i, hi * h : (hi + 1) * h] = _softmax(scores) @ values
    return out


def _reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """`gqa` in float64 on the float inputs, rounded to the input's dtype once."""
    wide = [
        None if a is None else a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays
    ]
    return [gqa(call, wide, None).astype(arrays[0].dtype)]  # type: ignore[union-attr]


def _semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """`gqa` over Z3 terms (the module docstring)."""
    if call.input(0).dtype not in (0, F32):
        raise fail(call, "defined for float32 only (ORT's CPU kernel)")
    x = arrays[0]
    assert x is not None
    return [np.asarray(gqa(call, list(arrays), x.flat[0]), dtype=object)]


def _flops(call: OpCall, outputs: list[TensorType]) -> float:
    """As attention.py's: 2·(H + H) per score and exp + 3 more, over the B·N·S·T scores."""
    q, pk = call.input(0).shape, call.input(3).shape if call.has_input(3) else (0, 0, 0, 0)
    n = int(call.attr("num_heads", 1))
    if q is None or pk is None or len(q) != 3 or len(pk) != 4:
        return 0.0
    dims = (q[0], q[1], q[2], pk[2])
    if not all(isinstance(d, int) for d in dims) or n <= 0:
        return 0.0
    b, s, d, p = (int(x) for x in dims)  # type: ignore[arg-type]
    scores = b * n * s * (p + s)
    return float(2 * scores * 2 * (d // n) + (TRANSCENDENTAL + 3) * scores)


def _to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """Default-valued attributes dropped; any other value (module docstring): opaque."""
    for name, allowed in _DEFAULTS.items():
        value = attrs.pop(name, allowed[0])
        if isinstance(value, bytes):
            value = value.decode()
        if value not in allowed:
            return None
    attrs.pop("rotary_interleaved", None)  # no effect: do_rotary is 0 here
    return attrs


def _attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Proof values: one query head per kv head, scale 0 (1/sqrt(H)) and 0.5."""
    if name in ("num_heads", "kv_num_heads"):
        return [1]
    if name == "scale":
        return [0.0, 0.5]
    return None


GROUP_QUERY_ATTENTION = register(
    OpSpec(
        "GroupQueryAttention",
        _infer,
        _reference,
        _flops,
        domain=MS,
        egg=EggSig(
            attrs=(
                ("num_heads", "i64", None),
                ("kv_num_heads", "i64", None),
                ("scale", "f64", 0.0),
            ),
            n_inputs=7,
            optional=4,
            to_egg=_to_egg,
            from_egg=dict,
        ),
        z3=_semantics,
        input_dtypes=(None, None, None, None, None, (I32,), (I32,)),
        attr_values=_attr_values,
        doc="GroupQueryAttention: causal softmax(scale·Q·Kᵀ)·V, kv heads shared by query heads",
    )
)


def _self_test_values() -> list[tuple[dict[str, Any], list[Array | None]]]:
    """Input sets of the typed form (`verify/selftest_listed.py`): past omitted, and empty."""
    rng = np.random.default_rng(0)

    def f(*shape: int) -> Array:
        return (rng.standard_normal(shape) * 2).astype(np.float32)

    def lengths(b: int, t: int) -> list[Array]:
        return [np.full(b, t - 1, np.int32), np.array(t, np.int32)]

    q, k, v = f(2, 3, 16), f(2, 3, 8), f(2, 3, 8)
    q4, k4, v4, past = f(2, 3, 32), f(2, 3, 16), f(2, 3, 16), f(2, 2, 0, 8)
    return [
        ({"num_heads": 2, "kv_num_heads": 1}, [q, k, v, None, None, *lengths(2, 3)]),
        (
            {"num_heads": 4, "kv_num_heads": 2, "scale": 0.5},
            [q4, k4, v4, past, past, *lengths(2, 3)],
        ),
    ]


SELF_TEST_VALUES = {(MS, "GroupQueryAttention"): _self_test_values()}
