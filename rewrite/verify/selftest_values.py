"""The self-test of typed ops whose output shape depends on input values (ReshapeDyn,
ExpandDyn, SliceDyn, Range, Resize, OneHot, Compress).

`verify.selftest` takes its cases from the sampling bound, which fixes every shape from the
input types: an op whose output shape is a function of an operand's values has no case there.
These ops are checked on the cases their modules list (`ops.dynamic.SELF_TEST_VALUES`,
`ops.resize.SELF_TEST_VALUES`): the shape operands as given, the data input drawn
(`specials.draw_rounds`: normal and special values, float32 and int64). Each input set runs
in ORT as a one-node model (the op written as its ONNX op, `OpSpec.op_type`), and the op's
numpy reference and its Z3 semantics (IEEE arithmetic, every input a numeral,
`z3.simplify`) must give what ORT gives, exactly (an input
set ORT refuses is not a case). LSTM, GRU and RNN (`ops.rnn.SELF_TEST_VALUES`: their inputs'
shapes must agree, which independent shapes never do) are listed here too, output Y; an
uninterpreted function applied to a numeral (LSTM's tanh) is replaced by its concrete value
rounded to the sort (`_concrete_ufs`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import helper

from rewrite.ops import _z3
from rewrite.ops._z3 import UFS
from rewrite.ops.base import OpCall, OpSpec, TensorType, onnx_dtype
from rewrite.ops.compress import SELF_TEST_VALUES as COMPRESS_VALUES
from rewrite.ops.dynamic import SELF_TEST_VALUES as DYNAMIC_VALUES
from rewrite.ops.onehot import SELF_TEST_VALUES as ONEHOT_VALUES
from rewrite.ops.registry import opset_for
from rewrite.ops.resize import SELF_TEST_VALUES as RESIZE_VALUES
from rewrite.ops.rnn import SELF_TEST_VALUES as RNN_VALUES
from rewrite.verify.ort_sides import run_ort
from rewrite.verify.refute import EXACT_CLAIM, violation
from rewrite.verify.selftest_listed import Row, check_listed, listed, record_mismatch
from rewrite.verify.semantics import number, uf_applications
from rewrite.verify.specials import draw_rounds

Array = np.ndarray
DATA_DTYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64)
SELF_TEST_VALUES = {
    **DYNAMIC_VALUES,
    **RESIZE_VALUES,
    **RNN_VALUES,
    **ONEHOT_VALUES,
    **COMPRESS_VALUES,
}


def value_shaped(spec: OpSpec) -> bool:
    """Whether the op is self-tested here (its output shape depends on input values)."""
    return (not spec.domain and spec.name in SELF_TEST_VALUES) or listed(spec)


def check_value_shaped(spec: OpSpec, row: Row, rounds: int, seed: int) -> None:
    """Every listed case of `spec`, `rounds` data input sets each, into `row`."""
    if listed(spec):  # contrib ops whose inputs' shapes must agree: `selftest_listed`
        check_listed(spec, row)
        return
    rng = np.random.default_rng(seed)
    for attrs, data_shape, given in SELF_TEST_VALUES[spec.name]:
        if data_shape is None:
            _check(spec, row, attrs, list(given))
            continue
        for dtype in DATA_DTYPES:
            types = {"x": TensorType(dtype, data_shape)}
            for _, values in draw_rounds(types, {}, rng, rounds):
                _check(spec, row, attrs, [values["x"], *given])


def _check(spec: OpSpec, row: Row, attrs: dict[str, Any], arrays: list[Array | None]) -> None:
    try:
        got = run_ort(_model(spec, attrs, arrays), _feeds(arrays))
    except Exception:  # ORT refuses these values: not a case
        return
    row.cases += 1
    where = f"{attrs} " + ", ".join("-" if a is None else repr(a.tolist()) for a in arrays)
    call = OpCall(spec.op_type, _types(arrays), [None] * len(arrays), attrs)
    for kind, fn in (("reference", _reference), ("Z3", _semantics)):
        try:
            mine = fn(spec, call, arrays)
            why = _compare(got, mine)
        except Exception as e:  # semantics that fail where ORT runs are a mismatch
            why = f"it fails: {type(e).__name__}: {e}"
        record_mismatch(row, kind, why, where)


def _types(arrays: list[Array | None]) -> list[TensorType | None]:
    return [None if a is None else TensorType(onnx_dtype(a), a.shape) for a in arrays]


def _feeds(arrays: list[Array | None]) -> dict[str, Array]:
    return {f"in{i}": a for i, a in enumerate(arrays) if a is not None}


def _model(spec: OpSpec, attrs: dict[str, Any], arrays: list[Array | None]) -> bytes:
    """A one-node model of the op: every given input a graph input."""
    names = ["" if a is None else f"in{i}" for i, a in enumerate(arrays)]
    while names and not names[-1]:
        names.pop()
    inputs = [
        helper.make_tensor_value_info(n, onnx_dtype(a), a.shape)
        for n, a in zip(names, arrays, strict=False)
        if a is not None
    ]
    node = helper.make_node(spec.op_type, names, ["out"], **attrs)
    out = [helper.make_empty_tensor_value_info("out")]
    graph = helper.make_graph([node], "self-test", inputs, out)
    opset = helper.make_opsetid("", opset_for([(spec.op_type, "")]))
    model = helper.make_model(graph, opset_imports=[opset])
    model.ir_version = 8
    return model.SerializeToString()


def _reference(spec: OpSpec, call: OpCall, arrays: list[Array | None]) -> Array:
    assert spec.reference is not None
    return np.asarray(spec.reference(call, arrays)[0])


def _semantics(spec: OpSpec, call: OpCall, arrays: list[Array | None]) -> Array:
    """The Z3 semantics on numerals of every input, simplified back to numbers."""
    assert spec.z3 is not None
    with _z3.arithmetic(_z3.IEEE):
        terms = [None if a is None else _numerals(a) for a in arrays]
        out = np.asarray(spec.z3(call, terms)[0], dtype=object)
    dtype = int(spec.infer(call)[0].dtype)
    res = np.empty(out.shape, dtype=object)
    for idx in np.ndindex(*out.shape):
        res[idx] = number(_concrete_ufs(out[idx]), dtype)
    return res


def _concrete_ufs(term: Any) -> Any:
    """`term` simplified, every uninterpreted function applied to a numeral replaced by its
    concrete value rounded to the sort (tanh in LSTM), until none is left."""
    term = z3.simplify(term)
    while z3.is_expr(term):
        apps = [a for a in uf_applications([term]) if z3.is_fp_value(a.arg(0))]
        if not apps:
            return term
        subs = [
            (a, z3.FPVal(UFS[a.decl().name()].concrete(number(a.arg(0))), a.sort())) for a in apps
        ]
        term = z3.simplify(z3.substitute(term, *subs))
    return term


def _numerals(a: Array) -> Array:
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(*a.shape):
        out[idx] = _z3.symbol("", onnx_dtype(a), a[idx].item())
    return out


def _compare(got: Array, mine: Array) -> str:
    """Why `mine` is not exactly ORT's `got` ("" when it is)."""
    if mine.shape != got.shape:
        return f"shape {list(mine.shape)}, ORT {list(got.shape)}"
    with np.errstate(all="ignore"):
        mine = mine.astype(got.dtype)
    return violation(EXACT_CLAIM, got, mine, 0.0)
