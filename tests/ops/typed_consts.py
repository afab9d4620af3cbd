"""Helpers for the typed-op tests of ops with constant and several tensor inputs (Trilu,
CumSum, ScatterND, Einsum): one-node models with initializers, ORT with one thread, the
Z3 semantics evaluated on numbers, and a bit-level comparison."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import z3
from onnx import helper, numpy_helper

from rewrite.ops import _z3
from rewrite.ops.base import OpCall, TensorType, onnx_dtype
from rewrite.ops.registry import lookup, opset_for
from rewrite.verify.semantics import number

Feeds = dict[str, np.ndarray]


def model(
    op: str,
    feeds: Feeds,
    consts: dict[int, np.ndarray],
    n_inputs: int,
    out_dtype: int = 0,
    **attrs: Any,
) -> onnx.ModelProto:
    """One `op` node: input i is the initializer consts[i], else the next of `feeds`
    (graph inputs, in order); output `y` of an unknown shape, of `out_dtype` (0: the first
    feed's dtype)."""
    names, inits, kids = [], [], iter(feeds)
    for i in range(n_inputs):
        if i in consts:
            names.append(f"c{i}")
            inits.append(numpy_helper.from_array(consts[i], f"c{i}"))
        else:
            names.append(next(kids))
    ins = [helper.make_tensor_value_info(n, onnx_dtype(a), a.shape) for n, a in feeds.items()]
    first = next(iter(feeds.values()))
    y = helper.make_tensor_value_info("y", out_dtype or onnx_dtype(first), None)
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], op, ins, [y], inits)
    opset = opset_for([(op, "")])
    out = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    out.ir_version = 8
    return out


def run_ort(m: onnx.ModelProto, feeds: Feeds) -> np.ndarray:
    """ORT's output with one intra-op thread and no graph optimizations."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, feeds)[0])


def call_of(
    op: str, arrays: list[np.ndarray | None], consts: dict[int, np.ndarray], attrs: dict
) -> OpCall:
    """The OpCall of a node whose inputs are `arrays` (None: omitted), `consts` constant."""
    types = [None if a is None else TensorType(onnx_dtype(a), a.shape) for a in arrays]
    cs = [consts.get(i) for i in range(len(arrays))]
    return OpCall(op, types, cs, attrs)


def numerals(x: np.ndarray) -> np.ndarray:
    """IEEE (or bit-vector, boolean) numerals of `x`'s values."""
    dtype = onnx_dtype(x)
    cells = np.empty(x.size, dtype=object)
    vals = [bool(v) if x.dtype == np.bool_ else v.item() for v in x.reshape(-1)]
    cells[:] = [_z3.symbol("", dtype, v) for v in vals]
    return cells.reshape(x.shape)


def z3_numbers(
    op: str, arrays: list[np.ndarray | None], consts: dict[int, np.ndarray], attrs: dict
) -> np.ndarray:
    """The op's Z3 semantics on numbers (IEEE model), simplified, in the output's dtype."""
    spec = lookup(op)
    assert spec is not None and spec.z3 is not None
    call = call_of(op, arrays, consts, attrs)
    out_t = spec.infer(call)[0]
    with _z3.arithmetic(_z3.IEEE):
        terms = [
            consts[i] if i in consts else (None if a is None else numerals(a))
            for i, a in enumerate(arrays)
        ]
        out = np.asarray(spec.z3(call, terms)[0], dtype=object)
    vals = []
    for e in out.reshape(-1):
        v = z3.simplify(e)
        vals.append(z3.is_true(v) if z3.is_bool(v) else number(v, out_t.dtype))
    np_dt = onnx.helper.tensor_dtype_to_np_dtype(out_t.dtype)
    wide = np.float64 if np.dtype(np_dt).kind == "f" else object
    return np.array(vals, dtype=wide).astype(np_dt).reshape(out.shape)


def same(want: np.ndarray, got: np.ndarray) -> bool:
    """Equal dtypes, shapes and values, NaN where NaN, the sign of zeros too."""
    if want.dtype != got.dtype or want.shape != got.shape:
        return False
    if want.dtype.kind != "f":
        return bool(np.array_equal(want, got))
    nan = np.isnan(want)
    return bool(
        np.array_equal(nan, np.isnan(got))
        and np.array_equal(want[~nan], got[~nan])
        and np.array_equal(np.signbit(want[~nan]), np.signbit(got[~nan]))
    )


SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.5, 3.4e38, -3.4e38, 1e-40, 65504.0]


def data(shape: tuple[int, ...], dtype: type, seed: int, special: bool = False) -> np.ndarray:
    """Random normal values (integers in [-9, 9]; booleans), or special float values."""
    rng = np.random.default_rng(seed)
    if dtype is np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-9, 10, size=shape).astype(dtype)
    if special:
        with np.errstate(over="ignore"):
            return rng.choice(np.array(SPECIALS, dtype=np.float64), size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def feeds_of(arrays: Sequence[np.ndarray | None], skip: tuple[int, ...] = ()) -> Feeds:
    """Graph inputs `x{i}` for the given operands (omitted ones and `skip` left out)."""
    return {f"x{i}": a for i, a in enumerate(arrays) if a is not None and i not in skip}


def run_outputs(m: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    """Every output of `m` in ORT (one intra-op thread, ORT's default graph optimizations)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return [np.asarray(a) for a in sess.run(None, feeds)]
