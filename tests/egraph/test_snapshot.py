"""take_snapshot: classes, e-nodes, types (egglog's shape analysis, completed in Python), names."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import helper as h

from rewrite.egraph.encode import Encoded, encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.extract import Snapshot
from rewrite.onnx_io import load
from rewrite.ops.base import TensorType
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.saturate import Limits, saturate
from rulesets.cleanup import CLEANUP
from tests.egraph import models as mk

FLOAT = onnx.TensorProto.FLOAT

# Rules that create terms the input never had, so only the shape analysis can type them.
NEW_TERMS = RuleSet("new_terms")


@NEW_TERMS.rule
def matmul_by_transposes(a: Tensor, b: Tensor) -> Rewrite:
    """A @ B = (Bᵀ @ Aᵀ)ᵀ   for A of rank 3, B of rank 2 (new Transpose and MatMul classes)"""
    bt = op.Transpose(b, perm=[1, 0])
    at = op.Transpose(a, perm=[0, 2, 1])
    return rewrite(a @ b).to(op.Transpose(bt @ at, perm=[0, 2, 1]), a.rank == 3, b.rank == 2)


@NEW_TERMS.rule
def neg_through_flat(x: Tensor) -> Rewrite:
    """-x = reshape(-flat(x), shape(x))   (a Reshape by -1: typed only by the Python `infer`)"""
    flat = op.Reshape(x, shape=[-1])
    return rewrite(-x).to(op.Reshape(-flat, shape=x.shape))


def snapshot_of(m: onnx.ModelProto, folder: Path) -> tuple[Encoded, Snapshot]:
    enc = encode(load(mk.write(m, folder)))
    return enc, take_snapshot(enc)


def classes_by_name(snap: Snapshot) -> dict[str, int]:
    return {name: c.id for c in snap for name in c.names}


def matmul_neg() -> onnx.ModelProto:
    return mk.model(
        [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Neg", ["m"], ["y"])],
        [mk.vi("x", [2, 5, 4])],
        [mk.vi("y", [2, 5, 3])],
        inits=[mk.const("w", mk.rand((4, 3), 1))],
    )


def test_every_class_has_a_type(tmp_path: Path) -> None:
    # (Not ms_contrib: ONNX shape inference does not type com.microsoft ops.)
    for build in (mk.mlp, mk.split_one_unused, mk.if_outer_scope, mk.constants, mk.custom_domain):
        _, snap = snapshot_of(build(), tmp_path)
        for c in snap:
            if c.sort == "T":
                assert c.type.shape is not None and c.type.dtype != 0, (build.__name__, c)


def test_every_new_class_gets_its_type_after_rewriting(tmp_path: Path) -> None:
    """Classes created by rules are typed by the egglog shape rules or the ops' `infer`."""
    enc, before = snapshot_of(matmul_neg(), tmp_path)
    saturate(enc, [NEW_TERMS], Limits(iterations=1))
    snap = take_snapshot(enc)
    assert len(snap) > len(before)
    types = {c.id: c.type for c in snap}
    assert all(t.shape is not None and t.dtype == FLOAT for t in types.values()), types

    by_name = classes_by_name(snap)

    def class_of(op: str, args: tuple[object, ...], child: int) -> int:
        (cid,) = [
            cid
            for cid, n in snap.enodes()
            if n.op == op and n.args == args and n.children[0] == child
        ]
        return cid

    assert types[class_of("Transpose", ((1, 0),), by_name["w"])] == TensorType(FLOAT, (3, 4))
    assert types[class_of("Transpose", ((0, 2, 1),), by_name["x"])] == TensorType(FLOAT, (2, 4, 5))
    flat = class_of("Reshape", (0, (-1,)), by_name["m"])
    assert types[flat] == TensorType(FLOAT, (30,))
    (neg_flat,) = [cid for cid, n in snap.enodes() if n.op == "Neg" and n.children == (flat,)]
    assert types[neg_flat] == TensorType(FLOAT, (30,))
    inner = [cid for cid, n in snap.enodes() if n.op == "MatMul" and cid not in before.classes]
    assert [types[c].shape for c in inner] == [(2, 3, 5)]


def test_symbolic_dims_come_back_by_name(tmp_path: Path) -> None:
    _, snap = snapshot_of(mk.mlp(), tmp_path)
    by_name = classes_by_name(snap)
    assert snap.classes[by_name["x"]].type == TensorType(FLOAT, ("batch", 8))
    assert snap.classes[by_name["h3"]].type == TensorType(FLOAT, ("batch", 16))
    assert snap.classes[by_name["y"]].type == TensorType(FLOAT, ("batch", 4))
    assert snap.classes[by_name["w1"]].type == TensorType(FLOAT, (8, 16))


