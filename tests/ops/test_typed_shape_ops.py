"""The typed e-graph forms of Unsqueeze, Squeeze, Flatten, Shape, Size, ConstantOfShape,
Gather and Tile: small models encode with no opaque node, `rewrite optimize --no-rules` writes
them back so that ORT computes the same outputs, and the Z3 semantics of Gather selects (and
requires an in-range index) as ORT does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto, helper, numpy_helper

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.base import OpCall, TensorType
from rewrite.ops.registry import lookup
from rewrite.verify.semantics import number
from tests.ops.roundtrip import round_trip

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
TYPED = ("Unsqueeze", "Squeeze", "Flatten", "Shape", "Size", "ConstantOfShape", "Gather", "Tile")


def _i64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _vi(name: str, dtype: int, shape: list[int | str]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


# op -> (nodes, inputs, outputs, initializers, opset)
Case = tuple[
    list[onnx.NodeProto], list[onnx.ValueInfoProto], list[str], list[onnx.TensorProto], int
]
X = _vi("x", F, ["n", 3, 1])
CASES: dict[str, Case] = {
    "Unsqueeze": (
        [
            helper.make_node("Unsqueeze", ["x", "ax0"], ["u0"]),
            helper.make_node("Unsqueeze", ["x", "ax1"], ["u1"]),
        ],
        [X],
        ["u0", "u1"],
        [_i64("ax0", [0, -1]), _i64("ax1", [2])],
        17,
    ),
    "Unsqueeze-opset11": (
        [helper.make_node("Unsqueeze", ["x"], ["u0"], axes=[0, 4])],
        [X],
        ["u0"],
        [],
        11,
    ),
    "Squeeze": (
        [helper.make_node("Squeeze", ["x", "ax"], ["s0"])],
        [X],
        ["s0"],
        [_i64("ax", [-1])],
        13,
    ),
    "Squeeze-all": (  # no axes: every size-1 dim of a static shape, spelled out when typed
        [helper.make_node("Squeeze", ["y"], ["s1"])],
        [_vi("y", F, [1, 3, 1, 4])],
        ["s1"],
        [],
        13,
    ),
    "Squeeze-opset11": (
        [helper.make_node("Squeeze", ["x"], ["s0"], axes=[2])],
        [X],
        ["s0"],
        [],
        11,
    ),
    "Flatten": (
        [
            helper.make_node("Flatten", ["x"], ["f0"]),
            helper.make_node("Flatten", ["x"], ["f1"], axis=0),
            helper.make_node("Flatten", ["x"], ["f2"], axis=-1),
        ],
        [X],
        ["f0", "f1", "f2"],
        [],
        17,
    ),
    "Shape": (
        [
            helper.make_node("Shape", ["x"], ["h0"]),
            helper.make_node("Shape", ["x"], ["h1"], start=1),
            helper.make_node("Shape", ["x"], ["h2"], start=-2, end=-1),
        ],
        [X],
        ["h0", "h1", "h2"],
        [],
        17,
    ),
    "Shape-opset13": ([helper.make_node("Shape", ["x"], ["h0"])], [X], ["h0"], [], 13),
    "Size": ([helper.make_node("Size", ["x"], ["z0"])], [X], ["z0"], [], 17),
    "ConstantOfShape": (
        [
            helper.make_node("ConstantOfShape", ["shp"], ["c0"]),
            helper.make_node(
                "ConstantOfShape",
                ["shp"],
                ["c1"],
                value=onnx.numpy_helper.from_array(np.array([7], np.int64)),
            ),
            helper.make_node(
                "ConstantOfShape",
                ["shp"],
                ["c2"],
                value=onnx.numpy_helper.from_array(np.array([-0.5], np.float16)),
            ),
        ],
        [X],
        ["c0", "c1", "c2"],
        [_i64("shp", [2, 3])],
        17,
    ),
    "Gather": (
        [
            helper.make_node("Gather", ["d", "i64"], ["g0"]),
            helper.make_node("Gather", ["d", "i32"], ["g1"], axis=1),
            helper.make_node("Gather", ["d", "neg"], ["g2"], axis=-1),
        ],
        [_vi("d", F, [5, 4]), _vi("i64", I64, [2, 3]), _vi("i32", I32, [3])],
        ["g0", "g1", "g2"],
        [_i64("neg", [-1, -4, 2])],
        17,
    ),
    "Tile": (
        [helper.make_node("Tile", ["x", "rep"], ["t0"])],
        [X],
        ["t0"],
        [_i64("rep", [2, 1, 3])],
        17,
    ),
}


def _model(key: str) -> onnx.ModelProto:
    nodes, inputs, outputs, inits, opset = CASES[key]
    outs = [helper.make_tensor_value_info(o, 0, None) for o in outputs]
    graph = helper.make_graph(nodes, key, inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return onnx.shape_inference.infer_shapes(model)


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    for vi in model.graph.input:
        t = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 2 for d in t.shape.dim]
        if t.elem_type == F:
            feeds[vi.name] = rng.normal(size=shape).astype(np.float32)
        else:  # Gather's indices: valid for every data dim (4 and 5), some negative
            dt = np.int64 if t.elem_type == I64 else np.int32
            feeds[vi.name] = rng.integers(-4, 4, size=shape).astype(dt)
    return feeds


def _run(model: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    src = model if isinstance(model, str) else model.SerializeToString()
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    return list(sess.run(None, {k: v for k, v in feeds.items() if k in names}))


@pytest.mark.parametrize("key", sorted(CASES))
def test_the_model_encodes_with_no_opaque_node(key: str, tmp_path: Path) -> None:
    path = tmp_path / "in.onnx"
    onnx.save(_model(key), path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 0, enc.opaque
    assert enc.typed == len(CASES[key][0])


def test_a_squeeze_without_axes_of_a_symbolic_shape_stays_opaque(tmp_path: Path) -> None:
    """Which dims are 1 is known only at run time there."""
    node = helper.make_node("Squeeze", ["x"], ["s"])
    graph = helper.make_graph([node], "g", [X], [helper.make_tensor_value_info("s", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "in.onnx"
    onnx.save(model, path)
    assert encode(load(path)).opaque_nodes == 1


def test_every_op_is_typed_and_provable() -> None:
    for name in TYPED:
        spec = lookup(name)
        assert spec is not None and spec.egg is not None and spec.z3 is not None, name
    assert set(TYPED) <= {n.op_type for c in CASES.values() for n in c[0]}


@pytest.mark.parametrize("opset", sorted({c[4] for c in CASES.values()}))
def test_optimize_round_trips_the_typed_ops_and_ort_agrees(opset: int, tmp_path: Path) -> None:
    """One model holding every case of an opset, through the e-graph and back (opset 11 is
    converted to 17 at load: axes become inputs)."""
    nodes: list[onnx.NodeProto] = []
    inputs: dict[str, onnx.ValueInfoProto] = {}
    outputs: list[str] = []
    inits: list[onnx.TensorProto] = []
    for ns, ins, outs, its, at in CASES.values():
        if at == opset:
            nodes += ns
            inputs.update({i.name: i for i in ins})
            outputs += outs
            inits += its
    graph = helper.make_graph(
        nodes,
        "all",
        list(inputs.values()),
        [helper.make_tensor_value_info(o, 0, None) for o in outputs],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    model = onnx.shape_inference.infer_shapes(model)
    round_trip(model, tmp_path)
    dst = tmp_path / "out.onnx"
    feeds = _feeds(model)
    for a, b in zip(_run(model, feeds), _run(str(dst), feeds), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def _gather_z3(data: np.ndarray, idx: list[int], dtype: int, axis: int) -> np.ndarray:
    spec = lookup("Gather")
    assert spec is not None and spec.z3 is not None
    ins = [TensorType(F, data.shape), TensorType(dtype, (len(idx),))]
    call = OpCall("Gather", ins, [None, None], {"axis": axis})
    with _z3.arithmetic(_z3.IEEE):
        d = np.empty(data.shape, dtype=object)
        for k in np.ndindex(*data.shape):
            d[k] = _z3.symbol("", F, float(data[k]))
        i = np.array([_z3.symbol("", dtype, v) for v in idx] + [None], dtype=object)[:-1]
        (out,) = spec.z3(call, [d, i])
    return np.vectorize(lambda t: float(number(z3.simplify(t), F)))(out)


@pytest.mark.parametrize("dtype", [I64, I32])
def test_gather_z3_selects_what_numpy_takes(dtype: int) -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    for axis, idx in ((0, [2, -1, 0, -3]), (1, [-4, 3, 1]), (-1, [0, -2])):
        got = _gather_z3(data, idx, dtype, axis)
        np.testing.assert_array_equal(got, np.take(data, idx, axis=axis))


def test_gather_z3_requires_an_index_in_range() -> None:
    spec = lookup("Gather")
    assert spec is not None and spec.z3 is not None
    call = OpCall("Gather", [TensorType(F, (3,)), TensorType(I64, (1,))], [None, None], {})
    i = z3.BitVec("i", 64)
    with _z3.arithmetic(_z3.REAL), _z3.collecting() as (req, _):
        data = np.array([z3.Real(f"d{k}") for k in range(3)], dtype=object)
        spec.z3(call, [data, np.array([i], dtype=object)])
    s = z3.Solver()
    s.add(z3.And(*req), z3.Or(i == 3, i == -4))
    assert s.check() == z3.unsat
    s = z3.Solver()
    s.add(z3.And(*req), i == -3)
    assert s.check() == z3.sat


def test_attribute_values_fit_the_input_rank() -> None:
    def values(op: str, name: str, shape: tuple[int, ...]) -> list[Any]:
        spec = lookup(op)
        assert spec is not None and spec.attr_values is not None
        got = spec.attr_values(name, [TensorType(F, shape)])
        assert got is not None
        return got

    assert values("Flatten", "axis", (2, 3)) == [-2, -1, 0, 1, 2]
    assert values("Squeeze", "axes", (2, 1, 3, 1)) == [(1,), (-1,), (1, 3)]
    assert values("Squeeze", "axes", (2, 3)) == []
    assert (-1, 0) in values("Unsqueeze", "axes", (2, 3))
    assert values("Unsqueeze", "axes", (1,) * 6) == []
    assert all(len(r) == 3 for r in values("Tile", "repeats", (2, 1, 3)))


def test_a_fill_value_no_float_holds_exactly_stays_opaque(tmp_path: Path) -> None:
    big = onnx.numpy_helper.from_array(np.array([2**60 + 1], np.int64))
    nodes = [helper.make_node("ConstantOfShape", ["shp"], ["c"], value=big)]
    graph = helper.make_graph(
        nodes, "g", [], [helper.make_tensor_value_info("c", 7, [2, 3])], [_i64("shp", [2, 3])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "big.onnx"
    onnx.save(model, path)
    assert encode(load(path)).opaque_nodes == 1
