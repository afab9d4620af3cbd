"""A user's rule file: `rewrite optimize model.onnx out.onnx --rules examples/custom_rules.py`.

Three rules a model owner might add on top of the built-ins:
- SiLU / Swish written out as x·sigmoid(x) becomes ORT's fused QuickGelu (alpha = 1);
- a reshape round trip that comes back to the input's shape disappears;
- two MatMuls that share their input and multiply it by constant weights become one MatMul by
  the concatenated weights, sliced back into the two results (one GEMM instead of two).
"""

from rewrite.rules import Ints, Rewrite, RuleSet, Tensor, op, rewrite

MY_RULES = RuleSet("my_rules", doc="fusions and clean-ups for our exported models")


@MY_RULES.rule(tags=["exact", "ort-cpu", "ort-cuda"])
def silu_to_quickgelu(x: Tensor) -> list[Rewrite]:
    """x · sigmoid(x) = sigmoid(x) · x = QuickGelu(x, alpha=1)   (com.microsoft)"""
    fused = op.ms.QuickGelu(x, alpha=1.0)
    return [rewrite(x * op.Sigmoid(x)).to(fused), rewrite(op.Sigmoid(x) * x).to(fused)]


@MY_RULES.rule
def reshape_round_trip(x: Tensor, s1: Ints, s2: Ints) -> Rewrite:
    """Reshape(Reshape(x, s1), s2) = x   when the result has x's shape"""
    y = op.Reshape(op.Reshape(x, shape=s1), shape=s2)
    return rewrite(y).to(x, y.shape == x.shape)


@MY_RULES.rule
def merge_shared_matmuls(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """A @ B, A @ C = (A @ [B | C])[..., :n], (A @ [B | C])[..., n:]   with n = cols(B),
    when B and C are constant matrices of one dtype"""
    n, m = b.dim(-1), c.dim(-1)
    both = a @ op.Concat(b, c, axis=1)
    first = op.Slice(both, starts=[0], ends=[n], axes=[-1], steps=[1])
    second = op.Slice(both, starts=[n], ends=[n + m], axes=[-1], steps=[1])
    return rewrite(a @ b, a @ c).to(
        first,
        second,
        b.is_const(),
        c.is_const(),
        b.rank == 2,
        c.rank == 2,
        b.dtype == c.dtype,
        b.precedes(c),
    )
