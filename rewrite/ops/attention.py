"""ORT's MultiHeadAttention contrib op (domain com.microsoft), and the helpers its sibling
`attention_packed.py` (Attention: packed projection, causal, past/present) shares.

Contract (ORT 1.32's CPU kernels, float32 only; first one output, no past/present state):
MultiHeadAttention(query (B,S,D), key (B,L,D), value (B,L,Dv)[, bias (D+D+Dv),
key_padding_mask (B,L) int32, attention_bias (B|1, N|1, S, L)]) with N = num_heads heads of
H = D/N (query/key) and Hv = Dv/N (value): per batch b and head h,
  scores = scale·(Q_h·K_hᵀ) + (attention_bias + mask)      (B, N, S, L)
  probs  = softmax(scores) along L, as exp(x - max) / sum(exp(x - max))
  out_h  = probs·V_h, heads concatenated back to (B, S, Dv),
where Q/K/V = query/key/value + their slice of `bias`, scale = the `scale` attribute, or
1/sqrt(H) computed in float32 when it is 0 (the default), and the mask is 0 where
key_padding_mask > 0 and `mask_filter_value` (default -10000) elsewhere.
Causal (`unidirectional` = 1; it must be 0 or 1): with P past keys (P = 0 without a past),
query i < S-1 attends to keys j <= P + i only and the last query (i = S-1) to all of them
(ORT's `PrepareMask` leaves the last row unmasked: measured with S = L, S < L and S > L, with
and without a past, key_padding_mask and attention_bias), the other keys getting probability
0 (ORT adds the float32 lowest there, over the bias and mask): j <= P + i for every query
when L <= S, and the last query sees every key when L > S.
Attention (`attention_packed.py`) projects Q/K/V from one input, then attends as above.

MultiHeadAttention with a KV cache: given past_key and past_value (B,N,P,H) (ORT needs
Hv = H then) and both present outputs declared, K' = concat(past_key, K) and
V' = concat(past_value, V) along the sequence axis (K/V in BNSH, bias added) are
present_key/present_value (B,N,P+L,H), copies (bit-exact, measured), and every query attends
to all P+L keys (or as the causal rule keeps), key_padding_mask (B, P+L), attention_bias
(..., S, P+L).
ORT concatenates the past only when both present outputs are declared (measured: without
them, or with present_key alone, output 0 is not that formula), so a node with a past and no
present output stays opaque.

Typed forms: `(ms_MultiHeadAttention num_heads scale mask_filter_value unidirectional
query key value bias key_padding_mask attention_bias)` (the last three may be `(Absent)`);
`(ms_MultiHeadAttentionPart num_heads scale mask_filter_value unidirectional index query key
value bias key_padding_mask attention_bias past_key past_value)`, output `index` (output,
present_key, present_value) of a node naming a present output, written back declaring both
(`ops.parts`; a node naming none is the one-output form); unidirectional = 0 (the default) is
left out when written back, a node whose unidirectional is neither 0 nor 1 stays opaque.
MultiHeadAttention's past_sequence_length and cache_indirection, other attributes (do_rotary,
...) and 4/5-D packed forms stay opaque.

Z3 semantics: the formula above, exact in reals with exp the `EXP` UF (as Softmax's); the
present outputs are the concatenated terms (with a bias, K + bias: in the real model exact in
reals, not rounded to float32 as ORT's copies and the numpy reference are). In floats
it is not bit-exact and no semantics here states ORT's order: ORT runs Q·Kᵀ as an MLAS SGEMM
with alpha = scale and beta = 1 over the pre-filled bias + mask (C = alpha·acc + C), MLAS's
softmax (its own exp, the sum's reciprocal multiplied in), probs·V as another SGEMM; a
non-causal MultiHeadAttention without mask or bias runs MLAS's flash attention instead (an
online softmax over blocks sized from the L2 cache). The tests bound the difference to ORT
(rtol 2e-5). The computation, shared by the reference and the semantics, is in
`_attention_core.py`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from rewrite.ops._attention_core import mha, mha_kv
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, Shape, TensorType, fail
from rewrite.ops.registry import register
from rewrite.ops.unary import TRANSCENDENTAL

MS = "com.microsoft"
Array = np.ndarray
F32, I32 = TensorProto.FLOAT, TensorProto.INT32


def _agree(call: OpCall, a: Dim, b: Dim, what: str) -> None:
    if isinstance(a, int) and isinstance(b, int) and a != b:
        raise fail(call, f"{what}: {a} != {b}")


def _rank(call: OpCall, i: int, rank: int, what: str) -> Shape | None:
    shape = call.input(i).shape
    if shape is not None and len(shape) != rank:
        raise fail(call, f"{what} must be {rank}-D (the typed form)")
    return shape


def _heads(call: OpCall, d: Dim, what: str) -> None:
    n = int(call.attr("num_heads", 0))
    if n <= 0:
        raise fail(call, "num_heads must be positive")
    if isinstance(d, int) and d % n:
        raise fail(call, f"{what} {d} is not a multiple of num_heads {n}")


def _mha_shapes(call: OpCall) -> tuple[Shape, Shape, Shape] | None:
    """query, key, value's shapes, checked (None where one is unknown); unidirectional 0 or 1."""
    q, k, v = (_rank(call, i, 3, n) for i, n in enumerate(("query", "key", "value")))
    if call.input(0).dtype not in (0, F32):
        raise fail(call, "ORT's CPU kernel takes float32 only")
    if int(call.attr("unidirectional", 0)) not in (0, 1):
        raise fail(call, "unidirectional must be 0 or 1")
    if q is None or k is None or v is None:
        return None
    for x in (k, v):
        _agree(call, q[0], x[0], "batch sizes")
    _agree(call, k[1], v[1], "key/value lengths")
    _agree(call, q[2], k[2], "query/key hidden sizes")
    _heads(call, q[2], "hidden size")
    _heads(call, v[2], "value hidden size")
    return q, k, v


