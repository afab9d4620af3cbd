"""The generic part mechanism (`ops.parts`, `egraph.encode_parts`, `egraph.decode`): a node
whose extra outputs are used encodes as one `<Op>Part` term per named output and is written
back as ONE node with the chosen outputs (a required output no class chose gets a fresh name),
bit-identical in ORT; a used output no part stands for keeps the node opaque."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
from onnx import helper as h

from rewrite.cli import main
from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from tests.egraph.models import MS_OPSET, vi

Array = np.ndarray


def _model(
    nodes: list[onnx.NodeProto], ins: dict[str, tuple[int, ...]], outs: list[str]
) -> onnx.ModelProto:
    inputs = [vi(k, list(s)) for k, s in ins.items()]
    graph = h.make_graph(nodes, "g", inputs, [h.make_empty_tensor_value_info(o) for o in outs])
    m = h.make_model(graph, opset_imports=MS_OPSET)
    m.ir_version = 8
    return m


def _feeds(ins: dict[str, tuple[int, ...]]) -> dict[str, Array]:
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in ins.items()}


def _round_trip(m: onnx.ModelProto, feeds: dict[str, Array], tmp_path: Path) -> onnx.ModelProto:
    """`optimize --no-rules` of `m`: 0 opaque nodes, ORT outputs bit-identical; the output."""
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    assert encode(load(src)).opaque_nodes == 0
    assert main(["optimize", str(src), str(dst), "--no-rules", "--no-isolate", "-q"]) == 0
    want = ort.InferenceSession(m.SerializeToString()).run(None, feeds)
    got = ort.InferenceSession(str(dst)).run(None, feeds)
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.tobytes() == g.tobytes()
    return onnx.load(dst)


def test_a_used_mean_writes_one_layer_norm_with_a_fresh_y(tmp_path: Path) -> None:
    ins = {"x": (2, 3, 4), "s": (4,), "b": (4,)}
    node = h.make_node("LayerNormalization", ["x", "s", "b"], ["y", "m"], epsilon=1e-6)
    out = _round_trip(_model([node], ins, ["m"]), _feeds(ins), tmp_path)
    (written,) = out.graph.node
    assert written.op_type == "LayerNormalization" and len(written.output) == 2
    assert written.output[1] == "m" and written.output[0] not in ("", "m")
    assert [a.name for a in written.attribute] == ["epsilon"]


def test_skip_layer_norm_sum_read_by_the_next_residual(tmp_path: Path) -> None:
    ins = {"x": (2, 3, 8), "sk": (2, 3, 8), "g": (8,), "be": (8,)}
    nodes = [
        h.make_node(
            "SkipLayerNormalization", ["x", "sk", "g", "be"], ["y", "", "", "sum"],
            domain="com.microsoft", epsilon=1e-5,
        ),
        h.make_node("Add", ["sum", "y"], ["z"]),
    ]  # fmt: skip
    src = tmp_path / "m.onnx"
    onnx.save(_model(nodes, ins, ["z"]), src)
    enc = encode(load(src))
    assert enc.opaque_nodes == 0 and enc.text.count("SkipLayerNormalizationPart ") == 2
    out = _round_trip(_model(nodes, ins, ["z"]), _feeds(ins), tmp_path)
    assert [(n.op_type, len(n.output)) for n in out.graph.node] == [
        ("SkipLayerNormalization", 4),
        ("Add", 1),
    ]


def test_a_used_output_no_part_stands_for_stays_opaque(tmp_path: Path) -> None:
    ins = {"x": (2, 8), "sk": (2, 8), "g": (8,)}
    node = h.make_node(
        "SkipLayerNormalization", ["x", "sk", "g"], ["y", "mean"], domain="com.microsoft"
    )
    src = tmp_path / "m.onnx"
    onnx.save(_model([node], ins, ["y", "mean"]), src)
    enc = encode(load(src))
    assert enc.opaque_nodes == 1 and enc.typed == 0
