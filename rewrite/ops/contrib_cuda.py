"""ORT contrib ops (domain com.microsoft) that only ORT's CUDA execution provider implements.

BiasAdd(X (N, S, C), bias (C,), skip (N, S, C)) = (X + bias) + skip, float32, C one of 320,
640, 1280 (the CUDA kernel's `input + bias + residual`, one rounding per Add:
onnxruntime/contrib_ops/cuda/diffusion/bias_add.cc refuses other ranks and channel counts).
float16 is outside the typed contract (`infer` refuses it): the CUDA kernel rounds each Add to
half, while ORT's CPU EP runs the decomposition in float32 (Casts around float Adds) and rounds
once, so no run here could check either.

BiasSoftmax(data, bias; axis = 1, is_inner_broadcast) = softmax(data + bias) in ORT's CUDA
kernel's view (contrib_ops/cuda/math/bias_softmax.cc): data coerced to 2-D (batch, element) at
`axis` (opset-11 Softmax), bias to (rows, element) with rows = size(bias) / element dividing
batch; data row r adds bias row r // (batch / rows) when is_inner_broadcast, else r % rows.
float32 and float64 only: for float16 the kernel adds and sums in float, which no float16 Add
states (`infer` refuses it).

ORT 1.32's CPU EP has no kernel for either (NOT_IMPLEMENTED, measured), so each is defined by
its decomposition into typed ops, Add(Add(X, bias), skip) and Softmax(Add(data, bias)) on the
2-D views above: the numpy references and the Z3 semantics compute exactly that (BiasAdd bit
for bit in the IEEE model; BiasSoftmax as Softmax's: exp(s - max) / sum, exp the EXP UF).
The self-test and the tests run the decomposition in ORT in its place (`ORT_STAND_INS`): they
check the semantics against the definition, not against the CUDA kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto, helper

from rewrite.ops._z3 import float_only, vmap
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, onnx_dtype, per_element
from rewrite.ops.registry import register
from rewrite.ops.unary import EXP

MS = "com.microsoft"
Array = np.ndarray
CHANNELS = (320, 640, 1280)
"""The channel counts ORT's CUDA BiasAdd kernel takes."""


