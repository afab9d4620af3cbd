"""The typed forms of ReduceSum, ReduceMean and ReduceSumSquare.

One-op models of every axes form (attribute before opset 18, constant input after, none,
noop_with_empty_axes) encode with no opaque node and `optimize` without rules writes models
whose ORT outputs are bit-identical; the Z3 semantics, evaluated on numbers, give exactly ORT's
bits (`_reduce_order`'s addition order, float16 in float32, integers through float64) on the
shapes of the proof and sampling bounds; and rules over the ops are proved or refuted.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3
from onnx import TensorProto, helper

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.base import OpCall, TensorType
from rewrite.ops.registry import lookup
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.language import Var
from rewrite.rules.rule import Rule
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.bound import rule_domain
from rewrite.verify.prove import prove
from rewrite.verify.result import PROVED, REFUTED
from rewrite.verify.semantics import number
from tests.ops.roundtrip import assert_optimizes_identically

P = TensorProto
OPS = ("ReduceSum", "ReduceMean", "ReduceSumSquare")
NP = {P.FLOAT: np.float32, P.DOUBLE: np.float64, P.FLOAT16: np.float16}
NP |= {P.INT32: np.int32, P.INT64: np.int64}


def _model(
    name: str,
    shape: list[int],
    dtype: int = P.FLOAT,
    axes: list[int] | None = None,
    opset: int = 17,
    **attrs: int,
) -> onnx.ModelProto:
    """One `name` node; axes as an attribute or a constant input as `opset` takes them."""
    as_input = opset >= (13 if name == "ReduceSum" else 18)
    inputs, inits = ["x"], []
    if axes is not None and as_input:
        inputs.append("axes")
        inits.append(helper.make_tensor("axes", P.INT64, [len(axes)], axes))
    elif axes is not None:
        attrs["axes"] = axes  # type: ignore[assignment]
    node = helper.make_node(name, inputs, ["y"], **attrs)
    x = helper.make_tensor_value_info("x", dtype, shape)
    y = helper.make_tensor_value_info("y", dtype, None)
    graph = helper.make_graph([node], "g", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _data(shape: tuple[int, ...], dtype: int, seed: int = 0) -> np.ndarray:
    """Values whose sums expose the order of additions: mixed magnitudes, ±0, ties."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype in (P.INT32, P.INT64):
        info = np.iinfo(NP[dtype])
        x = rng.integers(-(2**20), 2**20, n).astype(NP[dtype])
        x[rng.random(n) < 0.2] = info.max
        return x.reshape(shape)
    spread = 12 if dtype == P.FLOAT16 else 24
    x = rng.standard_normal(n) * np.exp2(rng.integers(-spread, spread, n))
    x[rng.random(n) < 0.3] = -0.0
    return x.astype(NP[dtype]).reshape(shape)


