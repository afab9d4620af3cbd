"""Small ONNX models built in code, and ORT helpers for round-trip tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
OPSET = [h.make_opsetid("", 17)]


def model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    *,
    inits: list[onnx.TensorProto] | None = None,
    opsets: list[onnx.OperatorSetIdProto] | None = None,
    ir_version: int = 8,
    **graph_kw: Any,
) -> onnx.ModelProto:
    """A model from parts, not checked (bad models are built with this too)."""
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=inits or [], **graph_kw)
    return h.make_model(g, opset_imports=opsets or OPSET, ir_version=ir_version)


def vi(
    name: str, shape: list[int | str | None] | None, dtype: int = T.FLOAT
) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, dtype, shape)


def const(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(arr, name)


def rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def mlp() -> onnx.ModelProto:
    """MatMul + Add + Relu + Split into two outputs, symbolic batch, metadata, doc strings."""
    m = model(
        [
            h.make_node("MatMul", ["x", "w"], ["xw"], name="mm", doc_string="the product"),
            h.make_node("Add", ["xw", "b"], ["y"], name="add"),
            h.make_node("Relu", ["y"], ["r"], name="relu"),
            h.make_node("Split", ["r"], ["s0", "s1"], name="split", axis=1, num_outputs=2),
        ],
        [vi("x", ["batch", 8])],
        [vi("s0", ["batch", 2]), vi("s1", ["batch", 2])],
        inits=[
            const("w", rand((8, 4), 1)),
            const("b", rand((4,), 2)),
            const("unused", rand((3,), 3)),
        ],
        opsets=[h.make_opsetid("", 18)],
        doc_string="graph doc",
    )
    m.doc_string = "model doc"
    m.producer_name, m.producer_version, m.model_version = "tests", "1.2", 7
    h.set_model_props(m, {"author": "me", "purpose": "round trip"})
    return m


def wide() -> onnx.ModelProto:
    """x @ w + b with a 64 KiB weight (for external data) and a 256-byte bias."""
    return model(
        [h.make_node("MatMul", ["x", "w"], ["xw"]), h.make_node("Add", ["xw", "b"], ["y"])],
        [vi("x", [2, 256])],
        [vi("y", [2, 64])],
        inits=[const("w", rand((256, 64), 6)), const("b", rand((64,), 7))],
    )


def if_model() -> onnx.ModelProto:
    """If(cond) with branches reading outer values `x`, `w` (one branch nests another If)."""
    inner = h.make_graph([h.make_node("Mul", ["t", "w"], ["u"])], "inner", [], [vi("u", [2, 3])])
    then = h.make_graph(
        [
            h.make_node("Add", ["x", "w"], ["t"]),
            h.make_node("If", ["c"], ["v"], then_branch=inner, else_branch=inner),
        ],
        "then",
        [],
        [vi("v", [2, 3])],
    )
    other = h.make_graph([h.make_node("Sub", ["x", "x"], ["e"])], "else", [], [vi("e", [2, 3])])
    return model(
        [
            h.make_node("Relu", ["x0"], ["x"]),
            h.make_node("If", ["c"], ["out"], name="branch", then_branch=then, else_branch=other),
        ],
        [vi("x0", [2, 3]), vi("c", [], T.BOOL)],
        [vi("out", [2, 3])],
        inits=[const("w", rand((2, 3), 4))],
    )


def initializer_input() -> onnx.ModelProto:
    """IR 8 model whose initializer `b` is also a graph input (an overridable default)."""
    return model(
        [h.make_node("Add", ["x", "b"], ["y"])],
        [vi("x", [2, 3]), vi("b", [2, 3])],
        [vi("y", [2, 3])],
        inits=[const("b", rand((2, 3), 5))],
    )


def constants() -> onnx.ModelProto:
    """Constant nodes feeding a Reshape and a Mul (Constant nodes stay nodes)."""
    return model(
        [
            h.make_node("Constant", [], ["shape"], value=const("", np.array([3, 2], np.int64))),
            h.make_node("Constant", [], ["k"], value_float=2.5),
            h.make_node("Reshape", ["x", "shape"], ["r"]),
            h.make_node("Mul", ["r", "k"], ["y"]),
        ],
        [vi("x", [2, 3])],
        [vi("y", [3, 2])],
    )


def ms_gelu() -> onnx.ModelProto:
    """A com.microsoft Gelu after a Relu."""
    return model(
        [
            h.make_node("Relu", ["x"], ["r"]),
            h.make_node("Gelu", ["r"], ["y"], domain="com.microsoft"),
        ],
        [vi("x", [2, 3])],
        [vi("y", [2, 3])],
        opsets=[*OPSET, h.make_opsetid("com.microsoft", 1)],
    )


def custom_op() -> onnx.ModelProto:
    """An op of an unknown domain, with attributes of several kinds."""
    node = h.make_node(
        "Frobnicate",
        ["x"],
        ["y", "z"],
        domain="my.ops",
        name="frob",
        alpha=0.5,
        mode="fast",
        sizes=[1, 2, 3],
        table=const("t", np.arange(4, dtype=np.int64)),
    )
    return model(
        [node, h.make_node("Relu", ["y"], ["r"])],
        [vi("x", [2, 3])],
        [vi("r", [2, 3]), vi("z", ["n"])],
        opsets=[*OPSET, h.make_opsetid("my.ops", 3)],
    )


SMALL = {
    "mlp": mlp,
    "if": if_model,
    "initializer_input": initializer_input,
    "constants": constants,
    "ms_gelu": ms_gelu,
}


def save(m: onnx.ModelProto, path: Path) -> Path:
    onnx.save_model(m, path)
    return path


def session(path: Path | str) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def feeds(sess: ort.InferenceSession, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random inputs for every ORT input (symbolic dims = 2)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 2 for d in i.shape]
        if i.type == "tensor(float)":
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
        elif i.type == "tensor(bool)":
            out[i.name] = np.asarray(rng.random(shape) < 0.5)
        elif i.type == "tensor(int64)":
            out[i.name] = rng.integers(0, 100, shape).astype(np.int64)
        else:
            raise NotImplementedError(i.type)
    return out


def assert_same_outputs(a: Path | str, b: Path | str, seeds: tuple[int, ...] = (0, 1)) -> None:
    """ORT outputs of models a and b are bit-identical on seeded random inputs."""
    sa, sb = session(a), session(b)
    assert [i.name for i in sa.get_inputs()] == [i.name for i in sb.get_inputs()]
    assert [o.name for o in sa.get_outputs()] == [o.name for o in sb.get_outputs()]
    for seed in seeds:
        f = feeds(sa, seed)
        for x, y in zip(sa.run(None, f), sb.run(None, f), strict=True):
            assert x.dtype == y.dtype and x.shape == y.shape
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
