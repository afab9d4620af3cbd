"""The typed forms of the parametric activations: each one-op model encodes with no opaque
node, and `rewrite optimize` (no rules) writes a model whose ORT outputs are bit-identical to
the input's; the references match ORT on float32 special values (bit for bit where the op
uses no exp or log). Mish
(opset 18) and Gelu (opset 20) are typed in models of their opset; their Z3 semantics are
checked against ORT on special values here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
from onnx import TensorProto as P
from onnx import helper as h

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.ops import OpCall, TensorType, _z3, lookup
from rewrite.ops.registry import opset_for
from rewrite.verify.refute import EXACT_CLAIM, violation
from rewrite.verify.semantics import environment, interpret_array, symbols
from tests.ops.roundtrip import assert_optimizes_identically

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.5, 0.5, 3.0, 1e-40, 3e38]
SPECIAL += [-3e38, 20.0, -20.0, 89.0, -89.0, 100.0, -100.0, 1e-3, -1e-8, 0.1, -0.75, 6.0]
Input = tuple[int, tuple[int, ...]]
F, F16, F64, I32 = P.FLOAT, P.FLOAT16, P.DOUBLE, P.INT32


def _values(dtype: int, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(shape))
    np_dt = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    if np.dtype(np_dt).kind in "iu":
        return rng.integers(-(2**31), 2**31 - 1, size=shape).astype(np_dt)
    pool = np.concatenate([np.array(SPECIAL), rng.normal(0, 3, size=n)])
    with np.errstate(all="ignore"):
        return np.resize(pool, n).reshape(shape).astype(np_dt)


def _model(op: str, inputs: list[Input], attrs: dict[str, Any]) -> onnx.ModelProto:
    """A one-op model at opset 17, or the op's first opset when it is newer (Mish, Gelu)."""
    opset = opset_for([(op, "")])
    names = [f"x{i}" for i in range(len(inputs))]
    node = h.make_node(op, names, ["y"], **attrs)
    graph_inputs = [
        h.make_tensor_value_info(n, t[0], t[1]) for n, t in zip(names, inputs, strict=True)
    ]
    graph = h.make_graph([node], op, graph_inputs, [h.make_empty_tensor_value_info("y")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _ort(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    src = str(model) if isinstance(model, Path) else model.SerializeToString()
    return ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)


X = (F, (4, 3, 2, 5))
CASES: list[tuple[str, list[Input], dict[str, Any]]] = [
    ("Softplus", [X], {}),
    ("Softsign", [X], {}),
    ("LeakyRelu", [X], {}),
    ("LeakyRelu", [X], {"alpha": -0.3}),
    ("Elu", [X], {}),
    ("Elu", [X], {"alpha": 0.7}),
    ("Celu", [X], {}),
    ("Celu", [X], {"alpha": 1.5}),
    ("Selu", [X], {}),
    ("Selu", [X], {"alpha": 1.2, "gamma": 0.9}),
    ("ThresholdedRelu", [X], {}),
    ("ThresholdedRelu", [X], {"alpha": -0.5}),
    ("HardSigmoid", [X], {}),
    ("HardSigmoid", [X], {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", [X], {}),
    ("Mish", [X], {}),
    ("Gelu", [X], {}),
    ("Gelu", [X], {"approximate": "tanh"}),
    ("PRelu", [X, (F, (3, 1, 1))], {}),
    ("PRelu", [X, (F, ())], {}),
    ("PRelu", [X, (F, (5,))], {}),
    ("PRelu", [(I32, (2, 3)), (I32, (3,))], {}),
]
CASES += [
    (op, [(F16, (4, 3, 2, 5))] + [(F16, t[1]) for t in inputs[1:]], attrs)
    for op, inputs, attrs in CASES
    if op != "Celu" and inputs[0][0] == F  # ORT has Celu for float32 only
]
CASES += [
    (op, [(F64, (4, 3, 2, 5))], attrs)
    for op, attrs in (("Mish", {}), ("Gelu", {"approximate": "tanh"}))
]  # ORT has no double Erf, so no double Gelu(approximate="none")


def _id(case: tuple[str, list[Input], dict[str, Any]]) -> str:
    op, inputs, attrs = case
    types = ",".join(f"{t[0]}{list(t[1])}" for t in inputs)
    return f"{op}({types}){attrs or ''}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_one_op_model_is_typed_and_optimizes_identically(
    case: tuple[str, list[Input], dict[str, Any]], tmp_path: Path
) -> None:
    op, inputs, attrs = case
    model = _model(op, inputs, attrs)
    rng = np.random.default_rng(0)
    feeds = {f"x{i}": _values(t[0], t[1], rng) for i, t in enumerate(inputs)}
    assert_optimizes_identically(model, feeds, tmp_path)


def _reference(op: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    spec = lookup(op)
    assert spec is not None and spec.reference is not None
    call = OpCall(op, [TensorType(F, a.shape) for a in arrays], [None] * len(arrays), attrs)
    return spec.reference(call, list(arrays))[0]


BIT_EXACT = {"Softsign", "LeakyRelu", "ThresholdedRelu", "HardSigmoid", "HardSwish", "PRelu"}
"""References that compute as ORT's kernels do, step by step in float32 (no exp or log)."""


@pytest.mark.parametrize("case", [c for c in CASES if c[1][0][0] == F], ids=_id)
def test_reference_matches_ort_on_float32(
    case: tuple[str, list[Input], dict[str, Any]],
) -> None:
    """Bit for bit where the op uses no exp or log (`BIT_EXACT`); elsewhere ORT's Eigen exp
    and log differ from numpy's by an ulp or so, which exp(x) - 1 near 0 turns into a few
    ulps of 1 (absolute), so: NaN and ±inf alike, else within 4 ulps of max(1, |y|)."""
    op, inputs, attrs = case
    model = _model(op, inputs, attrs)
    rng = np.random.default_rng(1)
    feeds = {f"x{i}": _values(t[0], t[1], rng) for i, t in enumerate(inputs)}
    (want,) = _ort(model, feeds)
    got = _reference(op, list(feeds.values()), dict(_model_attrs(model)))
    assert_matches_ort(got, want, op in BIT_EXACT)


def assert_matches_ort(got: np.ndarray, want: np.ndarray, bit_exact: bool) -> None:
    """`got` has ORT's dtype and shape, and its bits (`bit_exact`), or NaN and ±inf where
    ORT has them and elsewhere values within 4 ulps of max(1, |y|)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if bit_exact:
        assert got.tobytes() == want.tobytes(), f"{got} != {want}"
        return
    assert np.array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin], want[~fin], equal_nan=True)
    err = np.abs(got[fin].astype(np.float64) - want[fin])
    assert (err <= 4 * np.finfo(want.dtype).eps * np.maximum(1.0, np.abs(want[fin]))).all()


def _model_attrs(model: onnx.ModelProto) -> list[tuple[str, Any]]:
    """The node's attributes as an `OpCall` holds them (bytes decoded to str)."""
    values = [(a.name, h.get_attribute_value(a)) for a in model.graph.node[0].attribute]
    return [(k, v.decode() if isinstance(v, bytes) else v) for k, v in values]


@pytest.mark.parametrize(
    ("op", "attrs"), [("Mish", {}), ("Gelu", {}), ("Gelu", {"approximate": "tanh"})]
)
def test_opset_18_and_20_activations_have_z3_semantics_of_ort(
    op: str, attrs: dict[str, Any], tmp_path: Path
) -> None:
    model = _model(op, [(F, (len(SPECIAL),))], attrs)
    onnx.save(model, tmp_path / "m.onnx")
    enc = encode(load(tmp_path / "m.onnx"))
    assert enc.opaque_nodes == 0 and enc.typed == 1

    x = np.array(SPECIAL, np.float32)
    (want,) = _ort(model, {"x0": x})
    spec = lookup(op)
    assert spec is not None and spec.z3 is not None and spec.egg is not None
    t = TensorType(F, x.shape)
    with _z3.arithmetic(_z3.REAL):
        syms = symbols("x", t)
        terms = spec.z3(OpCall(op, [t], [None], attrs, opset=opset_for([(op, "")])), [syms])[0]
    sem = interpret_array(terms, environment({"x": syms}, {"x": x.astype(np.float64)}))
    with np.errstate(all="ignore"):
        assert not violation(EXACT_CLAIM, want, sem.astype(np.float32), 0.0)
