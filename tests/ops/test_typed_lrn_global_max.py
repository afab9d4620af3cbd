"""The typed forms of LRN and GlobalMaxPool.

One-op models (light-model shapes, 1-D to 3-D global pools, LRN sizes 1/3/5) encode with no
opaque node and `optimize` without rules writes models whose ORT outputs are bit-identical; the
numpy reference and the Z3 semantics, evaluated on numbers, give ORT's values on random inputs
and on NaN, ±inf, ±0, -FLT_MAX and subnormals: GlobalMaxPool bit for bit; LRN's NaN, ±inf, ±0
and signs bit for bit, its finite values up to Eigen's pow (ORT's Y is x times a float32
within 2 ulps of the float64 pow of the modelled scale).
The symbolic IEEE terms give the numeral path's values wherever they do not apply the pow UF.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import z3
from onnx import TensorProto

from rewrite.errors import ShapeError
from rewrite.ops import _z3
from rewrite.ops._lrn import pow_term
from rewrite.ops._z3 import fp_number
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.test_typed_pool import NP, _call, _data, _model, _ort, _same, _z3_numbers

P = TensorProto
F32 = np.float32
LRNS: list[tuple[list[int], dict[str, Any]]] = [
    ([1, 16, 5, 5], {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}),  # AlexNet's
    ([2, 6, 3, 4], {"size": 3, "alpha": 0.5, "beta": 0.6, "bias": 2.0}),
    ([1, 4, 2, 3], {"size": 1, "alpha": 2.0, "beta": 1.0, "bias": 0.5}),
    ([1, 5, 2, 2], {"size": 5, "alpha": 3.0, "beta": 2.0, "bias": 1e-3}),
    ([1, 3, 3, 2], {"size": 3}),  # alpha, beta, bias left out
]
GLOBAL_MAX_POOLS = [[1, 3, 7], [2, 3, 5, 5], [1, 2, 2, 3, 3], [1, 2, 1, 1]]


def _lrn_id(case: tuple) -> str:
    return f"{case[0]}-{case[1]}"


@pytest.mark.parametrize("case", LRNS, ids=_lrn_id)
def test_lrn_optimizes_to_identical_outputs(case: tuple, tmp_path: Path) -> None:
    shape, attrs = case
    x = _data(tuple(shape), P.FLOAT, seed=1)
    assert_optimizes_identically(_model("LRN", shape, **attrs), {"x": x}, tmp_path)


@pytest.mark.parametrize("shape", GLOBAL_MAX_POOLS[:3], ids=str)
def test_global_max_pool_optimizes_to_identical_outputs(shape: list[int], tmp_path: Path) -> None:
    x = _data(tuple(shape), P.FLOAT, seed=2)
    assert_optimizes_identically(_model("GlobalMaxPool", shape), {"x": x}, tmp_path)


def _lrn_inputs(shape: list[int]) -> list[np.ndarray]:
    """Random, special-value and large (cancelling running sum) inputs."""
    xs = [_data(tuple(shape), P.FLOAT, seed) for seed in range(2)]
    xs += [_data(tuple(shape), P.FLOAT, seed, special=True) for seed in range(3)]
    big = _data(tuple(shape), P.FLOAT, 9) * F32(1e3)
    big.reshape(-1)[::5] = F32(3e7)
    return [*xs, big]


def _up_to_pow(want: np.ndarray, got: np.ndarray, x: np.ndarray, ulps: int = 2) -> np.ndarray:
    """Whether ORT's `want` is x · p' for p' within `ulps` float32 steps of the pow `got`
    used (got = x · p): the scale matched and only Eigen's pow rounds otherwise."""
    with np.errstate(all="ignore"):
        p = got / x
        ok = want == got
        lo = hi = p
        for _ in range(ulps):
            lo, hi = np.nextafter(lo, F32(-np.inf)), np.nextafter(hi, F32(np.inf))
            ok |= (want == x * lo) | (want == x * hi)
    return ok


@pytest.mark.parametrize("case", LRNS, ids=_lrn_id)
def test_lrn_semantics_give_orts_values(case: tuple) -> None:
    """NaN, ±inf, ±0 and signs bit for bit (the running channel sum: inf - inf = NaN in later
    channels, cancellation); finite values up to Eigen's vectorised pow, which differs from the
    float64 pow by up to 2 ulps on a good part of the elements (hence the UF)."""
    shape, attrs = case
    model = _model("LRN", shape, **attrs)
    spec = lookup("LRN")
    assert spec is not None and spec.reference is not None
    for x in _lrn_inputs(shape):
        want = _ort(model, x)
        ref = spec.reference(_call("LRN", x, attrs), [x])[0]
        sem = _z3_numbers("LRN", x, attrs)
        for got in (ref, sem.reshape(want.shape)):
            assert got.dtype == want.dtype
            nan = np.isnan(want)
            assert np.array_equal(nan, np.isnan(got)), (x, want, got)
            differ = ~nan & ((want != got) | (np.signbit(want) != np.signbit(got)))
            assert _up_to_pow(want, got, x)[differ].all(), (x[differ], want[differ], got[differ])


