"""LayerNormalizationPart and the skip normalizations' parts (`ops.parts`): the numpy reference
and `infer` give ORT 1.32's outputs (Mean bit for bit, InvStdDev within 2 ulps on rows whose
mean is not far above their spread; the skip normalizations' input_skip_bias_sum bit for
bit), the Z3 semantics on numerals give the reference's values, index 0 is provably the
single-output op, and models using the extra outputs encode with no opaque node and
round-trip bit-identically."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.ops import _z3
from rewrite.ops.base import OpCall, TensorType
from rewrite.ops.registry import lookup
from rewrite.rules import Float, Int, Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.verify.bound import Bound
from rewrite.verify.prove import PROVED, prove
from rewrite.verify.semantics import number, symbols
from tests.ops.roundtrip import assert_optimizes_identically

Array = np.ndarray
MS = "com.microsoft"
OPSETS = [h.make_opsetid("", 17), h.make_opsetid(MS, 1)]


def _model(op_type: str, ins: dict[str, Array], outs: list[str], **attrs: object) -> bytes:
    node = h.make_node(op_type, list(ins), outs, domain=MS if "Skip" in op_type else "", **attrs)
    inputs = [h.make_tensor_value_info(k, T.FLOAT, a.shape) for k, a in ins.items()]
    graph = h.make_graph(
        [node], "g", inputs, [h.make_empty_tensor_value_info(o) for o in outs if o]
    )
    m = h.make_model(graph, opset_imports=OPSETS)
    m.ir_version = 8
    return m.SerializeToString()


def _ort(model: bytes, feeds: dict[str, Array]) -> list[Array]:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    return [np.asarray(a) for a in sess.run(None, feeds)]


def _feeds(shapes: dict[str, tuple[int, ...]], seed: int, scale: float = 1.0) -> dict[str, Array]:
    rng = np.random.default_rng(seed)
    return {k: (rng.standard_normal(s) * scale + 1).astype(np.float32) for k, s in shapes.items()}


def _call(name: str, ins: dict[str, Array], domain: str = "", **attrs: object) -> OpCall:
    types = [TensorType(T.FLOAT, a.shape) for a in ins.values()]
    return OpCall(name, types, [None] * len(types), dict(attrs))


def _numerals(arrays: dict[str, Array]) -> list[Array]:
    """The arrays as Z3 float32 numerals."""
    out = []
    for a in arrays.values():
        n = np.empty(a.shape, dtype=object)
        for idx in np.ndindex(*a.shape):
            n[idx] = symbols("", TensorType(T.FLOAT, ()), float(a[idx])).item()  # type: ignore[arg-type]
        out.append(n)
    return out


def _values(terms: Array) -> Array:
    """IEEE Z3 terms on numerals as float64 numbers."""
    return np.vectorize(lambda t: number(z3.simplify(t)), otypes=[np.float64])(terms)


def _ulps(a: Array, b: Array) -> int:
    return int(np.max(np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32))))


LN_CASES = [((2, 3, 8), -1), ((4, 16), -1), ((2, 5, 7), 1), ((3, 768), -1), ((2, 3, 1000), -1)]


@pytest.mark.parametrize(("shape", "axis"), LN_CASES)
@pytest.mark.parametrize("scale", [1.0, 100.0])
def test_layer_norm_parts_give_orts_mean_and_inv_std_dev(
    shape: tuple[int, ...], axis: int, scale: float
) -> None:
    norm = shape[axis % len(shape) :]
    feeds = _feeds({"x": shape, "s": norm, "b": norm}, 0, scale)
    want = _ort(_model("LayerNormalization", feeds, ["y", "m", "i"], axis=axis), feeds)
    spec = lookup("LayerNormalizationPart")
    assert spec is not None and spec.reference is not None
    for index in (1, 2):
        call = _call("LayerNormalizationPart", feeds, axis=axis, index=index)
        got = spec.reference(call, list(feeds.values()))[0]
        assert spec.infer(call)[0] == TensorType(T.FLOAT, want[index].shape)
        assert got.dtype == want[index].dtype and got.shape == want[index].shape
        assert _ulps(got, want[index]) <= (0 if index == 1 else 2)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_the_z3_semantics_give_the_reference_on_numerals(index: int) -> None:
    feeds = _feeds({"x": (2, 4), "s": (4,), "b": (4,)}, 1)
    spec = lookup("LayerNormalizationPart")
    assert spec is not None and spec.z3 is not None and spec.reference is not None
    call = _call("LayerNormalizationPart", feeds, index=index)
    with _z3.arithmetic(_z3.IEEE):
        got = _values(spec.z3(call, _numerals(feeds))[0])
    want = spec.reference(call, list(feeds.values()))[0]
    np.testing.assert_allclose(got, want, rtol=2e-7)


@pytest.mark.parametrize("op_type", ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization"])
@pytest.mark.parametrize("bias", [False, True])
def test_skip_sum_output_is_orts_bit_for_bit(op_type: str, bias: bool) -> None:
    simplified = "Simplified" in op_type
    shapes = {"x": (2, 3, 8), "sk": (3, 8), "g": (8,)}
    shapes |= {} if simplified else {"be": (8,)}
    shapes |= {"bi": (8,)} if bias else {}
    feeds = _feeds(shapes, 2, 10.0)
    want = _ort(_model(op_type, feeds, ["y", "", "", "sum"], epsilon=1e-5), feeds)[1]
    spec = lookup(f"{op_type}Part", MS)
    assert spec is not None and spec.reference is not None and spec.z3 is not None
    call = _call(f"{op_type}Part", feeds, epsilon=1e-5, index=3)
    got = spec.reference(call, list(feeds.values()))[0]
    assert got.tobytes() == want.tobytes()
    with _z3.arithmetic(_z3.IEEE):
        z = _values(spec.z3(call, _numerals(feeds))[0]).astype(np.float32)
    assert z.tobytes() == want.tobytes()
    with pytest.raises(Exception, match="index 1"):
        spec.infer(_call(f"{op_type}Part", feeds, index=1))


RS = RuleSet("layer_norm_parts")


@RS.rule
def ln_part_zero_is_ln(x: Tensor, s: Tensor, b: Tensor, ax: Int, eps: Float) -> Rewrite:
    """LayerNormalizationPart(index=0) = LayerNormalization (same attributes)"""
    y, _, _ = op.LayerNormalization(x, s, b, axis=ax, epsilon=eps, outputs=3)
    return rewrite(y).to(op.LayerNormalization(x, s, b, axis=ax, epsilon=eps))


def test_index_zero_is_proved_the_single_output_op() -> None:
    small = Bound(shapes=((3,), (2, 3), (2, 1, 2)), few=((2,),), dtypes=(T.FLOAT,))
    assert prove(RS.rules[0], small).status == PROVED


@pytest.mark.parametrize("outs", [["y", "m", "i"], ["y", "m"], ["y", "", "i"]])
def test_a_layer_norm_using_extra_outputs_round_trips(outs: list[str], tmp_path: Path) -> None:
    feeds = _feeds({"x": (2, 3, 8), "s": (8,), "b": (8,)}, 3)
    m = onnx.load_from_string(_model("LayerNormalization", feeds, outs, epsilon=1e-6))
    assert_optimizes_identically(m, feeds, tmp_path)
    node = onnx.load(tmp_path / "out.onnx").graph.node[0]
    assert [bool(o) for o in node.output] == [True, *(bool(o) for o in outs[1:])]


def test_a_skip_layer_norm_using_its_sum_round_trips(tmp_path: Path) -> None:
    feeds = _feeds({"x": (2, 3, 8), "sk": (2, 3, 8), "g": (8,), "be": (8,), "bi": (8,)}, 4)
    m = onnx.load_from_string(
        _model("SkipLayerNormalization", feeds, ["y", "", "", "sum"], epsilon=1e-5)
    )
    assert_optimizes_identically(m, feeds, tmp_path)
