"""The typed form of ConvTranspose.

One-op models of every attribute form (1-D, 2-D, 3-D; groups; dilations; explicit pads;
VALID, SAME_UPPER, SAME_LOWER; output_padding; output_shape;
kernel_shape given; bias or none) encode with no opaque node and `optimize` without rules
writes models whose ORT outputs are bit-identical. The numpy reference and the Z3 semantics
(evaluated on IEEE numerals) give ORT's values within a rounding bound (ORT's channel sum is
MLAS's GEMM, whose FMA and blocking order is not modelled): |Δ| <= 1e-5·Σ|x·w| + 1e-6 per
element. The Z3 semantics in reals equal the float64 reference to 1e-9, and the IEEE term of
an element two taps reach is (0 + tap0) + tap1 (col2im's order).
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
from rewrite.verify.semantics import environment, interpret_array, symbols
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, run_ort, z3_numbers

CASES: list[tuple[tuple[int, ...], tuple[int, ...], bool, dict[str, Any]]] = [
    ((1, 3, 4, 4), (3, 2, 3, 3), True, {}),
    ((2, 4, 3, 5), (4, 3, 3, 2), True, {"strides": [2, 3], "pads": [1, 0, 0, 1], "group": 2}),
    ((1, 2, 4, 4), (2, 3, 3, 3), False, {"strides": [2, 2], "output_padding": [1, 0]}),
    ((1, 2, 4, 5), (2, 3, 2, 3), True, {"dilations": [2, 1], "strides": [1, 2]}),
    ((1, 2, 5, 4), (2, 2, 3, 3), True, {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 5, 4), (2, 2, 4, 3), False, {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 3, 3), (2, 2, 3, 3), True, {"strides": [2, 1], "auto_pad": "VALID"}),
    ((1, 2, 5, 4), (2, 2, 3, 3), True, {"strides": [2, 2], "output_shape": [10, 8]}),
    ((1, 2, 5, 4), (2, 2, 4, 4), False, {"strides": [2, 2], "output_shape": [11, 9]}),
    ((1, 2, 3), (2, 2, 2), True, {"strides": [3], "output_shape": [10]}),  # beyond F: 0 + b
    ((2, 3, 7), (3, 4, 3), True, {"strides": [2], "pads": [1, 2]}),
    ((1, 4, 6), (4, 1, 2), False, {"group": 4, "kernel_shape": [2]}),
    ((1, 2, 3, 2, 3), (2, 2, 2, 2, 2), True, {"strides": [2, 1, 2]}),
]


def _ids(case: tuple) -> str:
    x, w, bias, attrs = case
    return f"{list(x)}x{list(w)}{'+b' if bias else ''}-{attrs}"


def _inputs(case: tuple, seed: int, special: bool = False) -> dict[str, np.ndarray]:
    x, w, bias, attrs = case
    feeds = {"x": data(x, np.float32, seed, special), "w": data(w, np.float32, seed + 7)}
    if bias:
        feeds["b"] = data((w[1] * attrs.get("group", 1),), np.float32, seed + 9)
    return feeds


def _bound(case: tuple, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """1e-5·Σ|x·w| + 1e-6 per output element (the reference over |x|, |w|, |b|)."""
    spec = lookup("ConvTranspose")
    assert spec is not None and spec.reference is not None
    absolute = [np.abs(a).astype(np.float64) for a in feeds.values()]
    mag = spec.reference(call_of("ConvTranspose", absolute, {}, case[3]), absolute)[0]
    return 1e-5 * mag + 1e-6


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_semantics_give_orts_values(case: tuple) -> None:
    spec = lookup("ConvTranspose")
    assert spec is not None and spec.reference is not None
    attrs = case[3]
    for seed in range(2):
        feeds = _inputs(case, seed)
        args = list(feeds.values())
        want = run_ort(model("ConvTranspose", feeds, {}, len(args), **attrs), feeds)
        call = call_of("ConvTranspose", args, {}, attrs)
        assert spec.infer(call)[0].shape == want.shape
        bound = _bound(case, feeds)
        for got in (spec.reference(call, args)[0], z3_numbers("ConvTranspose", args, {}, attrs)):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.all(np.abs(got.astype(np.float64) - want) <= bound), (want, got)


@pytest.mark.parametrize("case", CASES[:4] + CASES[7:9], ids=_ids)
def test_real_semantics_equal_the_reference(case: tuple) -> None:
    spec = lookup("ConvTranspose")
    assert spec is not None and spec.z3 is not None and spec.reference is not None
    feeds = _inputs(case, 3)
    args = list(feeds.values())
    call = call_of("ConvTranspose", args, {}, case[3])
    types = [t for t in call.inputs if t is not None]
    syms = {n: symbols(n, t) for n, t in zip(feeds, types, strict=True)}
    out = spec.z3(call, list(syms.values()))[0]
    env = environment(syms, {n: a.astype(np.float64) for n, a in feeds.items()})
    got = interpret_array(np.asarray(out, dtype=object), env)
    wide = [a.astype(np.float64) for a in args]
    np.testing.assert_allclose(got, spec.reference(call, wide)[0], rtol=1e-9, atol=1e-9)


def test_ieee_terms_add_the_taps_in_kernel_order_after_zero() -> None:
    """Y[1] of a length-2 X, kernel 2, stride 1, one channel: (0 + w0·x1) + w1·x0 (tap 0 first)."""
    spec = lookup("ConvTranspose")
    assert spec is not None and spec.z3 is not None
    x, w = np.zeros((1, 1, 2), np.float32), np.zeros((1, 1, 2), np.float32)
    call = call_of("ConvTranspose", [x, w], {}, {})
    with _z3.arithmetic(_z3.IEEE):
        xs = np.array([z3.FP(f"x{i}", z3.Float32()) for i in range(2)], object)
        ws = np.array([z3.FP(f"w{i}", z3.Float32()) for i in range(2)], object)
        out = spec.z3(call, [xs.reshape(1, 1, 2), ws.reshape(1, 1, 2)])[0]
        zero = _z3.const(0, xs[0])
        want = (zero + ws[0] * xs[1]) + ws[1] * xs[0]
    assert out.shape == (1, 1, 3)
    assert z3.eq(z3.simplify(out[0, 0, 1]), z3.simplify(want))


def test_special_values_keep_orts_nan_and_inf_places() -> None:
    case = CASES[0]
    feeds = _inputs(case, 5, special=True)
    args = list(feeds.values())
    want = run_ort(model("ConvTranspose", feeds, {}, 3), feeds)
    got = z3_numbers("ConvTranspose", args, {}, {})
    assert np.array_equal(np.isnan(want), np.isnan(got))
    assert np.array_equal(np.isinf(want), np.isinf(got))


def test_optimizes_to_identical_outputs(tmp_path: Path) -> None:
    for n, case in enumerate(CASES):
        feeds = _inputs(case, n)
        consts = {i + 1: feeds[k] for i, k in enumerate(("w", "b")) if k in feeds}
        m = model("ConvTranspose", {"x": feeds["x"]}, consts, 1 + len(consts), **case[3])
        (tmp_path / str(n)).mkdir()
        assert_optimizes_identically(m, {"x": feeds["x"]}, tmp_path / str(n))


@pytest.mark.parametrize(
    ("x", "w", "attrs"),
    [
        ((1, 3, 4), (2, 2, 3), {}),  # W's input channels are not X's
        ((1, 4, 4), (4, 2, 3), {"group": 3}),
        ((1, 2, 4), (2, 2, 3), {"output_padding": [0, 0]}),
        ((1, 2, 4), (2, 2, 3), {"output_shape": [7]}),  # ORT: O <= F + stride - 1
        ((1, 2, 4), (2, 2, 3), {"output_shape": [1, 2, 8]}),  # ONNX refuses (N, M, O...)
    ],
)
def test_forms_outside_the_op_are_refused(x: tuple, w: tuple, attrs: dict) -> None:
    spec = lookup("ConvTranspose")
    assert spec is not None
    args = [np.zeros(x, np.float32), np.zeros(w, np.float32)]
    with pytest.raises(ShapeError, match="ConvTranspose"):
        spec.infer(call_of("ConvTranspose", args, {}, attrs))