FORMS = [
    # (op, shape, dtype, axes, opset, attrs)
    ("ReduceSum", [2, 3, 4], P.FLOAT, [1], 13, {}),
    ("ReduceSum", [2, 3, 4], P.FLOAT, None, 13, {"keepdims": 0}),
    ("ReduceSum", [2, 3, 4], P.FLOAT, None, 13, {"noop_with_empty_axes": 1}),
    ("ReduceSum", [2, 3, 4], P.INT64, [0, -1], 18, {"keepdims": 0}),
    ("ReduceSum", [2, 3, 4], P.FLOAT16, [2], 17, {}),
    ("ReduceMean", [2, 3, 4], P.FLOAT, [-1], 17, {}),
    ("ReduceMean", [2, 3, 4], P.DOUBLE, [0, 2], 17, {"keepdims": 0}),
    ("ReduceMean", [2, 3, 4], P.FLOAT, None, 17, {}),
    ("ReduceMean", [2, 3, 4], P.FLOAT, [1], 18, {}),
    ("ReduceMean", [2, 3, 4], P.INT32, None, 18, {"keepdims": 0}),
    ("ReduceSumSquare", [2, 3, 4], P.FLOAT, [1, 2], 13, {}),
    ("ReduceSumSquare", [2, 3, 4], P.FLOAT, [-1], 18, {"keepdims": 0}),
    ("ReduceSumSquare", [2, 3, 4], P.INT64, None, 18, {}),
    ("ReduceMean", [1, 128, 768], P.FLOAT, [-1], 17, {}),  # LayerNorm's exports
    ("ReduceMean", [1, 128, 768], P.FLOAT, [-1], 18, {}),
    ("ReduceSum", [1, 128, 768], P.FLOAT, [-1], 17, {}),
    ("ReduceSumSquare", [1, 128, 768], P.FLOAT, [-1], 18, {}),
]


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f"{f[0]}-{f[1]}-{f[3]}-o{f[4]}-{f[5]}")
def test_form_round_trips_bit_identically(form: tuple, tmp_path: Path) -> None:
    name, shape, dtype, axes, opset, attrs = form
    model = _model(name, shape, dtype, axes, opset, **attrs)
    assert_optimizes_identically(model, {"x": _data(tuple(shape), dtype)}, tmp_path)


def test_computed_axes_and_opset18_noop_stay_opaque(tmp_path: Path) -> None:
    """Axes that are not a constant, and ReduceMean's opset-18 noop_with_empty_axes."""
    model = _model("ReduceMean", [2, 3], axes=None, opset=18, noop_with_empty_axes=1)
    onnx.save(model, tmp_path / "m.onnx")
    assert encode(load(tmp_path / "m.onnx")).opaque_nodes == 1
    x = helper.make_tensor_value_info("x", P.FLOAT, [2, 3])
    a = helper.make_tensor_value_info("a", P.INT64, [1])
    node = helper.make_node("ReduceSum", ["x", "a"], ["y"])
    y = helper.make_tensor_value_info("y", P.FLOAT, None)
    graph = helper.make_graph([node], "g", [x, a], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "c.onnx")
    assert encode(load(tmp_path / "c.onnx")).opaque_nodes == 1


def _ort(name: str, x: np.ndarray, axes: tuple[int, ...] | None, **attrs: int) -> np.ndarray:
    dtype = int(helper.np_dtype_to_tensor_dtype(x.dtype))
    model = _model(name, list(x.shape), dtype, None if axes is None else list(axes), 18, **attrs)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, {"x": x})[0])


def _z3_numbers(name: str, x: np.ndarray, axes: tuple[int, ...] | None, **attrs: int) -> list:
    """The op's Z3 semantics on the numbers of `x` (IEEE), simplified to Python numbers."""
    dtype = int(helper.np_dtype_to_tensor_dtype(x.dtype))
    spec = lookup(name)
    assert spec is not None and spec.z3 is not None
    if axes is not None:
        attrs["axes"] = list(axes)  # type: ignore[assignment]
    with _z3.arithmetic(_z3.IEEE):
        cells = np.empty(x.size, dtype=object)
        cells[:] = [_z3.symbol("", dtype, v.item()) for v in x.reshape(-1)]
        call = OpCall(name, [TensorType(dtype, x.shape)], [None], attrs)
        out = spec.z3(call, [cells.reshape(x.shape)])[0]
    return [number(z3.simplify(e), dtype) for e in np.asarray(out).reshape(-1)]


def _same(got: np.ndarray, sem: list) -> bool:
    want = np.asarray(sem, dtype=np.float64 if got.dtype.kind == "f" else object)
    if got.dtype.kind == "f":
        return want.astype(got.dtype).tobytes() == got.reshape(-1).tobytes()
    return [int(v) for v in want] == [int(v) for v in got.reshape(-1)]


