"""ORT's MatMulNBits contrib op (domain com.microsoft): a MatMul with blocked n-bit weights.

Contract (ORT 1.32's CPU kernel, float32 A, bits 4 or 8, no g_idx, no bias):
MatMulNBits(A (..., K), B uint8 (N, k_blocks, blob), scales (N·k_blocks,) or (N, k_blocks)
[, zero_points uint8 packed]) with k_blocks = ceil(K / block_size), blob = block_size·bits/8.
Weight k of column n lies in block kb = k // block_size at position i = k % block_size: the
bits [s, s + bits) of byte (i·bits) // 8 of B[n, kb], s = (i·bits) % 8 (low bits first).
Its zero point is the same-placed field of zero_points, packed per column into
ceil(k_blocks·bits/8) bytes (2^(bits-1) when zero_points is omitted). The kernel computes
  W[n, k] = (q - zp) · scale[n, kb]      (q - zp an exact integer, one rounding)
  Y = A · Wᵀ                             (..., N), A's dtype,
as its accuracy_level 0 and 1 paths do (the weights dequantized to float32, then an SGEMM).
A node of accuracy_level 2-4 (float16, bfloat16, int8 compute of A) stays opaque: at 4 MLAS
quantizes A per block where the CPU has an int8 kernel.

Typed form: `(ms_MatMulNBits K N bits block_size accuracy_level A B scales zero_points)`,
zero_points `(Absent)` when omitted. g_idx or bias inputs, float zero points and other
attributes keep the node opaque.

Z3 semantics: the dequantization above on bit-vector fields (exact: `Extract` of the byte,
the difference cast to float as ORT's int -> float Cast), then `np.matmul`'s sums of
products: exact in reals; in floats not bit-exact (MLAS's SGEMM sums in its own blocked FMA
order). The tests bound the difference to ORT (rtol 2e-5).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._cast import cast
from rewrite.ops._z3 import vmap
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, TensorType, fail
from rewrite.ops.registry import register

MS = "com.microsoft"
Array = np.ndarray
F32, U8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT32


def _sizes(call: OpCall) -> tuple[int, int, int, int, int]:
    """(K, N, bits, block_size, k_blocks), the attributes checked."""
    k, n = int(call.attr("K", 0)), int(call.attr("N", 0))
    bits, block = int(call.attr("bits", 4)), int(call.attr("block_size", 0))
    if bits not in (4, 8):
        raise fail(call, "bits must be 4 or 8 (the typed form)")
    if k <= 0 or n <= 0 or block < 16 or block & (block - 1):
        raise fail(call, "K, N must be positive and block_size a power of 2 >= 16")
    return k, n, bits, block, -(-k // block)


def _same(call: OpCall, got: Dim, want: int, what: str) -> None:
    if isinstance(got, int) and got != want:
        raise fail(call, f"{what} is {got}, not {want}")


def _infer(call: OpCall) -> list[TensorType]:
    """Y: (..., N) in A's dtype; A's last dim K, B (N, k_blocks, blob), scales N·k_blocks."""
    k, n, bits, block, kb = _sizes(call)
    a, b, s = call.input(0), call.input(1), call.input(2)
    if a.dtype not in (0, F32):
        raise fail(call, "A must be float32 (the typed form)")
    if b.dtype not in (0, U8) or (call.has_input(3) and call.input(3).dtype not in (0, U8)):
        raise fail(call, "B and zero_points must be uint8 (the typed form)")
    if b.shape is not None:
        if len(b.shape) != 3:
            raise fail(call, "B must be 3-D")
        wants = (n, kb, block * bits // 8)
        for got, want, what in zip(b.shape, wants, ("N", "blocks", "blob"), strict=True):
            _same(call, got, want, f"B's {what}")
    if s.numel is not None:
        _same(call, s.numel, n * kb, "scales' size")
    if call.has_input(3) and call.input(3).numel is not None:
        _same(call, call.input(3).numel, n * -(-kb * bits // 8), "zero_points' size")
    if a.shape is None:
        return [TensorType(a.dtype, None)]
    if not a.shape:
        raise fail(call, "A must have rank >= 1")
    _same(call, a.shape[-1], k, "A's last dim")
    return [TensorType(a.dtype, (*a.shape[:-1], n))]


def _field(byte: Any, shift: int, bits: int) -> Any:
    """Bits [shift, shift + bits) of one uint8 (a number or an 8-bit vector) as an int."""
    if z3.is_expr(byte):  # a shift as an unsigned division: the low bits of byte / 2^shift
        moved = z3.UDiv(byte, z3.BitVecVal(1 << shift, 8)) if shift else byte
        return z3.ZeroExt(32 - bits, z3.Extract(bits - 1, 0, moved))
    return (int(byte) >> shift) & ((1 << bits) - 1)


def _codes(call: OpCall, b: Array, zp: Array | None) -> Array:
    """(N, K) of q - zp: ints, or 32-bit vectors over Z3 terms."""
    k, n, bits, block, kb = _sizes(call)
    per = 8 // bits
    zp_row = -(-kb // per)
    flat_zp = None if zp is None else zp.reshape(-1)
    out = np.empty((n, k), dtype=object)
    for col in range(n):
        for j in range(k):
            blk, i = divmod(j, block)
            q = _field(b[col, blk, i // per], (i % per) * bits, bits)
            if flat_zp is None:
                z: Any = 1 << (bits - 1)
            else:
                z = _field(flat_zp[col * zp_row + blk // per], (blk % per) * bits, bits)
            out[col, j] = q - z
    return out


def _weights(call: OpCall, arrays: list[Array | None], like: Any) -> Array:
    """W (N, K): (q - zp) · scale, the difference cast to A's float type."""
    _, n, _, block, kb = _sizes(call)
    b, scales = arrays[1], arrays[2]
    assert b is not None and scales is not None
    codes = _codes(call, b, arrays[3] if len(arrays) > 3 else None)
    s = scales.reshape(n, kb)
    blocks = np.arange(codes.shape[1]) // block
    if z3.is_expr(like):
        as_float = vmap(lambda t: cast(t, I32, F32), codes)
    else:
        as_float = codes.astype(np.float64)
    return as_float * s[:, blocks]


