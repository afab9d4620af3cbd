"""The typed form of Resize (nearest and bilinear).

One-op models (opset 19) of every coordinate_transformation_mode, every nearest_mode, scales
or sizes (with axes and keep_aspect_ratio_policy), roi with tf_crop_and_resize's
extrapolation_value, float32 and integer X, encode with no opaque node, and `optimize`
without rules writes models whose ORT outputs are bit-identical. The numpy reference and the
Z3 semantics (evaluated on IEEE numerals) give ORT's output shape and values bit for bit, on
random and special values (NaN, ±inf, ±0, ±FLT_MAX, subnormals). Antialias stays opaque
(cubic: test_typed_resize_cubic.py); the semantics refuse symbolic scales.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import z3
from onnx import helper, numpy_helper

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, run_ort, same, z3_numbers

Case = tuple[dict[str, Any], tuple[int, ...], type, Any, Any, Any]


def _f(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def _i(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


LIN = {"mode": "linear"}
CROP = {"coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -7.5}
ROI4 = _f(0, 0, -0.1, 0.2, 1, 1, 0.9, 1.3)
CASES: list[Case] = [
    ({}, (1, 2, 3, 3), np.float32, None, _f(1, 1, 2, 2), None),  # the 2x upsample of YOLO, FPN
    (
        {"nearest_mode": "floor", "coordinate_transformation_mode": "asymmetric"},
        (1, 2, 3, 4),
        np.float32,
        None,
        _f(1, 1, 2, 2),
        None,
    ),
    ({"nearest_mode": "ceil"}, (2, 3, 5), np.float32, None, _f(1, 0.6, 1.7), None),
    (
        {"nearest_mode": "round_prefer_ceil", "coordinate_transformation_mode": "align_corners"},
        (1, 1, 4, 5),
        np.float32,
        None,
        None,
        _i(1, 1, 7, 3),
    ),
    (
        {"coordinate_transformation_mode": "pytorch_half_pixel"},
        (9,),
        np.float32,
        None,
        _f(0.45),
        None,
    ),
    (
        {"coordinate_transformation_mode": "half_pixel_symmetric"},
        (1, 1, 3, 5),
        np.float32,
        None,
        None,
        _i(1, 1, 6, 4),
    ),
    ({"axes": [2, 3]}, (1, 2, 3, 3), np.int32, None, _f(1.5, 0.7), None),
    (
        {"axes": [-1, -2], "keep_aspect_ratio_policy": "not_larger"},
        (1, 1, 4, 6),
        np.uint8,
        None,
        None,
        _i(5, 9),
    ),
    (
        {"axes": [3, 2], "keep_aspect_ratio_policy": "not_larger"},
        (1, 1, 4, 6),
        np.float32,
        None,
        None,
        _i(5, 9),
    ),
    (
        {"keep_aspect_ratio_policy": "not_smaller", "coordinate_transformation_mode": "asymmetric"},
        (2, 3),
        np.int8,
        None,
        None,
        _i(5, 4),
    ),
    (CROP, (1, 1, 4, 5), np.float32, ROI4, None, _i(1, 1, 5, 6)),
    ({**LIN}, (1, 2, 4, 5), np.float32, None, _f(1, 1, 1.5, 0.6), None),
    (
        {**LIN, "coordinate_transformation_mode": "align_corners"},
        (3, 4),
        np.float32,
        None,
        None,
        _i(7, 2),
    ),
    (
        {**LIN, "coordinate_transformation_mode": "pytorch_half_pixel"},
        (1, 1, 6, 6),
        np.float32,
        None,
        _f(1, 1, 0.5, 0.34),
        None,
    ),
    (
        {**LIN, "coordinate_transformation_mode": "asymmetric"},
        (2, 3),
        np.float32,
        None,
        _f(1, 3),
        None,
    ),
    (
        {**LIN, "coordinate_transformation_mode": "half_pixel_symmetric", "axes": [2, 3]},
        (1, 3, 3, 3),
        np.float32,
        None,
        None,
        _i(5, 4),
    ),
    ({**LIN, **CROP}, (1, 1, 4, 5), np.float32, ROI4, _f(1, 1, 1.25, 1.5), None),
    ({}, (1, 2, 3), np.float32, None, _f(1, 1, 1), None),  # the same shape: ORT copies X
]


def _ids(case: Case) -> str:
    attrs, shape, dt, _, scales, sizes = case
    given = scales.tolist() if scales is not None else f"sizes={sizes.tolist()}"
    return f"{list(shape)}-{np.dtype(dt).name}-{given}-{attrs}"


def case_model(case: Case, opset: int = 19, **extra: Any) -> onnx.ModelProto:
    """A one-node Resize model of `case` (roi, scales, sizes as initializers)."""
    attrs, shape, dt, *operands = case
    names, inits = ["x"], []
    for name, a in zip(("roi", "scales", "sizes"), operands, strict=True):
        names.append("" if a is None else name)
        if a is not None:
            inits.append(numpy_helper.from_array(a, name))
    while not names[-1]:
        names.pop()
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    node = helper.make_node("Resize", names, ["y"], **attrs, **extra)
    x = helper.make_tensor_value_info("x", et, shape)
    y = helper.make_tensor_value_info("y", et, None)
    g = helper.make_graph([node], "resize", [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def case_arrays(case: Case, x: np.ndarray) -> tuple[list[Any], dict[int, np.ndarray]]:
    """The operands of `case` with input `x`, and its constant ones by position."""
    arrays = [x, *case[3:]]
    while arrays[-1] is None:
        arrays.pop()
    return arrays, {i: a for i, a in enumerate(arrays) if i and a is not None}


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_semantics_give_orts_values(case: Case) -> None:
    spec = lookup("Resize")
    assert spec is not None and spec.reference is not None
    attrs, shape, dt = case[:3]
    for seed in range(3):
        x = data(shape, dt, seed, special=seed == 2)
        want = run_ort(case_model(case), {"x": x})
        arrays, consts = case_arrays(case, x)
        call = call_of("Resize", arrays, consts, attrs)
        assert spec.infer(call)[0].shape == want.shape
        ref = spec.reference(call, arrays)[0]
        assert same(want, ref), (x, want, ref)
        got = z3_numbers("Resize", arrays, consts, attrs)
        assert same(want, got), (x, want, got)


def test_optimizes_to_identical_outputs(tmp_path: Path) -> None:
    for n, case in enumerate(CASES):
        x = data(case[1], case[2], n)
        (tmp_path / str(n)).mkdir()
        assert_optimizes_identically(case_model(case), {"x": x}, tmp_path / str(n))


@pytest.mark.parametrize(
    ("extra", "opset"),
    [
        ({"mode": "linear", "antialias": 1}, 19),
        ({"mode": "cubic", "antialias": 1}, 19),
        ({"mode": "linear", "exclude_outside": 1, "antialias": 1}, 19),
    ],
)
def test_unmodelled_forms_stay_opaque(extra: dict, opset: int, tmp_path: Path) -> None:
    case: Case = ({}, (1, 1, 4, 4), np.float32, None, _f(1, 1, 0.5, 0.5), None)
    onnx.save(case_model(case, opset, **extra), tmp_path / "m.onnx")
    assert encode(load(tmp_path / "m.onnx")).opaque_nodes == 1


def test_opset_10_resize_is_upgraded_and_typed(tmp_path: Path) -> None:
    """Opset 10's Resize takes (X, scales): the loader converts the model to a newer opset,
    where the node has the typed form's inputs."""
    scales = numpy_helper.from_array(_f(1, 1, 2, 2), "scales")
    node = helper.make_node("Resize", ["x", "scales"], ["y"])
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (1, 1, 2, 2))
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    g = helper.make_graph([node], "r10", [x], [y], [scales])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    graph = load(tmp_path / "m.onnx")
    assert graph.opset >= 11
    assert encode(graph).opaque_nodes == 0


