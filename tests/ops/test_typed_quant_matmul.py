"""The typed form of MatMulNBits (com.microsoft): 4- and 8-bit blocked weights.

Every supported input form (with and without packed zero points, K a multiple of the block
or not, A of rank 1 to 3): ORT's CPU output against the reference and the Z3 semantics
evaluated on the same numbers within rtol 2e-5 of the output's scale (ORT's SGEMM order), the
dequantized weights exactly (ORT's own dequantization through a MatMul with an identity A),
`infer`'s shape equal to ORT's; a model with the op encodes with 0 opaque nodes and
`optimize --no-rules` writes a model whose ORT outputs are bit-identical.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.base import TensorType
from rewrite.ops.registry import lookup
from rewrite.verify.semantics import number
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.test_typed_attention import Arrays, call_of, feeds, model, run_ort, z3_values
from tests.ops.typed_consts import numerals, same

MS = "com.microsoft"
RNG = np.random.default_rng(5)


def case(
    lead: tuple[int, ...], k: int, n: int, bits: int, block: int, zp: bool, **more: int
) -> tuple:
    kb = -(-k // block)
    a = RNG.standard_normal((*lead, k)).astype(np.float32)
    b = RNG.integers(0, 256, (n, kb, block * bits // 8), dtype=np.uint8)
    s = (RNG.random(n * kb) + 0.1).astype(np.float32)
    arrays: Arrays = [a, b, s]
    if zp:
        arrays.append(RNG.integers(0, 256, (n * -(-kb * bits // 8),), dtype=np.uint8))
    return arrays, {"K": k, "N": n, "bits": bits, "block_size": block, **more}


CASES = [
    case((2,), 32, 3, 4, 16, False),
    case((1, 3), 40, 2, 4, 16, True),  # K not a multiple of the block, odd block count
    case((), 16, 2, 4, 16, True),  # 1-D A
    case((4,), 64, 3, 4, 32, True),
    case((2,), 20, 3, 8, 16, True),
    case((2,), 20, 2, 8, 16, False),
    case((3,), 32, 2, 4, 32, False, accuracy_level=1),
]
IDS = [f"{a[0].shape}-K{t['K']}-b{t['bits']}-zp{len(a) > 3}" for a, t in CASES]


def _close(got: np.ndarray, want: np.ndarray) -> None:
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-5, atol=2e-5 * scale)


@pytest.mark.parametrize(("arrays", "attrs"), CASES, ids=IDS)
def test_semantics_give_orts_values(arrays: Arrays, attrs: dict[str, Any]) -> None:
    spec = lookup("MatMulNBits", MS)
    assert spec is not None and spec.reference is not None
    want = run_ort("MatMulNBits", arrays, attrs)
    call = call_of("MatMulNBits", arrays, attrs)
    assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, want.shape)
    ref = spec.reference(call, arrays)[0]
    assert ref.dtype == want.dtype
    _close(ref, want)
    _close(z3_values("MatMulNBits", arrays, attrs), want)


@pytest.mark.parametrize(("arrays", "attrs"), CASES, ids=IDS)
def test_dequantized_weights_are_orts(arrays: Arrays, attrs: dict[str, Any]) -> None:
    """A = the identity: ORT's output is W (one product by 1.0 each), bit for bit, in the real
    model and in the IEEE model."""
    spec = lookup("MatMulNBits", MS)
    assert spec is not None and spec.z3 is not None
    eye = np.eye(attrs["K"], dtype=np.float32)
    with_eye = [eye, *arrays[1:]]
    want = run_ort("MatMulNBits", with_eye, attrs)
    got = z3_values("MatMulNBits", with_eye, attrs)
    assert np.array_equal(got.astype(np.float32), want)
    assert same(want, _ieee(with_eye, attrs))


def _ieee(arrays: Arrays, attrs: dict[str, Any]) -> np.ndarray:
    """The Z3 semantics on IEEE numerals, simplified to float32 numbers."""
    spec = lookup("MatMulNBits", MS)
    assert spec is not None and spec.z3 is not None
    with _z3.arithmetic(_z3.IEEE):
        terms = [None if a is None else numerals(a) for a in arrays]
        out = np.asarray(spec.z3(call_of("MatMulNBits", arrays, attrs), terms)[0], dtype=object)
    vals = [number(z3.simplify(e), TensorProto.FLOAT) for e in out.reshape(-1)]
    return np.array(vals, dtype=np.float64).astype(np.float32).reshape(out.shape)


@pytest.mark.parametrize(("arrays", "attrs"), CASES, ids=IDS)
def test_optimizes_to_identical_outputs(arrays: Arrays, attrs: dict, tmp_path: Path) -> None:
    assert_optimizes_identically(model("MatMulNBits", arrays, attrs), feeds(arrays), tmp_path)


def test_symbolic_dims_infer() -> None:
    spec = lookup("MatMulNBits", MS)
    assert spec is not None
    f, u8 = TensorProto.FLOAT, TensorProto.UINT8
    types = [TensorType(f, ("b", "s", 32)), TensorType(u8, (3, 2, 8)), TensorType(f, (6,))]
    attrs = {"K": 32, "N": 3, "bits": 4, "block_size": 16}
    call = call_of("MatMulNBits", [None, None, None], attrs)
    call = type(call)("MatMulNBits", types, [None] * 3, attrs)
    assert spec.infer(call) == [TensorType(f, ("b", "s", 3))]


@pytest.mark.parametrize(
    ("shapes", "attrs"),
    [
        ([(2, 31), (3, 2, 8), (6,)], {"K": 32, "N": 3, "block_size": 16}),  # A's K
        ([(2, 32), (3, 2, 8), (5,)], {"K": 32, "N": 3, "block_size": 16}),  # scales
        ([(2, 32), (3, 2, 8), (6,)], {"K": 32, "N": 3, "block_size": 12}),  # block size
        ([(2, 32), (3, 2, 8), (6,)], {"K": 32, "N": 3, "bits": 2, "block_size": 16}),
        ([(2, 32), (4, 2, 8), (6,)], {"K": 32, "N": 3, "block_size": 16}),  # B's N
    ],
)
def test_shapes_that_do_not_fit_are_refused(shapes: list, attrs: dict) -> None:
    spec = lookup("MatMulNBits", MS)
    assert spec is not None
    arrays: Arrays = [
        np.zeros(shapes[0], np.float32),
        np.zeros(shapes[1], np.uint8),
        np.zeros(shapes[2], np.float32),
    ]
    with pytest.raises(ShapeError, match="MatMulNBits"):
        spec.infer(call_of("MatMulNBits", arrays, attrs))


def test_int8_compute_stays_opaque(tmp_path: Path) -> None:
    arrays, attrs = CASES[0]
    path = tmp_path / "m.onnx"
    onnx.save(model("MatMulNBits", arrays, {**attrs, "accuracy_level": 4}), path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 1 and enc.typed == 0
