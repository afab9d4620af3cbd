"""The typed form of DynamicQuantizeMatMul (com.microsoft): A quantized to uint8 at run time.

Every supported input form (b_scale per tensor or per column, with and without b_zero_point
and bias, int8 and uint8 B, A of rank 1 to 3, an int32 sum past float32's 2^24): ORT's CPU
output equals the numpy reference and the Z3 semantics in the IEEE model bit for bit; the
real model lies within rtol 1e-6 of the output's scale (the float32 roundings it leaves out);
`quantize` is ORT's DynamicQuantizeLinear bit for bit (ties, all-zero, one-signed inputs);
`infer`'s shape is ORT's; a model with the op encodes with 0 opaque nodes and
`optimize --no-rules` writes a model whose ORT outputs are bit-identical.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto, helper

from rewrite.errors import ShapeError
from rewrite.ops import _z3
from rewrite.ops.base import TensorType
from rewrite.ops.dynamic_quant import quantize
from rewrite.ops.registry import lookup
from rewrite.verify.semantics import number
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.test_typed_attention import Arrays, call_of, feeds, model, run_ort, z3_values
from tests.ops.typed_consts import numerals, same

MS, OP = "com.microsoft", "DynamicQuantizeMatMul"
RNG = np.random.default_rng(11)


def case(
    lead: tuple[int, ...], k: int, n: int, bdt: type, per_column: bool, zp: bool, bias: bool
) -> Arrays:
    info = np.iinfo(bdt)
    a = (RNG.standard_normal((*lead, k)) * 3 + RNG.choice([0.0, 1.5])).astype(np.float32)
    b = RNG.integers(info.min, info.max + 1, (k, n)).astype(bdt)
    s = np.asarray(RNG.random(n if per_column else ()) + 0.01, dtype=np.float32)
    z = RNG.integers(info.min, info.max + 1, s.shape).astype(bdt) if zp else None
    arrays: Arrays = [a, b, s, z, RNG.standard_normal(n).astype(np.float32) if bias else None]
    while arrays[-1] is None:
        arrays.pop()
    return arrays


def _large_sum() -> Arrays:
    """K = 700, A in [5, 6) and B = 127: sums near 700·235·127 > 2^24 round in float32."""
    a = (RNG.random((2, 700)) + 5).astype(np.float32)
    return [a, np.full((700, 2), 127, np.int8), np.asarray([0.5, 3e-3], dtype=np.float32)]


CASES = [
    case((2,), 5, 3, np.int8, False, False, False),
    case((2,), 6, 4, np.uint8, False, False, False),
    case((3,), 7, 2, np.int8, True, False, False),
    case((1, 3), 8, 3, np.uint8, True, True, False),
    case((2,), 5, 3, np.int8, False, True, True),
    case((), 9, 3, np.uint8, True, False, True),  # 1-D A, zero point omitted, bias given
    case((2, 2, 2), 4, 5, np.int8, True, True, True),
    [np.zeros((2, 3), np.float32), *case((1,), 3, 2, np.int8, True, True, True)[1:]],
    _large_sum(),
]
IDS = [f"{a[0].shape}x{a[1].shape}-{a[1].dtype}-{len(a)}in-s{a[2].shape}" for a in CASES]


def _ieee(arrays: Arrays) -> np.ndarray:
    """The Z3 semantics on IEEE numerals, simplified to float32 numbers."""
    spec = lookup(OP, MS)
    assert spec is not None and spec.z3 is not None
    with _z3.arithmetic(_z3.IEEE):
        terms = [None if a is None else numerals(a) for a in arrays]
        out = np.asarray(spec.z3(call_of(OP, arrays, {}), terms)[0], dtype=object)
    vals = [number(z3.simplify(e), TensorProto.FLOAT) for e in out.reshape(-1)]
    return np.array(vals, dtype=np.float64).astype(np.float32).reshape(out.shape)


@pytest.mark.parametrize("arrays", CASES, ids=IDS)
def test_reference_and_ieee_semantics_are_orts_bits(arrays: Arrays) -> None:
    spec = lookup(OP, MS)
    assert spec is not None and spec.reference is not None
    want = run_ort(OP, arrays, {})
    call = call_of(OP, arrays, {})
    assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, want.shape)
    assert same(want, spec.reference(call, arrays)[0])
    assert same(want, _ieee(arrays))


def test_the_large_sum_rounds_in_float32() -> None:
    """The case above whose int32 sums float32 cannot hold: the float32(acc) step is tested."""
    a, b, _ = CASES[-1]
    q, _, zp = quantize(a)
    acc = (q - zp) @ b.astype(np.int64)
    assert (acc > 2**24).all() and (acc.astype(np.float32).astype(np.int64) != acc).any()


@pytest.mark.parametrize("arrays", CASES, ids=IDS)
def test_real_semantics_are_within_the_bound(arrays: Arrays) -> None:
    """Exact in reals: rtol 1e-6 of the output's scale covers float32's roundings of
    A / scale_a's neighbours, scale_a · b_scale, acc and the bias."""
    want = run_ort(OP, arrays, {}).astype(np.float64)
    got = z3_values(OP, arrays, {})
    scale = max(float(np.abs(want).max()), 1e-30)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * scale)