def test_lrn_pow_special_cases_match_the_numeral_path() -> None:
    """`pow_term` on special scales simplifies to float64 pow's value (as ORT gives it);
    on another finite positive scale it applies the UF."""
    for beta in (0.75, 1.0, 2.0, 3.0):
        for s in (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.0, -0.5):
            t = z3.simplify(pow_term(z3.FPVal(s, z3.Float32()), beta))
            with np.errstate(all="ignore"):
                want = F32(np.power(np.float64(s), -np.float64(beta)))
            integer_neg = s < 0 and np.isfinite(s) and beta.is_integer()
            if integer_neg:  # |s|^-beta through the UF, the sign explicit
                assert not z3.is_fp_value(t)
                continue
            got = F32(fp_number(t))
            assert _same(np.array([want]), np.array([got])), (beta, s, want, got)
        assert not z3.is_fp_value(z3.simplify(pow_term(z3.FPVal(3.0, z3.Float32()), beta)))


def test_lrn_symbolic_terms_agree_with_the_numeral_path() -> None:
    """The IEEE terms over symbols, with the symbols then set to special values: every element
    that simplifies to a numeral (the pow UF not applied) is the numeral path's value."""
    attrs = {"size": 3, "alpha": 0.5, "beta": 0.75, "bias": 1.0}
    spec = lookup("LRN")
    assert spec is not None and spec.z3 is not None
    x = _data((1, 4, 1, 2), P.FLOAT, 3, special=True)
    call = _call("LRN", x, attrs)
    with _z3.arithmetic(_z3.IEEE):
        syms = np.empty(x.shape, dtype=object)
        syms.reshape(-1)[:] = [z3.FP(f"x{i}", z3.Float32()) for i in range(x.size)]
        terms = spec.z3(call, [syms])[0]
    subst = [
        (s, z3.FPVal(float(v), z3.Float32()))
        for s, v in zip(syms.reshape(-1), x.reshape(-1), strict=True)
    ]
    want = _ort(_model("LRN", list(x.shape), **attrs), x).reshape(-1)
    checked = 0
    for t, w in zip(np.asarray(terms).reshape(-1), want, strict=True):
        v = z3.simplify(z3.substitute(t, *subst))
        if z3.is_fp_value(v):
            assert _same(np.array([w]), np.array([F32(fp_number(v))])), (x, t, w)
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("shape", GLOBAL_MAX_POOLS, ids=str)
def test_global_max_pool_semantics_give_orts_values(shape: list[int]) -> None:
    """MLAS's lanes: which of NaN, ±0 and -inf wins, bit for bit."""
    model = _model("GlobalMaxPool", shape)
    spec = lookup("GlobalMaxPool")
    assert spec is not None and spec.reference is not None
    for seed in range(5):
        x = _data(tuple(shape), P.FLOAT, seed, special=seed > 0)
        want = _ort(model, x)
        got = spec.reference(_call("GlobalMaxPool", x, {}), [x])[0]
        assert got.dtype == want.dtype and _same(want, got), (x, want, got)
        assert _same(want, _z3_numbers("GlobalMaxPool", x, {})), (x, want)


def test_global_max_pool_of_minus_inf_is_the_lowest_float() -> None:
    """MLAS's lanes start from -FLT_MAX: a plane of -inf gives -FLT_MAX, not -inf."""
    x = np.full((1, 1, 3, 3), -np.inf, dtype=F32)
    want = _ort(_model("GlobalMaxPool", [1, 1, 3, 3]), x)
    assert want.reshape(-1)[0] == np.finfo(F32).min
    assert _same(want, _z3_numbers("GlobalMaxPool", x, {}))


@pytest.mark.parametrize(
    ("op", "shape", "dtype", "attrs"),
    [
        ("LRN", [1, 3, 2, 2], P.DOUBLE, {"size": 3}),
        ("LRN", [1, 3, 4], P.FLOAT, {"size": 3}),
        ("LRN", [1, 3, 2, 2], P.FLOAT, {"size": 2}),
        ("GlobalMaxPool", [1, 2, 3, 3], P.FLOAT16, {}),
        ("GlobalMaxPool", [1, 2, 3, 3], P.DOUBLE, {}),
        ("GlobalMaxPool", [1, 2, 1, 1, 1, 2], P.FLOAT, {}),
    ],
)
def test_forms_outside_the_typed_domain_are_refused(
    op: str, shape: list[int], dtype: int, attrs: dict[str, Any]
) -> None:
    """ORT has no double kernel for either, LRN only rank 4 and odd sizes, MLAS 1 to 3 spatial
    axes; GlobalMaxPool's float16 kernel is not modelled."""
    spec = lookup(op)
    assert spec is not None
    x = np.zeros(shape, dtype=NP[dtype])
    with pytest.raises(ShapeError, match=op):
        spec.infer(_call(op, x, attrs))
