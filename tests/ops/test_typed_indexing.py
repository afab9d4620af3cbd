"""The typed forms of GatherElements, Hardmax and BitShift.

One-op models encode with no opaque node and `optimize` without rules writes models whose ORT
outputs are bit-identical. The numpy reference and the Z3 semantics (IEEE model, numerals)
give ORT's values bit for bit: GatherElements on every axis with negative int64/int32
indices; Hardmax on NaN, ±inf, ±0 along lines of lengths that take Eigen's vector tree and
its tail; BitShift on every unsigned dtype with shift amounts past the width.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import z3

from rewrite.errors import ShapeError
from rewrite.ops import _z3
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, numerals, run_ort, same, z3_numbers

I64, I32 = np.int64, np.int32


def _indices(shape: tuple[int, ...], d: int, dt: type, seed: int) -> np.ndarray:
    """Indices in [-d, d) (both signs), of `shape`."""
    return np.random.default_rng(seed).integers(-d, d, size=shape).astype(dt)


# data shape, indices shape, axis, data dtype, indices dtype
GATHERS: list[tuple[tuple[int, ...], tuple[int, ...], int, type, type]] = [
    ((3, 4), (5, 4), 0, np.float32, I64),
    ((2, 3, 5), (2, 3, 7), -1, np.float32, I32),
    ((4, 6, 2), (3, 2, 2), 1, np.float64, I64),  # indices smaller off the axis
    ((5,), (8,), 0, np.int64, I64),
    ((2, 3), (2, 3), 1, np.float16, I32),
]
HARDMAXES: list[tuple[tuple[int, ...], int]] = [
    ((3, 5), -1),
    ((2, 9), 1),
    ((4, 17), -1),
    ((3, 8, 2), 1),  # the transposed path
    ((2, 3, 6), 0),
    ((5,), 0),
    ((2, 12, 3), -2),
]
BITSHIFTS: list[tuple[type, tuple[int, ...], tuple[int, ...], str]] = [
    (np.uint8, (4, 9), (4, 9), "LEFT"),
    (np.uint8, (4, 9), (), "RIGHT"),
    (np.uint16, (), (33,), "LEFT"),
    (np.uint32, (3, 1), (1, 11), "RIGHT"),
    (np.uint32, (37,), (37,), "LEFT"),
    (np.uint64, (2, 7), (7,), "RIGHT"),
    (np.uint64, (19,), (19,), "LEFT"),
]


def _gather_arrays(case: tuple, seed: int, special: bool = False) -> list[np.ndarray]:
    dshape, ishape, axis, dt, it = case
    return [data(dshape, dt, seed, special), _indices(ishape, dshape[axis], it, seed + 50)]


def _shift_arrays(case: tuple, seed: int) -> list[np.ndarray]:
    dt, ashape, bshape, _ = case
    rng = np.random.default_rng(seed)
    w = np.dtype(dt).itemsize * 8
    a = rng.integers(0, 2 ** min(w, 63), size=ashape, dtype=np.uint64).astype(dt)
    return [a, rng.integers(0, 2 * w + 3, size=bshape).astype(dt)]


def _check(op: str, arrays: list[np.ndarray], consts: dict, attrs: dict[str, Any]) -> None:
    """ORT, the reference and the Z3 semantics agree bit for bit on `arrays`."""
    spec = lookup(op)
    assert spec is not None and spec.reference is not None
    feeds = {f"x{i}": a for i, a in enumerate(arrays) if i not in consts}
    want = run_ort(model(op, feeds, consts, len(arrays), **attrs), feeds)
    call = call_of(op, list(arrays), consts, attrs)
    assert spec.infer(call)[0].shape == want.shape
    ref = spec.reference(call, list(arrays))[0]
    assert same(want, ref), (arrays, want, ref)
    got = z3_numbers(op, list(arrays), consts, attrs)
    assert same(want, got), (arrays, want, got)


@pytest.mark.parametrize("case", GATHERS, ids=str)
def test_gather_elements_semantics_give_orts_values(case: tuple) -> None:
    for seed in range(3):
        arrays = _gather_arrays(case, seed, special=seed == 2)
        _check("GatherElements", arrays, {}, {"axis": case[2]})
        _check("GatherElements", arrays, {1: arrays[1]}, {"axis": case[2]})


@pytest.mark.parametrize("case", HARDMAXES, ids=str)
def test_hardmax_semantics_give_orts_values(case: tuple) -> None:
    """Specials: NaN in some lines (all-0 lines or a 1 after it, as Eigen's tree keeps it or
    not), ties of +0 and -0 (the first wins), ±inf."""
    shape, axis = case
    for seed in range(6):
        _check("Hardmax", [data(shape, np.float32, seed, special=seed >= 2)], {}, {"axis": axis})


def test_hardmax_ties_pick_the_first_and_nan_can_clear_a_line() -> None:
    x = np.array(
        [[0.0, -0.0, 0.0, -1.0], [1.0, 3.0, 3.0, 2.0], [np.nan] * 4, [1.0, np.nan, 2.0, 0.0]],
        dtype=np.float32,
    )
    want = run_ort(model("Hardmax", {"x": x}, {}, 1), {"x": x})
    assert want[:3].tolist() == [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]]
    assert same(want, z3_numbers("Hardmax", [x], {}, {}))


@pytest.mark.parametrize("case", BITSHIFTS, ids=str)
def test_bitshift_semantics_give_orts_values(case: tuple) -> None:
    for seed in range(3):
        _check("BitShift", _shift_arrays(case, seed), {}, {"direction": case[3]})


def test_optimizes_to_identical_outputs(tmp_path: Path) -> None:
    models = []
    for n, case in enumerate(GATHERS):
        d, i = _gather_arrays(case, n)
        models.append((model("GatherElements", {"d": d}, {1: i}, 2, axis=case[2]), {"d": d}))
        feeds = {"d": d, "i": i}
        models.append((model("GatherElements", feeds, {}, 2, axis=case[2]), feeds))
    for n, (shape, axis) in enumerate(HARDMAXES):
        x = data(shape, np.float32, n, special=n % 2 == 1)
        models.append((model("Hardmax", {"x": x}, {}, 1, axis=axis), {"x": x}))
    for n, case in enumerate(BITSHIFTS):
        a, b = _shift_arrays(case, n)
        feeds = {"a": a, "b": b}
        models.append((model("BitShift", feeds, {}, 2, direction=case[3]), feeds))
    for n, (m, feeds) in enumerate(models):
        (tmp_path / str(n)).mkdir()
        assert_optimizes_identically(m, feeds, tmp_path / str(n))


def test_gather_elements_index_out_of_range_is_undefined() -> None:
    """A symbolic index is required in [-d, d); a constant one outside is refused."""
    spec = lookup("GatherElements")
    assert spec is not None and spec.z3 is not None
    x = np.zeros((3, 2), np.float32)
    i = np.zeros((1, 2), I64)
    call = call_of("GatherElements", [x, i], {}, {"axis": 0})
    with _z3.arithmetic(_z3.IEEE), _z3.collecting() as (req, _):
        idx = np.array([[z3.BitVec("i0", 64), z3.BitVec("i1", 64)]], dtype=object)
        out = spec.z3(call, [numerals(x), idx])[0]
    assert out.shape == (1, 2) and len(req) == 2
    s = z3.Solver()
    s.add(req[0], idx[0, 0] == 3)
    assert s.check() == z3.unsat
    with pytest.raises(ShapeError, match="out of range"):
        spec.z3(call, [numerals(x), np.array([[0, -4]], I64)])


@pytest.mark.parametrize(
    ("op", "arrays", "attrs"),
    [
        ("Hardmax", [np.zeros((2, 3), np.float64)], {}),
        ("Hardmax", [np.zeros((2, 3), np.float32)], {"axis": 2}),
        ("BitShift", [np.zeros(3, np.int32), np.zeros(3, np.int32)], {"direction": "LEFT"}),
        ("BitShift", [np.zeros(3, np.uint8), np.zeros(3, np.uint8)], {"direction": "UP"}),
        ("GatherElements", [np.zeros((2, 3), np.float32), np.zeros(3, I64)], {}),
    ],
)
def test_forms_outside_the_op_are_refused(op: str, arrays: list, attrs: dict) -> None:
    spec = lookup(op)
    assert spec is not None
    with pytest.raises(ShapeError, match=op):
        spec.infer(call_of(op, arrays, {}, attrs))
