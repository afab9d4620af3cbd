"""merge: per-row MatMuls by one constant matrix batched into one MatMul over all rows.

Written exactly as a user's `--rules` file is. An RNN cell unrolled over time computes its
input projection x_t·W once per step: T small products reading the same W. MatMul by a 2-D W
maps every row of its left operand (a vector along the last axis) independently, so selecting
rows before the product equals selecting them after it, along any axis of x but the last:

    MatMul(Select(x), W) = Select(MatMul(x, W))

for Select a Gather, Slice, Squeeze or Split output that leaves x's last axis alone. Each step's
product becomes a row selection of one shared MatMul(x, W); the extractor (DAG cost: the shared
MatMul is paid once) keeps it only where it is cheaper than the T separate products. Each row's
dot product is the same sum of the same products on both sides; only the kernel that computes
it changes (one GEMM instead of T GEMVs), so the rules are `exact` (equal in real arithmetic,
within the float tolerance in IEEE); ORT 1.32's CPU MatMul (MLAS) computes every row in the same
order whatever the number of rows when W is an initializer (prepacked), which
`tests/rulesets/test_merge.py` checks bit for bit; with W a graph input, or in float16, a
one-row product takes another kernel and differs in the last bit (the sampler sees 1 ulp).

The Gather form (`x[:, t]` as exporters write it) is limited to float x of rank <= 3 and a
scalar index, where the proof takes seconds: each element is a sum of products under an
if-chain on the symbolic index, which Z3 decides once the if-terms are eliminated
(`verify.solve`); the identity itself holds for any rank and index tensor.
"""

from rewrite.rules import Int, Ints, Rewrite, RuleSet, Tensor, op, rewrite

MERGE = RuleSet("merge", doc="per-step MatMuls by a shared constant matrix batched into one")


def _not_last(a: object, x: Tensor) -> list[tuple]:
    """The two ways an axis `a` of x names an axis other than x's last one: 0 <= a < rank - 1,
    or -rank <= a <= -2 (a valid negative axis counts from the end)."""
    return [(a >= 0, a < x.rank - 1), (a <= -2,)]  # type: ignore[operator]


def _weight(w: Tensor) -> tuple:
    """W is a constant matrix: a product by it maps each row of its left operand alone."""
    return w.is_const(), w.rank == 2


@MERGE.rule
def matmul_of_slice(x: Tensor, w: Tensor, s: Ints, e: Ints, ax: Ints, st: Ints) -> list[Rewrite]:
    """MatMul(Slice(x, s, e, [a], st), W) = Slice(MatMul(x, W), s, e, [a], st)   when W is a
    constant matrix and the one sliced axis a is not x's last (0 <= a < rank(x) - 1, or
    a <= -2)"""
    lhs = op.MatMul(op.Slice(x, starts=s, ends=e, axes=ax, steps=st), w)
    rhs = op.Slice(op.MatMul(x, w), starts=s, ends=e, axes=ax, steps=st)
    one = ax.length() == 1
    return [rewrite(lhs).to(rhs, *_weight(w), one, *cond) for cond in _not_last(ax[0], x)]


@MERGE.rule
def matmul_of_squeeze(y: Tensor, w: Tensor, q: Ints) -> list[Rewrite]:
    """MatMul(Squeeze(y, [a]), W) = Squeeze(MatMul(y, W), [a])   when W is a constant matrix
    and the one squeezed axis a is not y's last (0 <= a < rank(y) - 1, or a <= -2): MatMul by a
    matrix keeps y's rank, so axis a names the same size-1 axis of the product"""
    lhs = op.MatMul(op.Squeeze(y, axes=q), w)
    rhs = op.Squeeze(op.MatMul(y, w), axes=q)
    one = q.length() == 1
    return [rewrite(lhs).to(rhs, *_weight(w), one, *cond) for cond in _not_last(q[0], y)]


@MERGE.rule
def matmul_of_split(x: Tensor, w: Tensor, a: Int, n: Ints, k: Int) -> Rewrite:
    """MatMul(SplitPart(x, axis=a, sizes=n, index=k), W) = SplitPart(MatMul(x, W), axis=a,
    sizes=n, index=k)   when W is a constant matrix and a < rank(x) - 1 (a Split's axis is
    non-negative once encoded): output k of Split(x) along an axis other than the last"""
    lhs = op.MatMul(op.SplitPart(x, axis=a, sizes=n, index=k), w)
    rhs = op.SplitPart(op.MatMul(x, w), axis=a, sizes=n, index=k)
    return rewrite(lhs).to(rhs, *_weight(w), a >= 0, a < x.rank - 1)


@MERGE.rule
def matmul_of_gather(x: Tensor, i: Tensor, w: Tensor, a: Int) -> list[Rewrite]:
    """MatMul(Gather(x, i, axis=a), W) = Gather(MatMul(x, W), i, axis=a)   when W is a constant
    matrix, a is not x's last axis (0 <= a < rank(x) - 1, or a <= -2), x is float of rank <= 3
    and i a scalar index (axis a dropped on both sides). The identity holds for any rank and
    any int tensor i; the limits keep the proof within the prover's time"""
    lhs = op.MatMul(op.Gather(x, i, axis=a), w)
    rhs = op.Gather(op.MatMul(x, w), i, axis=a)
    small = [x.is_float(), x.rank <= 3, i.rank == 0]
    return [rewrite(lhs).to(rhs, *_weight(w), *small, *cond) for cond in _not_last(a, x)]
