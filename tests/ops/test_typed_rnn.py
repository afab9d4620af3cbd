"""LSTM, GRU and RNN typed (`rewrite.ops.rnn`): the reference and `infer` give ORT's outputs
and shapes on every direction, with and without bias / sequence_lens / initial states /
peepholes / clip; the Z3 semantics, on numerals, give the reference's values; a model with
the op encodes with no opaque node and `optimize --no-rules` writes it back bit-identically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
from onnx import helper

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.ops import _z3
from rewrite.ops.base import OpCall, TensorType
from rewrite.ops.registry import lookup
from rewrite.verify.semantics import environment, interpret_array, symbols
from tests.ops.roundtrip import assert_optimizes_identically

Array = np.ndarray
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTS = {"LSTM": 3, "GRU": 2, "RNN": 2}


def _arrays(op: str, attrs: dict, cfg: dict, seed: int = 0) -> list[Array | None]:
    """X, W, R, B, sequence_lens, initial_h (, initial_c, P) for one configuration."""
    rng = np.random.default_rng(seed)
    seq, batch, inp, hid = cfg.get("dims", (3, 2, 4, 3))
    g, d = GATES[op], 2 if attrs.get("direction") == "bidirectional" else 1

    def f(*shape: int) -> Array:
        return rng.standard_normal(shape).astype(np.float32)

    lens = cfg.get("lens")
    out = [
        f(seq, batch, inp),
        f(d, g * hid, inp),
        f(d, g * hid, hid),
        f(d, 2 * g * hid) if cfg.get("bias", True) else None,
        None if lens is None else np.asarray(lens, np.int32),
        f(d, batch, hid) if cfg.get("init", True) else None,
    ]
    if op == "LSTM":
        out += [f(d, batch, hid) if cfg.get("init", True) else None]
        out += [f(d, 3 * hid) if cfg.get("peep") else None]
    return out


def _model(op: str, attrs: dict, arrays: list[Array | None], outs: list[str]) -> onnx.ModelProto:
    names = ["" if a is None else f"in{i}" for i, a in enumerate(arrays)]
    while names and not names[-1]:
        names.pop()
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in zip(names, arrays, strict=False)
        if a is not None
    ]
    node = helper.make_node(op, names, outs, **attrs)
    graph_outs = [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outs if o]
    graph = helper.make_graph([node], "g", inputs, graph_outs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _feeds(arrays: list[Array | None]) -> dict[str, Array]:
    return {f"in{i}": a for i, a in enumerate(arrays) if a is not None}


def _call(op: str, attrs: dict, arrays: list[Array | None], index: int) -> OpCall:
    spec = lookup(f"{op}Part")
    assert spec is not None and spec.egg is not None and spec.egg.to_egg is not None
    egg = spec.egg.to_egg(dict(attrs))
    assert egg is not None
    types = [
        None if a is None else TensorType(helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for a in arrays
    ]
    return OpCall(f"{op}Part", types, [None] * len(arrays), {**egg, "index": index})


CONFIGS: list[tuple[str, dict, dict]] = [
    (op, {"hidden_size": 3, **attrs}, cfg)
    for op in ("LSTM", "GRU", "RNN")
    for attrs in ({}, {"direction": "reverse"}, {"direction": "bidirectional"})
    for cfg in ({}, {"bias": False, "init": False}, {"lens": [3, 1]}, {"lens": [2, 3]})
] + [
    ("LSTM", {"hidden_size": 3}, {"peep": True}),
    ("LSTM", {"hidden_size": 3, "direction": "bidirectional"}, {"peep": True, "lens": [1, 3]}),
    ("LSTM", {"hidden_size": 3, "clip": 0.5}, {}),
    ("LSTM", {"hidden_size": 3, "input_forget": 1}, {"peep": True}),
    ("GRU", {"hidden_size": 3, "linear_before_reset": 1}, {}),
    ("GRU", {"hidden_size": 3, "clip": 0.5, "direction": "reverse"}, {"lens": [2, 1]}),
    ("RNN", {"hidden_size": 3, "activations": ["Relu"]}, {}),
    ("RNN", {"hidden_size": 3, "clip": 0.25}, {}),
    ("LSTM", {"hidden_size": 3, "activations": ["Tanh", "Relu", "Sigmoid"]}, {}),
]


def _id(case: tuple) -> str:
    op, attrs, cfg = case
    return f"{op}-{attrs}-{cfg}"


@pytest.mark.parametrize("case", CONFIGS, ids=_id)
def test_reference_and_infer_give_orts_outputs(case: tuple) -> None:
    op, attrs, cfg = case
    arrays = _arrays(op, attrs, cfg)
    outs = [f"o{i}" for i in range(OUTS[op])]
    got = ort.InferenceSession(_model(op, attrs, arrays, outs).SerializeToString()).run(
        None, _feeds(arrays)
    )
    spec = lookup(f"{op}Part")
    assert spec is not None and spec.reference is not None
    for i in range(OUTS[op]):
        call = _call(op, attrs, arrays, i)
        (ref,) = spec.reference(call, arrays)
        assert spec.infer(call)[0] == TensorType(onnx.TensorProto.FLOAT, got[i].shape)
        assert ref.dtype == got[i].dtype and ref.shape == got[i].shape
        np.testing.assert_allclose(ref, got[i], rtol=1e-5, atol=1e-6)


def test_layout_1_is_layout_0_transposed() -> None:
    """ORT 1.32 refuses layout=1 on CPU: the reference moves the axes of the layout-0 run."""
    arrays = _arrays("LSTM", {}, {"lens": [3, 2]})
    spec = lookup("LSTMPart")
    assert spec is not None and spec.reference is not None
    moved = list(arrays)
    moved[0] = np.swapaxes(arrays[0], 0, 1)  # type: ignore[arg-type]
    for i in (5, 6):
        moved[i] = np.swapaxes(arrays[i], 0, 1)  # type: ignore[arg-type]
    base = {"hidden_size": 3}
    for i, axes in ((0, (2, 0, 1, 3)), (1, (1, 0, 2)), (2, (1, 0, 2))):
        (want,) = spec.reference(_call("LSTM", base, arrays, i), arrays)
        call = _call("LSTM", {**base, "layout": 1}, moved, i)
        (got,) = spec.reference(call, moved)
        np.testing.assert_array_equal(got, np.transpose(want, axes))
        assert spec.infer(call)[0].shape == got.shape


SEMANTICS = [
    ("LSTM", {"hidden_size": 2}, {"dims": (2, 2, 2, 2), "lens": [2, 1], "peep": True}),
    ("LSTM", {"hidden_size": 2, "direction": "reverse", "clip": 0.5}, {"dims": (2, 1, 2, 2)}),
    ("GRU", {"hidden_size": 2, "linear_before_reset": 1}, {"dims": (2, 2, 2, 2)}),
    ("GRU", {"hidden_size": 2, "direction": "bidirectional"}, {"dims": (2, 1, 2, 2)}),
    ("RNN", {"hidden_size": 2}, {"dims": (2, 2, 3, 2), "lens": [1, 2]}),
]


@pytest.mark.parametrize("case", SEMANTICS, ids=_id)
def test_z3_semantics_on_numerals_give_the_reference(case: tuple) -> None:
    """In the real model (tanh, exp as the real functions) the Z3 terms evaluate to the
    float64 reference's values."""
    op, attrs, cfg = case
    arrays = _arrays(op, attrs, cfg)
    spec = lookup(f"{op}Part")
    assert spec is not None and spec.z3 is not None and spec.reference is not None
    for i in range(OUTS[op]):
        call = _call(op, attrs, arrays, i)
        with _z3.arithmetic(_z3.REAL):
            syms = {
                f"x{j}": symbols(f"x{j}", t)
                for j, t in enumerate(call.inputs)
                if t is not None and j != 4
            }
            terms = [
                None if a is None else (a if j == 4 else syms[f"x{j}"])
                for j, a in enumerate(arrays)
            ]
            if arrays[4] is not None:
                terms[4] = np.asarray(
                    [
                        symbols("", TensorType(onnx.TensorProto.INT32, ()), int(v)).item()
                        for v in arrays[4]
                    ],
                    object,
                )
            (out,) = spec.z3(call, terms)
        env = environment(
            syms, {f"x{j}": a.astype(np.float64) for j, a in enumerate(arrays) if f"x{j}" in syms}
        )
        got = interpret_array(np.asarray(out, dtype=object), env)
        wide = [None if a is None or j == 4 else a.astype(np.float64) for j, a in enumerate(arrays)]
        wide[4] = arrays[4]
        (ref,) = spec.reference(call, wide)
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "case",
    [
        ("LSTM", {"hidden_size": 3}, {}, ["y", "y_h", "y_c"]),
        ("LSTM", {"hidden_size": 3, "direction": "bidirectional"}, {"lens": [3, 1]}, ["", "h"]),
        ("LSTM", {"hidden_size": 3}, {"peep": True, "bias": False}, ["", "", "c"]),
        ("GRU", {"hidden_size": 3, "linear_before_reset": 1}, {"init": False}, ["y", "y_h"]),
        ("RNN", {"hidden_size": 3, "direction": "reverse"}, {"lens": [2, 3]}, ["y"]),
        (
            "LSTM",
            {"hidden_size": 3, "activations": ["Tanh", "Relu", "Sigmoid"], "clip": 2.5},
            {"peep": True, "lens": [3, 2]},
            ["y", "h", "c"],
        ),
        ("LSTM", {"hidden_size": 3, "input_forget": 1, "layout": 0}, {}, ["y", "", "c"]),
        ("GRU", {"hidden_size": 3, "direction": "bidirectional"}, {"lens": [1, 3]}, ["y", "h"]),
    ],
    ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}",
)
def test_optimizes_to_identical_outputs(case: tuple, tmp_path: Path) -> None:
    op, attrs, cfg, outs = case
    arrays = _arrays(op, attrs, cfg)
    assert_optimizes_identically(_model(op, attrs, arrays, outs), _feeds(arrays), tmp_path)


