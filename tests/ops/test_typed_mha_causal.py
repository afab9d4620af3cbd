"""Causal MultiHeadAttention (`unidirectional` = 1), both typed forms (`rewrite.ops.attention`).

ORT 1.32's CPU kernel masks key j for query i when i < S-1 and j > P + i (P past keys, 0
without a past): the last query sees every key. On random inputs with S = L, S < L and S > L
new keys, with and without a past (present outputs declared), bias, key_padding_mask and
attention_bias: ORT's outputs (one thread) against the reference and against the Z3
semantics evaluated on the same numbers (exp the real function), output 0 within rtol 2e-5,
atol 1e-6, the present outputs bit for bit (reference); `infer`'s shapes equal to ORT's.
A causal node encodes with 0 opaque nodes and `optimize` writes models whose ORT outputs are
bit-identical (one node, and a decoder step over a KV cache); unidirectional = 0 is written
back as before (left out), and any value other than 0 or 1 keeps the node opaque.
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
from tests.egraph.test_shape_rules import Case, egglog_type
from tests.ops.roundtrip import assert_optimizes_identically, round_trip
from tests.ops.test_typed_attention import call_of, z3_values
from tests.ops.typed_consts import feeds_of, run_outputs

MS = "com.microsoft"
OP, PART = "MultiHeadAttention", "MultiHeadAttentionPart"
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
N, H = 2, 4
CAUSAL = {"num_heads": N, "unidirectional": 1}
Arrays = list[np.ndarray | None]


def inputs(s: int, length: int, p: int, extras: str, seed: int, b: int = 2) -> Arrays:
    """query (B, S, N·H), key and value (B, L, N·H), bias, key_padding_mask (B, P+L) int32,
    attention_bias (B, 1, S, P+L) (each only where `extras` names it), past_key and
    past_value (B, N, P, H) (None when P = 0)."""
    rng = np.random.default_rng(seed)

    def f(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 2).astype(np.float32)

    d, m = N * H, p + length
    mask = (rng.random((b, m)) < 0.7).astype(np.int32)
    mask[:, 0] = 1  # a row with every key masked is not what this test is about
    return [
        f(b, s, d),
        f(b, length, d),
        f(b, length, d),
        f(3 * d) if "bias" in extras else None,
        mask if "mask" in extras else None,
        f(b, 1, s, m) if "attn" in extras else None,
        f(b, N, p, H) if p else None,
        f(b, N, p, H) if p else None,
    ]


def _model(arrays: Arrays, attrs: dict[str, Any], outs: tuple[str, ...]) -> onnx.ModelProto:
    """One MultiHeadAttention node on graph inputs x0..x7 (None: omitted), outputs `outs`."""
    names = ["" if a is None else f"x{i}" for i, a in enumerate(arrays)]
    while names and not names[-1]:
        names.pop()
    ins = [
        helper.make_tensor_value_info(f"x{i}", onnx_dtype(a), a.shape)
        for i, a in enumerate(arrays)
        if a is not None
    ]
    q, k, pk = arrays[0], arrays[1], (arrays + [None] * 8)[6]
    assert q is not None and k is not None
    present = (q.shape[0], N, k.shape[1] + (0 if pk is None else pk.shape[2]), H)
    shapes = {"y": q.shape, "pk": present, "pv": present}
    graph_outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outs]
    node = helper.make_node(OP, names, list(outs), domain=MS, **attrs)
    m = helper.make_model(helper.make_graph([node], OP, ins, graph_outs), opset_imports=OPSETS)
    m.ir_version = 8
    return m


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), 2e-5, 1e-6)


SHAPES = [(4, 4), (3, 5), (5, 3), (1, 4), (2, 6)]
"""(S, L): self-attention, and cross-attention shapes with fewer and more keys."""
EXTRAS = ["", "mask", "attn", "bias+mask+attn"]


@pytest.mark.parametrize("extras", EXTRAS, ids=lambda e: e or "plain")
@pytest.mark.parametrize(("s", "length"), SHAPES, ids=lambda x: str(x))
def test_one_output_form_gives_orts_output(s: int, length: int, extras: str) -> None:
    arrays = inputs(s, length, 0, extras, seed=s + 7 * length + len(extras))[:6]
    (want,) = run_outputs(_model(arrays, CAUSAL, ("y",)), feeds_of(arrays))
    spec = lookup(OP, MS)
    assert spec is not None and spec.reference is not None
    call = call_of(OP, arrays, CAUSAL)
    assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, want.shape)
    ref = spec.reference(call, arrays)[0]
    assert ref.dtype == want.dtype
    _close(ref, want)
    _close(z3_values(OP, arrays, CAUSAL), want)


PART_SHAPES = [(4, 4, 3), (3, 5, 2), (5, 3, 2), (1, 1, 4), (1, 3, 2), (3, 5, 0)]
"""(S, L, P): with a past (a decoder step, a chunk), and P = 0 with the present outputs."""


@pytest.mark.parametrize("extras", ["", "bias+mask+attn"], ids=lambda e: e or "plain")
@pytest.mark.parametrize(("s", "length", "p"), PART_SHAPES, ids=lambda x: str(x))
def test_part_form_gives_orts_outputs(s: int, length: int, p: int, extras: str) -> None:
    arrays = inputs(s, length, p, extras, seed=s + 5 * length + 11 * p)
    want = run_outputs(_model(arrays, CAUSAL, ("y", "pk", "pv")), feeds_of(arrays))
    spec = lookup(PART, MS)
    assert spec is not None and spec.reference is not None
    for index, w in enumerate(want):
        call = call_of(PART, arrays, {**CAUSAL, "index": index})
        assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, w.shape)
        ref = spec.reference(call, arrays)[0]
        if index:  # the present outputs: copies (bias added), bit for bit
            assert ref.tobytes() == w.tobytes()
        else:
            _close(ref, w)
    _close(z3_values(PART, arrays, {**CAUSAL, "index": 0}), want[0])


def test_the_causal_rule_and_its_last_row_matter() -> None:
    """The rows before the last differ from the non-causal output; with L > S the last row
    is the non-causal one (it sees every key), so j <= P + i there would not be ORT's."""
    arrays = inputs(3, 5, 2, "", seed=3)
    spec = lookup(PART, MS)
    assert spec is not None and spec.reference is not None
    causal = spec.reference(call_of(PART, arrays, {**CAUSAL, "index": 0}), arrays)[0]
    plain = spec.reference(call_of(PART, arrays, {"num_heads": N, "index": 0}), arrays)[0]
    assert np.abs(causal[:, :-1] - plain[:, :-1]).min(initial=np.inf) > 0
    assert np.abs(causal[:, :-1] - plain[:, :-1]).max() > 1e-2
    np.testing.assert_allclose(causal[:, -1], plain[:, -1], rtol=1e-6, atol=1e-7)
    (want, *_) = run_outputs(_model(arrays, CAUSAL, ("y", "pk", "pv")), feeds_of(arrays))
    _close(want[:, -1], plain[:, -1])


