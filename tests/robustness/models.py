"""Seed models for the robustness tests, an exploding rule set, and output checks.

`SEEDS` are small valid models (each under 2 KB, shapes of at most 8 elements a side) that
between them use broadcasting, constants to fold, shape arithmetic, multi-output ops, int and
bool tensors, a subgraph and a symbolic batch: the fuzzer mutates them. `EXPLODE` is Add
associativity + commutativity, the rule pair that grows an e-graph x20 in one iteration.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from rewrite.rules import Rewrite, RuleSet, Tensor, rewrite

OPSET = [h.make_opsetid("", 17)]

EXPLODE = RuleSet("explode", doc="Add associativity + commutativity: grows without end")
"""A stress for the limits, not a sound rule set: float32 addition is not associative (3e38 +
(3e38 + -3e38) = 3e38, (3e38 + 3e38) + -3e38 = inf), so the gate refuses `add_assoc`; the
tests that run it through `optimize` trust it (`prove_rules=False`)."""


@EXPLODE.rule
def add_comm(a: Tensor, b: Tensor) -> Rewrite:
    """a + b = b + a"""
    return rewrite(a + b).to(b + a)


@EXPLODE.rule
def add_assoc(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """a + (b + c) = (a + b) + c"""
    return rewrite(a + (b + c)).to((a + b) + c)


def vi(name: str, shape: list[int | str] | None, dtype: int = T.FLOAT) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, dtype, shape)


def const(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(arr, name)


def rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    inits: list[onnx.TensorProto] | None = None,
) -> onnx.ModelProto:
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=inits or [])
    m = h.make_model(g, opset_imports=OPSET, ir_version=8)
    onnx.checker.check_model(m, full_check=True)
    return m


def add_chain(n: int, width: int = 4) -> onnx.ModelProto:
    """y = x0 + (x1 + (x2 + ...)): n Adds of n+1 inputs, the explosion's playground."""
    names = [f"x{i}" for i in range(n + 1)]
    nodes, prev = [], names[-1]
    for i in range(n - 1, -1, -1):
        out = "y" if i == 0 else f"s{i}"
        nodes.append(h.make_node("Add", [names[i], prev], [out], name=f"add{i}"))
        prev = out
    return model(nodes, [vi(x, [width]) for x in names], [vi("y", [width])])


def cleanable() -> onnx.ModelProto:
    """MatMul -> Identity -> Transpose pair -> Mul by ones: cleanup rules fire."""
    return model(
        [
            h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
            h.make_node("Identity", ["m"], ["i"], name="id"),
            h.make_node("Transpose", ["i"], ["t1"], name="tr1", perm=[1, 0]),
            h.make_node("Transpose", ["t1"], ["t2"], name="tr2", perm=[1, 0]),
            h.make_node("Mul", ["t2", "one"], ["y"], name="mul"),
        ],
        [vi("x", ["batch", 4])],
        [vi("y", ["batch", 3])],
        [const("w", rand((4, 3), 1)), const("one", np.ones(3, np.float32))],
    )


def mlp() -> onnx.ModelProto:
    return model(
        [
            h.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
            h.make_node("Add", ["h1", "b1"], ["h2"], name="add1"),
            h.make_node("Relu", ["h2"], ["h3"], name="relu"),
            h.make_node("MatMul", ["h3", "w2"], ["h4"], name="mm2"),
            h.make_node("Add", ["h4", "b2"], ["y"], name="add2"),
        ],
        [vi("x", ["batch", 6])],
        [vi("y", ["batch", 2])],
        [
            const("w1", rand((6, 5), 2)),
            const("b1", rand((5,), 3)),
            const("w2", rand((5, 2), 4)),
            const("b2", rand((2,), 5)),
        ],
    )


def shapes() -> onnx.ModelProto:
    """Shape -> Gather -> Concat -> Reshape, Transpose, Slice: folding and shape arithmetic."""
    return model(
        [
            h.make_node("Shape", ["x"], ["s"], name="shape"),
            h.make_node("Gather", ["s", "i0"], ["d0"], name="gather", axis=0),
            h.make_node("Concat", ["d0", "m1"], ["ns"], name="concat", axis=0),
            h.make_node("Reshape", ["x", "ns"], ["r"], name="reshape"),
            h.make_node("Transpose", ["r"], ["t"], name="tr", perm=[1, 0]),
            h.make_node("Slice", ["t", "st", "en", "ax"], ["y"], name="slice"),
        ],
        [vi("x", [2, 3, 4])],
        [vi("y", [6, 2])],
        [
            const("i0", np.array([0], np.int64)),
            const("m1", np.array([-1], np.int64)),
            const("st", np.array([0], np.int64)),
            const("en", np.array([6], np.int64)),
            const("ax", np.array([0], np.int64)),
        ],
    )


