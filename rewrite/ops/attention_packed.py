"""ORT's Attention contrib op (domain com.microsoft): packed projection, then attention; causal
or not, with or without its KV cache (`past` / `present`).

Contract (ORT 1.32's CPU kernel, float32): Attention(input (B,S,Din), weights (Din, Dq+Dk+Dv),
bias (Dq+Dk+Dv)[, mask_index int32, past (2,B,N,P,H)]) -> output (B,S,Dv)[, present
(2,B,N,P+S,H)] first projects Q/K/V = input·weights + bias (slices of the packed columns;
Dq = Dk = Dv = D/3 unless `qkv_hidden_sizes`), splits them into N = num_heads heads, forms
K' = concat(past[0], K) and V' = concat(past[1], V) along the sequence axis (BNSH), then per
batch b and head h
  scores = scale·(Q_h·K'_hᵀ) + mask                        (B, N, S, P+S)
  probs  = softmax(scores) along the keys, over keys j <= P + i only for query i when
           `unidirectional` = 1 (causal: the later keys get probability 0)
  out_h  = probs·V'_h, heads concatenated back to (B, S, Dv),
as `attention.py`'s MultiHeadAttention (scale, mask_filter_value). mask_index over the P+S
keys: (B, P+S) a key padding mask, (B, S, P+S) a per-query one, (B,) the count of valid keys
(keys at index >= it masked); it adds mask_filter_value where it masks, the causal rule
excludes (ORT writes the float32 lowest there, overriding the mask: measured, every form).
present = stack(K', V'): the past slice a copy (bit-exact, measured), the new slice ORT's
float32 projection. ORT needs present declared when past is given (it fails otherwise), and
Dk = Dv for present. Without a past, output 0 of a node declaring present is bit-identical to
the one-output node's (measured, causal or not), so an unused present is dropped
(`ops.parts.DROPPABLE`); a node with a past whose present is unused stays opaque.

Typed forms: `(ms_Attention num_heads qkv_hidden_sizes unidirectional scale mask_filter_value
input weights bias mask_index)` (mask_index may be `(Absent)`): one output, no past; and
`(ms_AttentionPart num_heads qkv_hidden_sizes unidirectional scale mask_filter_value index input
weights bias mask_index past)`, output `index` (0 output, 1 present) of a node whose present is
used (`ops.parts`; written back declaring present), past may be `(Absent)` (P = 0).
unidirectional must be 0 or 1; attention_bias, past_sequence_length, do_rotary,
past_present_share_buffer and the (2B,) mask form stay opaque.

Z3 semantics: the formula above, exact in reals with exp the `EXP` UF (`_attention_core.py`,
shared with the reference); present is the concatenated terms (the projection exact in reals).
Not bit-exact in floats: ORT's projection and Q·Kᵀ, probs·V are MLAS SGEMMs, its softmax
MLAS's; the tests bound the difference to ORT (rtol 2e-5).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rewrite.ops._attention_core import attention, attention_kv, qkv_sizes
from rewrite.ops.attention import (
    _COMMON,
    F32,
    I32,
    MS,
    _agree,
    _attend_flops,
    _attr_values,
    _heads,
    _int32_mask,
    _rank,
    _reference,
    _semantics,
)
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, Shape, TensorType, fail
from rewrite.ops.registry import register

Array = np.ndarray


def _past_length(call: OpCall, x: Shape, h: Dim) -> Dim:
    """P: past's sequence length (0 without a past), past's shape checked against (2,B,N,·,H)."""
    if not call.has_input(4):
        return 0
    past = _rank(call, 4, 5, "past")
    if past is None:
        return None
    want = (2, x[0], int(call.attr("num_heads")), None, h)
    for at, what in ((0, "past's first dimension"), (1, "past batch"), (2, "past heads")):
        _agree(call, past[at], want[at], what)
    _agree(call, past[4], h, "past head size")
    return past[3]


def _shapes(call: OpCall) -> tuple[Shape, Dim, Dim, Dim] | None:
    """(input's shape, Dk, Dv, P+S keys), checked (None where input or weights is unknown)."""
    x, w = _rank(call, 0, 3, "input"), _rank(call, 1, 2, "weights")
    bias = _rank(call, 2, 1, "bias")
    if call.input(0).dtype not in (0, F32):
        raise fail(call, "ORT's CPU kernel takes float32 only")
    if int(call.attr("unidirectional", 0)) not in (0, 1):
        raise fail(call, "unidirectional must be 0 or 1")
    if x is None or w is None:
        return None
    _agree(call, x[2], w[0], "input/weights hidden sizes")
    dq, dk, dv = qkv_sizes(call, w[1])
    _agree(call, dq, dk, "query/key hidden sizes")
    if all(isinstance(d, int) for d in (dq, dk, dv)):
        _agree(call, w[1], dq + dk + dv, "weights' columns")  # type: ignore[operator]
        if bias is not None:
            _agree(call, bias[0], w[1], "bias length")
    _heads(call, dq, "hidden size")
    _heads(call, dv, "value hidden size")
    n = int(call.attr("num_heads"))
    past = _past_length(call, x, dk // n if isinstance(dk, int) else None)
    m = past + x[1] if isinstance(past, int) and isinstance(x[1], int) else None
    _mask_shape(call, x, m)
    return x, dk, dv, m


def _mask_shape(call: OpCall, x: Shape, m: Dim) -> None:
    """mask_index int32, (B,), (B, M) or (B, S, M) over the M = P+S keys."""
    _int32_mask(call, 3)
    mask = call.input(3).shape if call.has_input(3) else None
    if mask is None:
        return
    if len(mask) not in (1, 2, 3):
        raise fail(call, "mask_index must be (B,), (B, L) or (B, S, L) (the typed form)")
    _agree(call, mask[0], x[0], "mask batch")
    if len(mask) > 1:
        _agree(call, mask[-1], m, "mask length")
    if len(mask) == 3:
        _agree(call, mask[1], x[1], "mask query length")


def _infer(call: OpCall) -> list[TensorType]:
    """(B, S, Dv) in input's dtype (float32)."""
    if call.has_input(4):
        raise fail(call, "a past is not in the one-output form (ORT needs present declared)")
    if (shapes := _shapes(call)) is None:
        return [TensorType(call.input(0).dtype, None)]
    x, _, dv, _ = shapes
    return [TensorType(call.input(0).dtype, (x[0], x[1], dv))]


def _index(call: OpCall) -> int:
    index = int(call.attr("index", 0))
    if index not in (0, 1):
        raise fail(call, f"index {index}: 0 output, 1 present")
    return index


def _part_infer(call: OpCall) -> list[TensorType]:
    """output (B, S, Dv) or present (2, B, N, P+S, H)."""
    index = _index(call)
    if (shapes := _shapes(call)) is None:
        return [TensorType(call.input(0).dtype, None)]
    x, dk, dv, m = shapes
    _agree(call, dk, dv, "key/value hidden sizes (ORT's present holds both)")
    n = int(call.attr("num_heads"))
    h = dk // n if isinstance(dk, int) else None
    out = (x[0], x[1], dv) if index == 0 else (2, x[0], n, m, h)
    return [TensorType(call.input(0).dtype, out)]


def _part(call: OpCall, arrays: list[Array | None], like: Any) -> Array:
    """Output `index` of a node declaring present (`attention_kv`)."""
    out, kh, vh = attention_kv(call, arrays, like)
    return out if _index(call) == 0 else np.stack([kh, vh])


def _flops(call: OpCall, outputs: list[TensorType]) -> float:
    """The projection's 2·B·S·Din·(Dq+Dk+Dv) and the attention over the P+S keys; present
    (index 1, a copy of what output 0's computation makes): 0."""
    if int(call.attr("index", 0)):
        return 0.0
    x, w = call.input(0).shape, call.input(1).shape
    if x is None or w is None or len(x) != 3 or not all(isinstance(d, int) for d in (*x, *w)):
        return 0.0
    past = call.input(4).shape if call.has_input(4) else (0, 0, 0, 0, 0)
    p = past[3] if past is not None and len(past) == 5 and isinstance(past[3], int) else 0
    n = int(call.attr("num_heads", 1))
    dq, _, dv = qkv_sizes(call, w[1])
    proj = 2.0 * x[0] * x[1] * w[0] * w[1]  # type: ignore[operator]
    return proj + _attend_flops(x[0], n, x[1], p + x[1], dq // n, dv // n)  # type: ignore[operator]


def _values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """As `attention._attr_values`, with one head (input's hidden size is not the heads'),
    causal or not; the part: both outputs."""
    if name == "num_heads":
        return [1]
    if name == "unidirectional":
        return [0, 1]
    if name == "index":
        return [0, 1]
    return _attr_values(name, inputs)


def _to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """unidirectional 0 or 1 (else opaque)."""
    return attrs if int(attrs.get("unidirectional", 0)) in (0, 1) else None


def _part_to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """As `_to_egg`, for a node `encode_parts` gave an index (no second typed form of a
    one-output node)."""
    return _to_egg(attrs) if "index" in attrs else None


def _from_egg(attrs: dict[str, Any]) -> dict[str, Any]:
    """unidirectional = 0 (the default) left out."""
    return {k: v for k, v in attrs.items() if k != "unidirectional" or int(v)}


_ATTRS = (
    ("num_heads", "i64", None),
    ("qkv_hidden_sizes", "VecI", ()),
    ("unidirectional", "i64", 0),
    *_COMMON,
)
ATTENTION = register(
    OpSpec(
        "Attention",
        _infer,
        _reference(attention),
        _flops,
        domain=MS,
        egg=EggSig(attrs=_ATTRS, n_inputs=4, optional=1, to_egg=_to_egg, from_egg=_from_egg),
        z3=_semantics(attention),
        input_dtypes=(None, None, None, (I32,)),
        attr_values=_values,
        doc="Attention: input·weights + bias split into Q, K, V, then MultiHeadAttention "
        "(causal with unidirectional = 1)",
    )
)
ATTENTION_PART = register(
    OpSpec(
        "AttentionPart",
        _part_infer,
        _reference(_part),
        _flops,
        domain=MS,
        egg=EggSig(
            attrs=(*_ATTRS, ("index", "i64", 0)),
            n_inputs=5,
            optional=2,
            to_egg=_part_to_egg,
            from_egg=_from_egg,
        ),
        z3=_semantics(_part),
        input_dtypes=(None, None, None, (I32,), None),
        attr_values=_values,
        onnx_op="Attention",
        doc="AttentionPart(...): output `index` (output, present) of an ONNX Attention with a "
        "KV cache (`ops.parts`)",
    )
)


def _test_values() -> dict[tuple[str, str], list[tuple[dict[str, Any], list[Array | None]]]]:
    """Input sets of both forms (`verify/selftest_listed.py`): every mask form, causal or not,
    a past of 2, both outputs."""
    rng = np.random.default_rng(0)

    def f(*shape: int) -> Array:
        return (rng.standard_normal(shape) * 3).astype(np.float32)

    x, w, b = f(2, 3, 5), f(5, 12), f(12)
    rows = np.array([[[1, 0, 1], [0, 1, 1], [1, 1, 0]]] * 2, np.int32)
    keys = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 0, 1]], np.int32)
    past = f(2, 2, 2, 2, 2)
    cached: list[Array | None] = [x, w, b, keys, past]
    one: list[tuple[dict[str, Any], list[Array | None]]] = [
        ({"num_heads": 2}, [x, w, b]),
        ({"num_heads": 2}, [x, w, b, np.array([2, 3], np.int32)]),
        ({"num_heads": 1}, [x, w, b, np.array([[1, 0, 1], [0, 1, 1]], np.int32)]),
        ({"num_heads": 2, "unidirectional": 1}, [x, w, b]),
        ({"num_heads": 1, "unidirectional": 1, "scale": 0.5}, [x, w, b, rows]),
    ]
    causal = {"num_heads": 2, "unidirectional": 1}
    parts: list[tuple[dict[str, Any], list[Array | None]]] = [
        *(({**causal, "index": i}, cached) for i in (0, 1)),
        ({**causal, "index": 0}, [x, w, b, np.array([4, 5], np.int32), past]),
        ({"num_heads": 2, "index": 0}, [x, w, b, None, past]),
        ({"num_heads": 2, "index": 1}, [x, w, b]),
    ]
    return {(MS, "Attention"): one, (MS, "AttentionPart"): parts}


SELF_TEST_VALUES = _test_values()
