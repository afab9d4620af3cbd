"""Pairs of equivalent graphs for `cost_model.py`: each pair is one rewrite, before and after.

Micro pairs are synthetic: a few nodes cut out of the corpus' patterns (residual + LayerNorm,
erf-GELU, attention's Kᵀ and mask, the pooler's token-0 Gather, QKV projections, ...) at the
corpus' shapes, written by hand here. Whole-model pairs are a corpus model and the same model
after one real rewrite applied to every match (`sum_residuals`). `expect` says what ORT is
known to do with the pair ("tie": ORT's own fusions make both run the same kernels).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper

MS = "com.microsoft"
F, BOOL = TensorProto.FLOAT, TensorProto.BOOL
N = helper.make_node
HIDDEN = [(1, 1, 768), (1, 16, 768), (1, 128, 768), (1, 197, 768)]
"""decode, bert_s16, bert/distilbert, vit."""


@dataclass
class Pair:
    name: str
    a: onnx.ModelProto | str
    b: onnx.ModelProto | str
    feeds: dict[str, np.ndarray] = field(repr=False)
    kind: str = "synthetic"
    expect: str = ""
    costs: tuple[float, float] | None = None
    """Predicted µs of A and B as an extractor priced them (None: price the models)."""


def model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[int, ...] | tuple[tuple[int, ...], int]],
    inits: dict[str, np.ndarray],
    outputs: list[str],
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A model over `nodes` and random feeds for its inputs (float unless a dtype is given)."""
    rng = np.random.default_rng(0)
    vis, feeds = [], {}
    for name, spec in inputs.items():
        shape, dt = spec if isinstance(spec[0], tuple) else (spec, F)  # type: ignore[misc]
        vis.append(helper.make_tensor_value_info(name, dt, list(shape)))  # type: ignore[arg-type]
        feeds[name] = (
            rng.random(shape) > 0.3 if dt == BOOL else rng.standard_normal(shape).astype(np.float32)
        )  # type: ignore[arg-type]
    outs = [helper.make_tensor_value_info(o, F, None) for o in outputs]
    tensors = [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    graph = helper.make_graph(nodes, "pair", vis, outs, tensors)
    ops = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=ops, ir_version=9), feeds


def pair(name: str, a: list, b: list, inputs: dict, inits: dict, expect: str = "") -> Pair:
    ma, feeds = model(a, inputs, inits, ["y"])
    mb, _ = model(b, inputs, inits, ["y"])
    return Pair(name, ma, mb, feeds, expect=expect)


def w(*shape: int) -> np.ndarray:
    return (np.random.default_rng(1).standard_normal(shape) * 0.02).astype(np.float32)


def residual_pairs() -> list[Pair]:
    out = []
    for s in HIDDEN:
        ins, gb = {"x": s, "r": s}, {"g": 1 + w(768), "b": w(768)}
        add_ln = [N("Add", ["x", "r"], ["h"]), N("LayerNormalization", ["h", "g", "b"], ["y"])]
        sum_ln = [N("Sum", ["x", "r"], ["h"]), N("LayerNormalization", ["h", "g", "b"], ["y"])]
        skip = [N("SkipLayerNormalization", ["x", "r", "g", "b"], ["y"], domain=MS)]
        out += [
            pair(f"residual Add+LN -> Sum+LN {s}", add_ln, sum_ln, ins, gb),
            pair(f"Add+LN -> SkipLayerNorm {s}", add_ln, skip, ins, gb, "tie: ORT fuses A"),
            pair(f"SkipLayerNorm -> Sum+LN {s}", skip, sum_ln, ins, gb),
        ]
    return out


def gelu_pairs() -> list[Pair]:
    out = []
    for s in [(1, 1, 3072), (1, 16, 3072), (1, 128, 3072)]:
        c = {"s2": np.float32(1.4142135), "one": np.float32(1.0), "half": np.float32(0.5)}
        erf = [
            N("Div", ["x", "s2"], ["d"]),
            N("Erf", ["d"], ["e"]),
            N("Add", ["e", "one"], ["p"]),
            N("Mul", ["x", "p"], ["q"]),
            N("Mul", ["q", "half"], ["y"]),
        ]
        out.append(
            pair(
                f"erf-GELU -> Gelu {s}",
                erf,
                [N("Gelu", ["x"], ["y"], domain=MS)],
                {"x": s},
                c,
                "tie: ORT fuses A",
            )
        )
        biased = [N("Add", ["z", "bias"], ["x"]), *erf]
        fused = [N("BiasGelu", ["z", "bias"], ["y"], domain=MS)]
        out.append(
            pair(
                f"bias+erf-GELU -> BiasGelu {s}",
                biased,
                fused,
                {"z": s},
                {**c, "bias": w(3072)},
                "tie: ORT fuses A",
            )
        )
        silu = [N("Sigmoid", ["x"], ["sg"]), N("Mul", ["x", "sg"], ["y"])]
        quick = [N("QuickGelu", ["x"], ["y"], domain=MS, alpha=1.0)]
        out.append(
            pair(f"x*sigmoid(x) -> QuickGelu {s}", silu, quick, {"x": s}, {}, "tie: ORT fuses A")
        )
    return out