def multi_output() -> onnx.ModelProto:
    return model(
        [
            h.make_node("Split", ["x", "sp"], ["a", "b"], name="split", axis=1),
            h.make_node("Add", ["a", "b"], ["s"], name="add"),
            h.make_node("Mul", ["s", "a"], ["y"], name="mul"),
            h.make_node("Neg", ["b"], ["z"], name="neg"),
        ],
        [vi("x", [2, 4])],
        [vi("y", [2, 2]), vi("z", [2, 2])],
        [const("sp", np.array([2, 2], np.int64))],
    )


def ints_and_bools() -> onnx.ModelProto:
    return model(
        [
            h.make_node("Cast", ["x"], ["xi"], name="cast", to=T.INT64),
            h.make_node("Equal", ["xi", "k"], ["e"], name="eq"),
            h.make_node("Where", ["e", "x", "zero"], ["w"], name="where"),
            h.make_node("ReduceSum", ["w", "axes"], ["y"], name="rsum", keepdims=0),
        ],
        [vi("x", [3, 4])],
        [vi("y", [3])],
        [
            const("k", np.array(1, np.int64)),
            const("zero", np.zeros((), np.float32)),
            const("axes", np.array([1], np.int64)),
        ],
    )


def norm() -> onnx.ModelProto:
    """A hand-written LayerNorm: ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add."""
    return model(
        [
            h.make_node("ReduceMean", ["x"], ["mu"], name="mean", axes=[-1]),
            h.make_node("Sub", ["x", "mu"], ["d"], name="sub"),
            h.make_node("Pow", ["d", "two"], ["d2"], name="pow"),
            h.make_node("ReduceMean", ["d2"], ["var"], name="var", axes=[-1]),
            h.make_node("Add", ["var", "eps"], ["ve"], name="addeps"),
            h.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
            h.make_node("Div", ["d", "sd"], ["n"], name="div"),
            h.make_node("Mul", ["n", "g"], ["ng"], name="scale"),
            h.make_node("Add", ["ng", "b"], ["y"], name="shift"),
        ],
        [vi("x", ["batch", 8])],
        [vi("y", ["batch", 8])],
        [
            const("two", np.array(2.0, np.float32)),
            const("eps", np.array(1e-5, np.float32)),
            const("g", rand((8,), 6)),
            const("b", rand((8,), 7)),
        ],
    )


def conv() -> onnx.ModelProto:
    return model(
        [
            h.make_node("Conv", ["x", "w", "bias"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            h.make_node("Relu", ["c"], ["r"], name="relu"),
            h.make_node("GlobalAveragePool", ["r"], ["y"], name="gap"),
        ],
        [vi("x", [1, 2, 5, 5])],
        [vi("y", [1, 3, 1, 1])],
        [const("w", rand((3, 2, 3, 3), 8)), const("bias", rand((3,), 9))],
    )


def subgraph() -> onnx.ModelProto:
    """An If whose branches read an outer value; plus an Add outside."""
    then = h.make_graph([h.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", [4])])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [4])])
    return model(
        [
            h.make_node("If", ["c"], ["i"], name="iff", then_branch=then, else_branch=other),
            h.make_node("Add", ["i", "x"], ["y"], name="add"),
        ],
        [vi("c", [], T.BOOL), vi("x", [4])],
        [vi("y", [4])],
    )


def gather() -> onnx.ModelProto:
    return model(
        [
            h.make_node("Gather", ["emb", "ids"], ["g"], name="gather", axis=0),
            h.make_node("Softmax", ["g"], ["y"], name="softmax", axis=-1),
        ],
        [vi("ids", ["batch", 3], T.INT64)],
        [vi("y", ["batch", 3, 4])],
        [const("emb", rand((5, 4), 10))],
    )


SEEDS: dict[str, Callable[[], onnx.ModelProto]] = {
    "cleanable": cleanable,
    "mlp": mlp,
    "shapes": shapes,
    "multi_output": multi_output,
    "ints_and_bools": ints_and_bools,
    "norm": norm,
    "conv": conv,
    "subgraph": subgraph,
    "gather": gather,
    "add_chain": lambda: add_chain(4),
}


def write(m: onnx.ModelProto, folder: Path, name: str = "in.onnx") -> Path:
    path = folder / name
    path.write_bytes(m.SerializeToString())
    return path


def leftovers(folder: Path, expected: set[str]) -> set[str]:
    """Names in `folder` that are not `expected` (temporary files, partial outputs)."""
    return set(os.listdir(folder)) - expected
