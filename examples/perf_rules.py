"""Rules a performance engineer writes first: `rewrite optimize m.onnx out.onnx --rules
examples/perf_rules.py` (add `--allow-approximate` for the fusions). Each states its identity;
`rewrite verify examples/perf_rules.py` proves (or, tagged approximate, samples) every one;
`tests/test_perf_rules.py` fires each on a model where its pattern occurs and optimizes it.

Proved: MatMul + bias as Gemm, transposes sunk through Relu and Add, a transpose/reshape
round trip, the Q/K/V MatMuls merged with Slices (`merge_three_matmuls`) or with one Split
whose sizes are the weights' column counts (`merge_qkv_split`). Approximate (sampled in ORT
within the tolerance; the fused kernels round their own way): both GELU forms to
com.microsoft Gelu / FastGelu, decomposed LayerNorm to LayerNormalization (proved on the
bound, tagged approximate all the same: see its docstring) and RMSNorm to
SimplifiedLayerNormalization, each fused op's epsilon taken from the matched constant.

The scale moved into the weights, (x·c) @ W = x @ (W·c), holds only where W's elements are
finite and bounded (an x·c that underflows to 0 times an inf in W is NaN on one side only): a
per-element condition, `w.all(lambda e: ...)`, says so, and the rule fires on the constants
whose every element satisfies it (approximate: W·c is rounded once, at export).

Not here (`examples/refused_rules.py` holds them, each with the ORT run that shows why): the
attention scale moved to the smaller operand, (A @ B)·c = (A·c) @ B, overflows on one side only
whatever the guard (A and B are activations); and PyTorch's F.gelu order x·(1 + erf)·0.5
overflows where Gelu does not. ONNX's own Gelu (opset 20) is not a target: the models here are
opset 17. RMSNorm's fused op, SimplifiedLayerNormalization, is ORT's in the ONNX domain: the
output passes onnx.checker with ORT's schema (`rewrite/onnx_io/ort_ops.py`), the report notes
that only ORT runs it, and `--target portable` never writes it. Pad into Conv is
`rulesets/constants.py`'s; Conv + BatchNormalization is `examples/conv_bn_rules.py`'s.
"""

import math
from typing import Any

from rewrite.rules import Ints, Rewrite, RuleSet, Tensor, op, rewrite

PERF = RuleSet("perf", doc="fusions, merges and algebra of exported transformer/CNN graphs")


@PERF.rule
def matmul_bias_as_gemm(a: Tensor, w: Tensor, b: Tensor) -> list[Rewrite]:
    """A @ W + b = b + A @ W = Gemm(A, W, b)   for 2-D A and W, b broadcasting to the result"""
    mm = a @ w
    gemm = op.Gemm(a, w, b)
    out = []
    for lhs in (mm + b, b + mm):
        cond = (a.rank == 2, w.rank == 2, b.rank <= 2, lhs.shape == mm.shape)
        cond += (a.dtype == "float32",)  # ORT's Gemm kernels: float types only
        out.append(rewrite(lhs).to(gemm, *cond))
    return out


@PERF.rule
def transpose_after_relu(x: Tensor, p: Ints) -> Rewrite:
    """Relu(Transpose(x, p)) = Transpose(Relu(x), p)   (sinks a transpose through an
    elementwise op, toward another transpose it may cancel)"""
    return rewrite(op.Relu(op.Transpose(x, perm=p))).to(op.Transpose(op.Relu(x), perm=p))


@PERF.rule
def transpose_of_sum(a: Tensor, b: Tensor, p: Ints) -> Rewrite:
    """Transpose(a, p) + Transpose(b, p) = Transpose(a + b, p)   when a and b have one shape"""
    lhs = op.Transpose(a, perm=p) + op.Transpose(b, perm=p)
    return rewrite(lhs).to(op.Transpose(a + b, perm=p), a.shape == b.shape)


