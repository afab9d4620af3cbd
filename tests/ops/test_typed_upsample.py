"""Upsample (opsets 7-9) and Resize-10 as the opset-11+ Resize `ops/upsample.py` states.

Each old model is converted to opset 17 by onnx's version converter (as `onnx_io.load` does)
and its Resize given `resize_attributes`; ORT's outputs of the original and the restated
model are then bit-identical (nearest and linear, scales as attribute, constant input and
computed input, integer and fractional scales, special values). The restated model encodes
with no opaque node and round-trips through `optimize --no-rules` bit-identically. The
converter alone (Resize with mode only) computes something else: that is checked too, and
that `load` restates every such node (`onnx_io.resize10`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, version_converter

from rewrite.errors import ModelError
from rewrite.onnx_io import load
from rewrite.ops.upsample import resize_attributes
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import data, run_ort, same

Case = tuple[int, str, tuple[int, ...], list[float], str]
"""opset, mode, X's shape, scales, how scales are given: attr / const / computed."""

CASES: list[Case] = [
    (7, "nearest", (1, 2, 3, 4), [1, 1, 2, 2], "attr"),  # ORT's 2x fast path
    (7, "nearest", (1, 1, 3, 4), [1, 1, 1.5, 2.5], "attr"),
    (8, "linear", (1, 2, 3, 3), [1, 1, 2, 1.5], "attr"),
    (7, "linear", (3, 4), [1.7, 2], "attr"),
    (9, "nearest", (2, 5), [1.4, 3], "const"),
    (9, "nearest", (1, 1, 2, 3), [1, 1, 3, 1.25], "computed"),
    (9, "linear", (1, 1, 4, 3), [1, 1, 1.5, 2.25], "const"),
    (9, "linear", (2, 3), [2.5, 1], "computed"),
    (9, "nearest", (4,), [2.5], "const"),
    (10, "nearest", (1, 1, 5, 7), [1, 1, 0.6, 0.5], "const"),  # downsampling: ceil
    (10, "nearest", (1, 1, 3, 4), [1, 1, 1.5, 2.5], "const"),
    (10, "linear", (1, 1, 5, 4), [1, 1, 0.6, 1.5], "const"),
]


def _ids(case: Case) -> str:
    opset, mode, shape, scales, given = case
    return f"op{opset}-{mode}-{list(shape)}-{scales}-{given}"


def _model(case: Case) -> onnx.ModelProto:
    opset, mode, shape, scales, given = case
    op = "Resize" if opset == 10 else "Upsample"
    out = [int(np.float32(s) * d) for s, d in zip(scales, shape, strict=True)]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, out)
    s = numpy_helper.from_array(np.array(scales, np.float32), "s")
    nodes, inits = [], [s]
    if given == "attr":
        nodes.append(
            helper.make_node(op, ["x"], ["y"], mode=mode, scales=[float(v) for v in scales])
        )
        inits = []
    elif given == "const":
        nodes.append(helper.make_node(op, ["x", "s"], ["y"], mode=mode))
    else:  # computed: Abs of a constant, which the loader cannot see through before folding
        nodes.append(helper.make_node("Abs", ["s"], ["s2"]))
        nodes.append(helper.make_node(op, ["x", "s2"], ["y"], mode=mode))
    g = helper.make_graph(nodes, "up", [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 5
    return m


def _restated(case: Case, keep: bool = True) -> onnx.ModelProto:
    """The converter's opset-17 model, its Resize given `resize_attributes` when `keep`."""
    opset, mode, _, scales, given = case
    conv = version_converter.convert_version(_model(case), 17)
    if not keep:
        return conv
    op = "Resize" if opset == 10 else "Upsample"
    attrs = resize_attributes(op, opset, {"mode": mode}, None if given == "computed" else scales)
    assert attrs is not None
    node = next(n for n in conv.graph.node if n.op_type == "Resize")
    del node.attribute[:]
    node.attribute.extend(helper.make_attribute(k, v) for k, v in sorted(attrs.items()))
    return conv


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_the_restated_resize_computes_what_ort_computes(case: Case) -> None:
    for seed in range(3):
        x = data(case[2], np.float32, seed, special=seed == 2)
        want = run_ort(_model(case), {"x": x})
        got = run_ort(_restated(case), {"x": x})
        assert same(want, got), (x, want, got)


def test_the_converters_resize_computes_something_else() -> None:
    """Without the restated attributes the converted linear Upsample differs (the check above
    can fail)."""
    case = CASES[2]
    x = data(case[2], np.float32, 0)
    want = run_ort(_model(case), {"x": x})
    assert not same(want, run_ort(_restated(case, keep=False), {"x": x}))


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_load_keeps_what_the_node_computes(case: Case, tmp_path: Path) -> None:
    """`onnx_io.load` (which converts opsets below 13) restates each node as above, and
    `rewrite optimize` of the old model writes outputs bit-identical to the input's."""
    onnx.save(_model(case), tmp_path / "m.onnx")
    graph = load(tmp_path / "m.onnx")
    attrs: dict[str, Any] = next(n.attrs for n in graph.nodes if n.op_type == "Resize")
    assert attrs.get("coordinate_transformation_mode") == "asymmetric"
    if case[4] != "computed":  # one node to encode (the computed scales add an Abs)
        assert_optimizes_identically(_model(case), {"x": data(case[2], np.float32, 1)}, tmp_path)


def test_load_refuses_a_resize10_with_no_opset11_form(tmp_path: Path) -> None:
    """A nearest Resize-10 that scales one axis up and another down has no Resize-11 form:
    the load fails naming the node, rather than converting it to another computation."""
    case: Case = (10, "nearest", (1, 1, 4, 4), [1, 1, 0.5, 2], "const")
    model = _model(case)
    model.graph.node[0].name = "up_and_down"
    onnx.save(model, tmp_path / "m.onnx")
    with pytest.raises(ModelError, match=r"up_and_down.*no Resize of opset 11"):
        load(tmp_path / "m.onnx")


def test_optimizes_to_identical_outputs(tmp_path: Path) -> None:
    for n, case in enumerate(c for c in CASES if c[4] != "computed"):
        x = data(case[2], np.float32, n)
        (tmp_path / str(n)).mkdir()
        assert_optimizes_identically(_restated(case), {"x": x}, tmp_path / str(n))


@pytest.mark.parametrize(
    ("op", "opset", "mode", "scales", "want"),
    [
        ("Resize", 10, "nearest", [1, 1, 0.5, 2], None),  # up and down: no Resize-11 form
        ("Resize", 10, "nearest", None, None),  # computed scales of a Resize-10
        ("Resize", 10, "nearest", [1, 1, 1, 1], "floor"),
        ("Upsample", 9, "nearest", None, "floor"),
        ("Resize", 10, "linear", None, "-"),
    ],
)
def test_resize_attributes_per_form(
    op: str, opset: int, mode: str, scales: list[float] | None, want: str | None
) -> None:
    got = resize_attributes(op, opset, {"mode": mode}, scales)
    if want is None:
        assert got is None
        return
    assert got is not None and got["coordinate_transformation_mode"] == "asymmetric"
    assert got.get("nearest_mode", "-") == want


@pytest.mark.parametrize(("op", "opset"), [("Upsample", 10), ("Resize", 11), ("Resize", 9)])
def test_other_nodes_are_refused(op: str, opset: int) -> None:
    with pytest.raises(ValueError, match="opset < 11"):
        resize_attributes(op, opset, {}, [1.0])
