"""Small models for the rules of `examples/perf_rules.py` added after the first five: each
holds its rule's pattern as an exporter writes it (`tests/test_perf_rules.py` fires and
optimizes them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper as h

from tests.egraph.models import model, vi


def _w(name: str, shape: tuple[int, ...], seed: int) -> onnx.TensorProto:
    arr = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return onnx.numpy_helper.from_array(arr, name)


def _c(name: str, value: float) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(np.array(value, np.float32), name)


def _n(op_type: str, ins: list[str], out: str, **attrs: Any) -> onnx.NodeProto:
    return h.make_node(op_type, ins, [out], **attrs)


def _qkv_split_model() -> onnx.ModelProto:
    """Q/K/V projections of a [batch, seq, hidden] input, each its own output."""
    ws = [_w(f"w{c}", (3, 5), 5 + i) for i, c in enumerate("qkv")]
    nodes = [_n("MatMul", ["x", f"w{c}"], c) for c in "qkv"]
    outs = [vi(c, [2, 4, 5]) for c in "qkv"]
    return model(nodes, [vi("x", [2, 4, 3])], outs, inits=ws)


def _gelu_erf_model() -> onnx.ModelProto:
    """BERT's GELU twice, x/√2 (Div by 1.4142135) and x·(1/√2) (Mul by 0.70710677), and
    PyTorch's F.gelu order once."""
    nodes, outs = [], []
    for i, (op_type, c) in enumerate((("Div", "sqrt2"), ("Mul", "rsqrt2"))):
        nodes += [
            _n(op_type, ["x", c], f"s{i}"),
            _n("Erf", [f"s{i}"], f"e{i}"),
            _n("Add", [f"e{i}", "one"], f"a{i}"),
            _n("Mul", ["x", "half"], f"h{i}"),
            _n("Mul", [f"h{i}", f"a{i}"], f"y{i}"),
        ]
        outs.append(vi(f"y{i}", [4, 3]))
    nodes += [  # PyTorch's F.gelu order: x · (erf(x/√2) + 1), then · 0.5
        _n("Div", ["x", "sqrt2"], "s2"),
        _n("Erf", ["s2"], "e2"),
        _n("Add", ["e2", "one"], "a2"),
        _n("Mul", ["x", "a2"], "xa2"),
        _n("Mul", ["xa2", "half"], "y2"),
    ]
    outs.append(vi("y2", [4, 3]))
    inits = [_c("sqrt2", 1.4142135), _c("rsqrt2", 0.70710677), _c("one", 1.0), _c("half", 0.5)]
    return model(nodes, [vi("x", [4, 3])], outs, inits=inits)


def _gelu_tanh_model() -> onnx.ModelProto:
    """GPT-2's GELU: Pow(x, 3.0), ·0.044715, + x, ·√(2/π), Tanh, + 1, ·(x·0.5)."""
    nodes = [
        _n("Pow", ["x", "three"], "p"),
        _n("Mul", ["p", "k"], "pk"),
        _n("Add", ["x", "pk"], "s"),
        _n("Mul", ["s", "c"], "sc"),
        _n("Tanh", ["sc"], "t"),
        _n("Add", ["t", "one"], "a"),
        _n("Mul", ["x", "half"], "hx"),
        _n("Mul", ["hx", "a"], "y"),
    ]
    inits = [_c("three", 3.0), _c("k", 0.044715), _c("c", 0.7978845608), _c("one", 1.0)]
    inits.append(_c("half", 0.5))
    return model(nodes, [vi("x", [4, 3])], [vi("y", [4, 3])], inits=inits)


def _layer_norm_model() -> onnx.ModelProto:
    """BERT's LayerNorm as exported: mean, x - mean, Pow 2, mean, + eps, Sqrt, Div, ·s, + b."""
    nodes = [
        _n("ReduceMean", ["x"], "m", axes=[-1], keepdims=1),
        _n("Sub", ["x", "m"], "d"),
        _n("Pow", ["d", "two"], "d2"),
        _n("ReduceMean", ["d2"], "v", axes=[-1], keepdims=1),
        _n("Add", ["v", "eps"], "ve"),
        _n("Sqrt", ["ve"], "sd"),
        _n("Div", ["d", "sd"], "n"),
        _n("Mul", ["n", "s"], "ns"),
        _n("Add", ["ns", "b"], "y"),
    ]
    inits = [_c("two", 2.0), _c("eps", 1e-12), _w("s", (3,), 8), _w("b", (3,), 9)]
    return model(nodes, [vi("x", [2, 4, 3])], [vi("y", [2, 4, 3])], inits=inits)


def _rms_norm_model() -> onnx.ModelProto:
    """Llama's RMSNorm as exported: Pow 2, mean, + eps, Sqrt, 1 / that, x ·, weight ·."""
    nodes = [
        _n("Pow", ["x", "two"], "x2"),
        _n("ReduceMean", ["x2"], "v", axes=[-1], keepdims=1),
        _n("Add", ["v", "eps"], "ve"),
        _n("Sqrt", ["ve"], "sd"),
        _n("Div", ["one", "sd"], "inv"),
        _n("Mul", ["x", "inv"], "n"),
        _n("Mul", ["w", "n"], "y"),
    ]
    inits = [_c("two", 2.0), _c("eps", 1e-6), _c("one", 1.0), _w("w", (3,), 10)]
    return model(nodes, [vi("x", [2, 4, 3])], [vi("y", [2, 4, 3])], inits=inits)


def _scaled_matmul_model() -> onnx.ModelProto:
    """A scale on the activations before a projection: (x · 0.125) @ W."""
    nodes = [_n("Mul", ["x", "c"], "xc"), _n("MatMul", ["xc", "w"], "y")]
    inits = [_c("c", 0.125), _w("w", (3, 5), 11)]
    return model(nodes, [vi("x", [2, 4, 3])], [vi("y", [2, 4, 5])], inits=inits)


def _attention_scores_model() -> onnx.ModelProto:
    """Attention scores scaled after the product: (Q @ K) · 1/√d."""
    nodes = [_n("MatMul", ["q", "k"], "qk"), _n("Mul", ["qk", "c"], "y")]
    ins = [vi("q", [1, 2, 4, 8]), vi("k", [1, 2, 8, 4])]
    return model(nodes, ins, [vi("y", [1, 2, 4, 4])], inits=[_c("c", 8**-0.5)])


def new_models() -> dict[str, onnx.ModelProto]:
    return {
        "merge_qkv_split": _qkv_split_model(),
        "gelu_erf_fusion": _gelu_erf_model(),
        "gelu_tanh_fusion": _gelu_tanh_model(),
        "layer_norm_fusion": _layer_norm_model(),
        "rms_norm_fusion": _rms_norm_model(),
        "scalar_into_weights": _scaled_matmul_model(),
        "attention_scale_to_query": _attention_scores_model(),
    }
