"""ORT's GroupQueryAttention contrib op (domain com.microsoft), its simplest CPU form, with and
without its KV-cache outputs.

Contract (ORT 1.32's CPU kernel, float32): GroupQueryAttention(query (B,S,N·H), key
(B,S,Nkv·H), value (B,S,Nkv·H)[, past_key, past_value (B,Nkv,P,H)], seqlens_k (B,) int32,
total_sequence_length (scalar or (1,)) int32) -> output[, present_key, present_value] with
N = num_heads query heads and Nkv = kv_num_heads key/value heads, N a multiple of Nkv (query
head h reads key/value head h' = h // (N/Nkv)) and H a multiple of 8 (the kernel's). With
K' = concat(past_key, K) and V' = concat(past_value, V) along the sequence axis (Q/K/V in
BNSH), per batch b, head h, position i:
  out[b, i, h·H:(h+1)·H] = Σ_j softmax_j(scale·Q[b,h,i]·K'[b,h',j]) · V'[b,h',j],  j in [0, P+i]
(causal: query i sees the past and the new keys up to its own position, the later ones get
probability 0), scale = the `scale` attribute, or 1/sqrt(H) in float32 when it is 0;
present_key = K' and present_value = V' (B, Nkv, P+S, H), copies (bit-exact, measured).
ORT refuses B > 1 when S > 1 and P > 0 (so does `infer`).

Two typed forms:
- one output, `(ms_GroupQueryAttention num_heads kv_num_heads scale query key value past_key
  past_value seqlens_k total_sequence_length)` (past_key/past_value may be `(Absent)`): a node
  with exactly 7 inputs listed and ONE output, P = 0 only. A node without the present outputs
  does not concatenate a past (ORT 1.32 reads keys beyond the new ones: garbage, NaN
  measured), so P > 0 is refused (`infer`, the reference and the semantics).
- `(ms_GroupQueryAttentionPart num_heads kv_num_heads scale index query ... )`, output `index`
  (0, 1, 2) of a node declaring present_key and present_value (`ops.parts`; ORT fails when
  only one is), any P. Output 0 of such a node is not bit-identical to the one-output node's
  for S > 1 (4.8e-7 apart measured, both within the bound below): a node declaring the
  present outputs, used or not, is typed as parts, and written back with all three.
A node listing the present outputs with empty names stays opaque.

The kernel reads the lengths from seqlens_k (each batch's total length - 1) rather than from
the shapes. The typed contract covers seqlens_k[b] = P + S - 1 for every b and
total_sequence_length = P + S (no padding in the batch, past_key exactly the past: no shared
or larger buffer); other values (a padded batch, a buffer longer than the past, where ORT's
present is max(P, total) long) are recorded as undefined (`_z3.require`) and the numpy
reference refuses them, although ORT computes there: a rule may assume its left side's GQA
sees consistent lengths.

Opaque: packed QKV (key/value omitted), the inputs after total_sequence_length (cos/sin caches,
position_ids, attention_bias, head_sink, ...), output_qk (output 3), and any attribute off its
default: do_rotary (0), local_window_size (-1), softcap (0), smooth_softmax (-1 or 0), causal
(1), qk_output (0), sliding_window_cache (0), k/v_quant_type ("NONE"); rotary_interleaved is
ignored when do_rotary is 0.

Z3 semantics: the formula above, exact in reals with exp the `EXP` UF (as MultiHeadAttention's,
sharing `_attention_core`'s scale and softmax), the present outputs the concatenated terms.
Output 0 is not bit-exact: ORT runs Q·Kᵀ as a GEMM with alpha = scale over the first
total_seqlen keys, then a softmax per row over the causal prefix, then probs·V as another
GEMM. The tests bound the difference to ORT (rtol 2e-5, atol 1e-6).
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


def _check_inputs(call: OpCall) -> None:
    """The inputs the typed forms need, in their dtypes (module docstring)."""
    _heads(call)
    if not (call.has_input(1) and call.has_input(2) and call.has_input(5) and call.has_input(6)):
        raise fail(call, "key, value, seqlens_k and total_sequence_length are required")
    if call.has_input(3) != call.has_input(4):
        raise fail(call, "past_key and past_value must be given together")
    if any(call.input(i).dtype not in (0, F32) for i in range(5) if call.has_input(i)):
        raise fail(call, "float32 only (the typed form)")
    if any(call.input(i).dtype not in (0, I32) for i in (5, 6)):
        raise fail(call, "seqlens_k and total_sequence_length must be int32")


def shapes(call: OpCall, past_ok: bool) -> tuple[Shape, Shape] | None:
    """(output (B, S, N·H), present (B, Nkv, P+S, H)) of a checked call, None where query, key
    or value has no known shape; a past of P > 0 refused unless `past_ok`."""
    _check_inputs(call)
    n, nkv = _heads(call)
    q, k, v = (_shape(call, i, 3, w) for i, w in enumerate(("query", "key", "value")))
    if (sl := _shape(call, 5, 1, "seqlens_k")) is not None and q is not None:
        _agree(call, sl[0], q[0], "seqlens_k length")
    total = call.input(6).shape
    if total is not None and total not in ((), (1,)):
        raise fail(call, "total_sequence_length must be a scalar")
    if q is None or k is None or v is None:
        return None
    if isinstance(q[2], int) and q[2] % n:
        raise fail(call, f"hidden size {q[2]} is not a multiple of num_heads {n}")
    h = q[2] // n if isinstance(q[2], int) else None
    for x, what in ((k, "key"), (v, "value")):
        _agree(call, x[0], q[0], f"{what} batch")
        _agree(call, x[1], q[1], f"{what} sequence length")
        _agree(call, x[2], None if h is None else nkv * h, f"{what} hidden size")
    if isinstance(h, int) and h % 8:
        raise fail(call, f"head size {h} is not a multiple of 8 (ORT's kernel)")
    past: Dim = 0
    if call.has_input(3):
        pk, pv = _shape(call, 3, 4, "past_key"), _shape(call, 4, 4, "past_value")
        for p in (x for x in (pk, pv) if x is not None):
            wants = ((p[0], q[0], "batch"), (p[1], nkv, "heads"), (p[3], h, "head"))
            for got, want, what in wants:
                _agree(call, got, want, f"past {what}")
        if pk is not None and pv is not None:
            _agree(call, pk[2], pv[2], "past_key and past_value lengths")
        past = pk[2] if pk is not None else None if pv is None else pv[2]
    if not past_ok:
        _agree(call, past, 0, "past len (the one-output form has no past: module docstring)")
    if isinstance(past, int) and past and isinstance(q[1], int) and q[1] > 1:
        _agree(call, q[0], 1, "batch (ORT: 1 when S > 1 and a past is given)")
    s = q[1]
    t = past + s if isinstance(past, int) and isinstance(s, int) else None
    return (q[0], q[1], q[2]), (q[0], nkv, t, h)


def _infer(call: OpCall) -> list[TensorType]:
    """output (B, S, N·H) in query's dtype (float32 only: the typed form)."""
    out = shapes(call, past_ok=False)
    return [TensorType(call.input(0).dtype, None if out is None else out[0])]


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