def _dql(a: np.ndarray) -> list[np.ndarray]:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, a.shape)
    outs = [helper.make_empty_tensor_value_info(o) for o in ("q", "s", "z")]
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])
    m = helper.make_model(
        helper.make_graph([node], "g", [x], outs), opset_imports=[helper.make_opsetid("", 17)]
    )
    m.ir_version = 8
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": a})


def test_quantize_is_orts_dynamic_quantize_linear() -> None:
    """Ties (quarter steps), all zeros (scale 1), one-signed and tiny inputs, bit for bit."""
    rng = np.random.default_rng(3)
    inputs = [np.zeros(4, np.float32), np.array([1.0, 2.0], np.float32), -np.arange(5.0)]
    for i in range(300):
        scale = [1e-3, 1.0, 3.0, 100.0][i % 4]
        a = rng.standard_normal(int(rng.integers(1, 20))) * scale + [0.0, 1.0, -2.0][i % 3]
        inputs.append(np.round(a * 4) / 4 if i % 5 == 0 else a)
    for a in inputs:
        a32 = np.asarray(a, dtype=np.float32)
        q, s, z = _dql(a32)
        mq, ms, mz = quantize(a32)
        assert np.array_equal(q, mq) and s == ms and z == mz, a32


@pytest.mark.parametrize("arrays", CASES[:7], ids=IDS[:7])
def test_optimizes_to_identical_outputs(arrays: Arrays, tmp_path: Path) -> None:
    assert_optimizes_identically(model(OP, arrays, {}), feeds(arrays), tmp_path)


def test_symbolic_dims_infer() -> None:
    spec = lookup(OP, MS)
    assert spec is not None
    f, i8 = TensorProto.FLOAT, TensorProto.INT8
    types = [TensorType(f, ("b", "s", 8)), TensorType(i8, (8, 3)), TensorType(f, (3,))]
    call = type(call_of(OP, [], {}))(OP, types, [None] * 3, {})
    assert spec.infer(call) == [TensorType(f, ("b", "s", 3))]


@pytest.mark.parametrize(
    "arrays",
    [
        [np.zeros((2, 4), np.float32), np.zeros((5, 3), np.int8), np.ones((), np.float32)],
        [np.zeros((2, 4), np.float32), np.zeros((2, 4, 3), np.int8), np.ones((), np.float32)],
        [np.zeros((2, 4), np.float32), np.zeros((4, 3), np.int8), np.ones((2,), np.float32)],
        [np.zeros((2, 4), np.float32), np.zeros((4, 3), np.int8), np.ones((3, 1), np.float32)],
        [
            np.zeros((2, 4), np.float32),
            np.zeros((4, 3), np.int8),
            np.ones((3,), np.float32),
            np.zeros((3,), np.uint8),  # not B's dtype
        ],
        [
            np.zeros((2, 4), np.float32),
            np.zeros((4, 3), np.int8),
            np.ones((), np.float32),
            None,
            np.zeros((2,), np.float32),  # bias not N
        ],
        [np.zeros((2, 4), np.float16), np.zeros((4, 3), np.int8), np.ones((), np.float32)],
    ],
    ids=["K", "B-rank", "scale-size", "scale-rank", "zp-dtype", "bias-size", "A-dtype"],
)
def test_shapes_that_do_not_fit_are_refused(arrays: Arrays) -> None:
    spec = lookup(OP, MS)
    assert spec is not None
    with pytest.raises(ShapeError, match=OP):
        spec.infer(call_of(OP, arrays, {}))