@PERF.rule
def merge_three_matmuls(x: Tensor, q: Tensor, k: Tensor, v: Tensor) -> Rewrite:
    """x @ Wq, x @ Wk, x @ Wv = slices of x @ [Wq | Wk | Wv]   (Q/K/V: one GEMM for three),
    when the weights are constant matrices of one dtype"""
    nq, nk, nv = q.dim(-1), k.dim(-1), v.dim(-1)
    both = x @ op.Concat(q, k, v, axis=1)

    def part(start: object, end: object) -> object:
        return op.Slice(both, starts=[start], ends=[end], axes=[-1], steps=[1])

    return rewrite(x @ q, x @ k, x @ v).to(
        part(0, nq),
        part(nq, nq + nk),
        part(nq + nk, nq + nk + nv),
        q.is_const(),
        k.is_const(),
        v.is_const(),
        q.rank == 2,
        k.rank == 2,
        v.rank == 2,
        q.dtype == k.dtype,
        k.dtype == v.dtype,
        q.precedes(k),
        k.precedes(v),
    )


@PERF.rule
def transpose_reshape_round_trip(x: Tensor, s: Ints, p: Ints) -> Rewrite:
    """Reshape(Transpose(Transpose(x, p), p'), s) = Reshape(x, s)   when p' undoes p"""
    back = op.Transpose(op.Transpose(x, perm=p), perm=[1, 0])
    return rewrite(op.Reshape(back, shape=s)).to(op.Reshape(x, shape=s), x.rank == 2, p == [1, 0])


@PERF.rule
def merge_qkv_split(x: Tensor, q: Tensor, k: Tensor, v: Tensor) -> list[Rewrite]:
    """x @ Wq, x @ Wk, x @ Wv = Split(x @ [Wq | Wk | Wv], last axis, sizes = the weights'
    column counts)   (Q/K/V: one GEMM and one Split for three GEMMs), when the weights are
    constant matrices of one dtype and x has rank 2 or 3 (Split's axis is written
    non-negative)"""
    both = x @ op.Concat(q, k, v, axis=1)
    sizes = [q.dim(-1), k.dim(-1), v.dim(-1)]
    cond: tuple[Any, ...] = (q.is_const(), k.is_const(), v.is_const())
    cond += (q.rank == 2, k.rank == 2, v.rank == 2)
    cond += (q.dtype == k.dtype, k.dtype == v.dtype, q.precedes(k), k.precedes(v))
    return [
        rewrite(x @ q, x @ k, x @ v).to(
            *op.Split(both, axis=r - 1, sizes=sizes), x.rank == r, *cond
        )
        for r in (2, 3)
    ]


@PERF.rule(tags=["approximate", "ort-cpu", "ort-cuda"])
def gelu_erf_fusion(x: Tensor) -> list[Rewrite]:
    """(x·0.5)·(1 + erf(x/√2)) = x·(1 + erf(x/√2))·0.5 = Gelu(x)   (com.microsoft; the HF BERT
    export scales x first, PyTorch's F.gelu export last; x/√2 written Div by float32(√2) or Mul
    by float32(1/√2), either Add order) for float32 x (the kernel ORT has); approximate: the
    kernel rounds 1/√2 and erf its own way, and where F.gelu's order overflows near the float
    maximum Gelu gives the exact value"""
    out = []
    for scaled in (x / math.sqrt(2.0), x * math.sqrt(0.5)):
        e = op.Erf(scaled)
        for one_plus in (e + 1.0, 1.0 + e):
            for lhs in ((x * 0.5) * one_plus, (x * one_plus) * 0.5):
                out.append(rewrite(lhs).to(op.ms.Gelu(x), x.dtype == "float32"))
    return out


@PERF.rule(tags=["approximate", "ort-cpu", "ort-cuda"])
def gelu_tanh_fusion(x: Tensor) -> Rewrite:
    """(x·0.5)·(1 + tanh((x + 0.044715·x³)·√(2/π))) = FastGelu(x)   (com.microsoft; GPT-2's
    export, x³ written Pow(x, 3)) for float32 x of rank >= 1 (ORT's FastGelu kernel refuses a
    scalar); approximate: the constants are rounded to float32 and FastGelu evaluates tanh its
    own way"""
    inner = (x + op.Pow(x, 3.0) * 0.044715) * math.sqrt(2.0 / math.pi)
    lhs = (x * 0.5) * (op.Tanh(inner) + 1.0)
    return rewrite(lhs).to(op.ms.FastGelu(x), x.dtype == "float32", x.rank >= 1)


