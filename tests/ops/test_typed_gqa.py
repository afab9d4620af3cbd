"""The typed form of GroupQueryAttention (com.microsoft; `rewrite.ops.gqa`).

On random inputs for several (num_heads, kv_num_heads, S, past) configurations: ORT's CPU output
against the reference and against the Z3 semantics evaluated on the same numbers (exp the real
function) within rtol 2e-5, atol 2e-6 (ORT runs GEMMs and its own softmax: not bit-exact);
`infer`'s shape equal to ORT's. A model with the op encodes with 0 opaque nodes and
`optimize --no-rules` writes a model whose ORT outputs are bit-identical; the forms outside the
typed contract (empty present names, rotary, windows, packed QKV, a past, padding) are
refused (the present outputs: `test_typed_gqa_kv.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto, helper, numpy_helper

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops._z3 import collecting
from rewrite.ops.base import TensorType, onnx_dtype
from rewrite.ops.registry import lookup
from rewrite.verify.semantics import symbols
from tests.ops.roundtrip import assert_optimizes_identically, round_trip
from tests.ops.test_typed_attention import MS, Arrays, call_of, feeds, z3_values

OP = "GroupQueryAttention"
RNG = np.random.default_rng(11)


def _f(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 2).astype(np.float32)


def inputs(b: int, s: int, n: int, nkv: int, h: int = 8, past: str = "omitted") -> Arrays:
    """query, key, value, past_key, past_value (omitted, or `empty`: P = 0), seqlens_k
    (P + S - 1 per batch) and total_sequence_length (P + S), as the typed contract states."""
    pk: Arrays = [None, None] if past == "omitted" else [_f(b, nkv, 0, h), _f(b, nkv, 0, h)]
    lengths = [np.full(b, s - 1, np.int32), np.array(s, np.int32)]
    return [_f(b, s, n * h), _f(b, s, nkv * h), _f(b, s, nkv * h), *pk, *lengths]


def model(
    arrays: Arrays, attrs: dict[str, Any], outputs: tuple[str, ...] = ("y",), consts: bool = False
) -> Any:
    """One GroupQueryAttention node (com.microsoft opset 1) on graph inputs (None: omitted);
    with `consts`, seqlens_k and total_sequence_length are initializers instead (the optimizer
    draws its own input values, and these two must agree with the shapes)."""
    names = ["" if a is None else f"x{i}" for i, a in enumerate(arrays)]
    init = {5, 6} if consts else set()
    ins = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT if a.dtype.kind == "f" else 6, a.shape)
        for i, (n, a) in enumerate(zip(names, arrays, strict=True))
        if a is not None and i not in init
    ]
    inits = [numpy_helper.from_array(arrays[i], names[i]) for i in sorted(init)]  # type: ignore[arg-type]
    node = helper.make_node(OP, names, list(outputs), domain=MS, **attrs)
    shape = None if arrays[0] is None else arrays[0].shape  # the output's: query's
    outs = [
        helper.make_tensor_value_info(o, TensorProto.FLOAT, shape if o == "y" else None)
        for o in outputs
        if o
    ]
    graph = helper.make_graph([node], OP, ins, outs, initializer=inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 8
    return m


def graph_feeds(arrays: Arrays) -> dict[str, np.ndarray]:
    """The feeds of `model(arrays, ..., consts=True)`."""
    return {k: v for k, v in feeds(arrays).items() if k not in ("x5", "x6")}


def run_ort(arrays: Arrays, attrs: dict[str, Any]) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(
        model(arrays, attrs).SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    return np.asarray(sess.run(None, feeds(arrays))[0])


CASES: list[tuple[str, Arrays, dict[str, Any]]] = [
    ("2q-1kv", inputs(2, 3, 2, 1), {"num_heads": 2, "kv_num_heads": 1}),
    ("4q-2kv-empty-past", inputs(2, 5, 4, 2, past="empty"), {"num_heads": 4, "kv_num_heads": 2}),
    ("mha-like", inputs(1, 4, 2, 2), {"num_heads": 2, "kv_num_heads": 2, "scale": 0.3}),
    ("decode-step", inputs(3, 1, 4, 1, past="empty"), {"num_heads": 4, "kv_num_heads": 1}),
    ("6q-2kv-h16", inputs(1, 4, 6, 2, h=16), {"num_heads": 6, "kv_num_heads": 2}),
    ("8q-1kv", inputs(2, 2, 8, 1), {"num_heads": 8, "kv_num_heads": 1, "scale": 0.5}),
]


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), 2e-5, 2e-6)


@pytest.mark.parametrize(("name", "arrays", "attrs"), CASES, ids=[c[0] for c in CASES])
def test_reference_and_semantics_give_orts_values(name: str, arrays: Arrays, attrs: dict) -> None:
    spec = lookup(OP, MS)
    assert spec is not None and spec.reference is not None
    want = run_ort(arrays, attrs)
    call = call_of(OP, arrays, attrs)
    assert spec.infer(call)[0].shape == want.shape
    ref = spec.reference(call, arrays)[0]
    assert ref.dtype == want.dtype
    _close(ref, want)
    _close(z3_values(OP, arrays, attrs), want)


def test_masking_is_causal() -> None:
    """Query 0 sees key 0 only: its output is value 0's row of its kv head (not the mean)."""
    arrays = inputs(1, 3, 2, 1)
    out = run_ort(arrays, {"num_heads": 2, "kv_num_heads": 1})
    v = arrays[2]
    assert v is not None
    np.testing.assert_allclose(out[0, 0, :8], v[0, 0], rtol=1e-6)
    np.testing.assert_allclose(out[0, 0, 8:], v[0, 0], rtol=1e-6)


