"""encode, through the no-rules round trip: encode -> snapshot -> greedy -> decode -> to_model.

With no rules the round trip must give back the same computation: a model that passes the
full ONNX check and whose ORT outputs are bit-identical to the input's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from tests.egraph import models as mk

RUNNABLE = [
    mk.mlp,
    mk.split_one_unused,
    mk.topk_one_unused,
    mk.if_outer_scope,
    mk.ms_contrib,
    mk.output_is_input,
    mk.two_outputs_same_value,
    mk.constants,
]


@pytest.mark.parametrize("build", RUNNABLE, ids=lambda f: f.__name__)
def test_round_trip_is_bit_identical(build: Callable[[], onnx.ModelProto], tmp_path: Path) -> None:
    m = build()
    rt = mk.roundtrip(m, tmp_path)
    onnx.checker.check_model(rt.out, full_check=True)
    assert [i.name for i in rt.out.graph.input] == [i.name for i in m.graph.input]
    assert [o.name for o in rt.out.graph.output] == [o.name for o in m.graph.output]
    mk.assert_bit_identical(m, rt.out)


def test_mlp_is_encoded_typed(tmp_path: Path) -> None:
    rt = mk.roundtrip(mk.mlp(), tmp_path)
    assert rt.enc.typed == 6 and rt.enc.opaque_nodes == 0
    assert mk.op_types(rt.out) == mk.op_types(mk.mlp())
    assert set(rt.enc.value_vars) == set(rt.graph.iter_values())


def test_split_with_an_unused_output(tmp_path: Path) -> None:
    """A Split with constant sizes is one typed SplitPart per output, written back as one
    Split; the unused output keeps its name."""
    rt = mk.roundtrip(mk.split_one_unused(), tmp_path)
    assert rt.enc.opaque_nodes == 0 and not rt.enc.node_vars
    (split,) = [n for n in rt.out.graph.node if n.op_type == "Split"]
    assert list(split.output) == ["s0", "s1", "s2"] and split.name == "split"
    assert list(split.input) == ["x", "sizes"]


def test_opaque_multi_output_node_with_an_unused_output(tmp_path: Path) -> None:
    """TopK is a multi-output node read through Out(n, i); the unused output keeps its name."""
    rt = mk.roundtrip(mk.topk_one_unused(), tmp_path)
    assert rt.enc.opaque_nodes == 1 and len(rt.enc.node_vars) == 1
    (topk,) = [n for n in rt.out.graph.node if n.op_type == "TopK"]
    assert list(topk.output) == ["v", "i"] and topk.name == "topk"
    assert list(topk.input) == ["x", "k"]


def test_if_keeps_its_implicit_input_by_name(tmp_path: Path) -> None:
    rt = mk.roundtrip(mk.if_outer_scope(), tmp_path)
    (node,) = [n for n in rt.decoded.nodes if n.op_type == "If"]
    assert node.implicit_inputs == ["t"]
    assert "t" in {o for n in rt.decoded.nodes for o in n.outputs}
    (orig,) = [n for n in mk.if_outer_scope().graph.node if n.op_type == "If"]
    (out,) = [n for n in rt.out.graph.node if n.op_type == "If"]
    assert out.SerializeToString() == orig.SerializeToString()  # bodies byte for byte


def test_ms_contrib_ops_are_written_back_unchanged(tmp_path: Path) -> None:
    m = mk.ms_contrib()
    rt = mk.roundtrip(m, tmp_path)
    assert rt.enc.opaque_nodes == 0 and rt.enc.typed == 2  # registered com.microsoft ops
    assert [n.SerializeToString() for n in rt.out.graph.node] == [
        n.SerializeToString() for n in m.graph.node
    ]
    assert {(o.domain, o.version) for o in rt.out.opset_import} == {("", 17), ("com.microsoft", 1)}


def test_custom_domain_op_is_opaque_and_written_back(tmp_path: Path) -> None:
    """A domain ORT does not know: structure and the full check only."""
    m = mk.custom_domain()
    rt = mk.roundtrip(m, tmp_path)
    onnx.checker.check_model(rt.out, full_check=True)
    assert rt.enc.typed == 1 and rt.enc.opaque_nodes == 1
    (frob,) = [n for n in rt.out.graph.node if n.op_type == "Frobnicate"]
    (orig,) = [n for n in m.graph.node if n.op_type == "Frobnicate"]
    assert frob.SerializeToString() == orig.SerializeToString()
    assert [o.name for o in rt.out.graph.output] == ["y", "z"]
    assert ("org.example", 1) in {(o.domain, o.version) for o in rt.out.opset_import}


def test_output_that_is_an_input_gets_an_identity(tmp_path: Path) -> None:
    rt = mk.roundtrip(mk.output_is_input(), tmp_path)
    producers = {o: n for n in rt.out.graph.node for o in n.output}
    assert producers["x_out"].op_type == "Identity" and list(producers["x_out"].input) == ["x"]


def test_two_outputs_of_one_value(tmp_path: Path) -> None:
    """Equal computations share one class; the second output is an Identity of the first."""
    rt = mk.roundtrip(mk.two_outputs_same_value(), tmp_path)
    assert rt.enc.value_vars["y1"] != rt.enc.value_vars["y2"]
    assert rt.snap.roots[0] == rt.snap.roots[1]
    assert mk.op_types(rt.out) == ["Relu", "Identity"]
    producers = {o: n for n in rt.out.graph.node for o in n.output}
    assert producers["y1"].op_type == "Relu"
    assert list(producers["y2"].input) == ["y1"]


def test_constant_nodes_become_deduplicated_initializers(tmp_path: Path) -> None:
    """c1, c2 (Constant nodes) and c3 (initializer) are equal: one leaf, one initializer."""
    rt = mk.roundtrip(mk.constants(), tmp_path)
    assert "Constant" not in mk.op_types(rt.out)
    assert sorted(rt.enc.consts) == ["c3", "f"]
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in rt.out.graph.initializer}
    assert sorted(inits) == ["c3", "f"]
    assert inits["f"].dtype == np.float32 and inits["f"].shape == () and inits["f"] == 2.0
    readers = {n.op_type: list(n.input) for n in rt.out.graph.node}
    assert readers["Add"] == ["x", "c3"] and readers["Mul"] == ["a", "c3"]
    assert readers["Sub"] == ["b", "c3"] and readers["Div"] == ["c", "f"]


def test_equal_constants_of_other_dtype_or_shape_are_not_merged(tmp_path: Path) -> None:
    """Same bytes, different shape or dtype: three different constants."""
    zeros = np.zeros(4, np.float32)
    m = mk.model(
        [
            h.make_node("Add", ["x", "a"], ["p"]),
            h.make_node("Add", ["p", "b"], ["q"]),
            h.make_node("Cast", ["c"], ["cf"], to=onnx.TensorProto.FLOAT),
            h.make_node("Add", ["q", "cf"], ["y"]),
        ],
        [mk.vi("x", [4, 4])],
        [mk.vi("y", [4, 4])],
        inits=[
            mk.const("a", zeros),
            mk.const("b", zeros.reshape(1, 4)),
            mk.const("c", np.zeros(4, np.int32)),
        ],
    )
    rt = mk.roundtrip(m, tmp_path)
    assert sorted(rt.enc.consts) == ["a", "b", "c"]
    mk.assert_bit_identical(m, rt.out)


def test_nondeterministic_ops_are_not_merged(tmp_path: Path) -> None:
    rt = mk.roundtrip(mk.random_twice(), tmp_path)
    assert rt.enc.value_vars["r1"] != rt.enc.value_vars["r2"]
    assert len(rt.enc.opaque) == 2
    classes = {v: cid for cid in rt.snap.classes for v in rt.snap.classes[cid].names}
    assert classes["r1"] != classes["r2"]
    assert mk.op_types(rt.out) == ["RandomNormalLike", "RandomNormalLike", "Sub"]
    onnx.checker.check_model(rt.out, full_check=True)
    # Two draws: r1 - r2 is not all zero (it would be if the two calls had been merged).
    y = mk.ort_run(rt.out, mk.make_inputs(rt.out))["y"]
    assert np.any(y != 0)


def test_equal_deterministic_opaque_nodes_are_merged(tmp_path: Path) -> None:
    """The contrast: two TopKs of the same input with the same attributes are one node."""
    m = mk.model(
        [
            h.make_node("TopK", ["x", "k"], ["a0", "a1"], axis=1, sorted=0),  # opaque
            h.make_node("TopK", ["x", "k"], ["b0", "b1"], axis=1, sorted=0),
            h.make_node("Add", ["a0", "b0"], ["y"]),
        ],
        [mk.vi("x", [2, 4])],
        [mk.vi("y", [2, 2])],
        inits=[mk.const("k", mk.ints(2))],
    )
    rt = mk.roundtrip(m, tmp_path)
    assert len(rt.enc.opaque) == 1
    assert mk.op_types(rt.out) == ["TopK", "Add"]
    mk.assert_bit_identical(m, rt.out)


def test_encode_binds_every_value_once(tmp_path: Path) -> None:
    g = load(mk.write(mk.mlp(), tmp_path))
    enc = encode(g)
    assert sorted(enc.value_vars) == sorted(g.iter_values())
    assert len(set(enc.value_vars.values())) == len(enc.value_vars)
    assert enc.text.count("(let $v") == len(enc.value_vars)
