"""fold_constants: constant subgraphs become initializers holding exactly ORT's values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from rewrite.onnx_io import Graph, load, to_model
from rewrite.rules.fold import fold_constants, fold_to_fixpoint
from tests.egraph.models import (
    assert_bit_identical,
    const,
    ints,
    model,
    ort_run,
    rand,
    vi,
    write,
)


def loaded(m: onnx.ModelProto, folder: Path) -> Graph:
    return load(write(m, folder))


def ops(g: Graph) -> list[str]:
    return [n.op_type for n in g.nodes]


def test_shape_of_a_static_tensor_folds(tmp_path: Path) -> None:
    m = model(
        [
            h.make_node("Relu", ["x"], ["r"]),
            h.make_node("Shape", ["r"], ["s"], name="shape"),
            h.make_node("Reshape", ["z", "s"], ["y"]),
        ],
        [vi("x", [2, 3]), vi("z", [6])],
        [vi("y", [2, 3])],
    )
    g, stats = fold_constants(loaded(m, tmp_path))
    assert stats.folded == {"Shape": 1}
    assert "Shape" not in ops(g)
    assert np.array_equal(g.array("s"), ints(2, 3)) and g.array("s").dtype == np.int64
    assert_bit_identical(m, to_model(g))


def test_shape_of_a_symbolic_tensor_is_kept(tmp_path: Path) -> None:
    m = model(
        [h.make_node("Shape", ["x"], ["s"]), h.make_node("Reshape", ["x", "s"], ["y"])],
        [vi("x", ["n", 3])],
        [vi("y", ["n", 3])],
    )
    g, stats = fold_constants(loaded(m, tmp_path))
    assert stats.total == 0 and "Shape" in ops(g)


def test_constant_chain_folds_to_ort_values(tmp_path: Path) -> None:
    """Constant -> Add -> Mul -> Sqrt: every value is bit for bit what ORT computes."""
    m = model(
        [
            h.make_node("Constant", [], ["c"], value=const("cv", rand((3,), 1))),
            h.make_node("Add", ["c", "b"], ["c2"], name="add_c"),
            h.make_node("Mul", ["c2", "c2"], ["c3"], name="mul_c"),
            h.make_node("Sqrt", ["c3"], ["c4"], name="sqrt_c"),
            h.make_node("Add", ["x", "c4"], ["y"], name="add_x"),
        ],
        [vi("x", [2, 3])],
        [vi("y", [2, 3])],
        inits=[const("b", rand((3,), 2))],
    )
    g, stats = fold_constants(loaded(m, tmp_path))
    assert stats.folded == {"Add": 1, "Mul": 1, "Sqrt": 1}
    assert [n.name for n in g.nodes if n.op_type != "Constant"] == ["add_x"]
    # ORT's values of the intermediate results, read as extra outputs of the original model.
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    probe.graph.output.extend(vi(name, [3]) for name in ("c2", "c3", "c4"))
    want = ort_run(probe, {"x": np.zeros((2, 3), np.float32)})
    for name in ("c2", "c3", "c4"):
        got = numpy_helper.to_array(g.initializers[name])
        assert got.dtype == want[name].dtype and got.tobytes() == want[name].tobytes(), name
    assert_bit_identical(m, to_model(g))


def test_large_constant_of_shape_is_not_folded(tmp_path: Path) -> None:
    shape = const("shape", ints(16, 16))
    m = model(
        [
            h.make_node(
                "ConstantOfShape", ["shape"], ["big"], value=const("v", np.ones(1, np.float32))
            ),
            h.make_node("Add", ["x", "big"], ["y"]),
        ],
        [vi("x", [16, 16])],
        [vi("y", [16, 16])],
        inits=[shape],
    )
    g = loaded(m, tmp_path)
    kept, stats = fold_constants(g, max_elements=255)
    assert stats.total == 0 and "ConstantOfShape" in ops(kept)
    folded, stats = fold_constants(g, max_elements=256)
    assert stats.folded == {"ConstantOfShape": 1} and "ConstantOfShape" not in ops(folded)
    assert_bit_identical(m, to_model(folded))


def test_nondeterministic_op_is_not_folded(tmp_path: Path) -> None:
    m = model(
        [
            h.make_node("RandomUniform", [], ["r"], shape=[2, 3], dtype=T.FLOAT),
            h.make_node("Add", ["x", "r"], ["y"]),
        ],
        [vi("x", [2, 3])],
        [vi("y", [2, 3])],
    )
    g, stats = fold_constants(loaded(m, tmp_path))
    assert stats.total == 0 and ops(g) == ["RandomUniform", "Add"]


def test_graph_outputs_are_not_folded(tmp_path: Path) -> None:
    """A constant graph output stays computed by its node (and Shape of one stays too)."""
    m = model(
        [
            h.make_node("Add", ["a", "b"], ["c"], name="add_out"),
            h.make_node("Shape", ["x"], ["s"], name="shape_out"),
            h.make_node("Mul", ["x", "c"], ["y"]),
        ],
        [vi("x", [3])],
        [vi("y", [3]), vi("c", [3]), vi("s", [1], T.INT64)],
        inits=[const("a", rand((3,), 3)), const("b", rand((3,), 4))],
    )
    g, stats = fold_constants(loaded(m, tmp_path))
    assert stats.total == 0
    assert ops(g) == ["Add", "Shape", "Mul"]


def test_other_domains_and_subgraphs_are_not_folded(tmp_path: Path) -> None:
    branch = h.make_graph([h.make_node("Identity", ["a"], ["o"])], "b", [], [vi("o", [3])])
    m = model(
        [
            h.make_node("Gelu", ["a"], ["g"], domain="com.microsoft"),
            h.make_node("If", ["flag"], ["i"], then_branch=branch, else_branch=branch),
            h.make_node("Add", ["g", "i"], ["s"]),
            h.make_node("Add", ["x", "s"], ["y"]),
        ],
        [vi("x", [3])],
        [vi("y", [3])],
        inits=[const("a", rand((3,), 5)), const("flag", np.array(True))],
        opsets=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)],
    )
    g, stats = fold_constants(loaded(m, tmp_path))
    assert stats.total == 0
    assert ops(g) == ops(loaded(m, tmp_path))


def test_nothing_to_fold_returns_the_same_graph(tmp_path: Path) -> None:
    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", [3])], [vi("y", [3])])
    g = loaded(m, tmp_path)
    out, stats = fold_constants(g)
    assert out is g and stats.total == 0 and not stats.skipped


def test_concat_of_weights_folds_whatever_its_size_and_drops_the_parts(tmp_path: Path) -> None:
    w1, w2 = rand((16, 16), seed=1), rand((16, 16), seed=2)
    m = model(
        [
            h.make_node("Concat", ["w1", "w2"], ["w"], axis=1),
            h.make_node("MatMul", ["x", "w"], ["y"]),
            h.make_node("Expand", ["w1", "big_shape"], ["big"]),
            h.make_node("Add", ["z", "big"], ["u"]),
        ],
        [vi("x", [4, 16]), vi("z", [64, 16, 16])],
        [vi("y", [4, 32]), vi("u", [64, 16, 16])],
        inits=[
            numpy_helper.from_array(w1, "w1"),
            numpy_helper.from_array(w2, "w2"),
            const("big_shape", ints(64, 16, 16)),
        ],
    )
    g = loaded(m, tmp_path)
    folded, stats = fold_constants(g, max_elements=300)  # Concat 512 <= its inputs' 512
    assert stats.folded == {"Concat": 1} and ops(folded) == ["MatMul", "Expand", "Add"]
    assert "w2" not in folded.initializers  # read only by the folded Concat
    assert "w1" in folded.initializers  # the Expand (grows 256 -> 16,384: kept) still reads it
    assert_bit_identical(m, to_model(folded))


def _computed_pad_model() -> onnx.ModelProto:
    """Pad whose pads are computed from Shape(x) (as TF-style "same" padding exports write it),
    then the Shape of the padded value reshaping another input: load's shape inference cannot
    size the Pad's output, so the second Shape is not foldable until the first chain is."""
    return model(
        [
            h.make_node("Shape", ["x"], ["sx"]),
            h.make_node("Slice", ["sx", "two", "four"], ["hw"]),
            h.make_node("Sub", ["hw", "one"], ["grow"]),
            h.make_node("Concat", ["zeros", "grow", "zeros", "grow"], ["pads"], axis=0),
            h.make_node("Pad", ["x", "pads"], ["p"]),
            h.make_node("Relu", ["p"], ["r"]),
            h.make_node("Shape", ["r"], ["sr"]),
            h.make_node("Reshape", ["z", "sr"], ["y"]),
            h.make_node("Add", ["y", "r"], ["out"]),
        ],
        [vi("x", [1, 2, 3, 4]), vi("z", [1 * 2 * 7 * 10])],
        [vi("out", [None, None, None, None])],
        inits=[
            const("two", ints(2)),
            const("four", ints(4)),
            const("one", ints(1)),
            const("zeros", ints(0, 0)),
        ],
    )


def test_folding_to_a_fixpoint_folds_shapes_that_folding_made_static(tmp_path: Path) -> None:
    m = _computed_pad_model()
    g0 = loaded(m, tmp_path)
    once, _ = fold_constants(g0)
    assert "Shape" in ops(once)  # the padded value's size is unknown after one round
    g, stats = fold_to_fixpoint(g0)
    assert stats.folded["Shape"] == 2 and "Shape" not in ops(g)
    assert np.array_equal(g.array("sr"), ints(1, 2, 7, 10))
    assert g.types["p"].shape == (1, 2, 7, 10) and g.types["out"].shape == (1, 2, 7, 10)
    assert_bit_identical(m, to_model(g))


def test_folding_to_a_fixpoint_stops_when_nothing_folds(tmp_path: Path) -> None:
    m = model(
        [h.make_node("Shape", ["x"], ["s"]), h.make_node("Reshape", ["x", "s"], ["y"])],
        [vi("x", ["n", 3])],
        [vi("y", ["n", 3])],
    )
    g0 = loaded(m, tmp_path)
    g, stats = fold_to_fixpoint(g0)
    assert stats.total == 0 and g.types == g0.types
