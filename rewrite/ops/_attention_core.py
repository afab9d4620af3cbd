"""The attention computation of `rewrite.ops.attention` and `rewrite.ops.attention_packed`
(their docstrings state the contracts), shared by the numpy reference and the Z3 semantics:
arrays of numbers, or object arrays of Z3 terms (then `like`, a float term, gives the sort of
the constants written).

`mha` and `attention` take the op's inputs in ONNX order (absent ones None) and return the
(B, S, Dv) output (`mha_kv` and `attention_kv` also the keys and values over a past: the
present outputs); `qkv_sizes` splits Attention's packed weight columns.
A causal node (`unidirectional` = 1) lets query i < S-1 see keys j <= P + i only, and the last
query (i = S-1) every key: the others get probability 0 (ORT's `PrepareMask` adds the float32
lowest there, whose exp underflows to 0, on every row but the last). With P+L keys for S
queries that is j <= P + i for every query when L <= S (always so for Attention, L = S), and
not when L > S: then the last query sees the keys past P + S - 1 too (measured, ORT 1.32).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._z3 import const, vmap
from rewrite.ops.base import Dim, OpCall, fail
from rewrite.ops.unary import EXP

Array = np.ndarray


def qkv_sizes(call: OpCall, total: Dim) -> tuple[Dim, Dim, Dim]:
    """(Dq, Dk, Dv): `qkv_hidden_sizes`, or `total` in 3 equal parts (None each when unknown)."""
    sizes = list(call.attr("qkv_hidden_sizes", []) or [])
    if sizes:
        if len(sizes) != 3:
            raise fail(call, "qkv_hidden_sizes must have 3 entries")
        return int(sizes[0]), int(sizes[1]), int(sizes[2])
    if not isinstance(total, int):
        return None, None, None
    if total % 3:
        raise fail(call, "weights' columns are not 3 equal parts")
    return total // 3, total // 3, total // 3


def _scale(call: OpCall, head: int) -> float:
    """`scale`, or 1/sqrt(H) in float32 (the kernel's `1.0f / sqrt((float)H)`)."""
    s = float(np.float32(call.attr("scale", 0.0)))
    return s if s != 0.0 else float(np.float32(1.0) / np.sqrt(np.float32(head)))


def _split(x: Array, n: int) -> Array:
    """(B, S, N·H) -> (B, N, S, H)."""
    b, s, d = x.shape
    return x.reshape(b, s, n, d // n).transpose(0, 2, 1, 3)


def _masked(call: OpCall, m: int, padding: Array | None, form: str, like: Any) -> Array | None:
    """The additive mask (B, 1, S|1, L) of the padding mask (None without one): 0 where a key
    is kept, mask_filter_value (a float32) elsewhere.

    `padding` holds the mask input's elements (numbers or bit-vector terms), `form` its kind
    (`keys`: (B, L), `rows`: (B, S, L), `lengths`: (B,), keys at index >= it masked); values
    in the sort of `like` (a float term), or float64 numbers when `like` is not a term."""
    if padding is None:
        return None
    fill = float(np.float32(call.attr("mask_filter_value", -10000.0)))
    if form == "lengths":
        j = np.arange(m)[None, None, :]
        keep = vmap(lambda n, jj: _gt(n, jj), padding[:, None, None], j)
    else:
        keep = vmap(lambda t: _gt(t, 0), padding)
        keep = keep[:, None, :] if form == "keys" else keep
    mask = vmap(lambda k: _pick(k, fill, like), keep[:, None])
    return mask if z3.is_expr(like) else mask.astype(np.float64)


def _gt(a: Any, b: Any) -> Any:
    return a > b if z3.is_expr(a) else bool(a > b)


def _pick(keep: Any, fill: float, like: Any) -> Any:
    """0 where kept, `fill` elsewhere (a Z3 If on a term `keep`)."""
    if not z3.is_expr(like):
        return 0.0 if keep else fill
    if z3.is_expr(keep):
        return z3.If(keep, const(0.0, like), const(fill, like))
    return const(0.0 if keep else fill, like)


def _attend(call: OpCall, q: Array, k: Array, v: Array, add: Array | None) -> Array:
    """softmax(scale·Q·Kᵀ + add)·V per head, back to (B, S, Dv)."""
    n = int(call.attr("num_heads"))
    return _attend_heads(call, _split(q, n), _split(k, n), _split(v, n), add)


def _attend_heads(
    call: OpCall, qh: Array, kh: Array, vh: Array, add: Array | None, causal: int | None = None
) -> Array:
    """`_attend` on Q, K, V in BNSH, back to (B, S, N·Hv); with `causal` = P, query i < S-1
    attends to keys 0..P+i only, the last query to every key (the module docstring)."""
    scale = _scale(call, qh.shape[-1])
    scores = np.matmul(qh, kh.transpose(0, 1, 3, 2))
    scores = vmap(lambda t: t * scale, scores) if qh.dtype == object else scores * scale
    if add is not None:
        scores = scores + add
    if causal is None:
        out = np.matmul(_softmax(scores), vh)  # (B, N, S, Hv)
    else:
        s, m = scores.shape[2], scores.shape[3]
        ends = [causal + i + 1 if i < s - 1 else m for i in range(s)]
        rows = [
            np.matmul(_softmax(scores[:, :, i : i + 1, :end]), vh[:, :, :end])
            for i, end in enumerate(ends)
        ]
        out = np.concatenate(rows, axis=2)
    b, n, s, hv = out.shape
    return out.transpose(0, 2, 1, 3).reshape(b, s, n * hv)


def _softmax(x: Array) -> Array:
    if x.dtype != object:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    top = np.empty((*x.shape[:-1], 1), dtype=object)
    for idx in np.ndindex(x.shape[:-1]):
        row = list(x[idx])
        best = row[0]
        for t in row[1:]:
            best = z3.If(t > best, t, best)
        top[(*idx, 0)] = best
    e = vmap(EXP, x - top)
    return e / e.sum(axis=-1, keepdims=True)


def mha(call: OpCall, arrays: list[Array | None], like: Any) -> Array:
    """MultiHeadAttention on (query, key, value[, bias, key_padding_mask, attention_bias])."""
    return mha_kv(call, list(arrays)[:6], like)[0]


def mha_kv(call: OpCall, arrays: list[Array | None], like: Any) -> tuple[Array, Array, Array]:
    """(output, present_key, present_value) of MultiHeadAttention on (query, key, value[, bias,
    key_padding_mask, attention_bias, past_key, past_value]): K' = concat(past_key, K) and
    V' likewise in BNSH (the present outputs), every query attending to all of K', or with
    `unidirectional` = 1 to the keys the causal rule keeps (P = past_key's length, 0 without)."""
    q, k, v, bias, padding, attn_bias, pk, pv = (list(arrays) + [None] * 8)[:8]
    assert q is not None and k is not None and v is not None
    if bias is not None:
        d = q.shape[2]
        q, k, v = q + bias[:d], k + bias[d : 2 * d], v + bias[2 * d :]
    n = int(call.attr("num_heads"))
    kh, vh = _split(k, n), _split(v, n)
    if pk is not None and pv is not None:
        kh, vh = np.concatenate([pk, kh], axis=2), np.concatenate([pv, vh], axis=2)
    add = _masked(call, kh.shape[2], padding, "keys", like)
    if attn_bias is not None:
        add = attn_bias if add is None else attn_bias + add
    causal = kh.shape[2] - k.shape[1] if int(call.attr("unidirectional", 0)) else None
    return _attend_heads(call, _split(q, n), kh, vh, add, causal), kh, vh


def attention(call: OpCall, arrays: list[Array | None], like: Any) -> Array:
    """Attention's output on (input, weights, bias[, mask_index])."""
    return attention_kv(call, list(arrays)[:4], like)[0]


def attention_kv(call: OpCall, arrays: list[Array | None], like: Any) -> tuple[Array, Array, Array]:
    """(output, K', V') of Attention on (input, weights, bias[, mask_index, past]): K' =
    concat(past[0], K), V' = concat(past[1], V) in BNSH (present = stack(K', V')); the mask
    (mask_index over the P+S keys) and the causal rule (j <= P + i) both apply."""
    x, w, bias, mask, past = (list(arrays) + [None] * 5)[:5]
    assert x is not None and w is not None and bias is not None
    dq, dk, _ = qkv_sizes(call, w.shape[1])
    qkv = np.matmul(x, w) + bias
    q, k, v = qkv[..., :dq], qkv[..., dq : dq + dk], qkv[..., dq + dk :]  # type: ignore[operator]
    n = int(call.attr("num_heads"))
    kh, vh = _split(k, n), _split(v, n)
    if past is not None:
        kh, vh = np.concatenate([past[0], kh], axis=2), np.concatenate([past[1], vh], axis=2)
    form = {1: "lengths", 2: "keys", 3: "rows"}[mask.ndim] if mask is not None else ""
    add = _masked(call, kh.shape[2], mask, form, like)
    causal = kh.shape[2] - x.shape[1] if int(call.attr("unidirectional", 0)) else None
    out = _attend_heads(call, _split(q, n), kh, vh, add, causal)
    return out, kh, vh