def _same_dims(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Same rank, and no two static dims that differ."""
    return len(a) == len(b) and not any(
        isinstance(p, int) and isinstance(q, int) and p != q for p, q in zip(a, b, strict=True)
    )


def _bias_add_infer(call: OpCall) -> list[TensorType]:
    """Y: X's type; X and skip (N, S, C) alike, bias (C,), C in `CHANNELS`, float32."""
    x, bias, skip = call.input(0), call.input(1), call.input(2)
    if any(call.input(i).dtype not in (0, TensorProto.FLOAT) for i in range(3)):
        raise fail(call, "X, bias and skip must be float32 (the typed form)")
    if x.shape is None:
        return [x]
    if len(x.shape) != 3:
        raise fail(call, "X must be 3-D (ORT's kernel)")
    c = x.shape[2]
    if isinstance(c, int) and c not in CHANNELS:
        raise fail(call, f"C must be one of {CHANNELS} (ORT's kernel)")
    if bias.shape is not None and (len(bias.shape) != 1 or bias.shape[0] not in (c, None)):
        raise fail(call, "bias must be (C,)")
    if skip.shape is not None and not _same_dims(skip.shape, x.shape):
        raise fail(call, "skip must have X's shape")
    return [x]


def _bias_add_reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x, bias, skip = arrays
    assert x is not None and bias is not None and skip is not None
    return [((x + bias).astype(x.dtype) + skip).astype(x.dtype)]


def _bias_add_semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    float_only(call)
    x, bias, skip = arrays
    return [vmap(lambda s, b, r: (s + b) + r, x, bias, skip)]


BIAS_ADD = register(
    OpSpec(
        "BiasAdd",
        _bias_add_infer,
        _bias_add_reference,
        per_element(2),
        domain=MS,
        egg=EggSig(n_inputs=3),
        z3=_bias_add_semantics,
        doc="BiasAdd(X, bias, skip) = (X + bias) + skip (CUDA only)",
    )
)


def _views(attrs: Any, shape: Sequence[int], bias_size: int) -> tuple[int, int, int, bool]:
    """(batch, element, rows, inner) of the kernel's 2-D views of static shapes; ValueError
    when bias's size does not split into rows dividing batch."""
    rank = len(shape)
    axis = int(attrs.get("axis", 1))
    if not rank or not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    batch = int(np.prod(shape[: axis % rank], dtype=np.int64))
    element = int(np.prod(shape[axis % rank :], dtype=np.int64))
    rows = bias_size // element if element else 0
    if not rows or rows * element != bias_size or batch % rows:
        raise ValueError(f"a bias of {bias_size} elements does not fit {list(shape)} at {axis}")
    return batch, element, rows, bool(attrs.get("is_inner_broadcast", 0))


def _bias_softmax_infer(call: OpCall) -> list[TensorType]:
    """Y: data's type; data and bias float32 or float64, bias's size rows · element."""
    data, bias = call.input(0), call.input(1)
    if any(call.input(i).dtype not in (0, TensorProto.FLOAT, TensorProto.DOUBLE) for i in (0, 1)):
        raise fail(call, "data and bias must be float32 or float64 (the typed form)")
    if data.dtype and bias.dtype and data.dtype != bias.dtype:
        raise fail(call, "data and bias must have one dtype")
    if data.is_static and bias.numel is not None:
        assert data.shape is not None
        try:
            _views(call.attrs, data.shape, bias.numel)  # type: ignore[arg-type]
        except ValueError as e:
            raise fail(call, str(e)) from e
    return [data]


def _biased_rows(call: OpCall, data: Array, bias: Array) -> Array:
    """data + bias as the kernel's (batch, element) matrix (numbers or Z3 terms)."""
    batch, element, rows, inner = _views(call.attrs, data.shape, bias.size)
    group = batch // rows
    r = np.arange(batch)
    pick = r // group if inner else r % rows
    return data.reshape(batch, element) + bias.reshape(rows, element)[pick]


def _bias_softmax_reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The sum in data's dtype (as ORT's Add), the softmax in float64."""
    data, bias = arrays[0], arrays[1]
    assert data is not None and bias is not None
    s = _biased_rows(call, data, bias.astype(data.dtype)).astype(np.float64)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return [(e / e.sum(axis=1, keepdims=True)).reshape(data.shape).astype(data.dtype)]


def _bias_softmax_semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """exp(s - max) / sum(exp(s - max)) per row of s = data + bias (Softmax's semantics)."""
    float_only(call)
    data, bias = arrays[0], arrays[1]
    assert data is not None and bias is not None
    s = _biased_rows(call, data, bias)
    top = [reduce(lambda a, b: z3.If(b > a, b, a), list(row)) for row in s]
    e = vmap(EXP, s - np.asarray(top, dtype=object)[:, None])
    return [(e / e.sum(axis=1, keepdims=True)).reshape(data.shape)]


BIAS_SOFTMAX = register(
    OpSpec(
        "BiasSoftmax",
        _bias_softmax_infer,
        _bias_softmax_reference,
        per_element(6),
        domain=MS,
        egg=EggSig(attrs=(("axis", "i64", 1), ("is_inner_broadcast", "i64", None)), n_inputs=2),
        z3=_bias_softmax_semantics,
        doc="BiasSoftmax(data, bias) = softmax(data + bias), bias broadcast by rows (CUDA only)",
    )
)


def _graph_model(nodes: list[Any], arrays: list[Array | None], inits: Sequence[Any] = ()) -> bytes:
    """A model of `nodes` over inputs `in0`, `in1`, ... (as `selftest_listed` feeds them)."""
    inputs = [
        helper.make_tensor_value_info(f"in{i}", onnx_dtype(a), a.shape)
        for i, a in enumerate(arrays)
        if a is not None
    ]
    out = [helper.make_empty_tensor_value_info("out")]
    graph = helper.make_graph(nodes, "stand-in", inputs, out, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _bias_softmax_stand_in(attrs: dict[str, Any], arrays: list[Array | None]) -> bytes:
    """Softmax(Add(data, bias)) on the kernel's 2-D views: data as (rows, group, element)
    (inner broadcast) or (group, rows, element), bias as (rows, 1, element) or (rows, element),
    the sum's Softmax over its last axis, reshaped back to data's shape."""
    data, bias = arrays[0], arrays[1]
    assert data is not None and bias is not None
    batch, element, rows, inner = _views(attrs, data.shape, bias.size)
    group = batch // rows
    x_shape, b_shape = (
        ((rows, group, element), (rows, 1, element))
        if inner
        else (
            (group, rows, element),
            (rows, element),
        )
    )
    consts = {"xs": x_shape, "bs": b_shape, "ys": data.shape}
    inits = [helper.make_tensor(k, TensorProto.INT64, [len(v)], list(v)) for k, v in consts.items()]
    nodes = [
        helper.make_node("Reshape", ["in0", "xs"], ["x"]),
        helper.make_node("Reshape", ["in1", "bs"], ["b"]),
        helper.make_node("Add", ["x", "b"], ["t"]),
        helper.make_node("Softmax", ["t"], ["y"], axis=-1),
        helper.make_node("Reshape", ["y", "ys"], ["out"]),
    ]
    return _graph_model(nodes, arrays, inits)


def _bias_add_stand_in(attrs: dict[str, Any], arrays: list[Array | None]) -> bytes:
    """Add(Add(in0, in1), in2)."""
    nodes = [
        helper.make_node("Add", ["in0", "in1"], ["t"]),
        helper.make_node("Add", ["t", "in2"], ["out"]),
    ]
    return _graph_model(nodes, arrays)


ORT_STAND_INS: dict[tuple[str, str], Callable[[dict[str, Any], list[Array | None]], bytes]] = {
    (MS, "BiasAdd"): _bias_add_stand_in,
    (MS, "BiasSoftmax"): _bias_softmax_stand_in,
}
"""(domain, op) -> the model ORT runs in the op's place (its decomposition), from the attributes
and the input arrays (fed as `in0`, `in1`, ...; output `out`)."""


def _self_test_values() -> list[tuple[dict[str, Any], list[Array | None]]]:
    """Input sets (`verify/selftest_listed.py`): bias and skip follow X's shape."""
    rng = np.random.default_rng(0)
    out: list[tuple[dict[str, Any], list[Array | None]]] = []
    for shape in ((1, 2, 320), (2, 1, 640)):
        x = (rng.standard_normal(shape) * 100).astype(np.float32)
        bias = rng.standard_normal(shape[2]).astype(np.float32)
        out.append(({}, [x, bias, rng.standard_normal(shape).astype(np.float32)]))
    return out


def _softmax_values() -> list[tuple[dict[str, Any], list[Array | None]]]:
    """BiasSoftmax input sets: an attention mask (inner) and a per-head bias (outer)."""
    rng = np.random.default_rng(0)
    out: list[tuple[dict[str, Any], list[Array | None]]] = []
    for attrs, shape, bias_shape in (
        ({"axis": 3, "is_inner_broadcast": 1}, (2, 3, 2, 4), (2, 1, 1, 4)),
        ({"axis": 2, "is_inner_broadcast": 0}, (2, 3, 2, 4), (3, 2, 4)),
        ({"axis": -1, "is_inner_broadcast": 0}, (3, 5), (3, 5)),
    ):
        data = (rng.standard_normal(shape) * 3).astype(np.float32)
        out.append((attrs, [data, rng.standard_normal(bias_shape).astype(np.float32)]))
    return out


SELF_TEST_VALUES = {(MS, "BiasAdd"): _self_test_values(), (MS, "BiasSoftmax"): _softmax_values()}
