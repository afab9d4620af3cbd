"""Rules a performance engineer writes first: `rewrite optimize m.onnx out.onnx --rules
examples/perf_rules.py`. Each states its identity; `rewrite verify examples/perf_rules.py`
proves (or, tagged approximate, samples) every one; `tests/test_perf_rules.py` fires each on a
model where its pattern occurs.

`examples/refused_rules.py` holds four more that the verifier refuses, each with the ORT run
that shows why. Not here yet (the rule language cannot say them): Conv + BatchNormalization
folding (the right side needs a new constant, epsilon as a tensor), decomposed LayerNorm /
RMSNorm into the fused ops (ReduceMean is typed, but the fused op's epsilon attribute would
come from a matched constant's value, and SimplifiedLayerNormalization has no typed form
yet), Q/K/V merged with a Split (no multi-output ops in rules: the merge below slices
instead), Pad folded into Conv's pads.
"""

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