def test_unnamed_dims_stay_unknown(tmp_path: Path) -> None:
    m = mk.model(
        [h.make_node("Relu", ["x"], ["y"])], [mk.vi("x", [None, 3])], [mk.vi("y", [None, 3])]
    )
    _, snap = snapshot_of(m, tmp_path)
    assert snap.classes[classes_by_name(snap)["x"]].type.shape == (None, 3)


def test_original_names_are_attached_to_classes(tmp_path: Path) -> None:
    enc, snap = snapshot_of(mk.constants(), tmp_path)
    by_name = classes_by_name(snap)
    assert set(by_name) == set(enc.value_vars)
    # c3 (initializer) and the equal Constant nodes c1, c2 are one class, in graph order.
    assert snap.classes[by_name["c1"]].names == ["c3", "c1", "c2"]
    assert snap.classes[by_name["y"]].names == ["y"]
    assert snap.roots == [by_name["y"]]


def test_merged_classes_hold_every_name(tmp_path: Path) -> None:
    m = mk.model(
        [h.make_node("Identity", ["x"], ["i"]), h.make_node("Relu", ["i"], ["y"])],
        [mk.vi("x", [3])],
        [mk.vi("y", [3])],
    )
    enc, _ = snapshot_of(m, tmp_path)
    saturate(enc, [CLEANUP], Limits())
    snap = take_snapshot(enc)
    cls = snap.classes[classes_by_name(snap)["i"]]
    assert cls.names == ["x", "i"]
    assert {n.op for n in cls.nodes} == {"Input", "Identity"}


def test_multi_output_and_opaque_nodes(tmp_path: Path) -> None:
    enc, snap = snapshot_of(mk.topk_one_unused(), tmp_path)
    (n_class,) = [c for c in snap if c.sort == "N"]
    (topk,) = n_class.nodes
    assert topk.opaque and topk.op == "TopK" and topk.domain == ""
    by_name = classes_by_name(snap)
    assert topk.children == (by_name["x"], by_name["k"])
    for i, (name, dtype) in enumerate([("v", FLOAT), ("i", onnx.TensorProto.INT64)]):
        (out,) = snap.classes[by_name[name]].nodes
        assert (out.op, out.args, out.children) == ("Out", (i,), (n_class.id,))
        assert snap.classes[by_name[name]].type == TensorType(dtype, (2, 2))
    info = snap.opaque[topk.args[0]]
    assert (info.n_inputs, info.n_outputs, info.attrs) == (2, 2, {"axis": 1, "sorted": 0})
    assert set(snap.opaque) == set(enc.opaque)


def test_split_is_one_typed_part_per_output(tmp_path: Path) -> None:
    _, snap = snapshot_of(mk.split_one_unused(), tmp_path)
    by_name = classes_by_name(snap)
    assert not [c for c in snap if c.sort == "N"]
    for i, name in enumerate(["s0", "s1", "s2"]):
        (part,) = snap.classes[by_name[name]].nodes
        want = ("SplitPart", (1, (2, 2, 2), i), (by_name["x"],))
        assert (part.op, part.args, part.children) == want
        assert snap.classes[by_name[name]].type == TensorType(FLOAT, (2, 2))


def test_implicit_inputs_are_children_after_the_explicit_ones(tmp_path: Path) -> None:
    _, snap = snapshot_of(mk.if_outer_scope(), tmp_path)
    by_name = classes_by_name(snap)
    (node,) = [n for n in snap.classes[by_name["y"]].nodes if n.op == "If"]
    assert node.children == (by_name["cond"], by_name["t"])
    assert snap.opaque[node.args[0]].n_inputs == 1


def test_typed_nodes_carry_their_attributes(tmp_path: Path) -> None:
    m = mk.model(
        [
            h.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
            h.make_node("Cast", ["t"], ["c"], to=onnx.TensorProto.DOUBLE),
            h.make_node("Reshape", ["c", "s"], ["y"]),
        ],
        [mk.vi("x", [2, 3])],
        [mk.vi("y", [6], onnx.TensorProto.DOUBLE)],
        inits=[mk.const("s", mk.ints(-1))],
    )
    _, snap = snapshot_of(m, tmp_path)
    by_name = classes_by_name(snap)
    node = {name: snap.classes[by_name[name]].nodes[0] for name in ("t", "c", "y")}
    assert node["t"].args == ((1, 0),) and not node["t"].opaque
    assert node["c"].args == (onnx.TensorProto.DOUBLE,)
    assert node["y"].args == (0, (6,))  # -1 resolved from the inferred output shape
    assert node["y"].children == (by_name["c"],)  # the shape is an argument, not a child
