"""The typed forms of BiasAdd and BiasSoftmax (com.microsoft, CUDA only), defined by their
decompositions.

ORT's CPU EP has no kernel for them (checked: a test fails when one appears, to be compared with
then). BiasAdd: the numpy reference and the Z3 semantics in the IEEE model equal ORT's
Add(Add(X, bias), skip) bit for bit, the real model within float32 rounding. BiasSoftmax: the
reference and the real model equal ORT's Softmax(Add) on the kernel's 2-D views within rtol 1e-6
(numpy's exp is not MLAS's), and those views equal numpy broadcasting where it applies. A model
holding either encodes with 0 opaque nodes (`optimize --no-rules` writes BiasAdd back).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto, helper

from rewrite.cli import main
from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.base import TensorType, onnx_dtype
from rewrite.ops.contrib_cuda import ORT_STAND_INS
from rewrite.ops.registry import lookup
from rewrite.verify.ort_sides import run_ort as run_model
from rewrite.verify.semantics import number
from tests.ops.test_typed_attention import Arrays, call_of, model, run_ort, z3_values
from tests.ops.typed_consts import numerals, same

MS, OP = "com.microsoft", "BiasAdd"
RNG = np.random.default_rng(13)


def case(n: int, s: int, c: int, scale: float = 1.0) -> Arrays:
    x = (RNG.standard_normal((n, s, c)) * scale).astype(np.float32)
    bias = RNG.standard_normal(c).astype(np.float32)
    return [x, bias, (RNG.standard_normal((n, s, c)) * scale).astype(np.float32)]


CASES = [case(1, 1, 320), case(2, 1, 640, 1e3), case(1, 2, 1280, 1e-3)]
IDS = [str(a[0].shape) for a in CASES]


def _decomposition(arrays: Arrays) -> np.ndarray:
    model_bytes = ORT_STAND_INS[(MS, OP)]({}, arrays)
    return run_model(model_bytes, {f"in{i}": a for i, a in enumerate(arrays) if a is not None})


def _ieee(arrays: Arrays) -> np.ndarray:
    spec = lookup(OP, MS)
    assert spec is not None and spec.z3 is not None
    with _z3.arithmetic(_z3.IEEE):
        terms = [None if a is None else numerals(a) for a in arrays]
        out = np.asarray(spec.z3(call_of(OP, arrays, {}), terms)[0], dtype=object)
    vals = [number(z3.simplify(e), TensorProto.FLOAT) for e in out.reshape(-1)]
    return np.array(vals, dtype=np.float64).astype(np.float32).reshape(out.shape)


def test_orts_cpu_ep_has_no_kernel() -> None:
    """Why the decomposition stands in: should a CPU kernel appear, compare with it instead."""
    with pytest.raises(Exception, match="NOT_IMPLEMENTED"):
        run_ort(OP, CASES[0], {})


@pytest.mark.parametrize("arrays", CASES, ids=IDS)
def test_semantics_are_the_decompositions_bits(arrays: Arrays) -> None:
    spec = lookup(OP, MS)
    assert spec is not None and spec.reference is not None
    want = _decomposition(arrays)
    call = call_of(OP, arrays, {})
    assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, want.shape)
    assert same(want, spec.reference(call, arrays)[0])
    assert same(want, _ieee(arrays))
    x, bias, skip = (np.abs(a.astype(np.float64)) for a in arrays if a is not None)
    bound = 2.0**-23 * float((x + bias + skip).max())  # two float32 roundings of the sums
    np.testing.assert_allclose(z3_values(OP, arrays, {}), want, rtol=0, atol=bound)


def test_a_model_holding_it_is_typed_and_written_back(tmp_path: Path) -> None:
    """`optimize --no-rules --no-verify` (ORT cannot run the model here, so nothing to compare):
    0 opaque nodes, the node written back as it was, a model the full checker accepts."""
    m = model(OP, CASES[0], {})
    m.graph.output[0].type.tensor_type.shape.CopyFrom(m.graph.input[0].type.tensor_type.shape)
    src, dst, rep = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(m, src)
    argv = [str(src), str(dst), "--no-rules", "--no-fold", "--no-isolate", "--no-verify", "-q"]
    assert main(["optimize", *argv, "--extractor", "greedy", "--report", str(rep)]) == 0
    report = json.loads(rep.read_text())
    assert report["egraph"]["opaque_nodes"] == 0 and report["egraph"]["typed_nodes"] == 1
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    (node,) = out.graph.node
    assert (node.op_type, node.domain, list(node.input)) == (OP, MS, ["x0", "x1", "x2"])


@pytest.mark.parametrize(
    "shapes",
    [
        [(2, 320), (320,), (2, 320)],  # X not 3-D
        [(1, 2, 64), (64,), (1, 2, 64)],  # C not one of the kernel's
        [(1, 2, 320), (640,), (1, 2, 320)],  # bias not C
        [(1, 2, 320), (1, 320), (1, 2, 320)],  # bias not 1-D
        [(1, 2, 320), (320,), (2, 2, 320)],  # skip not X's shape
    ],
)
def test_shapes_that_do_not_fit_are_refused(shapes: list) -> None:
    spec = lookup(OP, MS)
    assert spec is not None
    arrays: Arrays = [np.zeros(s, np.float32) for s in shapes]
    with pytest.raises(ShapeError, match=OP):
        spec.infer(call_of(OP, arrays, {}))


def test_float16_is_outside_the_typed_form() -> None:
    spec = lookup(OP, MS)
    assert spec is not None
    arrays: Arrays = [np.zeros(s, np.float16) for s in [(1, 2, 320), (320,), (1, 2, 320)]]
    with pytest.raises(ShapeError, match="float32"):
        spec.infer(call_of(OP, arrays, {}))


SM = "BiasSoftmax"
SOFTMAX_CASES: list[tuple[Arrays, dict[str, int]]] = [
    (  # an attention mask over heads and queries (inner broadcast), big negative entries
        [RNG.standard_normal((2, 3, 2, 4)).astype(np.float32) * 3,
         np.where(RNG.random((2, 1, 1, 4)) < 0.3, -1e4, 0.0).astype(np.float32)],
        {"axis": 3, "is_inner_broadcast": 1},
    ),
    (  # a per-head bias (outer broadcast), softmax over the last two dims flattened
        [RNG.standard_normal((2, 3, 2, 4)).astype(np.float32),
         RNG.standard_normal((3, 2, 4)).astype(np.float32)],
        {"axis": 2, "is_inner_broadcast": 0},
    ),
    (  # the default axis 1, one bias row per data row
        [RNG.standard_normal((3, 5)).astype(np.float64),
         RNG.standard_normal((3, 5)).astype(np.float64)],
        {"is_inner_broadcast": 1},
    ),
    (  # one bias row for all (outer), rank 3 at the last axis
        [RNG.standard_normal((2, 2, 6)).astype(np.float32) * 10,
         RNG.standard_normal((6,)).astype(np.float32)],
        {"axis": -1, "is_inner_broadcast": 0},
    ),
]  # fmt: skip
SOFTMAX_IDS = ["mask", "per-head", "axis1-f64", "one-row"]


def _softmax_decomposition(arrays: Arrays, attrs: dict[str, int]) -> np.ndarray:
    model_bytes = ORT_STAND_INS[(MS, SM)](attrs, arrays)
    return run_model(model_bytes, {f"in{i}": a for i, a in enumerate(arrays) if a is not None})


def _close(got: np.ndarray, want: np.ndarray) -> None:
    """Softmax's exp is numpy's or MLAS's: not bit for bit, within a few ulps of [0, 1]."""
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(("arrays", "attrs"), SOFTMAX_CASES, ids=SOFTMAX_IDS)
def test_softmax_semantics_give_the_decompositions_values(
    arrays: Arrays, attrs: dict[str, int]
) -> None:
    spec = lookup(SM, MS)
    assert spec is not None and spec.reference is not None
    want = _softmax_decomposition(arrays, attrs)
    call = call_of(SM, arrays, attrs)
    assert spec.infer(call)[0] == TensorType(call.input(0).dtype, want.shape)
    ref = spec.reference(call, arrays)[0]
    assert ref.dtype == want.dtype
    _close(ref, want)
    _close(z3_values(SM, arrays, attrs), want)


