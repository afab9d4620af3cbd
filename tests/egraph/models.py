"""Small ONNX models built in code, and the no-rules round trip through the e-graph.

`roundtrip` runs encode -> snapshot -> greedy -> decode -> to_model on a model written to a
temporary folder; `ort_run` and `assert_bit_identical` compare models in ONNX Runtime.
Shared by tests/egraph, tests/rules and tests/rulesets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from rewrite.egraph.decode import decode
from rewrite.egraph.encode import Encoded, encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.extract import Choice, Snapshot, check_choice, greedy, node_costs
from rewrite.onnx_io import Graph, load, to_model
from rewrite.verify import make_inputs

OPSET = [h.make_opsetid("", 17)]
MS_OPSET = [h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)]


def model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    *,
    inits: list[onnx.TensorProto] | None = None,
    opsets: list[onnx.OperatorSetIdProto] | None = None,
) -> onnx.ModelProto:
    """A checked model (opset 17, IR 8) from parts."""
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=inits or [])
    m = h.make_model(g, opset_imports=opsets or OPSET, ir_version=8)
    onnx.checker.check_model(m, full_check=True)
    return m


def vi(
    name: str, shape: list[int | str | None] | None, dtype: int = T.FLOAT
) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, dtype, shape)


def const(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(arr, name)


def rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# -- models ----------------------------------------------------------------------------------


def mlp() -> onnx.ModelProto:
    """Two dense layers with Relu and Sigmoid; symbolic batch."""
    return model(
        [
            h.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
            h.make_node("Add", ["h1", "b1"], ["h2"], name="add1"),
            h.make_node("Relu", ["h2"], ["h3"], name="relu"),
            h.make_node("MatMul", ["h3", "w2"], ["h4"], name="mm2"),
            h.make_node("Add", ["h4", "b2"], ["h5"], name="add2"),
            h.make_node("Sigmoid", ["h5"], ["y"], name="sigmoid"),
        ],
        [vi("x", ["batch", 8])],
        [vi("y", ["batch", 4])],
        inits=[
            const("w1", rand((8, 16), 1)),
            const("b1", rand((16,), 2)),
            const("w2", rand((16, 4), 3)),
            const("b2", rand((4,), 4)),
        ],
    )


def split_one_unused() -> onnx.ModelProto:
    """Split into three; the middle output is read by nothing."""
    return model(
        [
            h.make_node("Split", ["x", "sizes"], ["s0", "s1", "s2"], name="split", axis=1),
            h.make_node("Add", ["s0", "s2"], ["y"], name="add"),
        ],
        [vi("x", [2, 6])],
        [vi("y", [2, 2])],
        inits=[const("sizes", ints(2, 2, 2))],
    )


def topk_one_unused() -> onnx.ModelProto:
    """TopK with sorted=0 (an opaque multi-output op: no typed form); its indices are read
    by nothing."""
    return model(
        [
            h.make_node("TopK", ["x", "k"], ["v", "i"], name="topk", axis=1, sorted=0),
            h.make_node("Add", ["v", "v"], ["y"], name="add"),
        ],
        [vi("x", [2, 6])],
        [vi("y", [2, 2])],
        inits=[const("k", ints(2))],
    )


def if_outer_scope() -> onnx.ModelProto:
    """If whose branches read `t`, a value of the main graph, by name (implicit input)."""
    then = h.make_graph(
        [h.make_node("Add", ["t", "t"], ["then_out"], name="then_add")],
        "then",
        [],
        [vi("then_out", [2, 3])],
    )
    other = h.make_graph(
        [h.make_node("Neg", ["t"], ["else_out"], name="else_neg")],
        "else",
        [],
        [vi("else_out", [2, 3])],
    )
    return model(
        [
            h.make_node("Relu", ["x"], ["t"], name="relu"),
            h.make_node("If", ["cond"], ["y"], name="if", then_branch=then, else_branch=other),
        ],
        [vi("x", [2, 3]), vi("cond", [], T.BOOL)],
        [vi("y", [2, 3])],
    )


def ms_contrib() -> onnx.ModelProto:
    """com.microsoft FusedMatMul (alpha, transB) then Gelu: contrib ops we type."""
    return model(
        [
            h.make_node(
                "FusedMatMul",
                ["x", "w"],
                ["m"],
                name="fmm",
                domain="com.microsoft",
                alpha=0.5,
                transB=1,
            ),
            h.make_node("Gelu", ["m"], ["y"], name="gelu", domain="com.microsoft"),
        ],
        [vi("x", [2, 4])],
        [vi("y", [2, 3])],
        inits=[const("w", rand((3, 4), 5))],
        opsets=MS_OPSET,
    )


def custom_domain() -> onnx.ModelProto:
    """An op of a domain nobody knows (ORT cannot run it): carried opaque."""
    g = h.make_graph(
        [
            h.make_node("Relu", ["x"], ["r"], name="relu"),
            h.make_node(
                "Frobnicate",
                ["r", "k"],
                ["y", "z"],
                name="frob",
                domain="org.example",
                level=3,
                mode="fast",
            ),
        ],
        "g",
        [vi("x", [2, 3])],
        [vi("y", [2, 3]), vi("z", [2, 3])],
        initializer=[const("k", rand((3,), 6))],
    )
    return h.make_model(g, opset_imports=[*OPSET, h.make_opsetid("org.example", 1)], ir_version=8)


def output_is_input() -> onnx.ModelProto:
    """One graph output is the graph input itself (through an Identity we may drop)."""
    return model(
        [
            h.make_node("Relu", ["x"], ["y"], name="relu"),
            h.make_node("Identity", ["x"], ["x_out"], name="passthrough"),
        ],
        [vi("x", [2, 3])],
        [vi("y", [2, 3]), vi("x_out", [2, 3])],
    )


def two_outputs_same_value() -> onnx.ModelProto:
    """Two outputs computed by the same expression (one e-class after encoding)."""
    return model(
        [
            h.make_node("Relu", ["x"], ["y1"], name="relu1"),
            h.make_node("Relu", ["x"], ["y2"], name="relu2"),
        ],
        [vi("x", [2, 3])],
        [vi("y1", [2, 3]), vi("y2", [2, 3])],
    )


def constants() -> onnx.ModelProto:
    """Constant nodes, two of them equal to each other and to an initializer."""
    c = rand((3,), 7)
    return model(
        [
            h.make_node("Constant", [], ["c1"], name="const1", value=const("c1v", c)),
            h.make_node("Constant", [], ["c2"], name="const2", value=const("c2v", c)),
            h.make_node("Constant", [], ["f"], name="constf", value_float=2.0),
            h.make_node("Add", ["x", "c1"], ["a"], name="add1"),
            h.make_node("Mul", ["a", "c2"], ["b"], name="mul"),
            h.make_node("Sub", ["b", "c3"], ["c"], name="sub"),
            h.make_node("Div", ["c", "f"], ["y"], name="div"),
        ],
        [vi("x", [2, 3])],
        [vi("y", [2, 3])],
        inits=[const("c3", c.copy())],
    )


def random_twice() -> onnx.ModelProto:
    """RandomNormalLike twice on the same input, same attributes: two different draws."""
    return model(
        [
            h.make_node("RandomNormalLike", ["x"], ["r1"], name="rand1"),
            h.make_node("RandomNormalLike", ["x"], ["r2"], name="rand2"),
            h.make_node("Sub", ["r1", "r2"], ["y"], name="sub"),
        ],
        [vi("x", [2, 3])],
        [vi("y", [2, 3])],
    )


# -- the round trip --------------------------------------------------------------------------


@dataclass
class RoundTrip:
    graph: Graph
    enc: Encoded
    snap: Snapshot
    choice: Choice
    decoded: Graph
    out: onnx.ModelProto


def write(m: onnx.ModelProto, folder: Path, name: str = "in.onnx") -> Path:
    path = folder / name
    onnx.save(m, path)
    return path


def roundtrip(m: onnx.ModelProto, folder: Path) -> RoundTrip:
    """encode -> snapshot -> greedy -> decode -> to_model, with no rules."""
    graph = load(write(m, folder))
    enc = encode(graph)
    snap = take_snapshot(enc)
    choice = greedy(snap, node_costs(snap))
    check_choice(snap, choice)
    decoded = decode(enc, snap, choice)
    return RoundTrip(graph, enc, snap, choice, decoded, to_model(decoded))


def ort_run(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """All outputs of `m` on `feeds`, by name (ORT, CPU, graph optimizations off)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds), strict=True))


def assert_bit_identical(ref: onnx.ModelProto, cand: onnx.ModelProto, seed: int = 0) -> None:
    """Same output names, dtypes, shapes and bytes on seeded random inputs."""
    feeds = make_inputs(ref, seed=seed)
    want, got = ort_run(ref, feeds), ort_run(cand, feeds)
    assert list(got) == list(want)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert g.tobytes() == w.tobytes(), f"output {name!r} differs"


def op_types(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in m.graph.node]
