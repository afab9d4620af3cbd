"""Cast's Z3 semantics (IEEE model) against ONNX Runtime, every dtype pair, special values.

Each value (NaN, ±inf, ±0, out-of-range floats, halves, 2^24 + 1, the integer extremes) is cast
in ORT and in `rewrite.ops._cast.cast` (evaluated by `z3.simplify`); they must agree bit for
bit, except where the semantics leave the value open (float -> uint32/uint64 out of range).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import z3
from onnx import TensorProto as T
from onnx import helper

from rewrite.ops._cast import cast
from rewrite.ops._z3 import IEEE, arithmetic, symbol
from rewrite.verify.ort_sides import run_ort
from rewrite.verify.semantics import number

FLOATS = (T.FLOAT, T.FLOAT16, T.DOUBLE)
INTS = (T.INT64, T.INT32, T.INT16, T.INT8, T.UINT8, T.UINT16, T.UINT32, T.UINT64)
DTYPES = (*FLOATS, *INTS, T.BOOL)
FLOAT_VALUES = [
    0.0, -0.0, 1.0, -1.0, 2.7, -2.7, 0.5, 300.5, -129.5, 65504.0, 70000.0, 16777217.0,
    3e9, -3e9, 1e20, -1e20, 1e-8, float("inf"), float("-inf"), float("nan"),
]  # fmt: skip
INT_VALUES = [0, 1, -1, 7, 255, 256 + 7, -129, 2**24 + 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**62]


def _values(src: int) -> np.ndarray:
    dt = helper.tensor_dtype_to_np_dtype(src)
    if src == T.BOOL:
        return np.array([True, False])
    if src in INTS:
        info = np.iinfo(dt)
        vals = [v for v in [*INT_VALUES, int(info.min), int(info.max)] if info.min <= v <= info.max]
        return np.array(vals, dtype=dt)
    with np.errstate(all="ignore"):
        return np.array(FLOAT_VALUES, dtype=np.float64).astype(dt)


def _ort_cast(x: np.ndarray, src: int, to: int) -> np.ndarray:
    node = helper.make_node("Cast", ["x"], ["y"], to=to)
    graph = helper.make_graph(
        [node],
        "cast",
        [helper.make_tensor_value_info("x", src, x.shape)],
        [helper.make_tensor_value_info("y", to, x.shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return run_ort(model.SerializeToString(), {"x": x})


def _z3_cast(x: np.ndarray, src: int, to: int) -> list[object]:
    out: list[object] = []
    with arithmetic(IEEE):
        for v in x.tolist():
            fill = v if src != T.BOOL else int(v)
            t = symbol("x", src, fill)
            if src in FLOATS:  # FPVal of a Python float: exact, including NaN/inf/-0
                t = z3.FPVal(v, t.sort())
            r = z3.simplify(cast(t, src, to))
            out.append(number(r, to) if _is_value(r) else None)
    return out


def _is_value(r: object) -> bool:
    return bool(
        z3.is_bv_value(r) or z3.is_fp_value(r) or z3.is_true(r) or z3.is_false(r)  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("to", DTYPES, ids=lambda d: onnx.TensorProto.DataType.Name(d))
@pytest.mark.parametrize("src", DTYPES, ids=lambda d: onnx.TensorProto.DataType.Name(d))
def test_cast_semantics_match_ort(src: int, to: int) -> None:
    x = _values(src)
    ort_out = _ort_cast(x, src, to)
    ours = _z3_cast(x, src, to)
    for v, got, want in zip(x.tolist(), ours, ort_out.tolist(), strict=True):
        if got is None:  # left open (float -> uint32/uint64 out of range)
            assert to in (T.UINT32, T.UINT64) and src in FLOATS
            continue
        if isinstance(want, float) and np.isnan(want):
            assert isinstance(got, float) and np.isnan(got), f"{v}: {got} != NaN"
        else:
            assert got == want, f"Cast {v} ({src} -> {to}): semantics {got}, ORT {want}"
            if isinstance(want, float) and want == 0:
                assert np.signbit(got) == np.signbit(want), f"{v}: sign of zero"