def gemm_pairs() -> list[Pair]:
    out = []
    for m in (1, 16, 128):
        ins, W = {"x": (1, m, 768)}, {"W": w(768, 768), "c": w(768)}
        mm = [N("MatMul", ["x", "W"], ["t"]), N("Add", ["t", "c"], ["y"])]
        gemm = [
            N("Reshape", ["x", "s2"], ["x2"]),
            N("Gemm", ["x2", "Wt", "c"], ["g"], transB=1),
            N("Reshape", ["g", "s3"], ["y"]),
        ]
        shapes = {"s2": np.array([m, 768]), "s3": np.array([1, m, 768]), "Wt": W["W"].T.copy()}
        out.append(
            pair(
                f"MatMul+Add -> Gemm {m}x768x768",
                mm,
                gemm,
                ins,
                {**W, **shapes},
                "tie: ORT fuses A",
            )
        )
        qkv = [N("MatMul", ["x", f"W{i}"], [f"p{i}"]) for i in range(3)]
        qkv.append(N("Concat", ["p0", "p1", "p2"], ["y"], axis=-1))
        merged = [N("MatMul", ["x", "Wqkv"], ["y"])]
        ws = {f"W{i}": w(768, 768) + i for i in range(3)}
        ws["Wqkv"] = np.concatenate([ws["W0"], ws["W1"], ws["W2"]], axis=1)
        out.append(pair(f"3 MatMuls -> merged QKV MatMul {m}", qkv, merged, ins, ws))
    ins = {"x": (1, 128, 768)}
    pooled = [N("MatMul", ["x", "W"], ["t"]), N("Gather", ["t", "zero"], ["y"], axis=1)]
    pushed = [N("Gather", ["x", "zero"], ["t"], axis=1), N("MatMul", ["t", "W"], ["y"])]
    out.append(
        pair(
            "MatMul then Gather -> Gather then MatMul (pooler)",
            pooled,
            pushed,
            ins,
            {"W": w(768, 768), "zero": np.array(0)},
        )
    )
    return out


