"""RotaryEmbedding's shape checks and row layout, as ORT 1.32's CPU kernel makes them
(contrib_ops/cpu/bert/rotary_embedding_helper.h; `rewrite.ops.rotary` states the op).

ORT refuses: input of rank other than 3 or 4; cos_cache / sin_cache not 2-D or not the same
shape; position_ids neither one element (rank 0 or 1) nor (batch, seq); rotary_embedding_dim
without num_heads, or above head_size; a rank-3 hidden size num_heads does not divide;
cos_cache.shape[1] other than rotary_dim / 2; seq above cos_cache.shape[0] (unless
is_packed_batching). Refused here too, as not typed: an odd rotary_dim (MLAS asserts pairs).
"""

from __future__ import annotations

from dataclasses import dataclass

from rewrite.ops.base import Dim, OpCall, fail


@dataclass(frozen=True)
class Layout:
    """Static sizes of one call: rows are (batch, seq, heads) of head_size elements."""

    batch: int
    seq: int
    heads: int
    head_size: int
    rotary_dim: int
    interleaved: bool


def _known(*dims: Dim) -> bool:
    return all(isinstance(d, int) for d in dims)


def _check_caches(call: OpCall) -> tuple[Dim, Dim] | None:
    """(max_pos, rotary_dim / 2) from cos_cache, once both caches are checked."""
    cos, sin = call.input(2).shape, call.input(3).shape
    for name, s in (("cos_cache", cos), ("sin_cache", sin)):
        if s is not None and len(s) != 2:
            raise fail(call, f"{name} must be 2-D (ORT's kernel)")
    if cos is None or sin is None:
        return None
    if any(_known(a, b) and a != b for a, b in zip(cos, sin, strict=True)):
        raise fail(call, "cos_cache and sin_cache must have the same shape")
    return cos[0], cos[1]


def _head_size(call: OpCall, shape: tuple[Dim, ...], cache_half: Dim) -> tuple[Dim, Dim]:
    """(heads, head_size) of the input."""
    num_heads = int(call.attr("num_heads", 0))
    if len(shape) == 4:
        return shape[1], shape[3]
    hidden = shape[2]
    if num_heads > 0:
        if _known(hidden) and hidden % num_heads:  # type: ignore[operator]
            raise fail(call, f"hidden size {hidden} is not a multiple of num_heads {num_heads}")
        return num_heads, (hidden // num_heads if _known(hidden) else None)  # type: ignore[operator]
    if not _known(cache_half) or not _known(hidden):
        return None, None
    head = 2 * cache_half  # type: ignore[operator]
    if head == 0 or hidden % head:  # type: ignore[operator]
        raise fail(call, f"hidden size {hidden} is not a multiple of head size {head}")
    return hidden // head, head  # type: ignore[operator]


def _check_positions(call: OpCall, batch: Dim, seq: Dim) -> None:
    pos = call.input(1).shape
    if pos is None or (len(pos) < 2 and (not pos or not _known(pos[0]) or pos[0] == 1)):
        return
    if len(pos) != 2:
        raise fail(call, "position_ids must have one element or be (batch, seq)")
    if any(_known(a, b) and a != b for a, b in zip(pos, (batch, seq), strict=True)):
        raise fail(call, "position_ids must be (batch, seq)")


def check(call: OpCall) -> Layout | None:
    """Raise `ShapeError` where ORT refuses the call; the layout when every size is static."""
    x = call.input(0).shape
    if x is not None and len(x) not in (3, 4):
        raise fail(call, "input must have rank 3 or 4 (ORT's kernel)")
    rd = int(call.attr("rotary_embedding_dim", 0))
    if rd > 0 and int(call.attr("num_heads", 0)) <= 0:
        raise fail(call, "rotary_embedding_dim needs num_heads")
    caches = _check_caches(call)
    if x is None or caches is None:
        return None
    max_pos, cache_half = caches
    batch, seq = x[0], x[2] if len(x) == 4 else x[1]
    _check_positions(call, batch, seq)
    heads, head = _head_size(call, x, cache_half)
    rotary = rd if rd > 0 else head
    if _known(rotary, head) and rotary > head:  # type: ignore[operator]
        raise fail(call, f"rotary_embedding_dim {rotary} is above head size {head}")
    if _known(rotary) and rotary % 2:  # type: ignore[operator]
        raise fail(call, f"rotary dim {rotary} is odd (not typed)")
    if _known(rotary, cache_half) and cache_half != rotary // 2:  # type: ignore[operator]
        raise fail(call, f"the caches' dim 1 must be {rotary} / 2")
    packed = int(call.attr("is_packed_batching", 0)) == 1
    if not packed and _known(seq, max_pos) and seq > max_pos:  # type: ignore[operator]
        raise fail(call, f"sequence length {seq} is above the caches' {max_pos} rows")
    if not _known(batch, seq, heads, head, rotary):
        return None
    inter = int(call.attr("interleaved", 0)) == 1
    return Layout(batch, seq, heads, head, rotary, inter)  # type: ignore[arg-type]


def layout(call: OpCall) -> Layout:
    """The layout of a call whose sizes are static (else a `ShapeError`)."""
    lay = check(call)
    if lay is None:
        raise fail(call, "the typed form needs static shapes")
    return lay