def test_symbolic_scales_have_no_semantics() -> None:
    spec = lookup("Resize")
    assert spec is not None and spec.z3 is not None
    x, scales = np.zeros((1, 1, 2, 2), np.float32), _f(1, 1, 2, 2)
    call = call_of("Resize", [x, None, scales], {}, {})
    with _z3.arithmetic(_z3.IEEE):
        xs = np.array([z3.FP(f"x{i}", z3.Float32()) for i in range(4)], object).reshape(x.shape)
        ss = np.array([z3.FP(f"s{i}", z3.Float32()) for i in range(4)], object)
        with pytest.raises(ShapeError, match="scales"):
            spec.z3(call, [xs, None, ss])


@pytest.mark.parametrize(
    ("attrs", "scales", "sizes"),
    [
        ({}, None, None),  # neither scales nor sizes
        ({}, _f(1, 2), None),  # scales for another rank
        ({"axes": [4]}, _f(2), None),
        ({"keep_aspect_ratio_policy": "not_larger"}, _f(1, 1, 2, 2), None),
        ({"mode": "area"}, _f(1, 1, 2, 2), None),
        ({"coordinate_transformation_mode": "centered"}, _f(1, 1, 2, 2), None),
        ({}, _f(1, 1, 0, 2), None),
    ],
)
def test_forms_outside_the_op_are_refused(attrs: dict, scales: Any, sizes: Any) -> None:
    spec = lookup("Resize")
    assert spec is not None
    x = np.zeros((1, 1, 2, 2), np.float32)
    arrays = [x, None, scales, sizes]
    consts = {i: a for i, a in enumerate(arrays) if i and a is not None}
    with pytest.raises(ShapeError, match="Resize"):
        spec.infer(call_of("Resize", arrays, consts, attrs))