def attention_pairs() -> list[Pair]:
    out = []
    for s in [128, 16]:
        qk = {"q": (1, 12, s, 64), "k": (1, 12, s, 64)}
        tmm = [N("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), N("MatMul", ["q", "kt"], ["y"])]
        fmm = [N("FusedMatMul", ["q", "k"], ["y"], domain=MS, transB=1)]
        out.append(
            pair(f"Transpose+MatMul -> FusedMatMul s{s}", tmm, fmm, qk, {}, "tie: ORT fuses A")
        )
        x = {"x": (1, 12, s, s), "c": ((1, 1, s, s), BOOL)}
        where = [N("Where", ["c", "x", "ninf"], ["y"])]
        bias = [N("Where", ["c", "zero", "ninf"], ["m"]), N("Add", ["x", "m"], ["y"])]
        c = {"ninf": np.float32(-np.inf), "zero": np.float32(0.0)}
        out.append(pair(f"Where(mask, scores) -> scores + mask bias s{s}", where, bias, x, c))
        div = [N("Div", ["x", "eight"], ["y"])]
        mul = [N("Mul", ["x", "eighth"], ["y"])]
        out.append(
            pair(
                f"Div by 8 -> Mul by 1/8 s{s}",
                div,
                mul,
                {"x": (1, 12, s, s)},
                {"eight": np.float32(8), "eighth": np.float32(0.125)},
            )
        )
        ex = [N("Expand", ["m", "shape"], ["e"]), N("Mul", ["x", "e"], ["y"])]
        bc = [N("Mul", ["x", "m"], ["y"])]
        out.append(
            pair(
                f"Expand+Mul -> broadcast Mul s{s}",
                ex,
                bc,
                {"x": (1, 12, s, s), "m": (1, 1, 1, s)},
                {"shape": np.array([1, 12, s, s])},
            )
        )
    return out


def layout_pairs() -> list[Pair]:
    out = []
    for s in [(1, 128, 12, 64), (1, 16, 12, 64)]:
        p = [0, 2, 1, 3]
        two = [
            N("Transpose", ["a"], ["ta"], perm=p),
            N("Transpose", ["b"], ["tb"], perm=p),
            N("Add", ["ta", "tb"], ["y"]),
        ]
        one = [N("Add", ["a", "b"], ["t"]), N("Transpose", ["t"], ["y"], perm=p)]
        out.append(pair(f"2 Transposes before Add -> 1 after {s}", two, one, {"a": s, "b": s}, {}))
        before = [N("Transpose", ["a"], ["t"], perm=p), N("Relu", ["t"], ["y"])]
        after = [N("Relu", ["a"], ["t"]), N("Transpose", ["t"], ["y"], perm=p)]
        out.append(
            pair(
                f"Relu after Transpose -> before {s}",
                before,
                after,
                {"a": s},
                {},
                "tie: same kernels",
            )
        )
        tt = [
            N("Transpose", ["a"], ["t"], perm=p),
            N("Transpose", ["t"], ["u"], perm=[0, 1, 3, 2]),
            N("Relu", ["u"], ["y"]),
        ]
        t1 = [N("Transpose", ["a"], ["u"], perm=[0, 2, 3, 1]), N("Relu", ["u"], ["y"])]
        out.append(
            pair(
                f"Transpose∘Transpose -> one Transpose {s}",
                tt,
                t1,
                {"a": s},
                {},
                "tie: ORT merges A's transposes",
            )
        )
    return out


def arith_pairs() -> list[Pair]:
    out = []
    for s in [(1, 128, 768), (1, 16, 768)]:
        pw = [N("Pow", ["x", "two"], ["y"])]
        mm = [N("Mul", ["x", "x"], ["y"])]
        out.append(pair(f"Pow(x, 2) -> x*x {s}", pw, mm, {"x": s}, {"two": np.float32(2)}))
        p3 = [N("Pow", ["x", "three"], ["y"])]
        m3 = [N("Mul", ["x", "x"], ["sq"]), N("Mul", ["sq", "x"], ["y"])]
        out.append(pair(f"Pow(x, 3) -> x*x*x {s}", p3, m3, {"x": s}, {"three": np.float32(3)}))
        eps, gb = {"eps": np.float32(1e-5), "two": np.float32(2)}, {"g": 1 + w(768), "b": w(768)}
        dec = [
            N("ReduceMean", ["x"], ["mu"], axes=[-1]),
            N("Sub", ["x", "mu"], ["d"]),
            N("Pow", ["d", "two"], ["d2"]),
            N("ReduceMean", ["d2"], ["var"], axes=[-1]),
            N("Add", ["var", "eps"], ["ve"]),
            N("Sqrt", ["ve"], ["sd"]),
            N("Div", ["d", "sd"], ["n"]),
            N("Mul", ["n", "g"], ["ng"]),
            N("Add", ["ng", "b"], ["y"]),
        ]
        ln = [N("LayerNormalization", ["x", "g", "b"], ["y"], epsilon=1e-5)]
        out.append(
            pair(
                f"decomposed LayerNorm -> LayerNormalization {s}",
                dec,
                ln,
                {"x": s},
                {**eps, **gb},
                "tie: ORT fuses A",
            )
        )
    return out


PairFn = Callable[[], list[Pair]]
MICRO: list[PairFn] = [
    residual_pairs,
    gelu_pairs,
    gemm_pairs,
    attention_pairs,
    layout_pairs,
    arith_pairs,
]


def micro_pairs() -> list[Pair]:
    return [p for fn in MICRO for p in fn()]


def sum_residuals(m: onnx.ModelProto) -> int:
    """Rewrite in place every `Add` whose only consumer is a LayerNormalization (input 0) into
    `Sum` (exact: same inputs, same result); returns how many. ORT fuses the Add, not the Sum."""
    users: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for n in m.graph.node:
        for i, name in enumerate(n.input):
            users.setdefault(name, []).append((n, i))
    outputs = {o.name for o in m.graph.output}
    count = 0
    for n in m.graph.node:
        if n.op_type != "Add" or n.domain not in ("", "ai.onnx") or n.output[0] in outputs:
            continue
        u = users.get(n.output[0], [])
        if len(u) == 1 and u[0][0].op_type == "LayerNormalization" and u[0][1] == 0:
            n.op_type = "Sum"
            count += 1
    return count
