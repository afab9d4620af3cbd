"""The typed forms of MultiHeadAttention and Attention (com.microsoft).

Every supported input form: ORT's CPU output against the reference and against the Z3
semantics evaluated on the same numbers (exp the real function) within rtol 2e-5 (ORT runs
MLAS SGEMMs, MLAS's softmax, or flash attention: not bit-exact), `infer`'s shape equal to
ORT's; a model with the op encodes with 0 opaque nodes and `optimize --no-rules` writes a model
whose ORT outputs are bit-identical; a node with a past but no present output stays opaque
(causal nodes: `test_typed_mha_causal.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
from onnx import TensorProto, helper

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops.base import OpCall, TensorType, onnx_dtype
from rewrite.ops.registry import lookup
from rewrite.verify.semantics import environment, interpret_array, symbols
from tests.ops.roundtrip import assert_optimizes_identically

MS = "com.microsoft"
Arrays = list[np.ndarray | None]
RNG = np.random.default_rng(3)


def _f(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _mask(*shape: int) -> np.ndarray:
    """0/1 int32 with the first key kept (no fully masked row: see _close)."""
    m = (RNG.random(shape) < 0.6).astype(np.int32)
    m[..., 0] = 1
    return m


def model(op: str, arrays: Arrays, attrs: dict[str, Any]) -> onnx.ModelProto:
    """One `op` node (com.microsoft opset 1) whose inputs are graph inputs (None: omitted)."""
    names, ins = [], []
    for i, a in enumerate(arrays):
        names.append("" if a is None else f"x{i}")
        if a is not None:
            ins.append(helper.make_tensor_value_info(f"x{i}", onnx_dtype(a), a.shape))
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, ["y"], domain=MS, **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], op, ins, [out])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 8
    return m


def feeds(arrays: Arrays) -> dict[str, np.ndarray]:
    return {f"x{i}": a for i, a in enumerate(arrays) if a is not None}


def run_ort(op: str, arrays: Arrays, attrs: dict[str, Any]) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    m = model(op, arrays, attrs).SerializeToString()
    sess = ort.InferenceSession(m, opts, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, feeds(arrays))[0])


def call_of(op: str, arrays: Arrays, attrs: dict[str, Any]) -> OpCall:
    types = [None if a is None else TensorType(onnx_dtype(a), a.shape) for a in arrays]
    return OpCall(op, types, [None] * len(arrays), attrs)


def z3_values(op: str, arrays: Arrays, attrs: dict[str, Any]) -> np.ndarray:
    """The Z3 semantics (real model) evaluated on `arrays` (exp the real function)."""
    spec = lookup(op, MS)
    assert spec is not None and spec.z3 is not None
    syms = {
        f"x{i}": symbols(f"x{i}", TensorType(onnx_dtype(a), a.shape))
        for i, a in enumerate(arrays)
        if a is not None
    }
    terms = [None if a is None else syms[f"x{i}"] for i, a in enumerate(arrays)]
    out = spec.z3(call_of(op, arrays, attrs), terms)[0]
    values = {f"x{i}": a for i, a in enumerate(arrays) if a is not None}
    wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in values.items()}
    return interpret_array(np.asarray(out, dtype=object), environment(syms, wide))


B, S, L, D, DV, N, DIN = 2, 2, 3, 4, 6, 2, 5
MHA_CASES: list[tuple[str, Arrays, dict[str, Any]]] = [
    ("plain", [_f(B, S, D), _f(B, L, D), _f(B, L, DV)], {"num_heads": N}),
    ("one-head", [_f(1, 3, 4), _f(1, 2, 4), _f(1, 2, 4)], {"num_heads": 1, "scale": 0.3}),
    ("bias", [_f(B, S, D), _f(B, L, D), _f(B, L, DV), _f(D + D + DV)], {"num_heads": N}),
    (
        "padding",
        [_f(B, S, D), _f(B, L, D), _f(B, L, DV), None, _mask(B, L)],
        {"num_heads": N},
    ),
    (
        "attention-bias",
        [_f(B, S, D), _f(B, L, D), _f(B, L, DV), None, None, _f(1, N, S, L)],
        {"num_heads": N},
    ),
    (
        "all",
        [_f(B, S, D), _f(B, L, D), _f(B, L, DV), _f(D + D + DV), _mask(B, L), _f(B, 1, S, L)],
        {"num_heads": N, "mask_filter_value": -50.0},
    ),
]
ATT_CASES: list[tuple[str, Arrays, dict[str, Any]]] = [
    ("plain", [_f(B, S, DIN), _f(DIN, 3 * D), _f(3 * D)], {"num_heads": N}),
    ("keys", [_f(B, S, DIN), _f(DIN, 3 * D), _f(3 * D), _mask(B, S)], {"num_heads": N}),
    (
        "lengths",
        [_f(B, S, DIN), _f(DIN, 3 * D), _f(3 * D), np.array([1, 2], np.int32)],
        {"num_heads": N},
    ),
    ("rows", [_f(B, S, DIN), _f(DIN, 3 * D), _f(3 * D), _mask(B, S, S)], {"num_heads": 1}),
    (
        "sizes",
        [_f(B, S, DIN), _f(DIN, D + D + DV), _f(D + D + DV)],
        {"num_heads": N, "qkv_hidden_sizes": [D, D, DV], "scale": 0.25},
    ),
]
CASES = [("MultiHeadAttention", *c) for c in MHA_CASES] + [("Attention", *c) for c in ATT_CASES]


def _close(got: np.ndarray, want: np.ndarray) -> None:
    """rtol 2e-5 (a fully masked row would lose ~1e-3: x + mask_filter_value in float32)."""
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), 2e-5, 2e-6)


@pytest.mark.parametrize(("op", "name", "arrays", "attrs"), CASES, ids=lambda c: str(c)[:24])
def test_semantics_give_orts_values(op: str, name: str, arrays: Arrays, attrs: dict) -> None:
    spec = lookup(op, MS)
    assert spec is not None and spec.reference is not None
    want = run_ort(op, arrays, attrs)
    call = call_of(op, arrays, attrs)
    assert spec.infer(call)[0] == TensorType(TensorProto.FLOAT, want.shape)
    ref = spec.reference(call, arrays)[0]
    assert ref.dtype == want.dtype
    _close(ref, want)
    _close(z3_values(op, arrays, attrs), want)


@pytest.mark.parametrize(("op", "name", "arrays", "attrs"), CASES, ids=lambda c: str(c)[:24])
def test_optimizes_to_identical_outputs(
    op: str, name: str, arrays: Arrays, attrs: dict, tmp_path: Path
) -> None:
    assert_optimizes_identically(model(op, arrays, attrs), feeds(arrays), tmp_path)


def test_symbolic_dims_infer() -> None:
    spec = lookup("MultiHeadAttention", MS)
    assert spec is not None
    f = TensorProto.FLOAT
    q, k, v = (
        TensorType(f, ("b", "s", 8)),
        TensorType(f, ("b", "l", 8)),
        TensorType(f, ("b", "l", 4)),
    )
    call = OpCall("MultiHeadAttention", [q, k, v], [None] * 3, {"num_heads": 2})
    assert spec.infer(call) == [TensorType(f, ("b", "s", 4))]


@pytest.mark.parametrize(
    ("op", "shapes", "attrs"),
    [
        ("MultiHeadAttention", [(1, 2, 6), (1, 3, 6), (1, 3, 6)], {"num_heads": 4}),
        ("MultiHeadAttention", [(1, 2, 4), (1, 3, 4), (1, 2, 4)], {"num_heads": 2}),
        ("MultiHeadAttention", [(1, 2, 2, 2), (1, 3, 4), (1, 3, 4)], {"num_heads": 2}),
        ("Attention", [(1, 2, 5), (4, 12), (12,)], {"num_heads": 2}),
        ("Attention", [(1, 2, 5), (5, 13), (13,)], {"num_heads": 1}),
    ],
)
def test_shapes_that_do_not_fit_are_refused(op: str, shapes: list, attrs: dict) -> None:
    spec = lookup(op, MS)
    assert spec is not None
    arrays: Arrays = [np.zeros(s, np.float32) for s in shapes]
    with pytest.raises(ShapeError, match=op):
        spec.infer(call_of(op, arrays, attrs))


def test_a_past_without_present_outputs_stays_opaque(tmp_path: Path) -> None:
    q = _f(1, 2, 4)
    nodes: list[tuple[Arrays, dict[str, Any]]] = [
        ([q, _f(1, 2, 4), _f(1, 2, 4), None, None, None, _f(1, 2, 1, 2)], {"num_heads": 2}),
    ]
    for i, (arrays, attrs) in enumerate(nodes):
        path = tmp_path / f"{i}.onnx"
        onnx.save(model("MultiHeadAttention", arrays, attrs), path)
        enc = encode(load(path))
        assert enc.opaque_nodes == 1 and enc.typed == 0
