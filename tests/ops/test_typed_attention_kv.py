"""Attention (com.microsoft) causal and with its KV cache (`rewrite.ops.attention_packed`).

On random inputs over B in {1, 2}, N in {1, 2, 4}, H in {4, 8}, a past of P in {0, 1, 3}
(0: no past input), S in {1, 4} new positions, with and without mask_index (B, P+S), causal
(unidirectional = 1): ORT 1.32's two outputs (CPU, one thread) against AttentionPart's
reference and its Z3 semantics evaluated on the same numbers (exp the real function): output
within rtol 2e-5, atol 1e-6; present's past slice bit for bit, its new slice (ORT's float32
projection) within rtol 2e-5; `infer`'s shapes equal to ORT's. The one-output causal form
likewise. GPT-2-like decoder steps (LayerNormalization, causal Attention with and without a
past, MatMul) encode with 0 opaque nodes and `optimize` writes models whose ORT outputs are
bit-identical.
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
OP, PART = "Attention", "AttentionPart"
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
DIN = 6
Arrays = list[np.ndarray | None]


def inputs(b: int, s: int, n: int, h: int, p: int, masked: bool, seed: int) -> Arrays:
    """input (B, S, DIN), weights (DIN, 3·N·H), bias, mask_index (B, P+S) int32 (None unless
    `masked`), past (2, B, N, P, H) (None when P = 0)."""
    rng = np.random.default_rng(seed)

    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    mask = (rng.random((b, p + s)) < 0.7).astype(np.int32)
    mask[:, 0] = 1  # a row with every key masked is not what this test is about
    d = 3 * n * h
    return [
        f(b, s, DIN),
        f(DIN, d),
        f(d),
        mask if masked else None,
        f(2, b, n, p, h) if p else None,
    ]


def _model(arrays: Arrays, attrs: dict[str, Any], outs: tuple[str, ...]) -> onnx.ModelProto:
    """One Attention node on graph inputs x0..x4 (None: omitted), outputs `outs`."""
    names = ["" if a is None else f"x{i}" for i, a in enumerate(arrays)]
    while names and not names[-1]:
        names.pop()
    ins = [
        helper.make_tensor_value_info(f"x{i}", onnx_dtype(a), a.shape)
        for i, a in enumerate(arrays)
        if a is not None
    ]
    x, w, past = arrays[0], arrays[1], (arrays + [None] * 5)[4]
    assert x is not None and w is not None
    b, s, d, n = x.shape[0], x.shape[1], w.shape[1] // 3, attrs["num_heads"]
    p = 0 if past is None else past.shape[3]
    shapes = {"y": (b, s, d), "present": (2, b, n, p + s, d // n)}
    graph_outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outs if o]
    node = helper.make_node(OP, names, list(outs), domain=MS, **attrs)
    m = helper.make_model(helper.make_graph([node], OP, ins, graph_outs), opset_imports=OPSETS)
    m.ir_version = 8
    return m


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), 2e-5, 1e-6)


GRID = [
    (b, n, h, p, s, masked)
    for b in (1, 2)
    for n in (1, 2, 4)
    for h in (4, 8)
    for p in (0, 1, 3)
    for s in (1, 4)
    for masked in (False, True)
]


def _id(c: tuple[Any, ...]) -> str:
    return "b{}-n{}-h{}-p{}-s{}".format(*c[:5]) + ("-mask" if c[5] else "")


@pytest.mark.parametrize("case", GRID, ids=_id)
def test_part_reference_and_semantics_give_orts_outputs(case: tuple[Any, ...]) -> None:
    b, n, h, p, s, masked = case
    arrays = inputs(b, s, n, h, p, masked, seed=b + 3 * n + 5 * h + 7 * p + 11 * s)
    attrs = {"num_heads": n, "unidirectional": 1}
    want = run_outputs(_model(arrays, attrs, ("y", "present")), feeds_of(arrays))
    assert [w.shape for w in want] == [(b, s, n * h), (2, b, n, p + s, h)]
    spec = lookup(PART, MS)
    assert spec is not None and spec.reference is not None
    for index, w in enumerate(want):
        call = call_of(PART, arrays, {**attrs, "index": index})
        assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, w.shape)
        ref = spec.reference(call, arrays)[0]
        z = z3_values(PART, arrays, {**attrs, "index": index})
        assert ref.dtype == w.dtype
        _close(ref, w)
        _close(z, w)
        if index == 1 and p:  # the past slice: a copy
            assert ref[:, :, :, :p].tobytes() == w[:, :, :, :p].tobytes()
            assert np.array_equal(z[:, :, :, :p], w[:, :, :, :p].astype(np.float64))


@pytest.mark.parametrize("p", [0, 3])
@pytest.mark.parametrize("masked", [False, True])
def test_a_non_causal_part_gives_orts_outputs(p: int, masked: bool) -> None:
    """unidirectional = 0 with a past: every query attends to all P+S keys."""
    arrays, attrs = inputs(2, 4, 2, 4, p, masked, seed=p + masked), {"num_heads": 2}
    want = run_outputs(_model(arrays, attrs, ("y", "present")), feeds_of(arrays))
    spec = lookup(PART, MS)
    assert spec is not None and spec.reference is not None
    for index, w in enumerate(want):
        call = call_of(PART, arrays, {**attrs, "index": index})
        _close(spec.reference(call, arrays)[0], w)
        _close(z3_values(PART, arrays, {**attrs, "index": index}), w)


MASKS = {
    "none": None,
    "keys": np.array([[1, 0, 1, 1], [1, 1, 0, 1]], np.int32),
    "lengths": np.array([3, 2], np.int32),
    "rows": np.array([[[1, 1, 0, 1]] * 4, [[1, 0, 1, 1]] * 4], np.int32),
}


@pytest.mark.parametrize("form", sorted(MASKS))
def test_one_output_causal_form_gives_orts_output(form: str, tmp_path: Path) -> None:
    """Every mask_index form with the causal rule; `optimize` keeps ORT's bits."""
    arrays = [*inputs(2, 4, 2, 4, 0, False, seed=9)[:3], MASKS[form]]
    attrs = {"num_heads": 2, "unidirectional": 1}
    m = _model(arrays, attrs, ("y",))
    (want,) = run_outputs(m, feeds_of(arrays))
    spec = lookup(OP, MS)
    assert spec is not None and spec.reference is not None
    call = call_of(OP, arrays, attrs)
    assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, want.shape)
    _close(spec.reference(call, arrays)[0], want)
    _close(z3_values(OP, arrays, attrs), want)
    assert_optimizes_identically(m, feeds_of(arrays), tmp_path)