@PERF.rule(tags=["approximate"])
def scalar_into_weights(x: Tensor, c: Tensor, w: Tensor) -> list[Rewrite]:
    """(x · c) @ W = x @ (W · c)   for a scalar constant c with 1e-3 <= |c| <= 1 and a constant
    2-D W whose elements are 0 or finite with 1e-20 <= |e| <= 1e20 (W·c is folded at export: one
    multiply of the activations fewer; approximate: rounding moves)"""
    bounded = w.all(lambda e: (e == 0) | (e.is_finite() & (abs(e) >= 1e-20) & (abs(e) <= 1e20)))
    cond = (c.is_scalar(), c.is_const(), c.rank == 0, w.is_const(), w.rank == 2, bounded)
    v = c.value()  # W·c neither overflows nor underflows: one rewrite per sign
    return [
        rewrite((x * c) @ w).to(x @ (w * c), *cond, small)
        for small in ((v >= 1e-3) & (v <= 1.0), (v <= -1e-3) & (v >= -1.0))
    ]


@PERF.rule(tags=["approximate"])
def attention_scale_to_query(q: Tensor, k: Tensor, c: Tensor) -> list[Rewrite]:
    """(Q @ K) · c = (Q · c) @ K   for float32 and a scalar constant 1e-3 <= |c| <= 1 (the
    attention scale moved to the smaller operand: Q is seq×d, the scores seq×seq);
    approximate: rounding moves, and where Q @ K overflows but the scaled scores do not, the
    right side gives the exact value"""
    v = c.value()
    cond = (c.is_scalar(), c.is_const(), c.rank == 0, q.rank >= 2, q.dtype == "float32")
    return [
        rewrite((q @ k) * c).to((q * c) @ k, *cond, small)
        for small in ((v >= 1e-3) & (v <= 1.0), (v <= -1e-3) & (v >= -1.0))
    ]


def _last_axis_norm(x: Tensor, eps: Tensor, *weights: Tensor) -> tuple[Any, ...]:
    """Guards of a fused last-axis normalization of x: eps a positive scalar constant of no
    higher rank than x, float32 x, each weight a vector as long as x's last axis (so nothing
    broadcasts x to a larger shape)."""
    cond: tuple[Any, ...] = (eps.is_const(), eps.is_scalar(), eps.value() > 0.0)
    cond += (eps.rank <= x.rank, x.dtype == "float32")
    for w in weights:
        cond += (w.rank == 1, w.dim(0) == x.dim(-1))
    return cond


@PERF.rule(tags=["approximate", "ort-cpu", "ort-cuda"])
def layer_norm_fusion(x: Tensor, eps: Tensor, s: Tensor, b: Tensor) -> list[Rewrite]:
    """(x - mean(x)) / √(mean((x - mean(x))²) + eps) · s + b
    = LayerNormalization(x, s, b, axis=-1, epsilon=eps)   (BERT's export; means over the last
    axis, the square written Pow(d, 2) or d·d). `rewrite verify` proves it on its bound,
    yet it stays tagged approximate: ORT's kernel accumulates in float64, so beyond the
    bound's dims it rounds its own way, and where (x - mean)² overflows float32 (|x - mean|
    above 1.8e19) the export gives b and the kernel a normalized value"""
    d = x - op.ReduceMean(x, axes=[-1], keepdims=1)
    rhs = op.LayerNormalization(x, s, b, axis=-1, epsilon=eps.value())
    out = []
    for sq in (op.Pow(d, 2.0), d * d):
        var = op.ReduceMean(sq, axes=[-1], keepdims=1)
        lhs = d / op.Sqrt(var + eps) * s + b
        out.append(rewrite(lhs).to(rhs, *_last_axis_norm(x, eps, s, b)))
    return out


@PERF.rule(tags=["approximate", "ort-cpu", "ort-cuda"])
def rms_norm_fusion(x: Tensor, eps: Tensor, w: Tensor) -> list[Rewrite]:
    """x / √(mean(x²) + eps) · w = SimplifiedLayerNormalization(x, w, axis=-1, epsilon=eps)
    (Llama's RMSNorm: x² written Pow(x, 2), the division x / r or x · (1 / r), the weight on
    either side; each form is sampled in ORT, so only these four); approximate: the kernel
    divides once and sums its own way"""
    rhs = op.SimplifiedLayerNormalization(x, w, axis=-1, epsilon=eps.value())
    r = op.Sqrt(op.ReduceMean(op.Pow(x, 2.0), axes=[-1], keepdims=1) + eps)
    out = []
    for n in (x / r, x * (1.0 / r)):
        for lhs in (n * w, w * n):
            out.append(rewrite(lhs).to(rhs, *_last_axis_norm(x, eps, w)))
    return out
