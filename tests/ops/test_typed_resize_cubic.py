"""The typed form of Resize mode cubic (`ops/_resize_cubic.py`).

One-op models (opset 19) of every coordinate_transformation_mode, scales above and below 1,
sizes, cubic_coeff_a, exclude_outside, tf_crop_and_resize's extrapolation_value, rank 2 and
rank 4 (NCHW), encode with no opaque node, and `optimize` without rules writes models whose
ORT outputs are bit-identical. The numpy reference and the Z3 semantics (evaluated on IEEE
numerals) give ORT's output bit for bit, on random and special values (NaN, ±inf, ±0,
±FLT_MAX, subnormals): no tolerance. antialias = 1 stays opaque.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops._resize_cubic import CubicAxis, coefficients, sources
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.test_typed_resize import Case as TypedCase
from tests.ops.test_typed_resize import case_arrays, case_model
from tests.ops.typed_consts import call_of, data, run_ort, same, z3_numbers

Case = tuple[dict[str, Any], tuple[int, ...], Any, Any, Any]


def _f(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def _i(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


CUB = {"mode": "cubic"}
EX = {"mode": "cubic", "exclude_outside": 1}
CROP = {"coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -7.5}
ROI4 = _f(0, 0, -0.1, 0.2, 1, 1, 0.9, 1.3)
CASES: list[Case] = [
    (CUB, (1, 2, 3, 3), None, _f(1, 1, 2, 2), None),  # half_pixel, the default
    (CUB, (1, 1, 5, 6), None, _f(1, 1, 0.6, 0.5), None),  # downsampling
    (CUB, (4, 5), None, _f(1.7, 0.8), None),
    ({**CUB, "cubic_coeff_a": -0.5}, (1, 1, 4, 4), None, _f(1, 1, 1.5, 2.5), None),
    ({**CUB, "coordinate_transformation_mode": "asymmetric"}, (3, 4), None, _f(2, 1.5), None),
    (
        {**CUB, "coordinate_transformation_mode": "align_corners"},
        (1, 1, 3, 4),
        None,
        None,
        _i(1, 1, 7, 2),
    ),
    (
        {**CUB, "coordinate_transformation_mode": "pytorch_half_pixel"},
        (1, 2, 4, 4),
        None,
        _f(1, 1, 0.25, 1.75),
        None,
    ),
    (
        {**CUB, "coordinate_transformation_mode": "tf_half_pixel_for_nn"},
        (3, 3),
        None,
        _f(1.5, 2),
        None,
    ),
    (
        {**CUB, "coordinate_transformation_mode": "half_pixel_symmetric"},
        (1, 1, 3, 5),
        None,
        None,
        _i(1, 1, 6, 4),
    ),
    ({**CUB, **CROP}, (1, 1, 4, 5), ROI4, None, _i(1, 1, 5, 6)),
    ({**EX}, (1, 1, 4, 5), None, _f(1, 1, 2, 1.5), None),
    ({**EX, "cubic_coeff_a": -0.5}, (5, 4), None, _f(0.6, 3), None),
    ({**EX, **CROP}, (1, 1, 4, 5), ROI4, _f(1, 1, 1.25, 1.5), None),
    ({**CUB, "axes": [2, 3]}, (1, 2, 3, 3), None, None, _i(5, 2)),
    (CUB, (4, 2), None, None, _i(4, 3)),  # both ends of a row outside X
    (EX, (3, 2), None, None, _i(5, 3)),
    (CUB, (1, 2, 3, 3), None, None, _i(1, 2, 3, 3)),  # the same shape: ORT copies X
]


def _ids(case: Case) -> str:
    attrs, shape, _, scales, sizes = case
    given = scales.tolist() if scales is not None else f"sizes={sizes.tolist()}"
    return f"{list(shape)}-{given}-{attrs}"


def _typed(case: Case) -> TypedCase:
    """`case` in `test_typed_resize`'s form (float32 X)."""
    attrs, shape, *operands = case
    return (attrs, shape, np.float32, *operands)  # type: ignore[return-value]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_semantics_give_orts_values(case: Case) -> None:
    spec = lookup("Resize")
    assert spec is not None and spec.reference is not None
    attrs, shape = case[:2]
    for seed in range(3):
        x = data(shape, np.float32, seed, special=seed == 2)
        want = run_ort(case_model(_typed(case)), {"x": x})
        arrays, consts = case_arrays(_typed(case), x)
        call = call_of("Resize", arrays, consts, attrs)
        assert spec.infer(call)[0].shape == want.shape
        ref = spec.reference(call, arrays)[0]
        assert same(want, ref), (x, want, ref)
        got = z3_numbers("Resize", arrays, consts, attrs)
        assert same(want, got), (x, want, got)


