"""The typed form of OneHot.

One-op models (axis last, first and in the middle; int64 and int32 depth, 0-D and 1-D; values
a constant or a graph input; int64, float32 and float16 values) encode with no opaque node and
`optimize` without rules writes models whose ORT outputs are bit-identical. The numpy
reference and the Z3 semantics, evaluated on numbers, give ORT's values bit for bit on random
indices, negative ones, ones outside [-d, d) and special values (NaN, ±0, ±inf as on/off).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import z3
from onnx import TensorProto, helper

from rewrite.errors import ShapeError
from rewrite.ops import _z3
from rewrite.ops.base import onnx_dtype
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically, round_trip
from tests.ops.typed_consts import call_of, model, run_ort, same, z3_numbers

I64 = np.int64
F32 = np.float32
# (indices shape, indices dtype, depth, values, values given as a constant, attributes)
CASES: list[tuple[tuple[int, ...], type, np.ndarray, np.ndarray, bool, dict[str, Any]]] = [
    ((2, 5), I64, np.array(6, I64), np.array([0, 1], I64), True, {}),
    ((7,), I64, np.array([4], I64), np.array([0.0, 1.0], F32), True, {"axis": 0}),
    ((2, 3, 2), I64, np.array(5, I64), np.array([-0.0, np.nan], F32), False, {"axis": 1}),
    ((3, 4), I64, np.array(3, np.int32), np.array([np.inf, -2.5], F32), False, {"axis": -2}),
    ((2, 3), np.int32, np.array(4, np.int32), np.array([1.0, 0.0], F32), True, {"axis": -3}),
    ((4,), I64, np.array(2, I64), np.array([3, -7], I64), False, {"axis": -1}),
    ((2, 2), I64, np.array(3, I64), np.array([0.0, 1.0], np.float16), True, {}),
]


def _ids(case: tuple) -> str:
    shape, dt, depth, vals, const, attrs = case
    kind = "const" if const else "input"
    return f"{list(shape)}-{np.dtype(dt).name}-d{depth.tolist()}-{vals.dtype.name}-{kind}-{attrs}"


def _indices(shape: tuple[int, ...], dt: type, depth: int, seed: int) -> np.ndarray:
    """Indices in [-d - 2, d + 2): hits, wrapped negatives and misses on both sides."""
    rng = np.random.default_rng(seed)
    return rng.integers(-depth - 2, depth + 2, size=shape).astype(dt)


def _parts(case: tuple, x: np.ndarray) -> tuple[dict, dict, list]:
    """Feeds, constants (ONNX input index -> value) and the three operands."""
    _, _, depth, vals, const, _ = case
    feeds = {"x": x} if const else {"x": x, "v": vals}
    consts = {1: depth, 2: vals} if const else {1: depth}
    return feeds, consts, [x, depth, vals]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_optimizes_to_identical_outputs(case: tuple, tmp_path: Path) -> None:
    shape, dt, depth, vals, _, attrs = case
    x = _indices(shape, dt, int(depth.reshape(-1)[0]), seed=1)
    feeds, consts, _ = _parts(case, x)
    m = model("OneHot", feeds, consts, 3, onnx_dtype(vals), **attrs)
    assert_optimizes_identically(m, feeds, tmp_path)


def test_cli_optimize_writes_identical_outputs(tmp_path: Path) -> None:
    """`rewrite optimize --no-rules`: 0 opaque nodes, the same ops, the same ORT bytes."""
    x = _indices((3, 4), I64, 5, seed=2)
    feeds = {"x": x, "v": np.array([-0.0, 2.5], F32)}
    m = model("OneHot", feeds, {1: np.array(5, I64)}, 3, onnx_dtype(feeds["v"]), axis=1)
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, (3, 5, 4)))
    out = round_trip(m, tmp_path)
    want, got = run_ort(m, feeds), run_ort(out, feeds)
    assert want.shape == got.shape == (3, 5, 4) and want.tobytes() == got.tobytes()


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_semantics_give_orts_values(case: tuple) -> None:
    shape, dt, depth, vals, _, attrs = case
    spec = lookup("OneHot")
    assert spec is not None and spec.reference is not None
    for seed in range(3):
        x = _indices(shape, dt, int(depth.reshape(-1)[0]), seed)
        feeds, consts, args = _parts(case, x)
        want = run_ort(model("OneHot", feeds, consts, 3, onnx_dtype(vals), **attrs), feeds)
        call = call_of("OneHot", args, consts, attrs)
        assert spec.infer(call)[0].shape == want.shape
        ref = spec.reference(call, args)[0]
        assert same(want, ref), (x, want, ref)
        got = z3_numbers("OneHot", args, {1: depth}, attrs)
        assert same(want, got), (x, want, got)


def test_extreme_indices_give_off_lines() -> None:
    """INT64_MIN, INT64_MAX, -d - 1 and d: all off; -d and d - 1: hits."""
    x = np.array([-(2**63), 2**63 - 1, -4, 3, -3, 2], I64)
    depth, vals = np.array(3, I64), np.array([5, 9], I64)
    want = run_ort(model("OneHot", {"x": x}, {1: depth, 2: vals}, 3, onnx_dtype(vals)), {"x": x})
    assert want.tolist()[:4] == [[5, 5, 5]] * 4 and want.tolist()[4:] == [[9, 5, 5], [5, 5, 9]]
    args = [x, depth, vals]
    assert same(want, z3_numbers("OneHot", args, {1: depth}, {}))


def test_float_indices_truncate_in_the_reference() -> None:
    """ORT casts float indices toward zero (NaN, ±inf: off); the reference does too."""
    x = np.array([-1.5, -0.5, 0.7, 1.9, 2.5, -3.5, np.nan, np.inf, -np.inf], F32)
    depth, vals = np.array(3, I64), np.array([0, 1], I64)
    want = run_ort(model("OneHot", {"x": x}, {1: depth, 2: vals}, 3, onnx_dtype(vals)), {"x": x})
    spec = lookup("OneHot")
    assert spec is not None and spec.reference is not None
    args = [x, depth, vals]
    assert same(want, spec.reference(call_of("OneHot", args, {1: depth}, {}), args)[0])


def test_symbolic_terms_are_one_if_per_element() -> None:
    """out[k, j] = If(i_k == j or i_k == j - d, on, off) over symbols (IEEE model)."""
    spec = lookup("OneHot")
    assert spec is not None and spec.z3 is not None
    x, depth, vals = np.zeros(2, I64), np.array(3, I64), np.zeros(2, F32)
    call = call_of("OneHot", [x, depth, vals], {1: depth}, {})
    with _z3.arithmetic(_z3.IEEE):
        i = [z3.BitVec(f"i{k}", 64) for k in range(2)]
        off, on = z3.FP("off", z3.Float32()), z3.FP("on", z3.Float32())
        out = spec.z3(call, [np.array(i, object), depth, np.array([off, on], object)])[0]
    assert out.shape == (2, 3)
    want = z3.If(z3.Or(i[1] == 2, i[1] == -1), on, off)
    solver = z3.Solver()
    solver.add(out[1, 2] != want)
    assert solver.check() == z3.unsat


@pytest.mark.parametrize(
    ("shape", "depth", "vals", "attrs"),
    [
        ((2,), np.array(0, I64), np.zeros(2, F32), {}),
        ((2,), np.array(-3, I64), np.zeros(2, F32), {}),
        ((2,), np.array([3, 4], I64), np.zeros(2, F32), {}),
        ((2,), np.array(3, I64), np.zeros(3, F32), {}),
        ((2, 3), np.array(3, I64), np.zeros(2, F32), {"axis": 3}),
        ((2, 3), np.array(3, I64), np.zeros(2, F32), {"axis": -4}),
    ],
)
def test_forms_outside_the_op_are_refused(
    shape: tuple, depth: np.ndarray, vals: np.ndarray, attrs: dict
) -> None:
    spec = lookup("OneHot")
    assert spec is not None
    x = np.zeros(shape, I64)
    with pytest.raises(ShapeError, match="OneHot"):
        spec.infer(call_of("OneHot", [x, depth, vals], {1: depth}, attrs))


def test_a_symbolic_depth_is_not_modelled() -> None:
    spec = lookup("OneHot")
    assert spec is not None and spec.z3 is not None
    x, vals = np.zeros(2, I64), np.zeros(2, F32)
    call = call_of("OneHot", [x, np.array(3, I64), vals], {}, {})
    with _z3.arithmetic(_z3.IEEE), pytest.raises(ShapeError):
        spec.z3(call, [x, np.array(z3.BitVec("d", 64), object), vals])
