"""Deliberately wrong rules: each must be refused by the prover with a counterexample.

Written as a user's rule file (`rewrite verify tests/verify/wrong_rules.py` refuses them all).
Each docstring states the claimed identity and why it is false.
"""

from rewrite.rules import Float, Int, Ints, Rewrite, RuleSet, Tensor, op, rewrite

WRONG = RuleSet("wrong", doc="unsound rules the prover must refuse")


@WRONG.rule
def softmax_axis_off_by_one(x: Tensor, a: Int) -> Rewrite:
    """Softmax(x, axis=a) = Softmax(x, axis=-1) when a = rank - 2   (off by one axis)"""
    return rewrite(op.Softmax(x, axis=a)).to(op.Softmax(x, axis=-1), a == x.rank - 2)


@WRONG.rule
def softmax_axis_change(x: Tensor) -> Rewrite:
    """Softmax(x, axis=0) = Softmax(x, axis=-1)   (false unless rank 1)"""
    return rewrite(op.Softmax(x, axis=0)).to(op.Softmax(x, axis=-1))


@WRONG.rule
def transpose_compose_wrong_order(x: Tensor, p: Ints, q: Ints) -> Rewrite:
    """Transpose(Transpose(x, p), q) = Transpose(x, q∘p)   (the right order is p∘q)"""
    return rewrite(op.Transpose(op.Transpose(x, perm=p), perm=q)).to(
        op.Transpose(x, perm=q.compose(p))
    )


@WRONG.rule
def transpose_swap_is_identity(x: Tensor) -> Rewrite:
    """Transpose(x, perm=[1, 0]) = x   (only when x is symmetric)"""
    return rewrite(op.Transpose(x, perm=[1, 0])).to(x)


@WRONG.rule
def mul_one_broadcast_dropped(x: Tensor, c: Tensor) -> Rewrite:
    """x · 1 = x   without the shape guard: a ones tensor that broadcasts x changes its shape"""
    return rewrite(x * c).to(x, c.is_one())


@WRONG.rule
def add_zero_broadcast_dropped(x: Tensor, c: Tensor) -> Rewrite:
    """x + 0 = x   without the shape guard"""
    return rewrite(x + c).to(x, c.is_zero())


@WRONG.rule
def add_const_not_zero(x: Tensor, c: Tensor) -> Rewrite:
    """x + c = x   for a constant c that is not all zeros"""
    y = x + c
    return rewrite(y).to(x, c.is_const(), y.shape == x.shape)


@WRONG.rule(tags=["exact"])
def gelu_tanh_declared_exact(x: Tensor) -> Rewrite:
    """Gelu(x) = FastGelu(x)   (the tanh approximation is not exact: |error| up to ~5e-4)"""
    return rewrite(op.ms.Gelu(x)).to(op.ms.FastGelu(x))


@WRONG.rule
def mul_div_cancel(x: Tensor, y: Tensor) -> Rewrite:
    """(x · y) / y = x   (y can be zero)"""
    return rewrite((x * y) / y).to(x, x.shape == y.shape)


@WRONG.rule
def cast_removed(x: Tensor, to: Int) -> Rewrite:
    """Cast(x, to) = x   (the dtype changes)"""
    return rewrite(op.Cast(x, to=to)).to(x)


@WRONG.rule
def reshape_reshape_copied_dim(x: Tensor, s1: Ints, s2: Ints) -> Rewrite:
    """Reshape(Reshape(x, s1), s2) = Reshape(x, s2)   (a 0 in s2 copies a dim of the middle
    tensor, not of x)"""
    return rewrite(op.Reshape(op.Reshape(x, shape=s1), shape=s2)).to(op.Reshape(x, shape=s2))


@WRONG.rule
def neg_is_identity(x: Tensor) -> Rewrite:
    """Neg(x) = x"""
    return rewrite(-x).to(x)


@WRONG.rule
def matmul_commutes(a: Tensor, b: Tensor) -> Rewrite:
    """A @ B = B @ A"""
    return rewrite(a @ b).to(b @ a)


@WRONG.rule
def sub_commutes(x: Tensor, y: Tensor) -> Rewrite:
    """x - y = y - x"""
    return rewrite(x - y).to(y - x)


@WRONG.rule
def div_commutes(x: Tensor, y: Tensor) -> Rewrite:
    """x / y = y / x"""
    return rewrite(x / y).to(y / x)


@WRONG.rule
def relu_neg_commute(x: Tensor) -> Rewrite:
    """Relu(-x) = -Relu(x)"""
    return rewrite(op.Relu(-x)).to(-op.Relu(x))


@WRONG.rule
def quick_gelu_default_alpha(x: Tensor) -> Rewrite:
    """x · Sigmoid(x) = QuickGelu(x)   (QuickGelu's default alpha is 1.702, SiLU needs 1.0)"""
    return rewrite(x * op.Sigmoid(x)).to(op.ms.QuickGelu(x))


@WRONG.rule
def sqrt_of_square(x: Tensor) -> Rewrite:
    """Sqrt(x · x) = x   (|x|, not x)"""
    return rewrite(op.Sqrt(x * x)).to(x)


@WRONG.rule
def div_mul_int_truncates(x: Tensor, c: Tensor) -> Rewrite:
    """(x / c) · c = x for c = 2   (true in the reals, false for integers: 3 / 2 · 2 = 2)"""
    y = (x / c) * c
    return rewrite(y).to(x, c.is_scalar(), c.value() == 2.0, y.shape == x.shape)


@WRONG.rule
def expand_removed(x: Tensor, s: Ints) -> Rewrite:
    """Expand(x, s) = x   (Expand can grow x)"""
    return rewrite(op.Expand(x, shape=s)).to(x)


@WRONG.rule
def fused_matmul_alpha_dropped(a: Tensor, b: Tensor, alpha: Float) -> Rewrite:
    """FusedMatMul(A, B, alpha) = A @ B   (drops the scale)"""
    return rewrite(op.ms.FusedMatMul(a, b, alpha=alpha, transA=0, transB=0)).to(a @ b)


@WRONG.rule
def matmul_assoc_without_rank_guard(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """(A @ B) @ C = A @ (B @ C)   (not for 1-D operands: numpy's vector promotion is not
    associative, e.g. A (1,), B (2, 1, 3), C (3,))"""
    return rewrite((a @ b) @ c).to(a @ (b @ c))


@WRONG.rule
def concat_wrong_in_one_element(x: Tensor, y: Tensor, z: Tensor, w: Tensor) -> Rewrite:
    """Concat(x·(y + z), -w) = Concat(x·y + x·z, w) for a one-element w   (every element but
    the last holds, by distributivity, which only the solver sees; the last is -w vs w)"""
    return rewrite(op.Concat(x * (y + z), -w, axis=0)).to(
        op.Concat(x * y + x * z, w, axis=0),
        x.rank == 1,
        y.shape == x.shape,
        z.shape == x.shape,
        w.shape == [1],
    )