SHAPES = [(), (3,), (5,), (2, 3), (2, 5), (3, 6), (2, 3, 2), (2, 6, 3), (1, 6, 4), (4, 1, 6, 1)]
SHAPES += [(2, 1, 3, 1, 2), (1, 2, 1, 3, 1, 2)]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", [P.FLOAT, P.DOUBLE, P.FLOAT16, P.INT32, P.INT64])
def test_z3_semantics_give_orts_bits(name: str, dtype: int) -> None:
    """On every axes subset of small shapes (every kernel path and row alignment)."""
    for shape in SHAPES:
        x = _data(shape, dtype, seed=len(shape))
        subsets = [
            c for k in range(len(shape) + 1) for c in itertools.combinations(range(len(shape)), k)
        ]
        for axes in [None, *subsets[1:]][:12]:
            got = _ort(name, x, axes)
            assert _same(got, _z3_numbers(name, x, axes)), (name, shape, axes, got)


def test_noop_and_integer_saturation_as_ort() -> None:
    x = np.array([[-0.0, 3.0], [2.0, -5.0]], np.float32)
    for name in OPS[:2]:
        assert _same(
            _ort(name, x, None, noop_with_empty_axes=1),
            _z3_numbers(name, x, None, noop_with_empty_axes=1),
        )
    big = np.array([[2**31 - 1, 1], [-(2**31), -1]], np.int32)
    for name in OPS:
        assert _same(_ort(name, big, (1,)), _z3_numbers(name, big, (1,)))
    wide = np.array([2**53, 1, 1], np.int64)  # Kahan: 2^53 + 2; a plain float64 sum: 2^53
    assert _same(_ort("ReduceSum", wide, None), _z3_numbers("ReduceSum", wide, None))


def test_rules_over_reductions_are_proved_or_refuted() -> None:
    """ReduceSum(-x) = -ReduceSum(x) holds for floats (IEEE negation commutes with every
    order of additions); ReduceMean is not ReduceSum."""
    x = Var("x")

    def total(t: object) -> object:
        return op.ReduceSum(t, axes=(-1,), keepdims=1)

    rw = Rewrite((total(op.Neg(x)),), (op.Neg(total(x)),), (x.dtype == P.FLOAT,))
    assert prove(Rule("sum-of-neg", "", (rw,))).status == PROVED
    mean = op.ReduceMean(x, axes=(-1,), keepdims=1)
    false = Rule("mean-is-sum", "", (Rewrite((mean,), (total(x),)),))
    assert prove(false).status == REFUTED


MEANS = RuleSet("means", doc="a perf_rules.py-style rule over ReduceMean")


@MEANS.rule
def mean_of_neg(x: Tensor) -> Rewrite:
    """ReduceMean(-x) = -ReduceMean(x)   over the last axis, keepdims (LayerNorm's form)"""
    mean = op.ReduceMean(op.Neg(x), axes=[-1], keepdims=1)
    return rewrite(mean).to(op.Neg(op.ReduceMean(x, axes=[-1], keepdims=1)), x.dtype == "float32")


@pytest.mark.parametrize("opset", [17, 18])
def test_a_rule_matches_reduce_mean_in_both_axes_forms(opset: int, tmp_path: Path) -> None:
    """Proved, and it fires on ReduceMean nodes whose axes are an attribute (opset 17) or a
    constant input (opset 18)."""
    (rule,) = MEANS.rules
    assert prove(rule).status == PROVED
    model = _model("ReduceMean", [2, 3, 8], axes=[-1], opset=opset, keepdims=1)
    neg = helper.make_node("Neg", ["x"], ["n"])
    model.graph.node[0].input[0] = "n"
    model.graph.node.insert(0, neg)
    only = RuleSet("one", [replace(rule, domain=rule_domain(rule))])
    stats = saturate(encode(load(_write(model, tmp_path))), [only], Limits(iterations=3))
    assert stats.refused == [] and stats.matches[rule.name] > 0


def _write(model: onnx.ModelProto, folder: Path) -> Path:
    path = folder / "m.onnx"
    onnx.save(model, path)
    return path