def _mha_infer(call: OpCall) -> list[TensorType]:
    """(B, S, Dv) in query's dtype (float32: ORT's only CPU kernel)."""
    if (qkv := _mha_shapes(call)) is None:
        return [TensorType(call.input(0).dtype, None)]
    q, k, v = qkv
    _check_extras(call, q, k, v, k[1])
    return [TensorType(call.input(0).dtype, (q[0], q[1], v[2]))]


def _check_extras(call: OpCall, q: Shape, k: Shape, v: Shape, m: Dim) -> None:
    """bias (D+D+Dv,), key_padding_mask (B, M) int32, attention_bias (B|1, N|1, S, M) with M
    keys (the past's and the new ones)."""
    if call.has_input(3) and (bias := _rank(call, 3, 1, "bias")) is not None:
        dims = (q[2], k[2], v[2])
        if all(isinstance(d, int) for d in (*dims, bias[0])):
            _agree(call, bias[0], sum(dims), "bias length")  # type: ignore[arg-type]
    _int32_mask(call, 4)
    if call.has_input(4) and (mask := _rank(call, 4, 2, "key_padding_mask")) is not None:
        _agree(call, mask[0], q[0], "mask batch")
        _agree(call, mask[1], m, "mask length")
    if call.has_input(5) and (ab := _rank(call, 5, 4, "attention_bias")) is not None:
        for got, want, what in ((ab[0], q[0], "batch"), (ab[1], call.attr("num_heads"), "heads")):
            if got != 1:
                _agree(call, got, want, f"attention_bias {what}")
        _agree(call, ab[2], q[1], "attention_bias query length")
        _agree(call, ab[3], m, "attention_bias key length")


def _int32_mask(call: OpCall, i: int) -> None:
    if call.has_input(i) and call.input(i).dtype not in (0, I32):
        raise fail(call, "the mask must be int32 (the typed form)")


