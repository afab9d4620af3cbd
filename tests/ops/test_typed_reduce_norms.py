"""The typed forms of ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceProd
(`rewrite/ops/_reduce_norms.py`).

One-op models (opset 17 axes attribute, opset 18 axes input) encode with no opaque node and
`optimize` without rules writes models whose ORT outputs are bit-identical. The reference gives
ORT's values bit for bit on every axes subset of ranks 0-4 (size-1 dims and a large row
included), keepdims 0 and 1, noop_with_empty_axes, with NaN, ±inf, ±0 and overflow, in float32,
double, float16, int32 and int64 (saturation). The Z3 semantics in IEEE, evaluated on numbers
with the exp/log UFs given the C library's values, give ORT's values bit for bit too.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import z3

from rewrite.cli import main
from rewrite.ops import _z3
from rewrite.ops._reduce_norms import NORMS, libm
from rewrite.ops.registry import lookup
from rewrite.verify.semantics import number
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, numerals, run_ort, same

SHAPES = [(), (7,), (2, 9), (3, 4, 5), (2, 3, 4, 2), (1, 5), (3, 1, 4)]
DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64]


def _axes(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    r = len(shape)
    return [a for k in range(r + 1) for a in itertools.combinations(range(r), k)]


def _attrs(axes: tuple[int, ...], keepdims: int) -> dict[str, Any]:
    return ({"axes": list(axes)} if axes else {}) | {"keepdims": keepdims}


def _model(op: str, x: np.ndarray, attrs: dict[str, Any]) -> onnx.ModelProto:
    return model(op, {"x": x}, {}, 1, **attrs)


def _x(shape: tuple[int, ...], dtype: type, seed: int) -> np.ndarray:
    """Normal values (seed 0: positive, for LogSum), specials (seed 2), ints in [-9, 9]."""
    x = np.asarray(data(shape, dtype, seed, special=seed == 2), dtype=dtype)
    return np.asarray(np.abs(x)) if seed == 0 and x.dtype.kind == "f" else x


@pytest.mark.parametrize("op", NORMS)
def test_optimizes_to_identical_outputs(op: str, tmp_path: Path) -> None:
    x = _x((2, 3, 4), np.float32, 0)
    for n, (axes, keep) in enumerate([((1,), 1), ((0, 2), 0), ((), 1)]):
        (tmp_path / str(n)).mkdir()
        m = _model(op, x, _attrs(axes, keep))
        assert_optimizes_identically(m, {"x": x}, tmp_path / str(n))
    # opset 18: the axes as a constant input
    m = model(op, {"x": x}, {1: np.array([-1], np.int64)}, 2, keepdims=0)
    m.opset_import[0].version = 18
    (tmp_path / "18").mkdir()
    assert_optimizes_identically(m, {"x": x}, tmp_path / "18")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", NORMS)
def test_reference_gives_orts_values(op: str, dtype: type) -> None:
    spec = lookup(op)
    assert spec is not None and spec.reference is not None
    for shape in SHAPES:
        for axes, seed in itertools.product(_axes(shape), range(3)):
            x = _x(shape, dtype, seed)
            attrs = _attrs(axes, seed % 2)
            want = run_ort(_model(op, x, attrs), {"x": x})
            got = spec.reference(call_of(op, [x], {}, attrs), [x])[0]
            assert same(want, got), (shape, axes, x, want, got)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_a_large_row_and_saturation_give_orts_values(dtype: type) -> None:
    """Eigen's packets over 600 elements; integer results beyond the dtype's range."""
    big = np.iinfo(dtype).max // 3 if np.dtype(dtype).kind == "i" else 3e4
    for op in NORMS:
        spec = lookup(op)
        assert spec is not None and spec.reference is not None
        for x in (_x((20, 30), dtype, 1), np.full((2, 5), big, dtype), np.full(4, -big, dtype)):
            for axes in _axes(x.shape):
                attrs = _attrs(axes, 1)
                want = run_ort(_model(op, x, attrs), {"x": x})
                got = spec.reference(call_of(op, [x], {}, attrs), [x])[0]
                assert same(want, got), (op, x.shape, axes, want, got)


@pytest.mark.parametrize("op", NORMS)
def test_noop_with_empty_axes_gives_orts_values(op: str) -> None:
    """No axes with noop_with_empty_axes=1: each element reduced alone (|x|, sqrt(x·x),
    log x, x's LogSumExp, x), as ORT does."""
    spec = lookup(op)
    assert spec is not None and spec.reference is not None
    for dtype in DTYPES:
        x = _x((3, 4), dtype, 2)
        m = _model(op, x, {"noop_with_empty_axes": 1})
        m.opset_import[0].version = 18
        want = run_ort(m, {"x": x})
        got = spec.reference(call_of(op, [x], {}, {"noop_with_empty_axes": 1}), [x])[0]
        assert same(want, got), (dtype, x, want, got)


def _resolve_ufs(e: Any) -> Any:
    """`e` simplified with every exp/log UF application to a numeral replaced by the C
    library's value, until it is a numeral."""
    e = z3.simplify(e)
    for _ in range(10_000):
        apps: dict[int, Any] = {}
        todo = [e]
        while todo:
            t = todo.pop()
            name = t.decl().name().split("_")[0] if z3.is_app(t) else ""
            if name in ("exp", "log") and t.num_args() == 1 and z3.is_fp_value(t.arg(0)):
                apps[t.get_id()] = t
                continue
            todo += list(t.children())
        if not apps:
            return e
        pairs = []
        for t in apps.values():
            sort = t.arg(0).sort()
            np_t = np.float32 if sort.sbits() == 24 else np.float64
            v = libm(t.decl().name().split("_")[0], np_t(_z3.fp_number(t.arg(0))))
            pairs.append((t, z3.FPVal(float(v), sort)))
        e = z3.simplify(z3.substitute(e, *pairs))
    raise AssertionError("UF applications left")


def _ieee_numbers(op: str, x: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    spec = lookup(op)
    assert spec is not None and spec.z3 is not None
    call = call_of(op, [x], {}, attrs)
    out_t = spec.infer(call)[0]
    with _z3.arithmetic(_z3.IEEE):
        out = np.asarray(spec.z3(call, [numerals(x)])[0], dtype=object)
    vals = [number(_resolve_ufs(e), out_t.dtype) for e in out.reshape(-1)]
    wide = np.float64 if x.dtype.kind == "f" else object
    return np.array(vals, dtype=wide).astype(x.dtype).reshape(out.shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", NORMS)
def test_ieee_semantics_give_orts_values(op: str, dtype: type) -> None:
    for shape in [(), (7,), (2, 9), (3, 4, 2)]:
        for axes, seed in itertools.product(_axes(shape), range(3)):
            x = _x(shape, dtype, seed)
            attrs = _attrs(axes, seed % 2)
            want = run_ort(_model(op, x, attrs), {"x": x})
            assert same(want, _ieee_numbers(op, x, attrs)), (shape, axes, x, want)
    x = _x((3, 4), dtype, 2)
    m = _model(op, x, {"noop_with_empty_axes": 1})
    m.opset_import[0].version = 18
    got = _ieee_numbers(op, x, {"noop_with_empty_axes": 1})
    assert same(run_ort(m, {"x": x}), got)


_RULES = '''
from rewrite.rules import Ints, Rewrite, RuleSet, Tensor, op, rewrite

R = RuleSet("norms", doc="test rules")


@R.rule(tags=["exact", "ort-cpu"])
def rule(x: Tensor, a: Ints) -> Rewrite:
    """doc"""
    return rewrite(op.ReduceL2(x, axes=a, keepdims=1)).to(RIGHT)
'''


@pytest.mark.parametrize(
    ("right", "proved"),
    [
        ("op.Sqrt(op.ReduceSumSquare(x, axes=a, keepdims=1)), x.is_float()", True),
        ("op.ReduceL1(x, axes=a, keepdims=1)", False),
    ],
)
def test_the_prover_decides_rules_with_the_typed_forms(
    right: str, proved: bool, tmp_path: Path
) -> None:
    """ReduceL2 = Sqrt(ReduceSumSquare) bit for bit (Eigen's norm() is the sqrt of its
    squaredNorm(), the generic loops agree); ReduceL2 = ReduceL1 is refuted."""
    path = tmp_path / "norm_rules.py"
    path.write_text(_RULES.replace("RIGHT", right))
    assert (main(["verify", "--no-cache", str(path)]) == 0) == proved