def test_causal_differs_from_non_causal() -> None:
    """The causal rule matters on these inputs (the tests above could not pass without it)."""
    arrays = inputs(1, 4, 2, 4, 3, False, seed=5)
    spec = lookup(PART, MS)
    assert spec is not None and spec.reference is not None
    causal = spec.reference(call_of(PART, arrays, {"num_heads": 2, "unidirectional": 1}), arrays)
    plain = spec.reference(call_of(PART, arrays, {"num_heads": 2}), arrays)
    assert np.abs(causal[0] - plain[0]).max() > 1e-2


def test_infer_refuses_unequal_key_and_value_sizes_with_present() -> None:
    arrays: Arrays = [np.zeros((1, 2, 6), np.float32), np.zeros((6, 20), np.float32)]
    arrays.append(np.zeros(20, np.float32))
    spec = lookup(PART, MS)
    assert spec is not None
    attrs = {"num_heads": 2, "qkv_hidden_sizes": [8, 8, 4], "index": 0}
    with pytest.raises(ShapeError, match="key/value hidden sizes"):
        spec.infer(call_of(PART, arrays, attrs))


def test_one_node_with_present_optimizes_identically(tmp_path: Path) -> None:
    arrays = inputs(2, 1, 2, 8, 3, True, seed=1)
    m = _model(arrays, {"num_heads": 2, "unidirectional": 1}, ("y", "present"))
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    assert encode(load(path)).text.count(f"{PART} ") == 2
    assert_optimizes_identically(m, feeds_of(arrays), tmp_path)


