"""The single-op models that `rewrite calibrate` times: ops that matter, at shapes that occur.

Each `Case` is one ONNX model holding one op (activations are graph inputs, weights are
initializers, as in an exported model, so ORT pre-packs GEMM weights as it does there) and
the random feeds to run it with. Shapes come from the corpus' workloads: BERT/ViT at sequence
128/197, the latency-critical sequence 16 and one-token decode, ResNet/MobileNet convolutions.
`cases(quick=True)` is a handful of them (for tests); the full list is about 130.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

MS = "com.microsoft"
F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
Shape = tuple[int, ...]


@dataclass
class Case:
    """One op in one model: `name` says which op at which shapes."""

    name: str
    op: str
    domain: str
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray] = field(repr=False)
    copies: int = 1
    """How many copies of the op the model runs (each with its own weights; see `single`)."""


def _rand(shape: Shape, dtype: int, rng: np.random.Generator) -> np.ndarray:
    if dtype == F:
        return rng.standard_normal(shape).astype(np.float32)
    if dtype == BOOL:
        return rng.random(shape) > 0.5
    return rng.integers(0, 4, shape).astype(onnx.helper.tensor_dtype_to_np_dtype(dtype))


COLD_BYTES = 64 << 20
"""Weights per case: more than a last-level cache, so each run reads them from memory."""
COLD_MIN = 64 << 10
"""Weights smaller than this (biases, LayerNorm scales) stay in cache in a real model too."""


def single(
    name: str,
    op: str,
    inputs: Sequence[tuple[Any, ...]],
    *,
    domain: str = "",
    out_dtype: int = F,
    n_out: int = 1,
    seed: int = 0,
    **attrs: Any,
) -> Case:
    """A model `y = op(inputs)`: `(name, shape, dtype)` is a graph input fed random values,
    `(name, array)` an initializer. Output types are left to ORT and to shape inference.

    An op with weights of `COLD_MIN` bytes or more is repeated (`Case.copies` nodes, each with
    its own copy of the weights, all reading the same inputs) until the weights exceed
    `COLD_BYTES`: in a whole model every weight is read once per run, from memory, not from
    the cache that a single op run in a loop would keep it in.
    """
    rng = np.random.default_rng(seed)
    graph_inputs, weights, feeds = [], {}, {}
    for spec in inputs:
        if len(spec) == 3:
            n, shape, dt = spec
            graph_inputs.append(helper.make_tensor_value_info(n, dt, list(shape)))
            feeds[n] = _rand(shape, dt, rng)
        else:
            n, arr = spec
            weights[n] = np.asarray(arr)
    size = sum(a.nbytes for a in weights.values())
    copies = 1 if size < COLD_MIN else max(1, min(64, -(-COLD_BYTES // size)))
    nodes, inits, declared = [], [], []
    for c in range(copies):
        names = [s[0] if s[0] not in weights or c == 0 else f"{s[0]}.{c}" for s in inputs]
        outs = [f"y{i}.{c}" for i in range(n_out)]
        nodes.append(helper.make_node(op, names, outs, domain=domain, **attrs))
        declared += [helper.make_tensor_value_info(o, out_dtype, None) for o in outs]
        for n, arr in weights.items():
            # distinct values, so no optimizer can share one copy between the nodes
            value = arr if c == 0 or arr.dtype.kind != "f" else arr * np.float32(1 + c / 1024)
            inits.append(onnx.numpy_helper.from_array(value, n if c == 0 else f"{n}.{c}"))
    graph = helper.make_graph(nodes, name, graph_inputs, declared, inits)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(MS, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets, ir_version=9)
    return Case(name, op, domain, model, feeds, copies)


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)


def gemm_cases(quick: bool) -> list[Case]:
    rng = np.random.default_rng(1)
    mkn = [(128, 768, 3072), (1, 768, 768)] if quick else [
        (1, 768, 768), (1, 768, 3072), (1, 3072, 768), (16, 768, 768), (16, 768, 3072),
        (128, 768, 768), (128, 768, 3072), (128, 3072, 768), (197, 768, 768), (64, 768, 8192),
    ]  # fmt: skip
    out = [
        single(f"MatMul {m}x{k}x{n}", "MatMul", [("x", (1, m, k), F), ("w", _w(rng, k, n))])
        for m, k, n in mkn
    ]
    act = [((1, 12, 128, 64), (1, 12, 64, 128))] if quick else [
        ((1, 12, 128, 64), (1, 12, 64, 128)), ((1, 12, 128, 128), (1, 12, 128, 64)),
        ((1, 12, 16, 64), (1, 12, 64, 16)), ((1, 12, 1, 64), (1, 12, 64, 128)),
        ((1, 12, 1, 128), (1, 12, 128, 64)), ((1, 12, 197, 64), (1, 12, 64, 197)),
    ]  # fmt: skip
    out += [single(f"MatMul {a}x{b}", "MatMul", [("a", a, F), ("b", b, F)]) for a, b in act]
    if quick:
        return out
    for m, k, n in [(128, 768, 768), (64, 768, 2304), (1, 768, 768), (64, 3072, 768)]:
        ins: list[tuple[Any, ...]] = [("x", (m, k), F), ("w", _w(rng, n, k)), ("c", _w(rng, n))]
        out.append(single(f"Gemm {m}x{k}x{n}", "Gemm", ins, transB=1))
    for a, b in [((1, 12, 128, 64), (1, 12, 128, 64)), ((1, 12, 16, 64), (1, 12, 16, 64))]:
        ins = [("a", a, F), ("b", b, F)]
        out.append(single(f"FusedMatMul {a}·{b}ᵀ", "FusedMatMul", ins, domain=MS, transB=1,
                          alpha=0.125))  # fmt: skip
    ins = [("x", (1, 128, 768), F), ("w", _w(rng, 768, 768))]
    out.append(single("FusedMatMul 128x768x768", "FusedMatMul", ins, domain=MS, alpha=0.5))
    return out


def conv_cases(quick: bool) -> list[Case]:
    rng = np.random.default_rng(2)
    # (input shape, out channels, kernel, stride, group)
    shapes = [((1, 64, 56, 56), 64, 3, 1, 1)] if quick else [
        ((1, 3, 224, 224), 64, 7, 2, 1), ((1, 64, 56, 56), 64, 3, 1, 1),
        ((1, 256, 56, 56), 64, 1, 1, 1), ((1, 64, 56, 56), 256, 1, 1, 1),
        ((1, 512, 7, 7), 512, 3, 1, 1), ((1, 128, 28, 28), 128, 3, 1, 1),
        ((1, 32, 112, 112), 16, 1, 1, 1), ((1, 320, 7, 7), 1280, 1, 1, 1),
        ((1, 96, 112, 112), 96, 3, 2, 96), ((1, 144, 56, 56), 144, 3, 1, 144),
        ((1, 960, 7, 7), 960, 3, 1, 960), ((1, 240, 28, 28), 240, 5, 1, 240),
    ]  # fmt: skip
    out = []
    for x, co, k, s, g in shapes:
        w = _w(rng, co, x[1] // g, k, k)
        ins = [("x", x, F), ("w", w), ("b", _w(rng, co))]
        name = f"Conv {x} {co}x{k}x{k}/{s}" + (f" g{g}" if g > 1 else "")
        out.append(single(name, "Conv", ins, kernel_shape=[k, k], strides=[s, s],
                          pads=[k // 2] * 4, group=g))  # fmt: skip
    return out


ACT_SHAPES_QUICK: list[Shape] = [(1, 1, 768), (1, 128, 768)]
ACT_SHAPES: list[Shape] = [(1, 1, 768), (1, 16, 768), (1, 128, 768), (1, 128, 3072),
                           (1, 12, 128, 128), (1, 64, 56, 56)]  # fmt: skip


def _bias(s: Shape) -> Shape:
    """The broadcast operand models add to `s`: a hidden bias, a channel bias, a key mask."""
    if len(s) == 4:
        return (1, 1, 1, s[-1]) if s[1] == 12 else (1, s[1], 1, 1)
    return (s[-1],)


def elementwise_cases(quick: bool) -> list[Case]:
    rng = np.random.default_rng(3)
    shapes = ACT_SHAPES_QUICK if quick else ACT_SHAPES
    binary = ["Add", "Mul"] if quick else ["Add", "Mul", "Sub", "Div", "Sum", "Pow"]
    unary = ["Relu", "Erf"] if quick else ["Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Neg"]
    out: list[Case] = []
    for s in shapes:
        for op in binary:
            b = ("e", np.float32(3.0)) if op == "Pow" else ("b", s, F)
            out.append(single(f"{op} {s}", op, [("a", s, F), b]))
        if not quick:
            bias = ("b", _w(rng, *_bias(s)))
            out.append(single(f"Add {s}+{bias[1].shape}", "Add", [("a", s, F), bias]))
            out.append(single(f"Mul {s}·{bias[1].shape}", "Mul", [("a", s, F), bias]))
            out.append(single(f"Mul {s}·scalar", "Mul", [("a", s, F), ("b", np.float32(0.5))]))
            f16 = TensorProto.FLOAT16
            out.append(single(f"Cast {s} f32->f16", "Cast", [("a", s, F)], out_dtype=f16, to=f16))
        out += [single(f"{op} {s}", op, [("a", s, F)]) for op in unary]
    if not quick:
        mask = (1, 1, 128, 128)
        out.append(single(f"Cast {mask} bool->f32", "Cast", [("c", mask, BOOL)], to=F))
        for small in [(1, 1, 1, 128), (1, 1, 128, 128), (1, 1, 1, 16)]:
            big = (1, 12, small[-1], small[-1])
            ins = [("x", small, F), ("shape", np.array(big))]
            out.append(single(f"Expand {small}->{big}", "Expand", ins))
    return out


def causal_mask(rows: int, cols: int) -> np.ndarray:
    """(rows, cols) bool: key j visible to query i when j <= i + cols - rows (a KV cache of
    cols - rows earlier positions is visible to every query)."""
    return np.tril(np.ones((rows, cols), dtype=bool), k=cols - rows)


def padding_mask(n: int, valid: int) -> np.ndarray:
    """(n,) bool: the first `valid` positions are real tokens, the rest padding."""
    return np.arange(n) < valid


def _where(name: str, cond: np.ndarray, shape: Shape, fill: bool) -> Case:
    """Where(c, a, b) with `cond` fed as c (broadcast to its own shape, as a model computes
    it), a of `shape`, b a scalar fill (masked scores) or a tensor of `shape`."""
    b: tuple[Any, ...] = ("b", np.float32(-1e4)) if fill else ("b", shape, F)
    case = single(name, "Where", [("c", cond.shape, BOOL), ("a", shape, F), b])
    case.feeds["c"] = np.ascontiguousarray(cond)
    return case


def where_cases(quick: bool) -> list[Case]:
    """Where on conditions as models compute them: causal masks (lower-triangular, from
    (1, 1, S, S) or expanded to the scores' shape), padding masks (a prefix of real tokens)
    and all-true masks. ORT's Where costs 7-11x more on random 50% conditions (1,460 µs vs
    128-193 µs at (1, 12, 128, 128) on the 2-core EPYC), which models do not feed it."""
    if quick:
        return []
    att, att16 = (1, 12, 128, 128), (1, 12, 16, 16)
    c128, c16 = causal_mask(128, 128)[None, None], causal_mask(16, 16)[None, None]
    pad128 = padding_mask(128, 96)[None, None, None]

    def rows(shape: Shape, valid: int) -> np.ndarray:  # padded positions masked, hidden kept
        keep = padding_mask(shape[1], valid)[None, :, None]
        return np.broadcast_to(keep, shape).copy()

    return [
        _where("Where causal (1,1,128,128)->(1,12,128,128)", c128, att, True),
        _where("Where causal (1,1,16,16)->(1,12,16,16)", c16, att16, True),
        _where("Where padding (1,1,1,128)->(1,12,128,128)", pad128, att, True),
        _where("Where padding (1,1,1,128)->(1,12,1,128)", pad128, (1, 12, 1, 128), True),
        _where(
            "Where all-true (1,1,128,128)->(1,12,128,128)",
            np.ones(c128.shape, dtype=bool),
            att,
            True,
        ),
        _where("Where causal (1,12,128,128)", np.broadcast_to(c128, att).copy(), att, True),
        _where("Where causal (1,12,16,16)", np.broadcast_to(c16, att16).copy(), att16, True),
        _where("Where all-true (1,12,128,128)", np.ones(att, dtype=bool), att, True),
        _where("Where padding (1,128,768)", rows((1, 128, 768), 96), (1, 128, 768), False),
        _where("Where padding (1,16,768)", rows((1, 16, 768), 12), (1, 16, 768), False),
        _where("Where padding (1,128,3072)", rows((1, 128, 3072), 96), (1, 128, 3072), False),
        _where("Where all-true (1,1,768)", np.ones((1, 1, 768), dtype=bool), (1, 1, 768), False),
    ]


def norm_cases(quick: bool) -> list[Case]:
    rng = np.random.default_rng(4)
    rows = [(1, 128, 768)] if quick else [(1, 1, 768), (1, 16, 768), (1, 128, 768), (1, 197, 768)]
    out = []
    for s in rows:
        gb = [("g", 1 + _w(rng, s[-1])), ("beta", _w(rng, s[-1]))]
        out.append(single(f"LayerNormalization {s}", "LayerNormalization", [("x", s, F), *gb],
                          axis=-1, epsilon=1e-12))  # fmt: skip
        out.append(single(f"SkipLayerNormalization {s}", "SkipLayerNormalization",
                          [("x", s, F), ("r", s, F), *gb], domain=MS, epsilon=1e-12))  # fmt: skip
        out.append(single(f"ReduceMean {s}", "ReduceMean", [("x", s, F)], axes=[-1], keepdims=1))
    att = [(1, 12, 128, 128)] if quick else [(1, 12, 128, 128), (1, 12, 16, 16), (1, 12, 1, 128),
                                             (1, 12, 197, 197)]  # fmt: skip
    out += [single(f"Softmax {s}", "Softmax", [("x", s, F)], axis=-1) for s in att]
    hidden = [(1, 128, 3072)] if quick else [(1, 1, 3072), (1, 16, 3072), (1, 128, 3072)]
    for s in hidden:
        out.append(single(f"Gelu {s}", "Gelu", [("x", s, F)], domain=MS))
        if quick:
            continue
        bias = ("b", _w(rng, s[-1]))
        out.append(single(f"BiasGelu {s}", "BiasGelu", [("x", s, F), bias], domain=MS))
        out.append(single(f"FastGelu {s}", "FastGelu", [("x", s, F), bias], domain=MS))
        out.append(single(f"QuickGelu {s}", "QuickGelu", [("x", s, F)], domain=MS, alpha=1.0))
    return out


def movement_cases(quick: bool) -> list[Case]:
    rng = np.random.default_rng(5)
    out = [
        single("Transpose (1,128,12,64) 0213", "Transpose", [("x", (1, 128, 12, 64), F)],
               perm=[0, 2, 1, 3]),
        single("Gather embedding 30522x768[1,128]", "Gather",
               [("w", _w(rng, 30522, 768)), ("i", (1, 128), I64)]),
    ]  # fmt: skip
    if quick:
        return out
    for s, perm in [
        ((1, 12, 128, 64), [0, 1, 3, 2]),
        ((1, 16, 12, 64), [0, 2, 1, 3]),
        ((1, 1, 12, 64), [0, 2, 1, 3]),
        ((1, 64, 56, 56), [0, 2, 3, 1]),
        ((1, 197, 12, 64), [0, 2, 1, 3]),
        ((1, 12, 128, 64), [0, 2, 1, 3]),
    ]:
        out.append(single(f"Transpose {s} {''.join(map(str, perm))}", "Transpose",
                          [("x", s, F)], perm=perm))  # fmt: skip
    out.append(single("Gather embedding 512x768[1,128]", "Gather",
                      [("w", _w(rng, 512, 768)), ("i", (1, 128), I64)]))  # fmt: skip
    out.append(single("Gather (1,128,768)[:,0]", "Gather",
                      [("x", (1, 128, 768), F), ("i", np.array(0))], axis=1))  # fmt: skip
    for a, b, ax in [
        ((1, 12, 127, 64), (1, 12, 1, 64), 2),
        ((1, 128, 768), (1, 128, 768), -1),
        ((1, 12, 16, 64), (1, 12, 16, 64), 2),
    ]:
        out.append(single(f"Concat {a}+{b}", "Concat", [("a", a, F), ("b", b, F)], axis=ax))
    for sl, end in [((1, 128, 768), 64), ((1, 12, 128, 64), 32), ((1, 128, 3072), 1536)]:
        ins = [("x", sl, F), ("st", np.array([0])), ("en", np.array([end])),
               ("ax", np.array([len(sl) - 1]))]  # fmt: skip
        out.append(single(f"Slice {sl}[..., :{end}]", "Slice", ins))
    out.append(single("MaxPool (1,64,112,112) 3/2", "MaxPool", [("x", (1, 64, 112, 112), F)],
                      kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))  # fmt: skip
    for s in [(1, 2048, 7, 7), (1, 96, 56, 56)]:
        out.append(single(f"GlobalAveragePool {s}", "GlobalAveragePool", [("x", s, F)]))
    return out


def cases(quick: bool = False) -> list[Case]:
    """Every calibration case (a handful with `quick`)."""
    return [
        *gemm_cases(quick),
        *conv_cases(quick),
        *elementwise_cases(quick),
        *where_cases(quick),
        *norm_cases(quick),
        *movement_cases(quick),
    ]


def baseline_cases(chain: int = 33) -> tuple[Case, Case]:
    """One Relu and `chain` chained Relus on one float: the session's fixed cost, and (by
    difference) the cost of one more node in a graph."""
    one = single("baseline Relu x1", "Relu", [("x", (1,), F)])
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"r{i}"], [f"r{i + 1}"])
             for i in range(chain)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", F, [1])],
        [helper.make_tensor_value_info(f"r{chain}", F, [1])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    return one, Case(f"baseline Relu x{chain}", "Relu", "", model, dict(one.feeds))
