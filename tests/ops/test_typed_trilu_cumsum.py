"""The typed forms of Trilu and CumSum.

One-op models (causal masks with a 0-D k, k omitted, 1-D k; CumSum with a 0-D int32/int64
axis, every exclusive/reverse combination) encode with no opaque node and `optimize` without
rules writes models whose ORT outputs are bit-identical. The numpy reference and the Z3
semantics, evaluated on numbers, give ORT's values bit for bit on random and special inputs
(NaN, ±inf, ±0, ±FLT_MAX, subnormals; CumSum's sequential IEEE order in float32, float64 and
float16, wrapping int32/int64).
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
TRILUS: list[tuple[tuple[int, ...], type, Any, dict[str, Any]]] = [
    ((1, 1, 6, 6), np.float32, np.array(1, I64), {"upper": 1}),  # causal mask (GPT-2 style)
    ((4, 5), np.float32, None, {}),
    ((2, 3, 5), np.float64, np.array([-1], I64), {"upper": 0}),
    ((5, 3), np.float16, np.array(2, I64), {"upper": 0}),
    ((3, 4), np.int64, np.array(-2, I64), {}),
    ((2, 4, 4), np.bool_, np.array(0, I64), {"upper": 0}),
    ((3, 3), np.int32, np.array(7, I64), {}),
]
CUMSUMS: list[tuple[tuple[int, ...], type, Any, dict[str, Any]]] = [
    ((2, 9), np.float32, np.array(1, I64), {}),  # position ids
    ((3, 4, 5), np.float32, np.array(-2, np.int32), {"exclusive": 1}),
    ((7,), np.float32, np.array([0], I64), {"reverse": 1}),
    ((2, 6), np.float32, np.array(0, I64), {"exclusive": 1, "reverse": 1}),
    ((3, 8), np.float64, np.array(1, I64), {"reverse": 1}),
    ((4, 6), np.float16, np.array(-1, I64), {}),
    ((2, 5), np.int64, np.array(1, I64), {"exclusive": 1}),
    ((5, 2), np.int32, np.array(0, np.int32), {"reverse": 1}),
]


def _ids(case: tuple) -> str:
    shape, dt, k, attrs = case
    kk = "-" if k is None else f"{k.tolist()}"
    return f"{list(shape)}-{np.dtype(dt).name}-{kk}-{attrs}"


def _parts(case: tuple) -> tuple[dict, list, dict]:
    _, _, k, attrs = case
    consts = {} if k is None else {1: k}
    return consts, [None] if k is None else [None, k], attrs


@pytest.mark.parametrize("op", ["Trilu", "CumSum"])
def test_optimizes_to_identical_outputs(op: str, tmp_path: Path) -> None:
    cases = TRILUS if op == "Trilu" else CUMSUMS
    for n, case in enumerate(cases):
        shape, dt, _, _ = case
        consts, arrays, attrs = _parts(case)
        x = data(shape, dt, seed=n)
        m = model(op, {"x": x}, consts, len(arrays), **attrs)
        (tmp_path / str(n)).mkdir()
        assert_optimizes_identically(m, {"x": x}, tmp_path / str(n))


def _check(op: str, case: tuple) -> None:
    shape, dt, _, _ = case
    consts, arrays, attrs = _parts(case)
    spec = lookup(op)
    assert spec is not None and spec.reference is not None
    for seed in range(4):
        x = data(shape, dt, seed, special=seed >= 2)
        m = model(op, {"x": x}, consts, len(arrays), **attrs)
        want = run_ort(m, {"x": x})
        args = [x, *arrays[1:]]
        call = call_of(op, args, consts, attrs)
        assert spec.infer(call)[0].shape == want.shape
        ref = spec.reference(call, args)[0]
        assert same(want, ref), (x, want, ref)
        got = z3_numbers(op, args, consts, attrs)
        assert same(want, got), (x, want, got)


@pytest.mark.parametrize("case", TRILUS, ids=_ids)
def test_trilu_semantics_give_orts_values(case: tuple) -> None:
    _check("Trilu", case)


@pytest.mark.parametrize("case", CUMSUMS, ids=_ids)
def test_cumsum_semantics_give_orts_values(case: tuple) -> None:
    """ORT adds sequentially along the axis: the first element copied (inclusive: -0 stays)
    or +0 (exclusive), then one IEEE addition per step in scan order."""
    _check("CumSum", case)


def test_cumsum_order_is_sequential_not_pairwise() -> None:
    """1e8 + 1 + ... + 1 in float32: a sequential sum never moves; ORT's does not either."""
    x = np.array([1e8] + [1.0] * 15, dtype=np.float32)
    consts = {1: np.array(0, I64)}
    want = run_ort(model("CumSum", {"x": x}, consts, 2), {"x": x})
    assert want[-1] == np.float32(1e8)
    assert same(want, z3_numbers("CumSum", [x, consts[1]], consts, {}))


def test_cumsum_symbolic_ieee_terms_are_additions_in_scan_order() -> None:
    """The IEEE term of the last element is ((x0 + x1) + x2) + x3 over symbols."""
    spec = lookup("CumSum")
    assert spec is not None and spec.z3 is not None
    x = np.zeros(4, np.float32)
    consts = {1: np.array([0], I64)}
    call = call_of("CumSum", [x, consts[1]], consts, {})
    with _z3.arithmetic(_z3.IEEE):
        syms = np.array([z3.FP(f"x{i}", z3.Float32()) for i in range(4)], dtype=object)
        out = spec.z3(call, [syms, consts[1]])[0]
    s = syms
    assert z3.eq(z3.simplify(out[3]), z3.simplify(((s[0] + s[1]) + s[2]) + s[3]))
    assert numerals(x).shape == (4,)


@pytest.mark.parametrize(
    ("op", "shape", "k"),
    [
        ("Trilu", (5,), None),
        ("Trilu", (2, 2), np.array([1, 2], I64)),
        ("CumSum", (), np.array(0, I64)),
        ("CumSum", (2, 3), np.array(2, I64)),
        ("CumSum", (2, 3), np.array([0, 1], I64)),
    ],
)
def test_forms_outside_the_op_are_refused(op: str, shape: tuple, k: Any) -> None:
    spec = lookup(op)
    assert spec is not None
    x = np.zeros(shape, np.float32)
    consts = {} if k is None else {1: k}
    with pytest.raises(ShapeError, match=op):
        spec.infer(call_of(op, [x] if k is None else [x, k], consts, {}))