@pytest.mark.parametrize(("name", "arrays", "attrs"), CASES, ids=[c[0] for c in CASES])
def test_optimizes_to_identical_outputs(
    name: str, arrays: Arrays, attrs: dict, tmp_path: Path
) -> None:
    assert_optimizes_identically(model(arrays, attrs, consts=True), graph_feeds(arrays), tmp_path)


def test_cli_no_rules_writes_bit_identical_outputs(tmp_path: Path) -> None:
    """`rewrite optimize --no-rules` (the command line) on a model with GQA: 0 opaque nodes."""
    _, arrays, attrs = CASES[1]
    m = model(arrays, attrs, consts=True)
    out = round_trip(m, tmp_path)
    want = ort.InferenceSession(m.SerializeToString()).run(None, graph_feeds(arrays))
    got = ort.InferenceSession(out.SerializeToString()).run(None, graph_feeds(arrays))
    assert [w.tobytes() for w in want] == [g.tobytes() for g in got]


G = {"num_heads": 2, "kv_num_heads": 1}
OPAQUE: list[tuple[str, Arrays, dict[str, Any], tuple[str, ...]]] = [
    ("window", inputs(1, 2, 2, 1), {**G, "local_window_size": 1}, ("y",)),
    ("softcap", inputs(1, 2, 2, 1), {**G, "softcap": 5.0}, ("y",)),
    ("smooth", inputs(1, 2, 2, 1), {**G, "smooth_softmax": 1}, ("y",)),
    ("rotary", inputs(1, 2, 2, 1), {**G, "do_rotary": 1}, ("y",)),
    ("packed", [_f(1, 2, 32), None, None, *inputs(1, 2, 2, 1)[3:]], G, ("y",)),
]


@pytest.mark.parametrize(("name", "arrays", "attrs", "outs"), OPAQUE, ids=[c[0] for c in OPAQUE])
def test_forms_outside_the_contract_stay_opaque(
    name: str, arrays: Arrays, attrs: dict, outs: tuple[str, ...], tmp_path: Path
) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(model(arrays, attrs, outs), path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 1 and enc.typed == 0


@pytest.mark.parametrize(
    ("shapes", "attrs"),
    [
        ([(1, 2, 16), (1, 2, 8), (1, 2, 8)], {"num_heads": 4, "kv_num_heads": 2}),  # H = 4
        ([(1, 2, 24), (1, 2, 16), (1, 2, 16)], {"num_heads": 3, "kv_num_heads": 2}),
        ([(1, 2, 16), (1, 2, 16), (1, 2, 16)], {"num_heads": 2, "kv_num_heads": 1}),
        ([(1, 2, 16), (1, 2, 8), (1, 2, 8), (1, 1, 3, 8), (1, 1, 3, 8)], G),
    ],
    ids=["head-size", "heads", "kv-width", "past"],
)
def test_shapes_outside_the_typed_form_are_refused(shapes: list, attrs: dict) -> None:
    spec = lookup(OP, MS)
    assert spec is not None
    arrays: Arrays = [np.zeros(s, np.float32) for s in shapes]
    arrays += [None] * (5 - len(arrays)) + [np.ones(1, np.int32), np.array(2, np.int32)]
    with pytest.raises(ShapeError, match=OP):
        spec.infer(call_of(OP, arrays, attrs))


def test_padded_lengths_are_refused_by_the_reference() -> None:
    """seqlens_k other than P + S - 1 (a padded batch) is outside the typed contract."""
    spec = lookup(OP, MS)
    assert spec is not None and spec.reference is not None
    arrays = inputs(2, 3, 2, 1)
    arrays[5] = np.array([2, 1], np.int32)
    with pytest.raises(ShapeError, match="padding"):
        spec.reference(call_of(OP, arrays, {"num_heads": 2, "kv_num_heads": 1}), arrays)


def test_semantics_require_consistent_lengths() -> None:
    """The Z3 semantics records seqlens_k[b] = S - 1 and total = S as `require`d: they hold
    at the contract's lengths and fail at a padded batch's."""
    spec = lookup(OP, MS)
    assert spec is not None and spec.z3 is not None
    arrays = inputs(2, 3, 2, 1)
    types = [None if a is None else TensorType(onnx_dtype(a), a.shape) for a in arrays]
    terms = [None if t is None else symbols(f"x{i}", t) for i, t in enumerate(types)]
    with collecting() as (required, _):
        spec.z3(call_of(OP, arrays, G), terms)
    assert len(required) == 3  # two batches' seqlens_k, one total
    sl, total = terms[5], terms[6]
    assert sl is not None and total is not None

    def holds(seqlens: list[int], t: int) -> bool:
        sub = [(sl[i], z3.BitVecVal(v, 32)) for i, v in enumerate(seqlens)]
        sub.append((total.reshape(-1)[0], z3.BitVecVal(t, 32)))
        return z3.is_true(z3.simplify(z3.substitute(z3.And(*required), *sub)))

    assert holds([2, 2], 3)
    assert not holds([2, 1], 3) and not holds([2, 2], 4)
