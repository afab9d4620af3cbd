"""decode: one node per chosen e-node, original value and node names kept, valid ONNX out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper

from rewrite.egraph.decode import decode
from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.errors import ExtractionError
from rewrite.extract import Choice, check_choice, greedy, node_costs
from rewrite.onnx_io import load, to_model
from rewrite.rules.saturate import Limits, saturate
from rulesets.cleanup import CLEANUP
from tests.egraph import models as mk


def optimized(m: onnx.ModelProto, folder: Path) -> onnx.ModelProto:
    """The model after CLEANUP and greedy extraction (checked)."""
    enc = encode(load(mk.write(m, folder)))
    saturate(enc, [CLEANUP], Limits())
    snap = take_snapshot(enc)
    choice = greedy(snap, node_costs(snap))
    check_choice(snap, choice)
    out = to_model(decode(enc, snap, choice))
    onnx.checker.check_model(out, full_check=True)
    return out


def assert_ssa(m: onnx.ModelProto) -> None:
    outs = [o for n in m.graph.node for o in n.output if o]
    assert len(outs) == len(set(outs)), outs
    names = [n.name for n in m.graph.node]
    assert len(names) == len(set(names)) and all(names), names


def test_original_value_and_node_names_are_kept(tmp_path: Path) -> None:
    m = mk.mlp()
    rt = mk.roundtrip(m, tmp_path)
    assert [(n.name, list(n.input), list(n.output)) for n in rt.out.graph.node] == [
        (n.name, list(n.input), list(n.output)) for n in m.graph.node
    ]
    assert rt.out.graph.input == m.graph.input and rt.out.graph.output == m.graph.output


def test_decoded_graph_is_typed(tmp_path: Path) -> None:
    rt = mk.roundtrip(mk.mlp(), tmp_path)
    for name in rt.graph.iter_values():
        assert rt.decoded.types[name] == rt.graph.types[name], name


def test_opaque_nodes_keep_attributes_name_and_doc(tmp_path: Path) -> None:
    m = mk.custom_domain()
    m.graph.node[1].doc_string = "a custom op"
    rt = mk.roundtrip(m, tmp_path)
    (frob,) = [n for n in rt.decoded.nodes if n.op_type == "Frobnicate"]
    assert (frob.name, frob.domain, frob.doc_string) == ("frob", "org.example", "a custom op")
    assert frob.attrs == {"level": 3, "mode": "fast"}


def test_typed_attributes_equal_to_defaults_are_dropped(tmp_path: Path) -> None:
    m = mk.model(
        [
            h.make_node("Softmax", ["x"], ["s"], name="sm", axis=-1),
            h.make_node("Softmax", ["s"], ["y"], name="sm0", axis=0),
        ],
        [mk.vi("x", [2, 3])],
        [mk.vi("y", [2, 3])],
    )
    rt = mk.roundtrip(m, tmp_path)
    assert [n.attrs for n in rt.decoded.nodes] == [{}, {"axis": 0}]
    mk.assert_bit_identical(m, rt.out)


def test_reshape_target_is_written_resolved(tmp_path: Path) -> None:
    """encode resolves -1 from the inferred shape; decode writes that target as a constant."""
    m = mk.model(
        [h.make_node("Reshape", ["x", "s"], ["r"], name="rs"), h.make_node("Relu", ["r"], ["y"])],
        [mk.vi("x", [2, 3, 4])],
        [mk.vi("y", [6, 4])],
        inits=[mk.const("s", mk.ints(-1, 4))],
    )
    rt = mk.roundtrip(m, tmp_path)
    (rs,) = [n for n in rt.out.graph.node if n.op_type == "Reshape"]
    assert rs.name == "rs" and rs.input[0] == "x" and rs.output[0] == "r"
    inits = {t.name: numpy_helper.to_array(t) for t in rt.out.graph.initializer}
    assert np.array_equal(inits[rs.input[1]], mk.ints(6, 4)) and "s" not in inits
    mk.assert_bit_identical(m, rt.out)


def test_rewritten_graph_keeps_names_where_classes_held_them(tmp_path: Path) -> None:
    """Transpose chain: (1,2,0)³ is the identity, so t3 = t0: one Transpose named t0 (the
    first original name of its class) by the node that first computed it."""
    nodes, prev = [], "x"
    for i in range(4):
        nodes.append(h.make_node("Transpose", [prev], [f"t{i}"], name=f"tr{i}", perm=[1, 2, 0]))
        prev = f"t{i}"
    nodes.append(h.make_node("Relu", [prev], ["y"], name="relu"))
    m = mk.model(nodes, [mk.vi("x", [2, 3, 4])], [mk.vi("y", [3, 4, 2])])
    out = optimized(m, tmp_path)
    assert [(n.op_type, n.name, list(n.input), list(n.output)) for n in out.graph.node] == [
        ("Transpose", "tr0", ["x"], ["t0"]),
        ("Relu", "relu", ["t0"], ["y"]),
    ]
    assert out.graph.node[0].attribute[0].ints == [1, 2, 0]
    mk.assert_bit_identical(m, out)


def test_outputs_merged_by_rules_get_identities(tmp_path: Path) -> None:
    """y1 = Identity(x) and y2 = Neg(Neg(x)) both become x: two outputs, two Identities."""
    m = mk.model(
        [
            h.make_node("Identity", ["x"], ["y1"], name="id"),
            h.make_node("Neg", ["x"], ["n"], name="neg1"),
            h.make_node("Neg", ["n"], ["y2"], name="neg2"),
            h.make_node("Relu", ["y2"], ["y3"], name="relu"),
        ],
        [mk.vi("x", [3])],
        [mk.vi("y1", [3]), mk.vi("y2", [3]), mk.vi("y3", [3])],
    )
    out = optimized(m, tmp_path)
    assert_ssa(out)
    producers = {o: n for n in out.graph.node for o in n.output}
    assert producers["y1"].op_type == producers["y2"].op_type == "Identity"
    assert list(producers["y3"].input) == ["x"] and producers["y3"].name == "relu"
    mk.assert_bit_identical(m, out)


def test_a_renamed_scope_value_is_defined_once_for_all_readers(tmp_path: Path) -> None:
    """Two If nodes read `t`, whose class is named `t2` (a graph output): one Identity t2 -> t.

    (Regression: decode wrote the Identity once per reader, so `t` was defined twice.)
    """

    def branch(tag: str, op: str) -> onnx.GraphProto:
        return h.make_graph(
            [h.make_node(op, ["t"], [f"{tag}_o"])], tag, [], [mk.vi(f"{tag}_o", [2, 3])]
        )

    m = mk.model(
        [
            h.make_node("Relu", ["x"], ["t"], name="relu"),
            h.make_node("Relu", ["x"], ["t2"], name="relu2"),
            h.make_node(
                "If",
                ["c"],
                ["y1"],
                name="if1",
                then_branch=branch("a", "Neg"),
                else_branch=branch("b", "Abs"),
            ),
            h.make_node(
                "If",
                ["c"],
                ["y2"],
                name="if2",
                then_branch=branch("c", "Exp"),
                else_branch=branch("d", "Abs"),
            ),
        ],
        [mk.vi("x", [2, 3]), mk.vi("c", [], onnx.TensorProto.BOOL)],
        [mk.vi("t2", [2, 3]), mk.vi("y1", [2, 3]), mk.vi("y2", [2, 3])],
    )
    rt = mk.roundtrip(m, tmp_path)
    onnx.checker.check_model(rt.out, full_check=True)
    assert_ssa(rt.out)
    assert mk.op_types(rt.out) == ["Relu", "Identity", "If", "If"]
    mk.assert_bit_identical(m, rt.out)


def test_unused_outputs_of_shared_opaque_nodes_do_not_steal_names(tmp_path: Path) -> None:
    """Two Splits with equal attributes share one opaque entry (the first's output names).

    (Regression: the second Split's unused output was named `a1`, the first's needed output,
    so `a1` was defined twice.)
    """
    m = mk.model(
        [
            h.make_node("Split", ["x"], ["a0", "a1"], name="splitA", axis=1, num_outputs=2),
            h.make_node("Split", ["x2"], ["b0", "b1"], name="splitB", axis=1, num_outputs=2),
        ],
        [mk.vi("x", [2, 4]), mk.vi("x2", [2, 4])],
        [mk.vi("b0", [2, 2]), mk.vi("a1", [2, 2])],
        opsets=[h.make_opsetid("", 18)],
    )
    rt = mk.roundtrip(m, tmp_path)
    onnx.checker.check_model(rt.out, full_check=True)
    assert_ssa(rt.out)
    producers = {o: n.name for n in rt.out.graph.node for o in n.output}
    assert producers["a1"] == "splitA" and producers["b0"] == "splitB"
    mk.assert_bit_identical(m, rt.out)


def test_missing_pick_raises(tmp_path: Path) -> None:
    rt = mk.roundtrip(mk.mlp(), tmp_path)
    picks = dict(rt.choice.picks)
    relu = next(cid for cid, n in picks.items() if n.op == "Relu")
    del picks[relu]
    with pytest.raises(ExtractionError, match=f"class {relu} is needed but has no pick"):
        decode(rt.enc, rt.snap, Choice(picks, rt.choice.roots))


def test_cyclic_choice_raises(tmp_path: Path) -> None:
    rt = mk.roundtrip(mk.mlp(), tmp_path)
    picks = dict(rt.choice.picks)
    relu = next(cid for cid, n in picks.items() if n.op == "Relu")
    sigmoid = next(cid for cid, n in picks.items() if n.op == "Sigmoid")
    picks[relu] = type(picks[relu])("Relu", (sigmoid,))  # Relu reads the graph's output
    with pytest.raises(ExtractionError, match="cycle"):
        decode(rt.enc, rt.snap, Choice(picks, rt.choice.roots))


def test_scope_values_merged_away_are_redefined_by_name(tmp_path: Path) -> None:
    """If branches read `t` (= Identity(x), merged into x by cleanup) and `k2` (equal to the
    initializer `k1`, deduplicated): both names are defined again, by Identities."""

    def branch(tag: str, reads: str) -> onnx.GraphProto:
        return h.make_graph(
            [h.make_node("Neg", [reads], [f"{tag}_o"])], tag, [], [mk.vi(f"{tag}_o", [3])]
        )

    ones = np.ones(3, np.float32)
    m = mk.model(
        [
            h.make_node("Identity", ["x"], ["t"]),
            h.make_node(
                "If", ["c"], ["y"], then_branch=branch("a", "t"), else_branch=branch("b", "k2")
            ),
            h.make_node("Add", ["y", "k1"], ["z"]),
        ],
        [mk.vi("x", [3]), mk.vi("c", [], onnx.TensorProto.BOOL)],
        [mk.vi("z", [3])],
        inits=[mk.const("k1", ones), mk.const("k2", ones.copy())],
    )
    out = optimized(m, tmp_path)
    assert_ssa(out)
    producers = {o: n for n in out.graph.node for o in n.output}
    assert (producers["t"].op_type, list(producers["t"].input)) == ("Identity", ["x"])
    assert (producers["k2"].op_type, list(producers["k2"].input)) == ("Identity", ["k1"])
    assert [t.name for t in out.graph.initializer] == ["k1"]
    for cond in (True, False):
        feeds = {"x": np.arange(3, dtype=np.float32), "c": np.array(cond)}
        assert mk.ort_run(out, feeds)["z"].tobytes() == mk.ort_run(m, feeds)["z"].tobytes()
