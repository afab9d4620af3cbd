"""Generated inputs that ops read as shapes, axes, divisors or thresholds are valid: the model
runs in ONNX Runtime on every seed (before `input_roles`, each of these failed on seed 0)."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewrite.onnx_io.inputs import input_specs, make_inputs
from tests.verify.models import model

F, I64, I32, U8 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.UINT8


def _vi(name: str, dtype: int, shape: list[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _op(
    op: str, inputs: list[tuple[str, int, list | None]], out: list | None, **attrs: object
) -> onnx.ModelProto:
    """One `op` node whose inputs are graph inputs ("": left out); output Y declared with
    `out` dims."""
    node = helper.make_node(op, [n for n, _, _ in inputs], ["Y"], **attrs)
    ins = [_vi(n, t, s) for n, t, s in inputs if n]
    dtype = inputs[0][1] if op not in ("NonMaxSuppression",) else I64
    return model([node], ins, [_vi("Y", dtype, out)], opset=20)


MODELS = {
    "reshape_to_declared_output": _op("Reshape", [("X", F, [2, 3, 4]), ("S", I64, [3])], [4, 3, 2]),
    "reshape_declared_symbolic": _op(
        "Reshape", [("X", F, ["batch", 12]), ("S", I64, [3])], ["batch", 3, 4]
    ),
    "reshape_undeclared_fewer_dims": _op("Reshape", [("X", F, [2, 3, 4]), ("S", I64, [2])], None),
    "reshape_undeclared_more_dims": _op("Reshape", [("X", F, [2, 3]), ("S", I64, [4])], None),
    "expand_declared": _op("Expand", [("X", F, [3, 1]), ("S", I64, [3])], [2, 3, 4]),
    "expand_undeclared": _op("Expand", [("X", F, [3, 1]), ("S", I64, [3])], None),
    "div_uint8": _op("Div", [("A", U8, [4]), ("B", U8, [4])], [4]),
    "mod_int32": _op("Mod", [("A", I32, [4]), ("B", I32, [4])], [4]),
    "resize_sizes": _op(
        "Resize",
        [("X", F, [1, 1, 2, 2]), ("", F, None), ("", F, None), ("S", I64, [4])],
        [1, 1, 4, 3],
    ),
    "resize_scales_axes": _op(
        "Resize", [("X", F, [1, 1, 2, 2]), ("", F, None), ("S", F, [2])], [1, 1, 4, 6], axes=[2, 3]
    ),
    "slice_axes_steps": _op(
        "Slice",
        [("X", F, [3, 4]), ("B", I64, [2]), ("E", I64, [2]), ("A", I64, [2]), ("T", I64, [2])],
        None,
    ),
    "squeeze_axes": _op("Squeeze", [("X", F, [1, 3, 1]), ("A", I64, [2])], None),
    "unsqueeze_axes": _op("Unsqueeze", [("X", F, [3]), ("A", I64, [3])], None),
    "reduce_axes": _op("ReduceSum", [("X", F, [2, 3, 4]), ("A", I64, [2])], None),
    "split_sizes": helper.make_model(
        helper.make_graph(
            [helper.make_node("Split", ["X", "S"], ["Y0", "Y1", "Y2"], axis=1)],
            "g",
            [_vi("X", F, [2, 7]), _vi("S", I64, [3])],
            [_vi("Y0", F, None), _vi("Y1", F, None), _vi("Y2", F, None)],
        ),
        opset_imports=[helper.make_opsetid("", 20)],
    ),
    "cumsum_axis": _op("CumSum", [("X", F, [5]), ("A", I64, [])], [5]),
    "nms_iou": _op(
        "NonMaxSuppression",
        [("B", F, [1, 3, 4]), ("S", F, [1, 1, 3]), ("M", I64, [1]), ("I", F, [1])],
        None,
    ),
    "affine_grid_size": _op("AffineGrid", [("T", F, [2, 2, 3]), ("S", I64, [4])], [2, 3, 4, 2]),
    "col2im_shapes": _op(
        "Col2Im", [("X", F, [1, 5, 5]), ("I", I64, [2]), ("K", I64, [2])], [1, 1, 5, 5]
    ),
    "shape_through_cast": model(
        [
            helper.make_node("Cast", ["S32"], ["S"], to=I64),
            helper.make_node("Reshape", ["X", "S"], ["Y"]),
        ],
        [_vi("X", F, [2, 6]), _vi("S32", I32, [3])],
        [_vi("Y", F, [3, 2, 2])],
    ),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_generated_inputs_run_in_ort(name: str) -> None:
    m = MODELS[name]
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for seed in range(3):
        sess.run(None, make_inputs(m, seed=seed))  # raises if any value is invalid for the op


def test_shape_values() -> None:
    assert make_inputs(MODELS["reshape_to_declared_output"])["S"].tolist() == [4, 3, 2]
    assert make_inputs(MODELS["reshape_declared_symbolic"], dims={"batch": 5})["S"].tolist() == [
        5,
        3,
        4,
    ]
    assert make_inputs(MODELS["reshape_undeclared_fewer_dims"])["S"].tolist() == [6, 4]
    assert make_inputs(MODELS["reshape_undeclared_more_dims"])["S"].tolist() == [1, 1, 2, 3]
    assert make_inputs(MODELS["expand_undeclared"])["S"].tolist() == [1, 1, 1]
    assert make_inputs(MODELS["resize_scales_axes"])["S"].tolist() == [2.0, 3.0]
    assert make_inputs(MODELS["col2im_shapes"])["K"].tolist() == [1, 5]
    for seed in range(5):
        assert (make_inputs(MODELS["div_uint8"], seed=seed)["B"] != 0).all()


def test_a_role_of_the_wrong_length_is_not_used() -> None:
    """Reshape's declared output has rank 2 but the shape input holds 3 values: no role fits,
    so the input keeps the default fill (and the reference may fail on it: the differential
    check drops such sets)."""
    m = _op("Reshape", [("X", F, [2, 6]), ("S", I64, [3])], [3, 4])
    (_, spec) = input_specs(m)
    assert spec.fill == "const" and spec.value == (1.0, 2.0, 6.0)  # the data's dims, padded
    m = model(
        [helper.make_node("NonZero", ["X"], ["N"]), helper.make_node("Reshape", ["N", "S"], ["Y"])],
        [_vi("X", F, [2, 6]), _vi("S", I64, [1])],
        [_vi("Y", I64, [3, 4])],
    )
    assert input_specs(m)[1].fill == "randint"  # neither the output nor the data says