@pytest.mark.parametrize(("arrays", "attrs"), SOFTMAX_CASES[:1] + SOFTMAX_CASES[3:], ids=str)
def test_rows_broadcast_as_numpy_where_the_shapes_allow(
    arrays: Arrays, attrs: dict[str, int]
) -> None:
    """Independently of the 2-D views: the fused pattern Softmax(Add(data, bias), axis=-1)
    with numpy broadcasting gives the same values as the stand-in."""
    nodes = [
        helper.make_node("Add", ["in0", "in1"], ["t"]),
        helper.make_node("Softmax", ["t"], ["out"], axis=-1),
    ]
    x = [
        helper.make_tensor_value_info(f"in{i}", onnx_dtype(a), a.shape)
        for i, a in enumerate(arrays)
        if a is not None
    ]
    graph = helper.make_graph(nodes, "g", x, [helper.make_empty_tensor_value_info("out")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    plain = run_model(m.SerializeToString(), {"in0": arrays[0], "in1": arrays[1]})
    assert same(plain, _softmax_decomposition(arrays, attrs))


def test_softmax_model_is_typed_and_written_back(tmp_path: Path) -> None:
    arrays, attrs = SOFTMAX_CASES[0]
    m = model(SM, arrays, attrs)
    m.graph.output[0].type.tensor_type.shape.CopyFrom(m.graph.input[0].type.tensor_type.shape)
    src = tmp_path / "in.onnx"
    onnx.save(m, src)
    assert encode(load(src)).opaque_nodes == 0
    missing = {k: v for k, v in attrs.items() if k != "is_inner_broadcast"}
    onnx.save(model(SM, arrays, missing), src)  # ORT requires the attribute: stays opaque
    enc = encode(load(src))
    assert enc.opaque_nodes == 1 and enc.typed == 0


@pytest.mark.parametrize(
    ("shapes", "dtype", "attrs"),
    [
        ([(2, 3, 4), (2, 1, 4)], np.float16, {"axis": 2}),  # float16
        ([(2, 3, 4), (5, 4)], np.float32, {"axis": 2}),  # 5 bias rows do not divide 6
        ([(2, 3, 4), (3,)], np.float32, {"axis": 2}),  # bias smaller than a row
        ([(2, 3, 4), (2, 1, 4)], np.float32, {"axis": 3}),  # axis out of range
    ],
)
def test_softmax_shapes_that_do_not_fit_are_refused(
    shapes: list, dtype: type, attrs: dict[str, int]
) -> None:
    spec = lookup(SM, MS)
    assert spec is not None
    arrays: Arrays = [np.zeros(s, dtype) for s in shapes]
    with pytest.raises(ShapeError, match=SM):
        spec.infer(call_of(SM, arrays, {**attrs, "is_inner_broadcast": 1}))