def _kv(call: OpCall, arrays: list[Array | None], past_ok: bool) -> tuple[Array, Array, Array]:
    """(Q (B, N, S, H), K', V' (B, Nkv, P+S, H)) on the 7 inputs (numbers, or object arrays of
    terms), the lengths checked or `require`d; a past of P > 0 refused unless `past_ok`."""
    q, k, v, pk, pv, seqlens, total = (list(arrays) + [None] * 7)[:7]
    assert q is not None and k is not None and v is not None
    assert seqlens is not None and total is not None
    n, nkv = _heads(call)
    qh, kh, vh = _split(q, n), _split(k, nkv), _split(v, nkv)
    if pk is not None and pv is not None:
        kh, vh = np.concatenate([pk, kh], axis=2), np.concatenate([pv, vh], axis=2)
    b, _, s, _ = qh.shape
    past = kh.shape[2] - s
    if past and not past_ok:
        raise fail(call, "a past of P > 0 is not in the one-output form (module docstring)")
    if past and s > 1 and b > 1:
        raise fail(call, "ORT refuses B > 1 when S > 1 and a past is given")
    _lengths(call, np.asarray(seqlens), np.asarray(total), past, s)
    return qh, kh, vh


def attend(call: OpCall, arrays: list[Array | None], past_ok: bool) -> Array:
    """The output (B, S, N·H) over K', V' (`_kv`; the module docstring's formula)."""
    qh, kh, vh = _kv(call, arrays, past_ok)
    n, nkv = _heads(call)
    b, _, s, h = qh.shape
    past = kh.shape[2] - s
    scale, group = _scale(call, h), n // nkv
    out = np.empty((b, s, n * h), dtype=qh.dtype)
    for bi, hi, i in np.ndindex(b, n, s):
        keys, values = kh[bi, hi // group, : past + i + 1], vh[bi, hi // group, : past + i + 1]
        scores = keys @ qh[bi, hi, i]
        scores = _z3.vmap(lambda t: t * scale, scores) if qh.dtype == object else scores * scale
        out[bi, i, hi * h : (hi + 1) * h] = _softmax(scores) @ values
    return out


def gqa(call: OpCall, arrays: list[Array | None], like: Any) -> Array:
    """The one-output form's output (B, S, N·H) on the 7 inputs (P = 0)."""
    return attend(call, arrays, past_ok=False)


def _wide(arrays: list[Array | None]) -> list[Array | None]:
    """The float inputs in float64 (the references compute there and round once)."""
    return [
        None if a is None else a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays
    ]


def _reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """`gqa` in float64 on the float inputs, rounded to the input's dtype once."""
    return [gqa(call, _wide(arrays), None).astype(arrays[0].dtype)]  # type: ignore[union-attr]


def _semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """`gqa` over Z3 terms (the module docstring)."""
    if call.input(0).dtype not in (0, F32):
        raise fail(call, "defined for float32 only (ORT's CPU kernel)")
    x = arrays[0]
    assert x is not None
    return [np.asarray(gqa(call, list(arrays), x.flat[0]), dtype=object)]


def flops(call: OpCall, outputs: list[TensorType]) -> float:
    """As attention.py's: 2·(H + H) per score and exp + 3 more, over the B·N·S·(P+S) scores."""
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


def to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """Default-valued attributes dropped; any other value (module docstring): opaque."""
    for name, allowed in _DEFAULTS.items():
        value = attrs.pop(name, allowed[0])
        if isinstance(value, bytes):
            value = value.decode()
        if value not in allowed:
            return None
    attrs.pop("rotary_interleaved", None)  # no effect: do_rotary is 0 here
    return attrs


def attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Proof values: one query head per kv head, scale 0 (1/sqrt(H)) and 0.5; every part."""
    if name in ("num_heads", "kv_num_heads"):
        return [1]
    if name == "scale":
        return [0.0, 0.5]
    if name == "index":
        return [0, 1, 2]
    return None


ATTRS = (("num_heads", "i64", None), ("kv_num_heads", "i64", None), ("scale", "f64", 0.0))
"""The typed attributes of both forms (the part adds `index`)."""

GROUP_QUERY_ATTENTION = register(
    OpSpec(
        "GroupQueryAttention",
        _infer,
        _reference,
        flops,
        domain=MS,
        egg=EggSig(attrs=ATTRS, n_inputs=7, optional=4, to_egg=to_egg, from_egg=dict),
        z3=_semantics,
        input_dtypes=(None, None, None, None, None, (I32,), (I32,)),
        attr_values=attr_values,
        doc="GroupQueryAttention: causal softmax(scale·Q·Kᵀ)·V, kv heads shared by query heads",
    )
)


def _index(call: OpCall) -> int:
    index = int(call.attr("index", 0))
    if index not in (0, 1, 2):
        raise fail(call, f"index {index}: 0 output, 1 present_key, 2 present_value")
    return index


def _part_infer(call: OpCall) -> list[TensorType]:
    """output (B, S, N·H), or present_key / present_value (B, Nkv, P+S, H); query's dtype."""
    index = _index(call)
    out = shapes(call, past_ok=True)
    return [TensorType(call.input(0).dtype, None if out is None else out[min(index, 1)])]


def part(call: OpCall, arrays: list[Array | None]) -> Array:
    """Output `index` of a node declaring the present outputs (module docstring)."""
    index = _index(call)
    return attend(call, arrays, past_ok=True) if index == 0 else _kv(call, arrays, True)[index]


def _part_reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """`part` in float64, rounded to the input's dtype once (the present outputs: exact)."""
    return [part(call, _wide(arrays)).astype(arrays[0].dtype)]  # type: ignore[union-attr]


def _part_semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """`part` over Z3 terms: output 0 the formula, the present outputs the inputs' terms."""
    if call.input(0).dtype not in (0, F32):
        raise fail(call, "defined for float32 only (ORT's CPU kernel)")
    return [np.asarray(part(call, list(arrays)), dtype=object)]


def _part_to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """As `to_egg`, for a node `encode_parts` gave an index: the part is no second typed form
    of a one-output node (whose past ORT does not concatenate)."""
    return to_egg(attrs) if "index" in attrs else None


def _part_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """Output 0's work as the one-output form's; the present outputs are copies (0)."""
    return flops(call, outputs) if int(call.attr("index", 0)) == 0 else 0.0


GROUP_QUERY_ATTENTION_PART = register(
    OpSpec(
        "GroupQueryAttentionPart",
        _part_infer,
        _part_reference,
        _part_flops,
        domain=MS,
        egg=EggSig(
            attrs=(*ATTRS, ("index", "i64", 0)),
            n_inputs=7,
            optional=4,
            to_egg=_part_to_egg,
            from_egg=dict,
        ),
        z3=_part_semantics,
        input_dtypes=(None, None, None, None, None, (I32,), (I32,)),
        attr_values=attr_values,
        onnx_op="GroupQueryAttention",
        doc="GroupQueryAttentionPart(...): output `index` (output, present_key, present_value) "
        "of an ONNX GroupQueryAttention (`ops.parts`)",
    )
)


def _self_test_values() -> dict[str, list[tuple[dict[str, Any], list[Array | None]]]]:
    """Input sets (`verify/selftest_listed.py`) of the one-output form (past omitted, and
    empty) and of each part (a past of 3, one new position in a batch of 2; a prompt of 3)."""
    rng = np.random.default_rng(0)

    def f(*shape: int) -> Array:
        return (rng.standard_normal(shape) * 2).astype(np.float32)

    def lengths(b: int, t: int) -> list[Array]:
        return [np.full(b, t - 1, np.int32), np.array(t, np.int32)]

    q, k, v = f(2, 3, 16), f(2, 3, 8), f(2, 3, 8)
    q4, k4, v4, past = f(2, 3, 32), f(2, 3, 16), f(2, 3, 16), f(2, 2, 0, 8)
    step: list[Array | None] = [f(2, 1, 32), f(2, 1, 16), f(2, 1, 16), f(2, 2, 3, 8)]
    step += [f(2, 2, 3, 8), *lengths(2, 4)]
    g4: dict[str, Any] = {"num_heads": 4, "kv_num_heads": 2}
    return {
        "GroupQueryAttention": [
            ({"num_heads": 2, "kv_num_heads": 1}, [q, k, v, None, None, *lengths(2, 3)]),
            ({**g4, "scale": 0.5}, [q4, k4, v4, past, past, *lengths(2, 3)]),
        ],
        "GroupQueryAttentionPart": [
            *(({**g4, "index": i}, step) for i in (0, 1, 2)),
            ({**g4, "index": 0}, [q4, k4, v4, past, past, *lengths(2, 3)]),
            ({**g4, "index": 1, "scale": 0.5}, [q4, k4, v4, None, None, *lengths(2, 3)]),
        ],
    }


SELF_TEST_VALUES = {(MS, name): cases for name, cases in _self_test_values().items()}