@pytest.mark.parametrize("value", [2, -1])
def test_unidirectional_other_than_0_or_1_is_refused_and_stays_opaque(
    value: int, tmp_path: Path
) -> None:
    arrays = inputs(2, 2, 0, "", seed=4)[:3]
    spec = lookup(OP, MS)
    assert spec is not None
    attrs = {"num_heads": N, "unidirectional": value}
    with pytest.raises(ShapeError, match="unidirectional"):
        spec.infer(call_of(OP, arrays, attrs))
    path = tmp_path / "m.onnx"
    onnx.save(_model(arrays, attrs, ("y",)), path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 1 and enc.typed == 0


@pytest.mark.parametrize("unidirectional", [0, 1])
def test_part_output_0_gets_its_dtype_from_the_rules(unidirectional: int) -> None:
    """The dtype rule reads the part's index (after unidirectional among its attributes)."""
    q, pk = ((2, 3, N * H), TensorProto.FLOAT), ((2, N, 4, H), TensorProto.FLOAT)
    attrs = {"num_heads": N, "unidirectional": unidirectional, "index": 0}
    case = Case(PART, (q, q, q, None, None, None, pk, pk), attrs, domain=MS)
    assert egglog_type(case)[1] == TensorProto.FLOAT


@pytest.mark.parametrize(("s", "length"), [(4, 4), (3, 5)], ids=["self", "cross"])
def test_one_node_optimizes_identically(s: int, length: int, tmp_path: Path) -> None:
    arrays = inputs(s, length, 0, "bias+mask", seed=s + length)[:6]
    assert_optimizes_identically(_model(arrays, CAUSAL, ("y",)), feeds_of(arrays), tmp_path)


def test_one_node_with_present_outputs_optimizes_identically(tmp_path: Path) -> None:
    arrays = inputs(3, 3, 4, "bias+mask+attn", seed=6)
    m = _model(arrays, CAUSAL, ("y", "pk", "pv"))
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    assert encode(load(path)).text.count(f"{PART} ") == 3
    assert_optimizes_identically(m, feeds_of(arrays), tmp_path)


@pytest.mark.parametrize("attrs", [CAUSAL, {"num_heads": N}], ids=["causal", "plain"])
def test_written_back_with_its_attributes(attrs: dict[str, Any], tmp_path: Path) -> None:
    """unidirectional = 1 is written back; 0 (the default) is left out, as before."""
    arrays = inputs(2, 3, 0, "", seed=8)[:3]
    m = _model(arrays, attrs, ("y",))
    (node,) = round_trip(m, tmp_path).graph.node
    got = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert got == attrs


def _decoder(b: int, s: int, p: int, d: int) -> onnx.ModelProto:
    """q/k/v projections of S new tokens, causal MultiHeadAttention on the past cache with the
    projection bias and a key padding mask (B, P+S), the output projection; y and the present
    cache are graph outputs."""
    rng = np.random.default_rng(b + s + p)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [w("wq", d, d), w("wk", d, d), w("wv", d, d), w("wo", d, d), w("bias", 3 * d)]
    nodes = [helper.make_node("MatMul", ["x", f"w{c}"], [c]) for c in "qkv"]
    att_in = ["q", "k", "v", "bias", "mask", "", "past_key", "past_value"]
    att_out = ["attn", "present_key", "present_value"]
    nodes.append(helper.make_node(OP, att_in, att_out, domain=MS, **CAUSAL))
    nodes.append(helper.make_node("MatMul", ["attn", "wo"], ["y"]))
    vi, f32 = helper.make_tensor_value_info, TensorProto.FLOAT
    past, present = [b, N, p, d // N], [b, N, p + s, d // N]
    ins = [vi("x", f32, [b, s, d]), vi("mask", TensorProto.INT32, [b, p + s])]
    ins += [vi(k, f32, past) for k in ("past_key", "past_value")]
    outs = [vi("y", f32, [b, s, d])] + [vi(k, f32, present) for k in att_out[1:]]
    m = helper.make_model(helper.make_graph(nodes, "step", ins, outs, inits), opset_imports=OPSETS)
    m.ir_version = 8
    return m


@pytest.mark.parametrize(("s", "p"), [(1, 4), (3, 2)], ids=["step", "chunk"])
def test_decoder_step_encodes_typed_and_optimizes_identically(
    s: int, p: int, tmp_path: Path
) -> None:
    b, d = 2, 16
    m = _decoder(b, s, p, d)
    path = tmp_path / "step.onnx"
    onnx.save(m, path)
    assert encode(load(path)).opaque_nodes == 0
    out = round_trip(m, tmp_path)
    rng = np.random.default_rng(5)
    mask = np.ones((b, p + s), np.int32)
    mask[1, 0] = 0  # a left-padded second sequence
    feeds = {"x": rng.standard_normal((b, s, d)).astype(np.float32), "mask": mask}
    for k in ("past_key", "past_value"):
        feeds[k] = rng.standard_normal((b, N, p, d // N)).astype(np.float32)
    want, got = run_outputs(m, feeds), run_outputs(out, feeds)
    assert [x.shape for x in want] == [(b, s, d), (b, N, p + s, d // N), (b, N, p + s, d // N)]
    for x, y in zip(want, got, strict=True):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
