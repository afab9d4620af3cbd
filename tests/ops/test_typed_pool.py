"""The typed forms of MaxPool (Y only) and GlobalAveragePool.

One-op models (light-model shapes, every attribute, every dtype ORT runs) encode with no
opaque node and `optimize` without rules writes models whose ORT outputs are bit-identical;
the numpy reference and the Z3 semantics, evaluated on numbers, give ORT's values on inputs of
NaN, ±inf, ±0, the dtype's lowest and subnormals along every kernel path (MLAS's global,
vector and generic kernels, ORT's generic tasks; MLAS's global average order).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3
from onnx import TensorProto, helper

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.base import OpCall, TensorType
from rewrite.ops.registry import lookup
from rewrite.verify.semantics import number
from tests.ops.roundtrip import assert_optimizes_identically

P = TensorProto
NP = {P.FLOAT: np.float32, P.DOUBLE: np.float64, P.FLOAT16: np.float16}
NP |= {P.INT8: np.int8, P.UINT8: np.uint8}
F32_LOWEST = float(np.finfo(np.float32).min)
SPECIALS = {
    P.FLOAT: [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, F32_LOWEST, 1e-45, -1e-45],
    P.DOUBLE: [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, float(np.finfo(np.float64).min)],
    P.FLOAT16: [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 60000.0, -60000.0, 6e-8],
    P.INT8: [-128, -127, -1, 0, 1, 127],
    P.UINT8: [0, 1, 7, 128, 255],
}


def _model(op: str, shape: list[int], dtype: int = P.FLOAT, **attrs: Any) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", dtype, shape)
    y = helper.make_tensor_value_info("y", dtype, None)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], op, [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _data(shape: tuple[int, ...], dtype: int, seed: int, special: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if special:
        return rng.choice(np.array(SPECIALS[dtype], dtype=NP[dtype]), size=shape)
    if dtype in (P.INT8, P.UINT8):
        info = np.iinfo(NP[dtype])
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(NP[dtype])
    return rng.standard_normal(shape).astype(NP[dtype])


def _ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, {"x": x})[0])


def _call(op: str, x: np.ndarray, attrs: dict[str, Any]) -> OpCall:
    dtype = int(helper.np_dtype_to_tensor_dtype(x.dtype))
    return OpCall(op, [TensorType(dtype, x.shape)], [None], attrs)


def _z3_numbers(op: str, x: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """The op's Z3 semantics on the numbers of `x` (IEEE), simplified, in x's dtype."""
    spec = lookup(op)
    assert spec is not None and spec.z3 is not None
    call = _call(op, x, attrs)
    dtype = call.input(0).dtype
    with _z3.arithmetic(_z3.IEEE):
        cells = np.empty(x.size, dtype=object)
        cells[:] = [_z3.symbol("", dtype, v.item()) for v in x.reshape(-1)]
        out = np.asarray(spec.z3(call, [cells.reshape(x.shape)])[0])
    vals = [number(z3.simplify(e), dtype) for e in out.reshape(-1)]
    return np.array(vals, dtype=np.float64 if x.dtype.kind == "f" else object).astype(x.dtype)


def _same(want: np.ndarray, got: np.ndarray) -> bool:
    """Equal values, NaN where NaN, the sign of zeros too (NaN payloads aside)."""
    got = got.reshape(want.shape)
    if want.dtype.kind != "f":
        return bool(np.array_equal(want, got))
    nan = np.isnan(want)
    return bool(
        np.array_equal(nan, np.isnan(got))
        and np.array_equal(want[~nan], got[~nan])
        and np.array_equal(np.signbit(want[~nan]), np.signbit(got[~nan]))
    )


MAX_POOLS: list[tuple[list[int], int, dict[str, Any]]] = [
    # light-model MaxPool (ResNet stem): MLAS's 2-D vector kernel, stride 2
    ([1, 64, 56, 56], P.FLOAT, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4}),
    ([1, 3, 9, 9], P.FLOAT, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ([1, 2, 7, 6], P.FLOAT, {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}),
    ([1, 2, 7, 6], P.FLOAT, {"kernel_shape": [3, 2], "auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    ([1, 2, 7, 6], P.FLOAT, {"kernel_shape": [2, 2], "auto_pad": "VALID", "strides": [2, 2]}),
    ([1, 2, 4, 4], P.FLOAT, {"kernel_shape": [4, 4]}),  # MLAS's global kernel
    ([1, 2, 9, 10], P.FLOAT, {"kernel_shape": [2, 2], "strides": [3, 3]}),  # MLAS generic
    ([1, 2, 9], P.FLOAT, {"kernel_shape": [3], "pads": [1, 1], "strides": [2]}),  # 1-D
    ([1, 2, 4, 5, 6], P.FLOAT, {"kernel_shape": [2, 2, 3], "pads": [0, 1, 1, 1, 0, 1]}),  # 3-D
    ([1, 2, 8, 8], P.FLOAT, {"kernel_shape": [2, 2], "dilations": [2, 2]}),  # ORT's task
    ([1, 2, 6, 6], P.FLOAT, {"kernel_shape": [2, 2], "pads": [1] * 4, "storage_order": 1}),
    ([1, 2, 6, 5], P.DOUBLE, {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "strides": [2, 1]}),
    ([1, 2, 8], P.INT8, {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ([1, 2, 5, 5], P.UINT8, {"kernel_shape": [2, 2], "ceil_mode": 1, "strides": [2, 2]}),
]
GLOBAL_AVERAGE_POOLS = [([1, 1280, 7, 7], P.FLOAT), ([2, 3, 5], P.FLOAT), ([1, 4, 3, 3], P.FLOAT16)]
GLOBAL_AVERAGE_POOLS += [([1, 2, 2, 3, 3], P.FLOAT)]


def _ids(case: tuple) -> str:
    return f"{case[0]}-{helper.tensor_dtype_to_np_dtype(case[1]).name}"


@pytest.mark.parametrize("case", MAX_POOLS, ids=_ids)
def test_max_pool_optimizes_to_identical_outputs(case: tuple, tmp_path: Path) -> None:
    shape, dtype, attrs = case
    model = _model("MaxPool", shape, dtype, **attrs)
    x = _data(tuple(shape), dtype, seed=len(shape))
    assert_optimizes_identically(model, {"x": x}, tmp_path)


@pytest.mark.parametrize("case", GLOBAL_AVERAGE_POOLS, ids=_ids)
def test_global_average_pool_optimizes_to_identical_outputs(case: tuple, tmp_path: Path) -> None:
    shape, dtype = case
    x = _data(tuple(shape), dtype, seed=len(shape))
    assert_optimizes_identically(_model("GlobalAveragePool", shape, dtype), {"x": x}, tmp_path)


@pytest.mark.parametrize("case", [c for c in MAX_POOLS if np.prod(c[0]) <= 400], ids=_ids)
def test_max_pool_semantics_give_orts_values_on_special_inputs(case: tuple) -> None:
    """Which of NaN, ±0, -inf and the kernels' lowest start / padding value wins."""
    shape, dtype, attrs = case
    model = _model("MaxPool", shape, dtype, **attrs)
    spec = lookup("MaxPool")
    assert spec is not None and spec.reference is not None
    for seed in range(3):
        x = _data(tuple(shape), dtype, seed, special=True)
        want = _ort(model, x)
        got = spec.reference(_call("MaxPool", x, attrs), [x])[0]
        assert got.dtype == want.dtype and _same(want, got), (x, want, got)
        assert _same(want, _z3_numbers("MaxPool", x, attrs)), (x, want)


