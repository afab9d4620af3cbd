"""The typed form of Compress.

One-op models (axis first, last, in the middle and absent; a condition shorter than, as long
as and longer than the axis; all false; float32, float16, int64 and bool data) encode with no
opaque node and `optimize` without rules writes models whose ORT outputs are bit-identical,
with the condition a constant and with it a graph input (output dim unknown). The numpy
reference and the Z3 semantics, evaluated on numbers, give ORT's values bit for bit on random
and special values (NaN, ±inf, ±0, ±FLT_MAX, subnormals).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import z3

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, numerals, run_ort, same, z3_numbers

F32 = np.float32


def _b(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.bool_)


# (input shape, input dtype, condition, attributes)
CASES: list[tuple[tuple[int, ...], type, np.ndarray, dict[str, Any]]] = [
    ((4, 3), F32, _b(1, 0, 1, 1), {"axis": 0}),
    ((2, 5), F32, _b(0, 1, 1), {"axis": -1}),  # shorter: nothing kept past it
    ((2, 3, 2), F32, _b(1, 0, 1, 1, 1), {"axis": 1}),  # longer: the rest ignored
    ((2, 3), F32, _b(1, 0, 0, 1, 1, 0, 1), {}),  # flatten, longer than 6
    ((3, 2), np.float16, _b(0, 1, 1), {}),
    ((3, 4), np.int64, _b(1, 1, 0), {"axis": -2}),
    ((2, 2), np.bool_, _b(0, 1), {"axis": 1}),
    ((5,), F32, _b(0, 0, 0, 0, 0), {"axis": 0}),  # nothing kept
]


def _ids(case: tuple) -> str:
    shape, dt, cond, attrs = case
    return f"{list(shape)}-{np.dtype(dt).name}-{cond.astype(int).tolist()}-{attrs}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_optimizes_to_identical_outputs(case: tuple, tmp_path: Path) -> None:
    shape, dt, cond, attrs = case
    x = data(shape, dt, seed=3)
    m = model("Compress", {"x": x}, {1: cond}, 2, **attrs)
    assert_optimizes_identically(m, {"x": x}, tmp_path)


def test_a_run_time_condition_encodes_typed_and_round_trips(tmp_path: Path) -> None:
    """The condition a graph input: typed, output dim unknown, written back as it was."""
    x, cond = data((3, 4), F32, seed=5), _b(1, 0, 1)
    feeds = {"x": x, "c": cond}
    m = model("Compress", feeds, {}, 2, axis=0)
    onnx_path = tmp_path / "m.onnx"
    onnx.save(m, onnx_path)
    enc = encode(load(onnx_path))
    assert enc.opaque_nodes == 0 and enc.typed == 1
    assert_optimizes_identically(m, feeds, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_semantics_give_orts_values(case: tuple) -> None:
    shape, dt, cond, attrs = case
    spec = lookup("Compress")
    assert spec is not None and spec.reference is not None
    for seed in range(4):
        x = data(shape, dt, seed, special=seed >= 2)
        want = run_ort(model("Compress", {"x": x}, {1: cond}, 2, **attrs), {"x": x})
        call = call_of("Compress", [x, cond], {1: cond}, attrs)
        assert spec.infer(call)[0].shape == want.shape
        ref = spec.reference(call, [x, cond])[0]
        assert same(want, ref), (x, want, ref)
        got = z3_numbers("Compress", [x, cond], {1: cond}, attrs)
        assert same(want, got), (x, want, got)


def test_typed_form_axis_is_a_vector() -> None:
    """The e-graph's attributes: axis [a] or [] (flatten); both read as ONNX's."""
    spec = lookup("Compress")
    assert spec is not None and spec.egg is not None and spec.egg.to_egg and spec.egg.from_egg
    assert spec.egg.to_egg({"axis": -1}) == {"axis": [-1]} and spec.egg.to_egg({}) == {"axis": []}
    assert spec.egg.from_egg({"axis": [2]}) == {"axis": 2} and spec.egg.from_egg({}) == {}
    x, cond = np.arange(6, dtype=F32).reshape(2, 3), _b(0, 1, 1)
    for attrs, want in (({"axis": [1]}, [[1, 2], [4, 5]]), ({"axis": []}, [1, 2])):
        out = spec.reference(call_of("Compress", [x, cond], {1: cond}, attrs), [x, cond])[0]
        assert out.tolist() == want


def test_a_symbolic_condition_is_not_modelled() -> None:
    spec = lookup("Compress")
    assert spec is not None and spec.z3 is not None
    x = np.zeros((2, 3), F32)
    cond = np.array([z3.Bool("c0"), z3.BoolVal(True)], dtype=object)
    call = call_of("Compress", [x, _b(0, 1)], {}, {"axis": 0})
    with _z3.arithmetic(_z3.IEEE), pytest.raises(ShapeError, match="Compress"):
        spec.z3(call, [numerals(x), cond])


@pytest.mark.parametrize(
    ("shape", "cond", "attrs"),
    [
        ((2, 3), np.ones((1, 2), np.bool_), {"axis": 0}),
        ((2, 3), _b(1), {"axis": 2}),
        ((2, 3), _b(1), {"axis": -3}),
        ((), _b(1), {}),
    ],
)
def test_forms_outside_the_op_are_refused(shape: tuple, cond: np.ndarray, attrs: dict) -> None:
    spec = lookup("Compress")
    assert spec is not None
    x = np.zeros(shape, F32)
    with pytest.raises(ShapeError, match="Compress"):
        spec.infer(call_of("Compress", [x, cond], {1: cond}, attrs))
