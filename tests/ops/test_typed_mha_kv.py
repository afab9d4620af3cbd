"""MultiHeadAttention with its KV cache (`rewrite.ops.attention`'s MultiHeadAttentionPart).

On random inputs over B in {1, 2}, N in {1, 2}, H in {4, 8}, a past of P in {0, 3}, S = L in
{1, 3} new positions, with and without bias, key_padding_mask and attention_bias: ORT 1.32's
three outputs (CPU, one thread) against the reference and against the Z3 semantics evaluated
on the same numbers (exp the real function): present_key/present_value bit for bit (the Z3
terms with a bias: K + bias in reals, within float32's rounding), the output within rtol 2e-5,
atol 1e-6; `infer`'s shapes equal to ORT's. A one-node model and a decoder
step (projections, MHA on the past cache, present graph outputs) encode with 0 opaque nodes
and `optimize` writes models whose ORT outputs are bit-identical; a node with a past and no
present output stays opaque (ORT does not concatenate the past there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops.base import TensorType, onnx_dtype
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically, round_trip
from tests.ops.test_typed_attention import call_of, z3_values
from tests.ops.typed_consts import feeds_of, run_outputs

MS = "com.microsoft"
OP, PART = "MultiHeadAttention", "MultiHeadAttentionPart"
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
Arrays = list[np.ndarray | None]


def inputs(b: int, s: int, n: int, h: int, p: int, extras: str, seed: int) -> Arrays:
    """query, key, value (B, S, N·H), bias, key_padding_mask (B, P+S) int32, attention_bias
    (B, 1, S, P+S) (each only where `extras` names it), past_key, past_value (B, N, P, H)."""
    rng = np.random.default_rng(seed)

    def f(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 2).astype(np.float32)

    d = n * h
    mask = (rng.random((b, p + s)) < 0.7).astype(np.int32)
    mask[:, 0] = 1  # a row with every key masked is not what this test is about
    return [
        f(b, s, d),
        f(b, s, d),
        f(b, s, d),
        f(3 * d) if "bias" in extras else None,
        mask if "mask" in extras else None,
        f(b, 1, s, p + s) if "attn" in extras else None,
        f(b, n, p, h),
        f(b, n, p, h),
    ]


def _model(arrays: Arrays, attrs: dict[str, Any], outs: tuple[str, ...]) -> onnx.ModelProto:
    """One MultiHeadAttention node on graph inputs x0..x7 (None: omitted), typed outputs."""
    names = ["" if a is None else f"x{i}" for i, a in enumerate(arrays)]
    ins = [
        helper.make_tensor_value_info(n, onnx_dtype(a), a.shape)
        for n, a in zip(names, arrays, strict=True)
        if a is not None
    ]
    q, pk = arrays[0], arrays[6]
    assert q is not None and pk is not None
    present = (*pk.shape[:2], pk.shape[2] + q.shape[1], pk.shape[3])
    shapes = {"y": q.shape, "pk": present, "pv": present}
    graph_outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outs if o]
    node = helper.make_node(OP, names, list(outs), domain=MS, **attrs)
    m = helper.make_model(helper.make_graph([node], OP, ins, graph_outs), opset_imports=OPSETS)
    m.ir_version = 8
    return m


GRID = [
    (b, n, h, p, s, extras)
    for b in (1, 2)
    for n in (1, 2)
    for h in (4, 8)
    for p in (0, 3)
    for s in (1, 3)
    for extras in ("", "bias+mask+attn")
]


def _id(c: tuple[Any, ...]) -> str:
    return "b{}-n{}-h{}-p{}-s{}-{}".format(*c[:5], c[5] or "plain")


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), 2e-5, 1e-6)


@pytest.mark.parametrize("case", GRID, ids=_id)
def test_reference_and_semantics_give_orts_outputs(case: tuple[Any, ...]) -> None:
    b, n, h, p, s, extras = case
    arrays, attrs = inputs(b, s, n, h, p, extras, seed=b + n + h + p + s), {"num_heads": n}
    want = run_outputs(_model(arrays, attrs, ("y", "pk", "pv")), feeds_of(arrays))
    spec = lookup(PART, MS)
    assert spec is not None and spec.reference is not None
    for index, w in enumerate(want):
        call = call_of(PART, arrays, {**attrs, "index": index})
        assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, w.shape)
        ref = spec.reference(call, arrays)[0]
        assert ref.dtype == w.dtype
        if index == 0:
            _close(ref, w)
        else:  # the present outputs: copies (bias added), bit for bit
            assert ref.tobytes() == w.tobytes()
            z = z3_values(
                PART, arrays, {**attrs, "index": index}
            )  # K + bias in reals: float32's rounding apart
            if arrays[3] is None:
                assert np.array_equal(z, w.astype(np.float64))
            np.testing.assert_allclose(z, w.astype(np.float64), rtol=1.2e-7, atol=0)
    _close(z3_values(PART, arrays, {**attrs, "index": 0}), want[0])


def test_infer_refuses_a_value_head_other_than_the_keys_with_a_past() -> None:
    """ORT refuses past_value's head size other than the key's (measured)."""
    arrays = inputs(1, 2, 2, 4, 3, "", seed=0)
    arrays[2], arrays[7] = np.zeros((1, 2, 6), np.float32), np.zeros((1, 2, 3, 3), np.float32)
    spec = lookup(PART, MS)
    assert spec is not None
    with pytest.raises(ShapeError, match="value head size"):
        spec.infer(call_of(PART, arrays, {"num_heads": 2, "index": 0}))


@pytest.mark.parametrize("extras", ["", "bias+mask+attn"])
def test_one_node_with_present_outputs_optimizes_identically(extras: str, tmp_path: Path) -> None:
    arrays = inputs(2, 1, 2, 8, 3, extras, seed=1)
    m = _model(arrays, {"num_heads": 2}, ("y", "pk", "pv"))
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    assert encode(load(path)).text.count(f"{PART} ") == 3
    assert_optimizes_identically(m, feeds_of(arrays), tmp_path)


def test_unused_present_outputs_are_written_back(tmp_path: Path) -> None:
    """Without the present outputs ORT ignores the past: a node declaring them, unread, is
    written back declaring both, its output bit-identical."""
    arrays = inputs(1, 2, 2, 4, 3, "bias", seed=2)
    m = _model(arrays, {"num_heads": 2}, ("y", "pk", "pv"))
    del m.graph.output[1:]
    out = round_trip(m, tmp_path)
    (node,) = out.graph.node
    assert len(node.output) == 3 and all(node.output)
    assert (
        run_outputs(m, feeds_of(arrays))[0].tobytes()
        == run_outputs(out, feeds_of(arrays))[0].tobytes()
    )


@pytest.mark.parametrize("outs", [("y",), ("y", "", "")], ids=["one-output", "empty-names"])
def test_a_past_without_present_outputs_stays_opaque(outs: tuple[str, ...], tmp_path: Path) -> None:
    arrays = inputs(1, 2, 2, 4, 3, "", seed=3)
    path = tmp_path / "m.onnx"
    onnx.save(_model(arrays, {"num_heads": 2}, outs), path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 1 and enc.typed == 0


def test_decoder_step_encodes_typed_and_optimizes_identically(tmp_path: Path) -> None:
    """q/k/v projections of the new token, MultiHeadAttention on the past cache with the
    projection bias and a key padding mask, the output projection; the present cache as graph
    outputs."""
    b, d, n, p = 2, 16, 2, 4
    rng = np.random.default_rng(4)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [w("wq", d, d), w("wk", d, d), w("wv", d, d), w("wo", d, d), w("bias", 3 * d)]
    nodes = [helper.make_node("MatMul", ["x", f"w{c}"], [c]) for c in "qkv"]
    nodes.append(
        helper.make_node(
            OP,
            ["q", "k", "v", "bias", "mask", "", "past_key", "past_value"],
            ["attn", "present_key", "present_value"],
            domain=MS,
            num_heads=n,
        )
    )
    nodes.append(helper.make_node("MatMul", ["attn", "wo"], ["y"]))
    vi, f32 = helper.make_tensor_value_info, TensorProto.FLOAT
    past, present = [b, n, p, d // n], [b, n, p + 1, d // n]
    ins = [vi("x", f32, [b, 1, d]), vi("mask", TensorProto.INT32, [b, p + 1])]
    ins += [vi(k, f32, past) for k in ("past_key", "past_value")]
    outs = [vi("y", f32, [b, 1, d])] + [
        vi(k, f32, present) for k in ("present_key", "present_value")
    ]
    m = helper.make_model(helper.make_graph(nodes, "step", ins, outs, inits), opset_imports=OPSETS)
    m.ir_version = 8
    path = tmp_path / "step.onnx"
    onnx.save(m, path)
    assert encode(load(path)).opaque_nodes == 0
    out = round_trip(m, tmp_path)
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((b, 1, d)).astype(np.float32),
        "mask": np.array([[1] * (p + 1), [0, 1, 1, 1, 1]], np.int32),
        "past_key": rng.standard_normal(past).astype(np.float32),
        "past_value": rng.standard_normal(past).astype(np.float32),
    }
    want, got = run_outputs(m, feeds), run_outputs(out, feeds)
    assert [x.shape for x in want] == [(b, 1, d), tuple(present), tuple(present)]
    for x, y in zip(want, got, strict=True):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