def test_unused_present_without_past_is_dropped(tmp_path: Path) -> None:
    """Without a past, output 0 does not depend on present being declared (bit-identical)."""
    arrays = inputs(2, 4, 2, 4, 0, True, seed=2)
    m = _model(arrays, {"num_heads": 2, "unidirectional": 1}, ("y", "present"))
    del m.graph.output[1:]
    out = round_trip(m, tmp_path)
    (node,) = out.graph.node
    assert list(node.output) == ["y"]
    assert (
        run_outputs(m, feeds_of(arrays))[0].tobytes()
        == run_outputs(out, feeds_of(arrays))[0].tobytes()
    )


def test_a_past_with_unused_present_stays_opaque(tmp_path: Path) -> None:
    """ORT needs present declared with a past; the one-output form has no past."""
    arrays = inputs(1, 2, 2, 4, 3, False, seed=3)
    m = _model(arrays, {"num_heads": 2, "unidirectional": 1}, ("y", "present"))
    del m.graph.output[1:]
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 1 and enc.typed == 0


def _decoder(b: int, s: int, p: int, d: int, n: int) -> onnx.ModelProto:
    """A GPT-2-style block as ORT's transformers optimizer writes it: LayerNormalization,
    causal Attention on the mask (B, P+S) and the past cache (none when P = 0), the output
    projection (MatMul); y and present are graph outputs."""
    rng = np.random.default_rng(b + s + p)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [w("gamma", d), w("beta", d), w("wqkv", d, 3 * d), w("bqkv", 3 * d), w("wo", d, d)]
    att_in = ["ln", "wqkv", "bqkv", "mask"] + (["past"] if p else [])
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], epsilon=1e-5),
        helper.make_node(OP, att_in, ["attn", "present"], domain=MS, num_heads=n, unidirectional=1),
        helper.make_node("MatMul", ["attn", "wo"], ["y"]),
    ]
    vi, f32 = helper.make_tensor_value_info, TensorProto.FLOAT
    ins = [vi("x", f32, [b, s, d]), vi("mask", TensorProto.INT32, [b, p + s])]
    ins += [vi("past", f32, [2, b, n, p, d // n])] if p else []
    outs = [vi("y", f32, [b, s, d]), vi("present", f32, [2, b, n, p + s, d // n])]
    m = helper.make_model(helper.make_graph(nodes, "step", ins, outs, inits), opset_imports=OPSETS)
    m.ir_version = 8
    return m


@pytest.mark.parametrize(("s", "p"), [(1, 4), (4, 0), (3, 2)], ids=["step", "prompt", "chunk"])
def test_decoder_step_encodes_typed_and_optimizes_identically(
    s: int, p: int, tmp_path: Path
) -> None:
    b, d, n = 2, 16, 4
    m = _decoder(b, s, p, d, n)
    path = tmp_path / "step.onnx"
    onnx.save(m, path)
    assert encode(load(path)).opaque_nodes == 0
    out = round_trip(m, tmp_path)
    rng = np.random.default_rng(7)
    mask = np.ones((b, p + s), np.int32)
    mask[1, 0] = 0  # a left-padded second sequence
    feeds = {"x": rng.standard_normal((b, s, d)).astype(np.float32), "mask": mask}
    if p:
        feeds["past"] = rng.standard_normal((2, b, n, p, d // n)).astype(np.float32)
    want, got = run_outputs(m, feeds), run_outputs(out, feeds)
    assert [x.shape for x in want] == [(b, s, d), (2, b, n, p + s, d // n)]
    for x, y in zip(want, got, strict=True):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
