"""Every way a model file can be wrong gives one ModelError line naming the file and culprit."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.errors import ModelError
from rewrite.onnx_io import load
from tests.onnx_io import models
from tests.onnx_io.models import const, rand, vi
from tests.robustness.models import shapes


def raises(path: Path, pattern: str) -> ModelError:
    """load(path) raises a one-line ModelError starting with the path and matching pattern."""
    with pytest.raises(ModelError, match=pattern) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message, message
    return info.value


def relu_chain(*edges: tuple[str, str, str], out: str = "y") -> onnx.ModelProto:
    """Relu nodes (name, input, output) from graph input x to graph output `out`."""
    nodes = [h.make_node("Relu", [i], [o], name=n) for n, i, o in edges]
    return models.model(nodes, [vi("x", [2])], [vi(out, [2])])


def test_missing_file(tmp_path: Path) -> None:
    raises(tmp_path / "nope.onnx", "nope.onnx: no such file")


def test_directory(tmp_path: Path) -> None:
    (tmp_path / "dir.onnx").mkdir()
    raises(tmp_path / "dir.onnx", "dir.onnx: is a directory")


@pytest.mark.parametrize(
    "data",
    [b"hello, world\n" * 10, bytes(range(256)), b"\xff" * 64],
    ids=["text", "bytes", "ff"],
)
def test_garbage_is_not_onnx(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "junk.onnx"
    path.write_bytes(data)
    raises(path, r"junk\.onnx: is not an ONNX model")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    raises(path, r"empty\.onnx: the file is empty")


def test_parsable_non_model(tmp_path: Path) -> None:
    path = tmp_path / "header.onnx"
    path.write_bytes(onnx.ModelProto(ir_version=8, producer_name="x").SerializeToString())
    raises(path, r"header\.onnx: is not an ONNX model \(no IR version or no graph\)")


@pytest.mark.parametrize("keep", [0.5, 0.97])
def test_truncated_file(tmp_path: Path, keep: float) -> None:
    data = models.mlp().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: int(len(data) * keep)])
    raises(path, r"cut\.onnx: is a truncated or corrupt ONNX file")


def test_missing_external_data_file(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save_model(
        models.mlp(), path, save_as_external_data=True, location="w.bin", size_threshold=0
    )
    (tmp_path / "w.bin").unlink()
    raises(path, r"m\.onnx: tensor 'w' keeps its data in 'w\.bin', which does not exist")


def test_short_external_data_file(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save_model(
        models.mlp(), path, save_as_external_data=True, location="w.bin", size_threshold=0
    )
    data = tmp_path / "w.bin"
    data.write_bytes(data.read_bytes()[:100])
    raises(path, r"m\.onnx: tensor '\w+': external data file 'w\.bin' is too short")


def test_no_outputs(tmp_path: Path) -> None:
    m = models.model([h.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [])
    raises(models.save(m, tmp_path / "m.onnx"), r"m\.onnx: the graph has no outputs")


def test_empty_graph(tmp_path: Path) -> None:
    m = models.model([], [vi("x", [2])], [vi("x", [2])])
    raises(models.save(m, tmp_path / "m.onnx"), r"m\.onnx: the graph is empty \(no nodes\)")


def test_value_defined_twice(tmp_path: Path) -> None:
    m = relu_chain(("a", "x", "y"), ("b", "x", "y"))
    raises(
        models.save(m, tmp_path / "m.onnx"),
        r"m\.onnx: node 'b' \(Relu\) defines 'y', which node 'a' \(Relu\) already defines",
    )


def test_node_redefines_graph_input(tmp_path: Path) -> None:
    m = relu_chain(("a", "x", "x"), out="x")
    raises(
        models.save(m, tmp_path / "m.onnx"),
        r"m\.onnx: node 'a' \(Relu\) defines 'x', which graph input 'x' already defines",
    )


def test_duplicate_initializer(tmp_path: Path) -> None:
    m = models.model(
        [h.make_node("Add", ["x", "w"], ["y"])],
        [vi("x", [2])],
        [vi("y", [2])],
        inits=[const("w", rand((2,), 0)), const("w", rand((2,), 1))],
    )
    raises(models.save(m, tmp_path / "m.onnx"), r"m\.onnx: initializer 'w' is declared twice")


def test_undefined_input(tmp_path: Path) -> None:
    m = relu_chain(("a", "x", "t"), ("b", "ghost", "y"))
    raises(
        models.save(m, tmp_path / "m.onnx"),
        r"m\.onnx: node 'b' \(Relu\) reads 'ghost', which no node, graph input or initializer",
    )


def test_undefined_subgraph_input(tmp_path: Path) -> None:
    body = h.make_graph([h.make_node("Relu", ["ghost"], ["t"])], "b", [], [vi("t", [2])])
    m = models.model(
        [h.make_node("If", ["c"], ["y"], name="iff", then_branch=body, else_branch=body)],
        [vi("c", [], T.BOOL)],
        [vi("y", [2])],
    )
    raises(models.save(m, tmp_path / "m.onnx"), r"node 'iff' \(If\) its subgraph reads 'ghost'")


def test_cycle(tmp_path: Path) -> None:
    m = models.model(
        [
            h.make_node("Relu", ["x"], ["a"], name="head"),
            h.make_node("Add", ["a", "c"], ["b"], name="p"),
            h.make_node("Relu", ["b"], ["c"], name="q"),
            h.make_node("Relu", ["b"], ["y"], name="tail"),
        ],
        [vi("x", [2])],
        [vi("y", [2])],
    )
    err = raises(models.save(m, tmp_path / "m.onnx"), r"m\.onnx: the graph has a cycle through")
    assert re.search(
        r"node 'p' \(Add\) -> node 'q' \(Relu\)|node 'q' \(Relu\) -> node 'p'", str(err)
    )
    assert "head" not in str(err) and "tail" not in str(err)


def test_self_loop(tmp_path: Path) -> None:
    m = models.model(
        [h.make_node("Add", ["x", "y"], ["y"], name="me")], [vi("x", [2])], [vi("y", [2])]
    )
    raises(models.save(m, tmp_path / "m.onnx"), r"cycle through node 'me' \(Add\)")


def test_output_not_produced(tmp_path: Path) -> None:
    m = models.model([h.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("z", [2])])
    raises(
        models.save(m, tmp_path / "m.onnx"),
        r"m\.onnx: graph output 'z' is not produced by any node, graph input or initializer",
    )


def test_ir_version_too_new(tmp_path: Path) -> None:
    m = relu_chain(("a", "x", "y"))
    m.ir_version = onnx.IR_VERSION + 1
    raises(models.save(m, tmp_path / "m.onnx"), rf"IR version {onnx.IR_VERSION + 1} is newer")


def test_opset_too_new(tmp_path: Path) -> None:
    m = relu_chain(("a", "x", "y"))
    m.opset_import[0].version = onnx.defs.onnx_opset_version() + 1
    raises(
        models.save(m, tmp_path / "m.onnx"),
        rf"m\.onnx: opset {onnx.defs.onnx_opset_version() + 1} is newer than the installed onnx",
    )


def test_no_ai_onnx_opset(tmp_path: Path) -> None:
    m = relu_chain(("a", "x", "y"))
    m.opset_import[0].domain = "my.ops"
    raises(models.save(m, tmp_path / "m.onnx"), r"uses ai\.onnx ops but imports no ai\.onnx opset")


def test_old_opset_that_cannot_be_converted(tmp_path: Path) -> None:
    m = models.model(
        [h.make_node("Tile", ["x", "r"], ["y"])],
        [vi("x", [2]), vi("r", [1], T.INT64)],
        [vi("y", [4])],
        opsets=[h.make_opsetid("", 5)],
        ir_version=3,
    )
    raises(
        models.save(m, tmp_path / "old.onnx"),
        r"old\.onnx: opset 5 is older than supported 13 and could not be converted to 17: "
        r"No Adapter From Version \$5 for Tile",
    )


def test_file_over_2gb(tmp_path: Path) -> None:
    path = tmp_path / "huge.onnx"
    with open(path, "wb") as f:
        f.truncate(2**31)  # sparse: no disk space used
    raises(path, r"huge\.onnx: over 2 GB in one file, which protobuf cannot parse")


@pytest.mark.parametrize("where", ["input", "output", "value_info", "subgraph"])
def test_negative_declared_dim(tmp_path: Path, where: str) -> None:
    """Refused before shape inference, which aborted the process on the fuzzer's `shapes`
    seed with input dims [2, -5, 4] (Shape/Gather/Concat/Reshape/Transpose/Slice)."""
    m = shapes()
    if where == "input":
        m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = -5
    elif where == "output":
        m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = -1
    elif where == "value_info":
        m.graph.value_info.append(vi("r", [-3, 4]))
    else:
        body = h.make_graph([h.make_node("Relu", ["y"], ["t"])], "b", [], [vi("t", [-2])])
        m.graph.node.append(h.make_node("If", ["c"], ["z"], then_branch=body, else_branch=body))
        m.graph.input.append(vi("c", [], T.BOOL))
        m.graph.output.append(vi("z", None))
    path = models.save(m, tmp_path / "neg.onnx")
    name = {"input": "graph input 'x'", "output": "graph output 'y'", "value_info": "value 'r'",
            "subgraph": "graph output 't'"}[where]  # fmt: skip
    raises(path, rf"neg\.onnx: {name} declares a negative dim \(shape \[")


@pytest.mark.parametrize(
    ("field", "count", "what"),
    [
        ("raw_data", 5, "need 24 bytes, but holds 20"),
        ("raw_data", 7, "need 24 bytes, but holds 28"),
        ("float_data", 5, "need 6 values, but holds 5"),
        ("float_data", 9, "need 6 values, but holds 9"),
    ],
)
def test_initializer_whose_data_does_not_fit_its_dims(
    tmp_path: Path, field: str, count: int, what: str
) -> None:
    values = np.arange(count, dtype=np.float32)
    data = {field: values.tobytes() if field == "raw_data" else values.tolist()}
    w = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[2, 3], **data)
    model = models.model(
        [h.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 3])], inits=[w]
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    raises(path, re.escape(f"tensor 'w' declares dims [2, 3] (FLOAT), which {what}"))