def _reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    a = arrays[0]
    assert a is not None
    w = _weights(call, arrays, None)  # in float64: the real model's value
    y = np.matmul(a.astype(np.float64), w.T)
    return [y.astype(a.dtype)]


def _semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    _infer(call)  # float32 A, uint8 B and zero points
    a = arrays[0]
    assert a is not None
    w = _weights(call, arrays, a.flat[0])
    return [np.asarray(np.matmul(a, w.T), dtype=object)]


def _flops(call: OpCall, outputs: list[TensorType]) -> float:
    """2·K per output element, plus the dequantization (2 per weight)."""
    k, n = int(call.attr("K", 0)), int(call.attr("N", 0))
    numel = outputs[0].numel if outputs else None
    return 2.0 * k * numel + 2.0 * k * n if numel is not None else 0.0


def _attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """K, N and block_size from the operand shapes, 4 bits, accuracy level 0."""
    a = inputs[0].shape if inputs else None
    b = inputs[1].shape if len(inputs) > 1 else None
    if name == "K" and a:
        return [a[-1]]
    if name == "N" and b:
        return [b[0]]
    if name == "block_size" and b and isinstance(b[2], int):
        return [b[2] * 2]
    if name == "bits":
        return [4]
    if name == "accuracy_level":
        return [0]
    return None


def _to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """accuracy_level 0 (unset) or 1 (float32 compute) only: at 4 the kernel may quantize A
    to int8 per block (MLAS's CompInt8, where the CPU has it), which this form does not state."""
    return attrs if int(attrs.get("accuracy_level", 0)) in (0, 1) else None


MATMUL_NBITS = register(
    OpSpec(
        "MatMulNBits",
        _infer,
        _reference,
        _flops,
        domain=MS,
        egg=EggSig(
            attrs=(
                ("K", "i64", None),
                ("N", "i64", None),
                ("bits", "i64", 4),
                ("block_size", "i64", None),
                ("accuracy_level", "i64", 0),
            ),
            n_inputs=4,
            optional=1,
            to_egg=_to_egg,
            from_egg=dict,
        ),
        z3=_semantics,
        input_dtypes=(None, (U8,), None, (U8,)),
        attr_values=_attr_values,
        doc="MatMulNBits: A · dequantize(B)ᵀ, B's n-bit codes in blocks with per-block scales",
    )
)


def _self_test_values() -> list[tuple[dict[str, Any], list[Array | None]]]:
    """Input sets (`verify/selftest_values.py`): B's, scales' and zero points' shapes follow
    K, N, bits and block_size, which the sampling bound does not know."""
    rng = np.random.default_rng(0)
    out: list[tuple[dict[str, Any], list[Array | None]]] = []
    for k, n, bits, block, zp in (
        (32, 3, 4, 16, False),
        (40, 2, 4, 16, True),
        (20, 2, 8, 16, True),
    ):
        kb = -(-k // block)
        a = (rng.standard_normal((2, k)) * 3).astype(np.float32)
        b = rng.integers(0, 256, (n, kb, block * bits // 8), dtype=np.uint8)
        s = (rng.random(n * kb) + 0.1).astype(np.float32)
        arrays: list[Array | None] = [a, b, s]
        if zp:
            arrays.append(rng.integers(0, 256, (n * -(-kb * bits // 8),), dtype=np.uint8))
        out.append(({"K": k, "N": n, "bits": bits, "block_size": block}, arrays))
    return out


SELF_TEST_VALUES = {(MS, "MatMulNBits"): _self_test_values()}