def test_one_node_with_every_output_is_written_back_once(tmp_path: Path) -> None:
    from tests.ops.roundtrip import round_trip

    arrays = _arrays("LSTM", {}, {})
    m = _model("LSTM", {"hidden_size": 3, "direction": "reverse"}, arrays, ["y", "h", "c"])
    shapes = {"y": [3, 1, 2, 3], "h": [1, 2, 3], "c": [1, 2, 3]}
    for o in m.graph.output:
        o.CopyFrom(helper.make_tensor_value_info(o.name, onnx.TensorProto.FLOAT, shapes[o.name]))
    out = round_trip(m, tmp_path)
    (node,) = out.graph.node
    assert list(node.output) == ["y", "h", "c"]
    assert {a.name: helper.get_attribute_value(a) for a in node.attribute} == {
        "hidden_size": 3,
        "direction": b"reverse",
    }


@pytest.mark.parametrize(
    "attrs",
    [
        {"hidden_size": 3, "activation_alpha": [0.5], "activations": ["LeakyRelu"]},
        {"hidden_size": 3, "activations": ["Softsign"]},
    ],
)
def test_forms_outside_the_typed_one_stay_opaque(attrs: dict[str, Any], tmp_path: Path) -> None:
    arrays = _arrays("RNN", attrs, {})
    m = _model("RNN", attrs, arrays, ["y", "h"])
    onnx.save(m, tmp_path / "m.onnx")
    enc = encode(load(tmp_path / "m.onnx"))
    assert enc.opaque_nodes == 1 and enc.typed == 0


def test_flops_are_shared_by_the_outputs() -> None:
    arrays = _arrays("LSTM", {}, {})
    spec = lookup("LSTMPart")
    assert spec is not None
    total = 0.0
    for i in range(3):
        call = _call("LSTM", {"hidden_size": 3}, arrays, i)
        total += spec.flops(call, spec.infer(call))
    seq, batch, inp, hid = 3, 2, 4, 3
    assert total == seq * batch * (2 * 4 * hid * (inp + hid) + 18 * hid)
