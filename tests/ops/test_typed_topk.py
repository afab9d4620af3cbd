"""The typed form of TopK: one `TopKPart` term per output, written back as one TopK.

ORT's order (NaN above every number, ties by index, -0 == +0) is checked bit for bit on
both outputs against the reference and the Z3 semantics (IEEE numerals and symbolic terms);
one-op models encode with no opaque node and `optimize --no-rules` writes models whose ORT
outputs are bit-identical, with one output used or both; a TopK outside the typed form stays
opaque.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3
from onnx import helper, numpy_helper

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.base import OpCall, TensorType, onnx_dtype
from rewrite.ops.registry import lookup
from rewrite.ops.topk import topk_plan
from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED
from rewrite.rules.load import select_rulesets
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, same, z3_numbers

SPECIAL = np.array([np.nan, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.5, 2.5, -2.0])
# shape, axis, k, largest, dtype
CASES: list[tuple[tuple[int, ...], int, int, int, type]] = [
    ((3, 7), -1, 3, 1, np.float32),  # heap path
    ((2, 12), 1, 9, 0, np.float32),  # nth_element + sort path
    ((5, 2, 3), 0, 1, 1, np.float32),  # single pass, strided
    ((4, 6), 0, 4, 0, np.float64),
    ((2, 3, 8), 2, 8, 1, np.float16),
    ((3, 9), -1, 5, 1, np.int64),
    ((6, 2), 0, 2, 0, np.int32),
]


def topk_model(
    x: np.ndarray, k: int, outputs: tuple[str, ...] = ("v", "i"), **attrs: int
) -> onnx.ModelProto:
    """One TopK with K an initializer; `outputs`: its graph outputs (a Relu reads an unused
    Values when only "relu" is given)."""
    dt = onnx_dtype(x)
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], **attrs)]
    if "relu" in outputs:
        nodes.append(helper.make_node("Relu", ["v"], ["relu"]))
    shape = list(x.shape)
    shape[attrs.get("axis", -1)] = k
    outs = [helper.make_tensor_value_info(o, 7 if o == "i" else dt, shape) for o in outputs]
    k_init = numpy_helper.from_array(np.array([k], np.int64), "k")
    xin = helper.make_tensor_value_info("x", dt, x.shape)
    graph = helper.make_graph(nodes, "topk", [xin], outs, [k_init])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def run_both(m: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return [np.asarray(a) for a in sess.run(None, {"x": x})]


def _x(shape: tuple[int, ...], dt: type, seed: int) -> np.ndarray:
    if seed < 2 or np.dtype(dt).kind != "f":
        return data(shape, dt, seed)
    return np.random.default_rng(seed).choice(SPECIAL, size=shape).astype(dt)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_semantics_give_orts_values_on_both_outputs(case: tuple) -> None:
    shape, axis, k, largest, dt = case
    spec = lookup("TopKPart")
    assert spec is not None and spec.reference is not None
    for seed in range(5):
        x = _x(shape, dt, seed)
        want = run_both(topk_model(x, k, axis=axis, largest=largest), x)
        for index in (0, 1):
            attrs = {"axis": axis, "largest": largest, "k": k, "index": index}
            call = call_of("TopKPart", [x], {}, attrs)
            assert spec.infer(call)[0] == TensorType(onnx_dtype(want[index]), want[index].shape)
            ref = spec.reference(call, [x])[0]
            assert same(want[index], ref), (x, want[index], ref)
            got = z3_numbers("TopKPart", [x], {}, attrs)
            assert same(want[index], got), (x, want[index], got)


def test_symbolic_terms_put_a_nan_first_and_break_ties_by_index() -> None:
    """Over IEEE symbols: x0 NaN makes slot 0 index 0 whatever x1, x2 are; x1 == x2 puts
    index 1 before 2."""
    spec = lookup("TopKPart")
    assert spec is not None and spec.z3 is not None
    attrs = {"axis": 0, "largest": 1, "k": 3, "index": 1}
    call = call_of("TopKPart", [np.zeros(3, np.float32)], {}, attrs)
    with _z3.arithmetic(_z3.IEEE):
        xs = [z3.FP(f"x{i}", z3.Float32()) for i in range(3)]
        out = spec.z3(call, [np.array(xs, dtype=object)])[0]
    s = z3.Solver()
    s.add(z3.fpIsNaN(xs[0]), out[0] != 0)
    assert s.check() == z3.unsat
    s = z3.Solver()
    s.add(z3.Not(z3.fpIsNaN(xs[0])), xs[0] < xs[1], z3.fpEQ(xs[1], xs[2]), out[0] != 1)
    assert s.check() == z3.unsat


@pytest.mark.parametrize("case", CASES, ids=str)
def test_optimizes_to_identical_outputs(case: tuple, tmp_path: Path) -> None:
    shape, axis, k, largest, dt = case
    x = _x(shape, dt, 3)
    m = topk_model(x, k, axis=axis, largest=largest)
    assert_optimizes_identically(m, {"x": x}, tmp_path)


@pytest.mark.parametrize("outputs", [("relu",), ("i",), ("relu", "i")])
def test_one_output_used_writes_one_topk(outputs: tuple[str, ...], tmp_path: Path) -> None:
    x = data((3, 8), np.float32, 0)
    m = topk_model(x, 3, outputs)
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    assert encode(load(src)).opaque_nodes == 0
    opts = Options(rulesets=select_rulesets(no_rules=True, target="cpu"), isolate=False)
    assert optimize(src, dst, opts).status == STATUS_OPTIMIZED
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    assert [n.op_type for n in out.graph.node].count("TopK") == 1
    got = ort.InferenceSession(str(dst)).run(None, {"x": x})
    for w, g in zip(run_both(m, x), got, strict=True):
        assert w.tobytes() == g.tobytes()


@pytest.mark.parametrize(
    ("k", "attrs", "const_k", "typed"),
    [(2, {"sorted": 0}, True, False), (2, {}, False, False), (1, {"sorted": 0}, True, True)],
)
def test_forms_outside_stay_opaque(k: int, attrs: dict, const_k: bool, typed: bool) -> None:
    """sorted=0 with k > 1 (the kernel's heap order) and a computed K have no typed form;
    sorted=0 with k = 1 has."""
    x = TensorType(1, (3, 4))
    kc = np.array([k], np.int64) if const_k else None
    plan = topk_plan(OpCall("TopK", [x, TensorType(7, (1,))], [None, kc], attrs, 2, 17))
    assert (plan is not None) == typed
