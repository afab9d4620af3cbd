"""The self-test of typed contrib ops whose inputs' shapes must agree with each other and with
their attributes (MultiHeadAttention, Attention, MatMulNBits, DynamicQuantizeMatMul,
RotaryEmbedding).

The sampling bound draws each input's shape on its own, so these ops get no case from it; their
modules list input sets (`SELF_TEST_VALUES`, keyed by (domain, name)). Each set runs in ORT as a
one-node model (CPU, optimizations off); the op's numpy reference (float64 inputs) and its Z3
semantics (the real model, exp and the other UFs as their concrete functions:
`semantics.interpret_array`) must agree with ORT as an `exact` rule's sides must
(`refute.violation`). A part (`ops.parts`) runs as its ONNX node, its other outputs declared
as the decoder writes them. An input set ORT refuses is not a case. An op ORT's CPU EP has no
kernel for (BiasAdd, BiasSoftmax: CUDA only) runs as its decomposition
(`ops.contrib_cuda.ORT_STAND_INS`): its semantics are checked against that definition, not
against the CUDA kernel.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from onnx import helper

from rewrite.ops.attention import SELF_TEST_VALUES as ATTENTION_VALUES
from rewrite.ops.attention_packed import SELF_TEST_VALUES as PACKED_VALUES
from rewrite.ops.base import OpCall, OpSpec, TensorType, onnx_dtype
from rewrite.ops.contrib_cuda import ORT_STAND_INS
from rewrite.ops.contrib_cuda import SELF_TEST_VALUES as CUDA_ONLY_VALUES
from rewrite.ops.dynamic_quant import SELF_TEST_VALUES as DQ_VALUES
from rewrite.ops.gqa import SELF_TEST_VALUES as GQA_VALUES
from rewrite.ops.parts import node_outputs, part
from rewrite.ops.quant_matmul import SELF_TEST_VALUES as NBITS_VALUES
from rewrite.ops.rotary import SELF_TEST_VALUES as ROTARY_VALUES
from rewrite.verify.ort_sides import run_ort
from rewrite.verify.refute import EXACT_CLAIM, violation
from rewrite.verify.semantics import environment, interpret_array, symbols

Array = np.ndarray
LISTED: dict[tuple[str, str], list[tuple[dict[str, Any], list[Array | None]]]] = {
    **ATTENTION_VALUES,
    **PACKED_VALUES,
    **CUDA_ONLY_VALUES,
    **DQ_VALUES,
    **GQA_VALUES,
    **NBITS_VALUES,
    **ROTARY_VALUES,
}


class Row(Protocol):
    """What the self-test of listed and value-shaped ops fills of a `selftest.OpRow`."""

    cases: int
    reference_mismatches: int
    z3_mismatches: int
    details: list[str]


def record_mismatch(row: Row, kind: str, why: str, where: str) -> None:
    """Count a mismatch of `kind` ("reference" or "Z3") against ORT in `row` when `why` says
    one ("" when there is none); the first three are kept as details (400 characters each)."""
    if not why:
        return
    if kind == "reference":
        row.reference_mismatches += 1
    else:
        row.z3_mismatches += 1
    if len(row.details) < 3:
        row.details.append(f"{kind} vs ORT: {why} for {where}"[:400])


def listed(spec: OpSpec) -> bool:
    return spec.key in LISTED


def check_listed(spec: OpSpec, row: Row) -> None:
    """Every listed input set of `spec` into `row`."""
    for attrs, arrays in LISTED[spec.key]:
        try:
            got = run_ort(_model(spec, attrs, arrays), _feeds(arrays))
        except Exception:  # ORT refuses these values: not a case
            continue
        row.cases += 1
        types = [None if a is None else TensorType(onnx_dtype(a), a.shape) for a in arrays]
        call = OpCall(spec.name, types, [None] * len(arrays), attrs)
        for kind, fn in (("reference", _reference), ("Z3", _semantics)):
            try:
                why = violation(EXACT_CLAIM, got, fn(spec, call, arrays).astype(got.dtype), 0.0)
            except Exception as e:  # semantics that fail where ORT runs are a mismatch
                why = f"it fails: {type(e).__name__}: {e}"
            record_mismatch(row, kind, why, str(attrs))


def _feeds(arrays: list[Array | None]) -> dict[str, Array]:
    return {f"in{i}": a for i, a in enumerate(arrays) if a is not None}


def _model(spec: OpSpec, attrs: dict[str, Any], arrays: list[Array | None]) -> bytes:
    if spec.key in ORT_STAND_INS:  # no CPU kernel (CUDA only): its decomposition runs
        return ORT_STAND_INS[spec.key](attrs, arrays)
    names = ["" if a is None else f"in{i}" for i, a in enumerate(arrays)]
    inputs = [
        helper.make_tensor_value_info(n, onnx_dtype(a), a.shape)
        for n, a in zip(names, arrays, strict=True)
        if a is not None
    ]
    outs, attrs = ["out"], dict(attrs)
    if (p := part(spec.name, spec.domain)) is not None:  # output `index` of `ops.parts`' node
        fresh = iter(f"unused{i}" for i in range(p.n_outputs))
        outs = node_outputs(p, {int(attrs.pop("index", 0)): "out"}, lambda: next(fresh))
    node = helper.make_node(spec.op_type, names, outs, domain=spec.domain, **attrs)
    out = [helper.make_empty_tensor_value_info("out")]
    graph = helper.make_graph([node], "self-test", inputs, out)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(spec.domain, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model.SerializeToString()


def _wide(arrays: list[Array | None]) -> list[Array | None]:
    return [None if a is None or a.dtype.kind != "f" else a.astype(np.float64) for a in arrays]


def _reference(spec: OpSpec, call: OpCall, arrays: list[Array | None]) -> Array:
    assert spec.reference is not None
    wide = [w if w is not None else a for w, a in zip(_wide(arrays), arrays, strict=True)]
    return np.asarray(spec.reference(call, wide)[0], dtype=np.float64)


def _semantics(spec: OpSpec, call: OpCall, arrays: list[Array | None]) -> Array:
    assert spec.z3 is not None
    syms = {
        f"x{i}": symbols(f"x{i}", TensorType(onnx_dtype(a), a.shape))
        for i, a in enumerate(arrays)
        if a is not None
    }
    terms = [None if a is None else syms[f"x{i}"] for i, a in enumerate(arrays)]
    out = np.asarray(spec.z3(call, terms)[0], dtype=object)
    values = {f"x{i}": a for i, a in enumerate(arrays) if a is not None}
    wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in values.items()}
    return np.asarray(interpret_array(out, environment(syms, wide)), dtype=np.float64)
