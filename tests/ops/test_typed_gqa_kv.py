"""GroupQueryAttention with its KV-cache outputs (`rewrite.ops.gqa`'s GroupQueryAttentionPart).

On random inputs over B in {1, 2}, N/Nkv in {4/2, 2/2, 4/1}, H in {8, 16}, a past of P in
{0, 3} and S in {1, 4} new positions: ORT 1.32's three outputs (CPU, one thread) against the
reference and against the Z3 semantics evaluated on the same numbers (exp the real function):
present_key/present_value bit for bit, the output within rtol 2e-5, atol 1e-6; `infer`'s
shapes equal to ORT's. A one-node model and a decoder step (projections, lengths from an
attention mask, GQA with past inputs and present graph outputs) encode with 0 opaque nodes and
`optimize` writes models whose ORT outputs are bit-identical. Refused: B > 1 with S > 1 and a
past (ORT refuses it too), a one-output node with a past (ORT reads memory it never wrote:
encoded opaque). Present outputs listed with empty names are not produced: the one-output
form.
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
OP, PART = "GroupQueryAttention", "GroupQueryAttentionPart"
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
Arrays = list[np.ndarray | None]


def inputs(b: int, s: int, n: int, nkv: int, h: int, p: int, seed: int) -> Arrays:
    """query, key, value, past_key, past_value (B, Nkv, P, H), seqlens_k (P + S - 1 per batch)
    and total_sequence_length (P + S): the typed contract."""
    rng = np.random.default_rng(seed)

    def f(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 2).astype(np.float32)

    lengths = [np.full(b, p + s - 1, np.int32), np.array(p + s, np.int32)]
    qkv = [f(b, s, n * h), f(b, s, nkv * h), f(b, s, nkv * h), f(b, nkv, p, h), f(b, nkv, p, h)]
    return [*qkv, *lengths]


def _model(arrays: Arrays, attrs: dict[str, Any], outs: tuple[str, ...], consts: bool) -> Any:
    """One GroupQueryAttention node on graph inputs x0..x6 (None: omitted); with `consts`,
    seqlens_k and total_sequence_length are initializers (the optimizer draws its own feeds,
    and these must agree with the shapes)."""
    names = ["" if a is None else f"x{i}" for i, a in enumerate(arrays)]
    init = {5, 6} if consts else set()
    ins = [
        helper.make_tensor_value_info(n, onnx_dtype(a), a.shape)
        for i, (n, a) in enumerate(zip(names, arrays, strict=True))
        if a is not None and i not in init
    ]
    inits = [numpy_helper.from_array(arrays[i], names[i]) for i in sorted(init)]  # type: ignore[arg-type]
    node = helper.make_node(OP, names, list(outs), domain=MS, **attrs)
    q, pk = arrays[0], arrays[3]
    assert q is not None and pk is not None
    present = (*pk.shape[:2], pk.shape[2] + q.shape[1], pk.shape[3])
    shapes = {"y": q.shape, "pk": present, "pv": present}
    graph_outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outs if o]
    m = helper.make_model(
        helper.make_graph([node], OP, ins, graph_outs, inits), opset_imports=OPSETS
    )
    m.ir_version = 8
    return m


GRID = [
    (b, n, nkv, h, p, s)
    for b in (1, 2)
    for n, nkv in ((4, 2), (2, 2), (4, 1))
    for h in (8, 16)
    for p in (0, 3)
    for s in (1, 4)
    if not (b > 1 and p and s > 1)  # ORT refuses it (test below)
]


def _id(c: tuple[int, ...]) -> str:
    return "b{}-n{}-kv{}-h{}-p{}-s{}".format(*c)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), 2e-5, 1e-6)


@pytest.mark.parametrize("case", GRID, ids=_id)
def test_reference_and_semantics_give_orts_outputs(case: tuple[int, ...]) -> None:
    b, n, nkv, h, p, s = case
    arrays, attrs = (
        inputs(b, s, n, nkv, h, p, seed=sum(case)),
        {"num_heads": n, "kv_num_heads": nkv},
    )
    want = run_outputs(_model(arrays, attrs, ("y", "pk", "pv"), False), feeds_of(arrays))
    spec = lookup(PART, MS)
    assert spec is not None and spec.reference is not None
    for index, w in enumerate(want):
        call = call_of(PART, arrays, {**attrs, "index": index})
        assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, w.shape)
        ref = spec.reference(call, arrays)[0]
        assert ref.dtype == w.dtype
        if index == 0:
            _close(ref, w)
        else:  # the present outputs: copies, bit for bit
            assert ref.tobytes() == w.tobytes()
            assert np.array_equal(
                z3_values(PART, arrays, {**attrs, "index": index}), w.astype(np.float64)
            )
    _close(z3_values(PART, arrays, {**attrs, "index": 0}), want[0])


def test_ort_and_infer_refuse_a_batch_with_a_past_and_several_positions() -> None:
    arrays, attrs = inputs(2, 4, 2, 1, 8, 3, seed=0), {"num_heads": 2, "kv_num_heads": 1}
    with pytest.raises(Exception, match="batch_size must be 1"):
        run_outputs(_model(arrays, attrs, ("y", "pk", "pv"), False), feeds_of(arrays))
    spec = lookup(PART, MS)
    assert spec is not None
    with pytest.raises(ShapeError, match="batch"):
        spec.infer(call_of(PART, arrays, {**attrs, "index": 0}))


@pytest.mark.parametrize("what", ["padding", "longer-buffer"])
def test_lengths_outside_the_contract_are_refused_by_the_reference(what: str) -> None:
    """seqlens_k below P + S - 1 (a padded batch; a past buffer longer than the past, where
    ORT's present keeps the buffer's length) is outside the typed contract."""
    past = 3 if what == "padding" else 5  # the buffer of a past of 3
    arrays, attrs = inputs(1, 1, 2, 1, 8, past, seed=1), {"num_heads": 2, "kv_num_heads": 1}
    arrays[5], arrays[6] = np.array([3 - (what == "padding")], np.int32), np.array(4, np.int32)
    spec = lookup(PART, MS)
    assert spec is not None and spec.reference is not None
    for index in (0, 1, 2):
        with pytest.raises(ShapeError, match="padding"):
            spec.reference(call_of(PART, arrays, {**attrs, "index": index}), arrays)


OPTIMIZE = [(1, 4, 2, 8, 3, 1), (2, 4, 1, 16, 0, 4), (1, 2, 2, 8, 3, 4), (2, 4, 2, 16, 3, 1)]


@pytest.mark.parametrize("case", OPTIMIZE, ids=_id)
def test_one_node_with_present_outputs_optimizes_identically(
    case: tuple[int, ...], tmp_path: Path
) -> None:
    b, n, nkv, h, p, s = case
    arrays, attrs = inputs(b, s, n, nkv, h, p, seed=2), {"num_heads": n, "kv_num_heads": nkv}
    m = _model(arrays, attrs, ("y", "pk", "pv"), consts=True)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    assert encode(load(path)).text.count(f"{PART} ") == 3
    assert_optimizes_identically(m, feeds_of(arrays, skip=(5, 6)), tmp_path)


def test_unused_present_outputs_are_written_back(tmp_path: Path) -> None:
    """A node declaring present outputs nobody reads (P = 3: without them ORT reads garbage) is
    typed as its parts and written back declaring both, its output bit-identical."""
    arrays, attrs = inputs(1, 2, 4, 2, 8, 3, seed=3), {"num_heads": 4, "kv_num_heads": 2}
    m = _model(arrays, attrs, ("y", "pk", "pv"), consts=True)
    del m.graph.output[1:]
    out = round_trip(m, tmp_path)
    (node,) = out.graph.node
    assert len(node.output) == 3 and all(node.output)
    feeds = feeds_of(arrays, skip=(5, 6))
    assert run_outputs(m, feeds)[0].tobytes() == run_outputs(out, feeds)[0].tobytes()


@pytest.mark.parametrize("outs", [("y",), ("y", "", "")], ids=["one-output", "empty-names"])
def test_a_node_naming_no_present_output_is_not_typed_as_parts(
    outs: tuple[str, ...], tmp_path: Path
) -> None:
    """One output, or present outputs listed with empty names (ORT computes neither): the
    one-output form (its output 0 is computed otherwise for S > 1)."""
    arrays, attrs = inputs(1, 2, 2, 1, 8, 0, seed=4), {"num_heads": 2, "kv_num_heads": 1}
    path = tmp_path / "m.onnx"
    onnx.save(_model(arrays, attrs, outs, consts=True), path)
    enc = encode(load(path))
    assert PART not in enc.text
    assert (enc.typed, enc.opaque_nodes) == (1, 0)


@pytest.mark.parametrize("outs", [("y",), ("y", "", "")], ids=["one-output", "empty-names"])
def test_a_one_output_node_with_a_past_stays_opaque(outs: tuple[str, ...], tmp_path: Path) -> None:
    """Outside the typed contract (`infer` refuses a past without present outputs): opaque."""
    arrays, attrs = inputs(1, 1, 2, 1, 8, 3, seed=6), {"num_heads": 2, "kv_num_heads": 1}
    path = tmp_path / "m.onnx"
    onnx.save(_model(arrays, attrs, outs, consts=True), path)
    enc = encode(load(path))
    assert (enc.typed, enc.opaque_nodes) == (0, 1)


def _decoder_step(b: int, d: int, n: int, nkv: int, h: int, p: int) -> onnx.ModelProto:
    """One decoder step as ORT's transformers optimizer writes it: q/k/v projections of the new
    token, seqlens_k = ReduceSum(attention_mask) - 1 and total_sequence_length =
    Shape(attention_mask)[1] (int32), GQA on the past cache, the output projection; the
    present cache as graph outputs."""
    rng = np.random.default_rng(5)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    i64 = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("one", 1), ("ax", [1]))]
    inits = [w("wq", d, n * h), w("wk", d, nkv * h), w("wv", d, nkv * h), w("wo", n * h, d)]
    inits += [*i64, numpy_helper.from_array(np.array(1, np.int64), "i1")]
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("MatMul", ["x", "wv"], ["v"]),
        helper.make_node("ReduceSum", ["mask", "ax"], ["sum"], keepdims=0),
        helper.make_node("Sub", ["sum", "one"], ["sum1"]),
        helper.make_node("Cast", ["sum1"], ["seqlens"], to=TensorProto.INT32),
        helper.make_node("Shape", ["mask"], ["mshape"]),
        helper.make_node("Gather", ["mshape", "i1"], ["t64"], axis=0),
        helper.make_node("Cast", ["t64"], ["total"], to=TensorProto.INT32),
        helper.make_node(
            OP,
            ["q", "k", "v", "past_key", "past_value", "seqlens", "total"],
            ["attn", "present_key", "present_value"],
            domain=MS,
            num_heads=n,
            kv_num_heads=nkv,
        ),
        helper.make_node("MatMul", ["attn", "wo"], ["y"]),
    ]
    vi = helper.make_tensor_value_info
    ins = [vi("x", TensorProto.FLOAT, [b, 1, d]), vi("mask", TensorProto.INT64, [b, p + 1])]
    ins += [vi(k, TensorProto.FLOAT, [b, nkv, p, h]) for k in ("past_key", "past_value")]
    outs = [vi("y", TensorProto.FLOAT, [b, 1, d])]
    outs += [vi(k, TensorProto.FLOAT, [b, nkv, p + 1, h]) for k in ("present_key", "present_value")]
    m = helper.make_model(helper.make_graph(nodes, "step", ins, outs, inits), opset_imports=OPSETS)
    m.ir_version = 8
    return m


def test_decoder_step_encodes_typed_and_optimizes_identically(tmp_path: Path) -> None:
    b, d, n, nkv, h, p = 2, 32, 4, 2, 8, 5
    m = _decoder_step(b, d, n, nkv, h, p)
    onnx.checker.check_model(m, full_check=True)
    rng = np.random.default_rng(6)
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((b, 1, d)).astype(np.float32),
        "mask": np.ones((b, p + 1), np.int64),
        "past_key": rng.standard_normal((b, nkv, p, h)).astype(np.float32),
        "past_value": rng.standard_normal((b, nkv, p, h)).astype(np.float32),
    }
    path = tmp_path / "step.onnx"
    onnx.save(m, path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 0 and enc.text.count(f"{PART} ") == 3
    out = round_trip(m, tmp_path)
    want, got = run_outputs(m, feeds), run_outputs(out, feeds)
    assert [w.shape for w in want] == [(b, 1, d), (b, nkv, p + 1, h), (b, nkv, p + 1, h)]
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.tobytes() == g.tobytes()
