"""The typed form of ScatterND (reduction "none").

One-op models (KV-cache style row updates with constant indices, computed indices, duplicate
and negative tuples) encode with no opaque node and `optimize` without rules writes models
whose ORT outputs are bit-identical. The reference and the Z3 semantics (numeral indices, and
symbolic index terms then set to the values) give ORT's values bit for bit, the last of
duplicate tuples winning; an index out of range is an error in ORT and undefined in Z3.
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
from rewrite.verify.semantics import number
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, numerals, run_ort, same, z3_numbers

I64 = np.int64
F32 = 1  # onnx FLOAT
# data shape, indices, updates dtype
CASES: list[tuple[tuple[int, ...], list[Any], type]] = [
    ((1, 4, 6, 3), [[[0, 2]], [[0, -1]]], np.float32),  # cache rows, k = 2
    ((4, 2), [[1], [-1], [1]], np.float32),  # a duplicate: the last wins
    ((3, 3), [[0, 0], [2, 1], [0, 0]], np.float64),  # k = rank: elements
    ((5,), [[4], [0]], np.int64),
    ((2, 3), [[1]], np.bool_),
    ((4, 3), [[3], [2]], np.float16),
]


def _ids(case: tuple) -> str:
    return f"{list(case[0])}-{np.dtype(case[2]).name}-{case[1]}"


def _arrays(case: tuple, seed: int, special: bool = False) -> tuple[np.ndarray, ...]:
    shape, idx, dt = case
    i = np.array(idx, dtype=I64)
    k = i.shape[-1]
    d = data(shape, dt, seed, special)
    u = data((*i.shape[:-1], *shape[k:]), dt, seed + 100, special)
    return d, i, u


@pytest.mark.parametrize("const_indices", [True, False])
def test_optimizes_to_identical_outputs(const_indices: bool, tmp_path: Path) -> None:
    for n, case in enumerate(CASES):
        d, i, u = _arrays(case, n)
        feeds = {"d": d, "u": u} if const_indices else {"d": d, "i": i, "u": u}
        consts = {1: i} if const_indices else {}
        m = model("ScatterND", feeds, consts, 3)
        (tmp_path / str(n)).mkdir()
        assert_optimizes_identically(m, feeds, tmp_path / str(n))


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_semantics_give_orts_values(case: tuple) -> None:
    spec = lookup("ScatterND")
    assert spec is not None and spec.reference is not None
    for seed in range(4):
        d, i, u = _arrays(case, seed, special=seed >= 2)
        want = run_ort(
            model("ScatterND", {"d": d, "i": i, "u": u}, {}, 3), {"d": d, "i": i, "u": u}
        )
        call = call_of("ScatterND", [d, i, u], {}, {})
        assert spec.infer(call)[0].shape == want.shape
        assert same(want, spec.reference(call, [d, i, u])[0])
        assert same(want, z3_numbers("ScatterND", [d, i, u], {}, {}))
        consts = {1: i}  # the indices as a constant input: the same values
        assert same(want, z3_numbers("ScatterND", [d, i, u], consts, {}))


def test_symbolic_indices_select_as_ort_does() -> None:
    """Indices as bit-vector symbols (data and updates numerals): substituting each index
    assignment, duplicates and negative ones included, gives ORT's output; the recorded
    requirement is false exactly for an index out of range."""
    spec = lookup("ScatterND")
    assert spec is not None and spec.z3 is not None
    d = np.arange(8, dtype=np.float32).reshape(4, 2)
    u = -np.arange(1, 7, dtype=np.float32).reshape(3, 2)
    i0 = np.zeros((3, 1), I64)
    call = call_of("ScatterND", [d, i0, u], {}, {})
    syms = np.array([[z3.BitVec(f"i{j}", 64)] for j in range(3)], dtype=object)
    with _z3.arithmetic(_z3.IEEE), _z3.collecting() as (req, _):
        out = spec.z3(call, [numerals(d), syms, numerals(u)])[0]
    for idx in ([1, -3, 1], [3, 2, -4], [0, 0, 0], [-1, 2, 3], [4, 0, 0]):
        sub = [(s, z3.BitVecVal(v, 64)) for s, v in zip(syms.reshape(-1), idx, strict=True)]
        ok = z3.simplify(z3.substitute(z3.And(*req), *sub))
        i = np.array(idx, I64).reshape(3, 1)
        if max(idx) >= 4:
            assert z3.is_false(ok)
            continue
        assert z3.is_true(ok)
        want = run_ort(
            model("ScatterND", {"d": d, "i": i, "u": u}, {}, 3), {"d": d, "i": i, "u": u}
        )
        vals = [number(z3.simplify(z3.substitute(t, *sub)), F32) for t in out.reshape(-1)]
        got = np.array(vals, dtype=np.float32).reshape(want.shape)
        assert same(want, got), (idx, want, got)


@pytest.mark.parametrize(
    ("shapes", "attrs"),
    [
        (((4, 2), (3,), (3, 2)), {}),  # no room for index tuples: k = 3 > rank
        (((4, 2), (3, 1), (3, 3)), {}),  # updates of the wrong shape
        (((4, 2), (), ()), {}),  # indices of rank 0
    ],
)
def test_forms_outside_the_op_are_refused(shapes: tuple, attrs: dict) -> None:
    spec = lookup("ScatterND")
    assert spec is not None
    arrays = [np.zeros(s, np.float32) for s in shapes]
    arrays[1] = arrays[1].astype(I64)
    with pytest.raises(ShapeError, match="ScatterND"):
        spec.infer(call_of("ScatterND", arrays, {}, attrs))


def test_a_reduction_stays_opaque() -> None:
    spec = lookup("ScatterND")
    assert spec is not None and spec.egg is not None and spec.egg.to_egg is not None
    assert spec.egg.to_egg({"reduction": "add"}) is None
    assert spec.egg.to_egg({"reduction": "none"}) == {}
