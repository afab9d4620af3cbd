"""Small models with MatMul/Gemm layers, built in code, for the precision tests."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def mlp(
    sizes: tuple[int, ...] = (64, 128, 64),
    rows: int = 32,
    *,
    gemm: bool = False,
    seed: int = 0,
    outputs: int = 1,
) -> onnx.ModelProto:
    """x (rows, sizes[0]) through Linear+Relu layers; `gemm`: Gemm with transB=1 and a bias;
    `outputs` > 1 adds that many heads on the last hidden state."""
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    for i, (k, n) in enumerate(itertools.pairwise(sizes)):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        if gemm:
            inits += [
                nh.from_array(w.T.copy(), f"w{i}"),
                nh.from_array(rng.random(n, np.float32), f"b{i}"),
            ]
            nodes.append(
                h.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"m{i}"], name=f"gemm{i}", transB=1)
            )
        else:
            inits.append(nh.from_array(w, f"w{i}"))
            nodes.append(h.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"matmul{i}"))
        nodes.append(h.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
    outs = []
    for j in range(outputs):
        name = "y" if outputs == 1 else f"y{j}"
        nodes.append(h.make_node("Mul", [prev, f"c{j}"], [name], name=f"head{j}"))
        inits.append(nh.from_array(np.array(1.0 + j, np.float32), f"c{j}"))
        outs.append(h.make_tensor_value_info(name, T.FLOAT, [rows, sizes[-1]]))
    graph = h.make_graph(
        nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, [rows, sizes[0]])], outs, inits
    )
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def cnn(
    channels: tuple[int, ...] = (8, 16, 16),
    size: int = 16,
    *,
    seed: int = 0,
    bias: bool = True,
    opset: int = 17,
    pool: bool = False,
) -> onnx.ModelProto:
    """x (1, channels[0], size, size) through 3x3 Conv+Relu layers, then a residual Add of
    the last two activations (equal channels), with `pool` a 2x2 MaxPool, and a 1x1 Conv
    head without bias."""
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    acts = []
    for i, (c, o) in enumerate(itertools.pairwise(channels)):
        w = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        inits.append(nh.from_array(w, f"w{i}"))
        ins = [prev, f"w{i}"]
        if bias:
            inits.append(nh.from_array(rng.standard_normal(o).astype(np.float32) * 0.1, f"b{i}"))
            ins.append(f"b{i}")
        nodes.append(h.make_node("Conv", ins, [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]))
        nodes.append(h.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
        acts.append(prev)
    nodes.append(h.make_node("Add", [acts[-2], acts[-1]], ["sum"], name="residual"))
    o = channels[-1]
    head = (rng.standard_normal((4, o, 1, 1)) / np.sqrt(o)).astype(np.float32)
    inits.append(nh.from_array(head, "head_w"))
    last, out = "sum", size
    if pool:
        nodes.append(h.make_node("MaxPool", ["sum"], ["pooled"], name="pool", kernel_shape=[2, 2],
                                 strides=[2, 2]))  # fmt: skip
        last, out = "pooled", size // 2
    nodes.append(h.make_node("Conv", [last, "head_w"], ["y"], name="head"))
    x = h.make_tensor_value_info("x", T.FLOAT, [1, channels[0], size, size])
    y = h.make_tensor_value_info("y", T.FLOAT, [1, 4, out, out])
    m = h.make_model(
        h.make_graph(nodes, "cnn", [x], [y], inits), opset_imports=[h.make_opsetid("", opset)]
    )
    m.ir_version = 8
    return m