def test_larger_grids_match_ort_bit_for_bit() -> None:
    """The reference on grids ORT's row cache sees more of (several channels, odd sizes)."""
    spec = lookup("Resize")
    assert spec is not None and spec.reference is not None
    rng = np.random.default_rng(7)
    for coord in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"):
        for exclude in (0, 1):
            for size in ((9, 13), (3, 4), (16, 5)):
                attrs = {**CUB, "coordinate_transformation_mode": coord, "exclude_outside": exclude}
                case: Case = (attrs, (2, 3, 6, 7), None, None, _i(2, 3, *size))
                x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32) * 100
                want = run_ort(case_model(_typed(case)), {"x": x})
                arrays, consts = case_arrays(_typed(case), x)
                ref = spec.reference(call_of("Resize", arrays, consts, attrs), arrays)[0]
                assert same(want, ref), (attrs, size)


def test_coefficients_sum_to_one_at_the_grid_points() -> None:
    """c(0) = (0, 1, 0, 0) for any a: the kernel interpolates (a check that can fail)."""
    for a in (-0.75, -0.5):
        assert [float(c) for c in coefficients(0.0, a)] == [0.0, 1.0, 0.0, 0.0]


def test_the_row_cache_replays_a_colliding_key() -> None:
    """ORT's cache key row·W + start - 1 of (row 1, start -1) is that of (row 0, start W - 1):
    with the same s the later output reuses the earlier row's value, as ORT does."""
    width = 3
    ys = CubicAxis(start=[1, 2], s=[0.5, 0.5], outside=[False, False])
    xs = CubicAxis(start=[width - 1, -1], s=[0.25, 0.25], outside=[False, False])
    rows, starts = sources(ys, xs, width)
    # output (0, 1)'s tap i (row i, start -1) has key 3i - 2, the key output (0, 0) filled
    # with its tap i - 1 (row i - 1, start 2): taps 1..3 reuse those
    assert [(int(r), int(s)) for r, s in zip(rows[0, 1], starts[0, 1], strict=True)] == [
        (0, -1),
        (0, 2),
        (1, 2),
        (2, 2),
    ]
    assert [(int(r), int(s)) for r, s in zip(rows[0, 0], starts[0, 0], strict=True)] == [
        (0, 2),
        (1, 2),
        (2, 2),
        (3, 2),
    ]


def test_optimizes_to_identical_outputs(tmp_path: Path) -> None:
    for n, case in enumerate(CASES):
        x = data(case[1], np.float32, n)
        (tmp_path / str(n)).mkdir()
        assert_optimizes_identically(case_model(_typed(case)), {"x": x}, tmp_path / str(n))


def test_antialias_stays_opaque(tmp_path: Path) -> None:
    case: Case = (CUB, (1, 1, 4, 4), None, _f(1, 1, 0.5, 0.5), None)
    onnx.save(case_model(_typed(case), antialias=1), tmp_path / "m.onnx")
    assert encode(load(tmp_path / "m.onnx")).opaque_nodes == 1


@pytest.mark.parametrize(
    ("shape", "scales", "dtype"),
    [
        ((1, 2, 3), _f(1, 2, 2), np.float32),  # rank 3: ORT refuses it
        ((1, 2, 3), _f(1, 1, 1), np.float32),  # even when Y = X
        ((1, 2, 3, 3), _f(1, 2, 2, 2), np.float32),  # a channel scale
        ((1, 1, 3, 3), _f(1, 1, 2, 2), np.int32),  # ORT reads cubic's data as float32
    ],
)
def test_forms_outside_the_kernel_have_no_semantics(
    shape: tuple[int, ...], scales: np.ndarray, dtype: type
) -> None:
    spec = lookup("Resize")
    assert spec is not None and spec.reference is not None
    x = np.zeros(shape, dtype)
    call = call_of("Resize", [x, None, scales], {2: scales}, CUB)
    with pytest.raises(ShapeError, match="cubic"):
        spec.reference(call, [x, None, scales])
