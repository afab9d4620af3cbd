"""Unused extra outputs are dropped (`ops.parts.DROPPABLE`): a node whose extra outputs no node
reads and no graph output names encodes typed as its output 0, and `optimize --no-rules`
writes it back with one output, a model onnx's full checker accepts, whose ORT output is
bit-identical to the input model's (where ORT computes output 0 with another kernel when the
extra output is declared, MaxPool's Indices, the values still agree bit for bit). A used extra
output keeps the node opaque unless the op has typed parts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from tests.egraph.models import MS_OPSET, model, vi
from tests.ops.roundtrip import assert_optimizes_identically

Array = np.ndarray


def _rng_feeds(shapes: dict[str, tuple[int, ...]]) -> dict[str, Array]:
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def _one_node(
    op: str, ins: dict[str, tuple[int, ...]], outs: list[str], domain: str = "", **attrs: object
) -> onnx.ModelProto:
    node = h.make_node(op, list(ins), outs, domain=domain, **attrs)
    inputs = [vi(k, list(s)) for k, s in ins.items()]
    graph = h.make_graph([node], "g", inputs, [h.make_empty_tensor_value_info(outs[0])])
    m = h.make_model(graph, opset_imports=MS_OPSET)
    m.ir_version = 8
    return m


CASES: list[tuple[str, dict[str, tuple[int, ...]], list[str], str, dict[str, object]]] = [
    ("LayerNormalization", {"x": (2, 3, 8), "s": (8,), "b": (8,)}, ["y", "m", "i"], "", {}),
    ("LayerNormalization", {"x": (2, 3, 8), "s": (3, 8), "b": (3, 8)}, ["y", "", "i"], "",
     {"axis": 1}),
    ("SimplifiedLayerNormalization", {"x": (2, 3, 8), "s": (8,)}, ["y", "i"], "", {}),
    ("MaxPool", {"x": (1, 2, 5, 5)}, ["y", "idx"], "", {"kernel_shape": [2, 2]}),
    ("MaxPool", {"x": (1, 3, 7, 6)}, ["y", "idx"], "",
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("Dropout", {"x": (2, 3)}, ["y", "mask"], "", {}),
    ("SkipLayerNormalization", {"x": (2, 3, 8), "sk": (2, 3, 8), "g": (8,), "be": (8,)},
     ["y", "m", "i", "sum"], "com.microsoft", {"epsilon": 1e-5}),
    ("SkipSimplifiedLayerNormalization", {"x": (2, 3, 8), "sk": (3, 8), "g": (8,)},
     ["y", "", "", "sum"], "com.microsoft", {"epsilon": 1e-6}),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{len(c[2])}")
def test_unused_extra_outputs_are_dropped_bit_identically(case: tuple, tmp_path: Path) -> None:
    op, ins, outs, domain, attrs = case
    m = _one_node(op, ins, outs, domain, **attrs)
    assert_optimizes_identically(m, _rng_feeds(ins), tmp_path)
    written = onnx.load(tmp_path / "out.onnx")
    assert [(n.op_type, list(n.output)) for n in written.graph.node] == [(op, ["y"])]


def test_attention_with_an_unused_present_is_dropped(tmp_path: Path) -> None:
    ins = {"x": (1, 3, 4), "w": (4, 12), "b": (12,)}
    m = _one_node("Attention", ins, ["y", "present"], "com.microsoft", num_heads=2)
    assert_optimizes_identically(m, _rng_feeds(ins), tmp_path)


def test_a_used_extra_output_without_parts_stays_opaque(tmp_path: Path) -> None:
    node = h.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2])
    outs = [vi("y", [1, 1, 3, 3]), vi("idx", [1, 1, 3, 3], T.INT64)]
    m = model([node], [vi("x", [1, 1, 4, 4])], outs)
    onnx.save(m, tmp_path / "m.onnx")
    enc = encode(load(tmp_path / "m.onnx"))
    assert enc.opaque_nodes == 1 and enc.typed == 0
