"""The typed forms of DepthToSpace, SpaceToDepth and ReverseSequence.

One-op models encode with no opaque node and `optimize --no-rules` writes models whose ORT
outputs are bit-identical; the reference and the Z3 semantics (IEEE numerals, special float
values) give ORT's values bit for bit; ReverseSequence's symbolic lengths are defined only in
[0, T] (ORT fails the run outside).
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

I64 = np.int64
# op, X shape, dtype, attrs
MOVES: list[tuple[str, tuple[int, ...], type, dict[str, Any]]] = [
    ("DepthToSpace", (1, 8, 2, 3), np.float32, {"blocksize": 2}),
    ("DepthToSpace", (2, 18, 2, 2), np.float32, {"blocksize": 3, "mode": "CRD"}),
    ("DepthToSpace", (1, 4, 3, 1), np.float64, {"blocksize": 2, "mode": "DCR"}),
    ("SpaceToDepth", (1, 3, 4, 6), np.float32, {"blocksize": 2}),
    ("SpaceToDepth", (2, 1, 3, 3), np.float64, {"blocksize": 3}),
    ("SpaceToDepth", (2, 2, 4, 2), np.float32, {"blocksize": 1}),
]
# X shape, lens, dtype, attrs
REVERSES: list[tuple[tuple[int, ...], list[int], type, dict[str, Any]]] = [
    ((4, 3), [1, 4, 0], np.float32, {}),
    ((5, 2, 3), [3, 5], np.float32, {"batch_axis": 1, "time_axis": 0}),
    ((2, 6, 2), [6, 2], np.int64, {"batch_axis": 0, "time_axis": 1}),
    ((3, 3), [2, 2, 3], np.float16, {"batch_axis": 0, "time_axis": 1}),
]


def _check(op: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> None:
    spec = lookup(op)
    assert spec is not None and spec.reference is not None
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    want = run_ort(model(op, feeds, {}, len(arrays), **attrs), feeds)
    call = call_of(op, arrays, {}, attrs)
    assert spec.infer(call)[0].shape == want.shape
    assert same(want, spec.reference(call, arrays)[0])
    got = z3_numbers(op, arrays, {}, attrs)
    assert same(want, got), (arrays, want, got)


@pytest.mark.parametrize("case", MOVES, ids=str)
def test_block_moves_give_orts_values(case: tuple) -> None:
    op, shape, dt, attrs = case
    for seed in range(3):
        _check(op, [data(shape, dt, seed, special=seed == 2)], attrs)


@pytest.mark.parametrize("case", REVERSES, ids=str)
def test_reverse_sequence_gives_orts_values(case: tuple) -> None:
    shape, lens, dt, attrs = case
    for seed in range(3):
        _check("ReverseSequence", [data(shape, dt, seed, seed == 2), np.array(lens, I64)], attrs)


def test_optimizes_to_identical_outputs(tmp_path: Path) -> None:
    cases = []
    for n, (op, shape, dt, attrs) in enumerate(MOVES):
        x = data(shape, dt, n)
        cases.append((model(op, {"x": x}, {}, 1, **attrs), {"x": x}))
    for n, (shape, lens, dt, attrs) in enumerate(REVERSES):
        feeds = {"x": data(shape, dt, n), "lens": np.array(lens, I64)}
        cases.append((model("ReverseSequence", feeds, {}, 2, **attrs), feeds))
    for n, (m, feeds) in enumerate(cases):
        (tmp_path / str(n)).mkdir()
        assert_optimizes_identically(m, feeds, tmp_path / str(n))


def test_reverse_sequence_length_outside_is_undefined() -> None:
    spec = lookup("ReverseSequence")
    assert spec is not None and spec.z3 is not None
    x = np.zeros((3, 2), np.float32)
    call = call_of("ReverseSequence", [x, np.zeros(2, I64)], {}, {})
    with _z3.arithmetic(_z3.IEEE), _z3.collecting() as (req, _):
        lens = np.array([z3.BitVec("l0", 64), z3.BitVec("l1", 64)], dtype=object)
        out = spec.z3(call, [numerals(x), lens])[0]
    assert out.shape == (3, 2) and len(req) == 2
    s = z3.Solver()
    s.add(req[0], z3.Or(lens[0] == 4, lens[0] == -1))
    assert s.check() == z3.unsat
    with pytest.raises(ShapeError, match="outside"):
        spec.reference(call, [x, np.array([4, 0], I64)])


@pytest.mark.parametrize(
    ("op", "shape", "attrs"),
    [
        ("DepthToSpace", (1, 6, 2, 2), {"blocksize": 2}),
        ("DepthToSpace", (1, 4, 2), {"blocksize": 2}),
        ("SpaceToDepth", (1, 2, 3, 4), {"blocksize": 2}),
        ("DepthToSpace", (1, 4, 2, 2), {"blocksize": 2, "mode": "XYZ"}),
    ],
)
def test_forms_outside_the_op_are_refused(op: str, shape: tuple, attrs: dict) -> None:
    spec = lookup(op)
    assert spec is not None
    with pytest.raises(ShapeError, match=op):
        spec.infer(call_of(op, [np.zeros(shape, np.float32)], {}, attrs))