def _reference(fn: Any) -> Any:
    """`fn` in float64 on the float inputs, rounded to float32 once."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        wide = [
            None if a is None else a.astype(np.float64) if a.dtype.kind == "f" else a
            for a in arrays
        ]
        return [np.asarray(fn(call, wide, None)).astype(arrays[0].dtype)]  # type: ignore[union-attr]

    return reference


def _semantics(fn: Any) -> Any:
    """`fn` over Z3 terms (the module docstring)."""

    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        if call.input(0).dtype not in (0, F32):
            raise fail(call, "defined for float32 only (ORT's CPU kernel)")
        x = arrays[0]
        assert x is not None
        return [np.asarray(fn(call, list(arrays), x.flat[0]), dtype=object)]

    return semantics


def _attend_flops(b: Dim, n: Dim, s: Dim, m: Dim, h: Dim, hv: Dim) -> float:
    dims = (b, n, s, m, h, hv)
    if not all(isinstance(d, int) for d in dims):
        return 0.0
    scores = b * n * s * m  # type: ignore[operator]
    return float(2 * scores * (h + hv) + (TRANSCENDENTAL + 3) * scores)  # type: ignore[operator]


def _mha_flops(call: OpCall, outputs: list[TensorType]) -> float:
    q, k, v = call.input(0).shape, call.input(1).shape, call.input(2).shape
    if q is None or k is None or v is None or len(q) != 3 or len(v) != 3:
        return 0.0
    n = int(call.attr("num_heads", 1))
    h = q[2] // n if isinstance(q[2], int) else None
    hv = v[2] // n if isinstance(v[2], int) else None
    return _attend_flops(q[0], n, q[1], k[1], h, hv)


def _attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Proof values: one and two heads (as query's hidden size allows), scale 0 (1/sqrt(H))
    and 0.5, the default mask_filter_value, qkv_hidden_sizes omitted (equal thirds), causal or
    not."""
    if name == "num_heads":
        d = inputs[0].shape[-1] if inputs and inputs[0].shape else None
        return [1, 2] if isinstance(d, int) and d % 2 == 0 else [1]
    if name == "scale":
        return [0.0, 0.5]
    if name == "mask_filter_value":
        return [-10000.0]
    if name == "qkv_hidden_sizes":
        return [()]
    if name == "unidirectional":
        return [0, 1]
    return None


_COMMON = (("scale", "f64", 0.0), ("mask_filter_value", "f64", -10000.0))
_MHA_ATTRS = (("num_heads", "i64", None), *_COMMON, ("unidirectional", "i64", 0))


def _to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """unidirectional 0 or 1 (else opaque: ORT reads any other value as 0)."""
    return attrs if int(attrs.get("unidirectional", 0)) in (0, 1) else None


def _from_egg(attrs: dict[str, Any]) -> dict[str, Any]:
    """unidirectional = 0 (the default) left out."""
    return {k: v for k, v in attrs.items() if k != "unidirectional" or int(v)}


MULTI_HEAD_ATTENTION = register(
    OpSpec(
        "MultiHeadAttention",
        _mha_infer,
        _reference(mha),
        _mha_flops,
        domain=MS,
        egg=EggSig(
            attrs=_MHA_ATTRS,
            n_inputs=6,
            optional=3,
            to_egg=_to_egg,
            from_egg=_from_egg,
        ),
        z3=_semantics(mha),
        input_dtypes=(None, None, None, None, (I32,), None),
        attr_values=_attr_values,
        doc="MultiHeadAttention: softmax(scale·Q·Kᵀ + bias + mask)·V per head (causal with "
        "unidirectional = 1)",
    )
)


def _index(call: OpCall) -> int:
    index = int(call.attr("index", 0))
    if index not in (0, 1, 2):
        raise fail(call, f"index {index}: 0 output, 1 present_key, 2 present_value")
    return index


