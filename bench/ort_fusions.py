"""Which of ORT's own fusions pay on this machine: each one timed fused vs not fused.

    python bench/ort_fusions.py [--only SkipLayerNormFusion,GeluFusion] [--threads 1]
        [--rounds 15] [--seq 128] [--json out.json]

ORT rewrites every model it loads (ORT_ENABLE_ALL): Add + LayerNormalization becomes
SkipLayerNormalization, the erf form of GELU becomes Gelu, MatMul + Add becomes Gemm, ... A rule
of ours that looks cheaper than the graph as written gains nothing where ORT would have fused it
anyway, and loses where it blocks a fusion that pays. So the cost model must price what ORT
executes; this bench measures, per fusion, what ORT executes both ways on the CPU provider.

For each fusion a small model holds its unfused pattern at transformer (hidden 768, `--seq`
tokens, FFN 3072, 12 heads) or CNN (64 channels, 56x56) shapes. Two sessions run it, both at
ORT_ENABLE_ALL with `--threads` intra-op threads: one as users run it, one with that fusion
disabled (`disabled_optimizers`). The fused op must be in the first session's optimized graph
and absent from the second's (else the row says the fusion did not apply). Timed in
interleaved rounds (order alternating); printed: the median per-run time of each, the median
of per-round ratios unfused/fused (> 1: the fusion pays) and half the ratios' IQR (noise), and
the largest output difference between the two.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto as P
from onnx import helper as h
from onnx import numpy_helper as nh

F = P.FLOAT
RNG = np.random.default_rng(0)


def _w(name: str, *shape: int, scale: float = 0.05) -> onnx.TensorProto:
    return nh.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _c(name: str, value: float) -> onnx.TensorProto:
    return nh.from_array(np.array(value, dtype=np.float32), name)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, list[int]],
    out: str,
    inits: list[onnx.TensorProto],
    domain_ms: bool = False,
) -> onnx.ModelProto:
    g = h.make_graph(
        nodes,
        "fusion",
        [h.make_tensor_value_info(k, F, v) for k, v in inputs.items()],
        [h.make_tensor_value_info(out, F, None)],
        inits,
    )
    opsets = [h.make_opsetid("", 17)] + ([h.make_opsetid("com.microsoft", 1)] if domain_ms else [])
    return h.make_model(g, opset_imports=opsets)


@dataclass(frozen=True)
class Case:
    """An unfused pattern, the fusion that rewrites it and the op it becomes."""

    fusion: str
    fused_op: str
    build: Callable[[int], onnx.ModelProto]
    shape: str
    disable: tuple[str, ...] = ()
    """The transformer names that turn it off (default: `fusion`; ORT 1.32 registers the
    LayerNorm and Gelu fusions once per level, as `...L1` / `...L2`)."""


def _skip_ln(s: int) -> onnx.ModelProto:
    """Add(a, b) -> LayerNormalization  =>  SkipLayerNormalization."""
    nodes = [
        h.make_node("Add", ["a", "b"], ["s"]),
        h.make_node("LayerNormalization", ["s", "g", "be"], ["y"], axis=-1, epsilon=1e-12),
    ]
    return _model(nodes, {"a": [1, s, 768], "b": [1, s, 768]}, "y", [_w("g", 768), _w("be", 768)])


def _layer_norm(s: int) -> onnx.ModelProto:
    """ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add  =>  LayerNormalization."""
    nodes = [
        h.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
        h.make_node("Sub", ["x", "m"], ["d"]),
        h.make_node("Pow", ["d", "two"], ["p"]),
        h.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
        h.make_node("Add", ["v", "eps"], ["ve"]),
        h.make_node("Sqrt", ["ve"], ["sd"]),
        h.make_node("Div", ["d", "sd"], ["n"]),
        h.make_node("Mul", ["n", "g"], ["ng"]),
        h.make_node("Add", ["ng", "be"], ["y"]),
    ]
    inits = [_c("two", 2.0), _c("eps", 1e-12), _w("g", 768), _w("be", 768)]
    return _model(nodes, {"x": [1, s, 768]}, "y", inits)


def _rms_norm(s: int) -> onnx.ModelProto:
    """Pow/ReduceMean/Add/Sqrt/Div/Mul  =>  SimplifiedLayerNormalization (RMSNorm)."""
    nodes = [
        h.make_node("Pow", ["x", "two"], ["p"]),
        h.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
        h.make_node("Add", ["v", "eps"], ["ve"]),
        h.make_node("Sqrt", ["ve"], ["sd"]),
        h.make_node("Div", ["x", "sd"], ["n"]),
        h.make_node("Mul", ["n", "g"], ["y"]),
    ]
    return _model(nodes, {"x": [1, s, 768]}, "y", [_c("two", 2.0), _c("eps", 1e-6), _w("g", 768)])


def _gelu_nodes(x: str, y: str) -> list[onnx.NodeProto]:
    return [
        h.make_node("Div", [x, "sqrt2"], [f"{y}_d"]),
        h.make_node("Erf", [f"{y}_d"], [f"{y}_e"]),
        h.make_node("Add", [f"{y}_e", "one"], [f"{y}_a"]),
        h.make_node("Mul", [x, f"{y}_a"], [f"{y}_m"]),
        h.make_node("Mul", [f"{y}_m", "half"], [y]),
    ]


_GELU_CONSTS = [_c("sqrt2", 1.4142135381698608), _c("one", 1.0), _c("half", 0.5)]


def _gelu(s: int) -> onnx.ModelProto:
    """x·½·(1 + erf(x/√2))  =>  Gelu."""
    return _model(_gelu_nodes("x", "y"), {"x": [1, s, 3072]}, "y", list(_GELU_CONSTS))


def _bias_gelu(s: int) -> onnx.ModelProto:
    """Add(x, bias) -> Gelu  =>  BiasGelu (Gelu itself fused first)."""
    nodes = [h.make_node("Add", ["x", "bias"], ["xb"]), *_gelu_nodes("xb", "y")]
    return _model(nodes, {"x": [1, s, 3072]}, "y", [*_GELU_CONSTS, _w("bias", 3072)])


def _fast_gelu(s: int) -> onnx.ModelProto:
    """½x(1 + tanh(√(2/π)(x + 0.044715x³)))  =>  FastGelu."""
    nodes = [
        h.make_node("Pow", ["x", "three"], ["c"]),
        h.make_node("Mul", ["c", "k"], ["ck"]),
        h.make_node("Add", ["x", "ck"], ["i"]),
        h.make_node("Mul", ["i", "s2p"], ["t0"]),
        h.make_node("Tanh", ["t0"], ["t"]),
        h.make_node("Add", ["t", "one"], ["a"]),
        h.make_node("Mul", ["x", "half"], ["xh"]),
        h.make_node("Mul", ["xh", "a"], ["y"]),
    ]
    inits = [_c("three", 3.0), _c("k", 0.044715), _c("s2p", 0.7978845834732056)]
    inits += [_c("one", 1.0), _c("half", 0.5)]
    return _model(nodes, {"x": [1, s, 3072]}, "y", inits)


def _quick_gelu(s: int) -> onnx.ModelProto:
    """x·sigmoid(x)  =>  QuickGelu (alpha 1)."""
    nodes = [h.make_node("Sigmoid", ["x"], ["sg"]), h.make_node("Mul", ["x", "sg"], ["y"])]
    return _model(nodes, {"x": [1, s, 3072]}, "y", [])


def _matmul_scale(s: int) -> onnx.ModelProto:
    """MatMul(q, k) · 0.125  =>  FusedMatMul(alpha=0.125)."""
    nodes = [h.make_node("MatMul", ["q", "k"], ["m"]), h.make_node("Mul", ["m", "sc"], ["y"])]
    return _model(nodes, {"q": [12, s, 64], "k": [12, 64, s]}, "y", [_c("sc", 0.125)])


def _matmul_transpose(s: int) -> onnx.ModelProto:
    """MatMul(q, Transpose(k))  =>  FusedMatMul(transB=1)."""
    nodes = [
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        h.make_node("MatMul", ["q", "kt"], ["y"]),
    ]
    return _model(nodes, {"q": [12, s, 64], "k": [12, s, 64]}, "y", [])


def _matmul_add(s: int) -> onnx.ModelProto:
    """MatMul(x, W) + bias  =>  Gemm."""
    nodes = [h.make_node("MatMul", ["x", "W"], ["m"]), h.make_node("Add", ["m", "bias"], ["y"])]
    return _model(nodes, {"x": [s, 768]}, "y", [_w("W", 768, 768), _w("bias", 768)])


def _gemm_relu(s: int) -> onnx.ModelProto:
    """Gemm -> Relu  =>  FusedGemm(activation=Relu)."""
    nodes = [h.make_node("Gemm", ["x", "W", "bias"], ["m"]), h.make_node("Relu", ["m"], ["y"])]
    return _model(nodes, {"x": [s, 768]}, "y", [_w("W", 768, 3072), _w("bias", 3072)])


def _bias_softmax(s: int) -> onnx.ModelProto:
    """Softmax(scores + mask)  =>  BiasSoftmax."""
    nodes = [
        h.make_node("Add", ["x", "mask"], ["a"]),
        h.make_node("Softmax", ["a"], ["y"], axis=-1),
    ]
    return _model(nodes, {"x": [1, 12, s, s], "mask": [1, 1, 1, s]}, "y", [])


def _conv_relu(_: int) -> onnx.ModelProto:
    """Conv -> Relu  =>  FusedConv(activation=Relu)."""
    nodes = [
        h.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c"], ["y"]),
    ]
    return _model(nodes, {"x": [1, 64, 56, 56]}, "y", [_w("W", 64, 64, 3, 3), _w("B", 64)])


def _conv_bn(_: int) -> onnx.ModelProto:
    """Conv -> BatchNormalization  =>  Conv (scale and shift folded into the weights)."""
    bn = [_w("g", 64), _w("b", 64), _w("mu", 64)]
    var = nh.from_array(RNG.uniform(0.5, 1.5, 64).astype(np.float32), "var")
    nodes = [
        h.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
        h.make_node("BatchNormalization", ["c", "g", "b", "mu", "var"], ["y"]),
    ]
    return _model(nodes, {"x": [1, 64, 56, 56]}, "y", [_w("W", 64, 64, 3, 3), *bn, var])


CASES = [
    Case("SkipLayerNormFusion", "SkipLayerNormalization", _skip_ln, "[1,S,768]"),
    Case(
        "LayerNormFusion",
        "LayerNormalization",
        _layer_norm,
        "[1,S,768]",
        ("LayerNormFusionL1", "LayerNormFusionL2", "SimplifiedLayerNormFusion"),
    ),
    Case("SimplifiedLayerNormFusion", "SimplifiedLayerNormalization", _rms_norm, "[1,S,768]"),
    Case("GeluFusion", "Gelu", _gelu, "[1,S,3072]", ("GeluFusionL1", "GeluFusionL2")),
    Case("BiasGeluFusion", "BiasGelu", _bias_gelu, "[1,S,3072]"),
    Case("FastGeluFusion", "FastGelu", _fast_gelu, "[1,S,3072]"),
    Case("QuickGeluFusion", "QuickGelu", _quick_gelu, "[1,S,3072]"),
    Case("MatMulScaleFusion", "FusedMatMul", _matmul_scale, "[12,S,64]x[12,64,S]"),
    Case("MatmulTransposeFusion", "FusedMatMul", _matmul_transpose, "[12,S,64]x[12,S,64]ᵀ"),
    Case("MatMulAddFusion", "Gemm", _matmul_add, "[S,768]x[768,768]"),
    Case("GemmActivationFusion", "FusedGemm", _gemm_relu, "[S,768]x[768,3072]"),
    Case("BiasSoftmaxFusion", "BiasSoftmax", _bias_softmax, "[1,12,S,S]"),
    Case("ConvActivationFusion", "FusedConv", _conv_relu, "[1,64,56,56] 3x3"),
    Case("ConvBNFusion", "Conv", _conv_bn, "[1,64,56,56] 3x3"),
]


def _session(path: Path, threads: int, disabled: list[str], saved: Path) -> Any:
    import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints

    o = ort.SessionOptions()
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.log_severity_level = 3
    o.optimized_model_filepath = str(saved)
    return ort.InferenceSession(
        str(path), o, providers=["CPUExecutionProvider"], disabled_optimizers=disabled
    )


def _ops(path: Path) -> list[str]:
    return [n.op_type for n in onnx.load(str(path)).graph.node]


def measure(case: Case, seq: int, threads: int, rounds: int, work: Path) -> dict[str, Any]:
    """The fused and unfused sessions of `case`, timed in interleaved rounds."""
    model = case.build(seq)
    src = work / f"{case.fusion}.onnx"
    onnx.save(model, src)
    fused_path, plain_path = work / f"{case.fusion}.fused.onnx", work / f"{case.fusion}.plain.onnx"
    fused = _session(src, threads, [], fused_path)
    plain = _session(src, threads, list(case.disable or (case.fusion,)), plain_path)
    fused_ops, plain_ops = _ops(fused_path), _ops(plain_path)
    row: dict[str, Any] = {"fusion": case.fusion, "fused_op": case.fused_op, "shape": case.shape}
    row["fused_ops"], row["plain_ops"] = fused_ops, plain_ops
    row["applied"] = fused_ops != plain_ops and case.fused_op in fused_ops
    feeds = {
        i.name: RNG.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(
            np.float32
        )
        for i in model.graph.input
    }
    a, b = fused.run(None, feeds)[0], plain.run(None, feeds)[0]
    row["max_abs_diff"] = float(np.max(np.abs(a - b)))
    t = time.perf_counter()
    fused.run(None, feeds)
    n = max(3, min(200, round(0.05 / max(time.perf_counter() - t, 1e-7))))
    tf: list[float] = []
    tp: list[float] = []
    for r in range(rounds):
        order = [(fused, tf), (plain, tp)] if r % 2 == 0 else [(plain, tp), (fused, tf)]
        for sess, out in order:
            t = time.perf_counter()
            for _ in range(n):
                sess.run(None, feeds)
            out.append((time.perf_counter() - t) / n)
    ratios = sorted(p / f for f, p in zip(tf, tp, strict=True))
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    row.update(
        fused_us=1e6 * statistics.median(tf),
        plain_us=1e6 * statistics.median(tp),
        gain=statistics.median(ratios),
        noise=max((q3 - q1) / 2, 0.01),
        rounds=rounds,
        runs=n,
        threads=threads,
        seq=seq,
    )
    return row


def verdict(row: dict[str, Any]) -> str:
    if not row["applied"]:
        return "not applied"
    if row["gain"] > 1 + row["noise"]:
        return "pays"
    return "SLOWER" if row["gain"] < 1 - row["noise"] else "within noise"


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    keep = set(filter(None, a.only.split(",")))
    cases = [c for c in CASES if not keep or c.fusion in keep]
    if keep - {c.fusion for c in CASES}:
        print(f"unknown fusion(s): {sorted(keep - {c.fusion for c in CASES})}", file=sys.stderr)
        return 1
    print(f"ORT {ort.__version__} CPU, ORT_ENABLE_ALL, {a.threads} thread(s), S={a.seq}\n")
    print("| fusion | becomes | shape | not fused µs | fused µs | gain (noise) | verdict "
          "| max diff |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---|---:|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            r = measure(c, a.seq, a.threads, a.rounds, Path(tmp))
            rows.append(r)
            print(
                f"| {r['fusion']} | {r['fused_op']} | {r['shape']} | {r['plain_us']:.1f} | "
                f"{r['fused_us']:.1f} | {r['gain']:.2f}x (±{r['noise']:.0%}) | {verdict(r)} | "
                f"{r['max_abs_diff']:.1e} |",
                flush=True,
            )
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