def test_max_pool_pads_and_starts_with_the_lowest_float_on_mlas_paths() -> None:
    """MLAS pads with -FLT_MAX (an all -inf window with padding gives it); ORT's tasks start
    from the window's first element (-inf stays -inf)."""
    x = np.full((1, 1, 3, 3), -np.inf, dtype=np.float32)
    mlas = {"kernel_shape": [2, 2], "pads": [1] * 4}
    tasks = {**mlas, "storage_order": 1}
    want_mlas = _ort(_model("MaxPool", [1, 1, 3, 3], **mlas), x)
    want_tasks = _ort(_model("MaxPool", [1, 1, 3, 3], **tasks), x)
    assert want_mlas[0, 0, 0, 0] == F32_LOWEST and np.isneginf(want_mlas[0, 0, 1, 1])
    assert np.isneginf(want_tasks).all()
    assert _same(want_mlas, _z3_numbers("MaxPool", x, mlas))
    assert _same(want_tasks, _z3_numbers("MaxPool", x, tasks))


@pytest.mark.parametrize("case", GLOBAL_AVERAGE_POOLS[1:], ids=_ids)
def test_global_average_pool_semantics_give_orts_values(case: tuple) -> None:
    """MLAS's lanes (four partial sums from +0, then the tail), divided by the count."""
    shape, dtype = case
    model = _model("GlobalAveragePool", shape, dtype)
    spec = lookup("GlobalAveragePool")
    assert spec is not None and spec.reference is not None
    big = 1e8 if dtype == P.FLOAT else 60000.0
    for seed in range(4):
        x = _data(tuple(shape), dtype, seed, special=seed < 2)
        if seed == 3:  # magnitudes where the order of the additions shows
            x.reshape(-1)[::3] = big
            x.reshape(-1)[1::7] = -big
        want = _ort(model, x)
        got = spec.reference(_call("GlobalAveragePool", x, {}), [x])[0]
        assert got.dtype == want.dtype and _same(want, got), (x, want, got)
        assert _same(want, _z3_numbers("GlobalAveragePool", x, {})), (x, want)


