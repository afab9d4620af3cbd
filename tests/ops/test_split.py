"""Split's typed form (`rewrite.ops.split`): a Split with static sizes encodes as one
`SplitPart` term per output (no opaque node), `optimize --no-rules` writes exactly one Split
back and ORT computes bit-identical outputs (every form: `split` input, attribute form at
opset 11, `num_outputs` at opset 18 with a smaller last piece, equal pieces, a negative axis,
an unused output, an output that is a graph output and also read); a Split whose sizes are not
static stays opaque; the Z3 semantics of SplitPart is what ORT's Split computes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto, helper, numpy_helper

from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.errors import RuleError
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.base import OpCall, TensorType
from rewrite.ops.registry import lookup
from rewrite.ops.split import split_plan
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.prove import prove
from rewrite.verify.sample import sample
from rewrite.verify.semantics import number
from tests.ops.roundtrip import round_trip

F, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(7)


def _i64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


# name -> (nodes, x shape, graph outputs, initializers, opset)
Case = tuple[list[onnx.NodeProto], list[int | str], list[str], list[onnx.TensorProto], int]
CASES: dict[str, Case] = {
    "sizes-input": (
        [helper.make_node("Split", ["x", "sp"], ["a", "b", "c"], axis=1)],
        [4, 6],
        ["a", "b", "c"],
        [_i64("sp", [1, 2, 3])],
        17,
    ),
    "attribute-opset11": (
        [helper.make_node("Split", ["x"], ["a", "b"], axis=0, split=[1, 3])],
        [4, 6],
        ["a", "b"],
        [],
        11,
    ),
    "num-outputs-remainder": (
        [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)],
        [2, 7],
        ["a", "b", "c"],
        [],
        18,
    ),
    "equal-negative-axis": (
        [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=-1)],
        [2, 3, 6],
        ["a", "b", "c"],
        [],
        17,
    ),
    "unused-output": (
        [
            helper.make_node("Split", ["x", "sp"], ["a", "b", "c"], axis=-1),
            helper.make_node("Add", ["a", "c"], ["s"]),
        ],
        [3, 4],
        ["s"],
        [_i64("sp", [2, 0, 2])],
        17,
    ),
    "output-also-read": (
        [
            helper.make_node("Split", ["x", "sp"], ["a", "b"], axis=0),
            helper.make_node("Relu", ["a"], ["r"]),
        ],
        [5, 2],
        ["a", "r", "b"],
        [_i64("sp", [2, 3])],
        17,
    ),
    "gemm-qkv": (  # gpt2's attention input: Gemm -> Reshape -> Split into Q, K, V
        [
            helper.make_node("Gemm", ["x", "w", "bias"], ["y"]),
            helper.make_node("Reshape", ["y", "shp"], ["y3"]),
            helper.make_node("Split", ["y3", "sp"], ["q", "k", "v"], axis=2),
            helper.make_node("Mul", ["q", "k"], ["qk"]),
        ],
        [6, 8],
        ["qk", "v"],
        [
            numpy_helper.from_array(RNG.normal(size=(8, 12)).astype(np.float32), "w"),
            numpy_helper.from_array(RNG.normal(size=(12,)).astype(np.float32), "bias"),
            _i64("shp", [2, 3, 12]),
            _i64("sp", [4, 4, 4]),
        ],
        17,
    ),
}


def _model(key: str, x_shape: list[int | str] | None = None) -> onnx.ModelProto:
    nodes, shape, outputs, inits, opset = CASES[key]
    x = helper.make_tensor_value_info("x", F, x_shape or shape)
    outs = [helper.make_tensor_value_info(o, 0, None) for o in outputs]
    graph = helper.make_graph(nodes, key, [x], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto | str, x: np.ndarray) -> list[np.ndarray]:
    src = model if isinstance(model, str) else model.SerializeToString()
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    return list(sess.run(None, {"x": x}))


@pytest.mark.parametrize("key", sorted(CASES))
def test_split_encodes_typed_and_round_trips_to_one_split(key: str, tmp_path: Path) -> None:
    model = _model(key)
    path = tmp_path / "src.onnx"
    onnx.save(model, path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 0, enc.opaque
    n_parts = next(len(n.output) for n in CASES[key][0] if n.op_type == "Split")
    assert enc.text.count("(SplitPart ") == n_parts
    out = round_trip(model, tmp_path)  # the same ops: exactly one Split, no Slice
    (split,) = [n for n in out.graph.node if n.op_type == "Split"]
    assert len(split.output) == n_parts and all(split.output)
    x = RNG.normal(size=CASES[key][1]).astype(np.float32)  # type: ignore[arg-type]
    for want, got in zip(_run(model, x), _run(str(tmp_path / "out.onnx"), x), strict=True):
        assert want.dtype == got.dtype and want.shape == got.shape
        assert want.tobytes() == got.tobytes()


def test_a_symbolic_dim_off_the_axis_stays_typed(tmp_path: Path) -> None:
    path = tmp_path / "sym.onnx"
    onnx.save(_model("equal-negative-axis", ["n", 3, 6]), path)
    assert encode(load(path)).opaque_nodes == 0


def test_sizes_not_known_statically_stay_opaque(tmp_path: Path) -> None:
    path = tmp_path / "sym.onnx"
    onnx.save(_model("equal-negative-axis", [2, 3, "d"]), path)  # pieces of an unknown dim
    assert encode(load(path)).opaque_nodes == 1
    nodes = [helper.make_node("Split", ["x", "sp"], ["a", "b"], axis=0)]
    sp = helper.make_tensor_value_info("sp", I64, [2])
    x = helper.make_tensor_value_info("x", F, [4, 2])
    outs = [helper.make_tensor_value_info(o, 0, None) for o in ("a", "b")]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x, sp], outs), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.save(model, path)
    assert encode(load(path)).opaque_nodes == 1  # sizes computed at run time


def test_split_plan_reads_every_form() -> None:
    def plan(
        attrs: dict[str, object], opset: int = 17, n: int = 3, split: list[int] | None = None
    ) -> tuple[int, list[int]] | None:
        ins = [TensorType(F, (2, 7))] + ([TensorType(I64, (len(split),))] if split else [])
        consts = [None] + ([np.array(split, np.int64)] if split else [])
        return split_plan(OpCall("Split", ins, consts, attrs, n, opset))

    assert plan({"axis": -1, "num_outputs": 3}, opset=18) == (1, [3, 3, 1])
    assert plan({"axis": 1}, split=[2, 5], n=2) == (1, [2, 5])
    assert plan({"axis": 0}, n=2) == (0, [1, 1])
    assert plan({"axis": 1}, n=2) is None  # 7 does not split evenly in two
    assert plan({"axis": 1}, split=[2, 2], n=2) is None  # does not sum to 7


def _split_part_z3(x: np.ndarray, axis: int, sizes: list[int], index: int) -> np.ndarray:
    spec = lookup("SplitPart")
    assert spec is not None and spec.z3 is not None
    attrs = {"axis": axis, "sizes": sizes, "index": index}
    call = OpCall("SplitPart", [TensorType(F, x.shape)], [None], attrs)
    with _z3.arithmetic(_z3.IEEE):
        d = np.empty(x.shape, dtype=object)
        for k in np.ndindex(*x.shape):
            d[k] = _z3.symbol("", F, float(x[k]))
        (out,) = spec.z3(call, [d])
    got = np.vectorize(lambda t: float(number(z3.simplify(t), F)), otypes=[np.float64])(out)
    return got.reshape(out.shape).astype(np.float32)


@pytest.mark.parametrize(
    ("shape", "axis", "sizes"),
    [((2, 7), 1, [3, 3, 1]), ((4, 3), -2, [1, 0, 3]), ((2, 3, 4), 2, [4]), ((5,), 0, [2, 3])],
)
def test_split_part_z3_is_what_ort_splits(
    shape: tuple[int, ...], axis: int, sizes: list[int]
) -> None:
    x = RNG.normal(size=shape).astype(np.float32)
    outs = [f"o{i}" for i in range(len(sizes))]
    node = helper.make_node("Split", ["x", "sp"], outs, axis=axis)
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [node], "g", [vi("x", F, list(shape))], [vi(o, F, None) for o in outs], [_i64("sp", sizes)]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    spec = lookup("SplitPart")
    assert spec is not None and spec.reference is not None
    for i, want in enumerate(_run(model, x)):
        got = _split_part_z3(x, axis, sizes, i)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()
        call = OpCall(
            "SplitPart", [TensorType(F, shape)], [None], {"axis": axis, "sizes": sizes, "index": i}
        )
        assert spec.infer(call)[0].shape == want.shape
        assert spec.reference(call, [x])[0].tobytes() == want.tobytes()


SPLIT_RULES = RuleSet("split_rules")


@SPLIT_RULES.rule
def concat_of_all_pieces(x: Tensor) -> Rewrite:
    """Concat(Split(x, [1, 2, 3], axis=1), axis=1) = x"""
    a, b, c = op.Split(x, axis=1, sizes=[1, 2, 3])
    return rewrite(op.Concat(a, b, c, axis=1)).to(x)


def test_a_rule_matches_the_pieces_of_a_split(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Split", ["x", "sp"], ["a", "b", "c"], axis=1),
        helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=1),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "g", [vi("x", F, [4, 6])], [vi("y", F, [4, 6])], [_i64("sp", [1, 2, 3])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "cat.onnx"
    onnx.save(model, path)
    enc = encode(load(path))
    stats = saturate(enc, [SPLIT_RULES], Limits())
    assert stats.matches.get("concat_of_all_pieces", 0) >= 1, stats
    snap = take_snapshot(enc)
    (y,) = [c for c in snap if "y" in c.names]
    assert "x" in y.names


def test_op_split_needs_a_list_of_sizes_and_a_non_negative_axis() -> None:
    x = Tensor("x")
    assert [p.op for p in op.Split(x, sizes=[2, 2])] == ["SplitPart", "SplitPart"]
    with pytest.raises(RuleError, match="list of ints"):
        op.Split(x, sizes=3)  # type: ignore[arg-type]
    with pytest.raises(RuleError, match="non-negative"):
        op.Split(x, axis=-1, sizes=[1, 1])


def test_a_rule_on_split_pieces_is_proved_and_sampled_in_ort() -> None:
    """The prover's bound gets the split dim (the sum of the sizes); ORT runs a SplitPart as
    a Split (`split_part_node`)."""
    (rule,) = list(SPLIT_RULES)
    assert prove(rule).status == "proved"
    sampled = sample(rule)
    assert sampled.cases > 0 and sampled.counterexample is None and sampled.max_error == 0.0