def _mha_part_infer(call: OpCall) -> list[TensorType]:
    """output (B, S, Dv), present_key (B, N, P+L, H) or present_value (B, N, P+L, Hv)."""
    index = _index(call)
    if call.has_input(6) != call.has_input(7):
        raise fail(call, "past_key and past_value must be given together")
    if (qkv := _mha_shapes(call)) is None:
        return [TensorType(call.input(0).dtype, None)]
    q, k, v = qkv
    n = int(call.attr("num_heads"))
    h, hv = (d // n if isinstance(d, int) else None for d in (q[2], v[2]))
    past: Dim = 0
    if call.has_input(6):
        _agree(call, hv, h, "value head size (ORT: the key's with a past)")
        pk, pv = _rank(call, 6, 4, "past_key"), _rank(call, 7, 4, "past_value")
        for p, head in ((pk, h), (pv, hv)):
            for at, want, what in ((0, q[0], "batch"), (1, n, "heads"), (3, head, "head")):
                _agree(call, None if p is None else p[at], want, f"past {what}")
        if pk is not None and pv is not None:
            _agree(call, pk[2], pv[2], "past_key/past_value lengths")
        past = pk[2] if pk is not None else None if pv is None else pv[2]
    m = past + k[1] if isinstance(past, int) and isinstance(k[1], int) else None
    _check_extras(call, q, k, v, m)
    shapes = ((q[0], q[1], v[2]), (q[0], n, m, h), (q[0], n, m, hv))
    return [TensorType(call.input(0).dtype, shapes[index])]


def _mha_part(call: OpCall, arrays: list[Array | None], like: Any) -> Array:
    """Output `index` of a node declaring the present outputs (`mha_kv`)."""
    return mha_kv(call, arrays, like)[_index(call)]


def _mha_part_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """Output 0's: `_mha_flops` over the P+L keys; the present outputs (copies): 0."""
    if int(call.attr("index", 0)):
        return 0.0
    past = call.input(6).shape if call.has_input(6) else (0, 0, 0, 0)
    flops = _mha_flops(call, outputs)
    k = call.input(1).shape
    if past is None or len(past) != 4 or k is None or not isinstance(k[1], int) or not k[1]:
        return flops
    p = past[2] if isinstance(past[2], int) else 0
    return flops * (p + k[1]) / k[1]


def _part_to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """As `_to_egg`, for a node `encode_parts` gave an index: the part is no second typed form
    of a one-output node (whose past ORT ignores)."""
    return _to_egg(attrs) if "index" in attrs else None


def _part_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """As `_attr_values`, and every part."""
    return [0, 1, 2] if name == "index" else _attr_values(name, inputs)


MULTI_HEAD_ATTENTION_PART = register(
    OpSpec(
        "MultiHeadAttentionPart",
        _mha_part_infer,
        _reference(_mha_part),
        _mha_part_flops,
        domain=MS,
        egg=EggSig(
            attrs=(*_MHA_ATTRS, ("index", "i64", 0)),
            n_inputs=8,
            optional=5,
            to_egg=_part_to_egg,
            from_egg=_from_egg,
        ),
        z3=_semantics(_mha_part),
        input_dtypes=(None, None, None, None, (I32,), None, None, None),
        attr_values=_part_values,
        onnx_op="MultiHeadAttention",
        doc="MultiHeadAttentionPart(...): output `index` (output, present_key, present_value) "
        "of an ONNX MultiHeadAttention with past_key/past_value (`ops.parts`)",
    )
)


def _self_test_values() -> list[tuple[dict[str, Any], list[Array | None]]]:
    """Input sets of every typed form (`verify/selftest_values.py`): the sampling bound draws
    each input's shape alone, and these ops need their inputs' shapes to agree."""
    rng = np.random.default_rng(0)

    def f(*shape: int) -> Array:
        return (rng.standard_normal(shape) * 3).astype(np.float32)

    keys = np.array([[1, 0, 1], [1, 1, 0]], np.int32)
    q, k, v = f(2, 2, 4), f(2, 3, 4), f(2, 3, 2)
    causal = {"num_heads": 2, "unidirectional": 1}
    return [
        ({"num_heads": 2}, [q, k, v]),
        ({"num_heads": 1, "scale": 0.5}, [q, k, v, f(10), keys, f(1, 1, 2, 3)]),
        ({"num_heads": 2, "mask_filter_value": -30.0}, [q, k, v, None, keys, f(2, 2, 2, 3)]),
        (causal, [f(2, 3, 4), f(2, 3, 4), f(2, 3, 2)]),
        (causal, [q, k, v, f(10), keys, f(2, 1, 2, 3)]),
    ]


def _part_test_values() -> list[tuple[dict[str, Any], list[Array | None]]]:
    """Input sets of MultiHeadAttentionPart: a past of 3, every output, bias and mask, causal
    or not."""
    rng = np.random.default_rng(1)

    def f(*shape: int) -> Array:
        return (rng.standard_normal(shape) * 3).astype(np.float32)

    keys = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 0, 1]], np.int32)
    q, k, v, pk, pv = f(2, 2, 4), f(2, 2, 4), f(2, 2, 4), f(2, 2, 3, 2), f(2, 2, 3, 2)
    full: list[Array | None] = [q, k, v, f(12), keys, f(2, 1, 2, 5), pk, pv]
    plain: list[Array | None] = [q, k, v, None, None, None, pk, pv]
    return [({"num_heads": 2, "index": i}, full) for i in (0, 1, 2)] + [
        ({"num_heads": 2, "index": 0, "scale": 0.5}, plain),
        ({"num_heads": 2, "index": 0, "unidirectional": 1}, full),
        ({"num_heads": 2, "index": 0, "unidirectional": 1}, plain),
    ]


SELF_TEST_VALUES = {
    (MS, "MultiHeadAttention"): _self_test_values(),
    (MS, "MultiHeadAttentionPart"): _part_test_values(),
}