def test_global_average_pool_adds_in_mlas_lane_order() -> None:
    """[1e8, 1, -1e8, 1, 1]: lanes (1e8, 1, -1e8, 1) give (1e8 - 1e8) + (1 + 1) = 2, then
    + 1 = 3, / 5; a sequential sum would lose the first 1 (1e8 + 1 = 1e8)."""
    x = np.array([[[1e8, 1, -1e8, 1, 1]]], dtype=np.float32)
    want = _ort(_model("GlobalAveragePool", [1, 1, 5]), x)
    assert want.reshape(-1)[0] == np.float32(3) / np.float32(5)
    assert _same(want, _z3_numbers("GlobalAveragePool", x, {}))


@pytest.mark.parametrize(
    ("op", "shape", "dtype", "attrs"),
    [
        ("MaxPool", [1, 2, 4, 4], P.FLOAT16, {"kernel_shape": [2, 2]}),
        ("MaxPool", [1, 2, 8, 8], P.FLOAT, {"kernel_shape": [2, 2], "dilations": [2, 2],
                                             "auto_pad": "SAME_UPPER"}),
        ("GlobalAveragePool", [1, 2, 4, 4], P.DOUBLE, {}),
        ("GlobalAveragePool", [1, 2, 2, 2, 2, 2], P.FLOAT, {}),
    ],
)  # fmt: skip
def test_forms_outside_the_typed_domain_are_refused(
    op: str, shape: list[int], dtype: int, attrs: dict[str, Any]
) -> None:
    """ORT's float16 MaxPool kernels treat NaN and padding differently between 1-D and 2-D,
    it sizes SAME with dilations otherwise, and has no double or rank-6 GlobalAveragePool:
    infer or the Z3 semantics refuse them (so no proof covers them)."""
    spec = lookup(op)
    assert spec is not None and spec.z3 is not None
    x = np.zeros(shape, dtype=NP[dtype])
    call = _call(op, x, attrs)
    with pytest.raises(ShapeError, match=op):
        spec.infer(call)
        cells = np.empty(x.shape, dtype=object)
        cells[...] = z3.FPVal(0.0, z3.Float32())
        spec.z3(call, [cells])


def test_max_pool_with_indices_stays_opaque(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", P.FLOAT, [1, 2, 4, 4])
    outs = [helper.make_tensor_value_info(n, 0, None) for n in ("y", "i")]
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])
    model = helper.make_model(
        helper.make_graph([node], "g", [x], outs), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    path = tmp_path / "in.onnx"
    onnx.save(model, path)
    assert encode(load(path)).opaque_nodes == 1
