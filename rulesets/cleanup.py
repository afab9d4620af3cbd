"""cleanup: remove work that computes nothing.

Written exactly as a user's `--rules` file is. Each rule's docstring is its identity; its
conditions are code. Constant folding and common-subexpression elimination need no rules:
`rewrite.rules.fold` folds, and the e-graph shares equal computations by construction.
"""

from rewrite.rules import Int, Ints, Rewrite, RuleSet, Tensor, op, rewrite

CLEANUP = RuleSet("cleanup", doc="identity, no-op and cancelling ops removed")


@CLEANUP.rule
def identity_elim(x: Tensor) -> Rewrite:
    """Identity(x) = x"""
    return rewrite(op.Identity(x)).to(x)


@CLEANUP.rule
def dropout_inference(x: Tensor) -> Rewrite:
    """Dropout(x) = x   at inference (no training_mode, mask unused)"""
    return rewrite(op.Dropout(x)).to(x)


@CLEANUP.rule
def double_neg(x: Tensor) -> Rewrite:
    """Neg(Neg(x)) = x"""
    return rewrite(op.Neg(op.Neg(x))).to(x)


@CLEANUP.rule
def transpose_identity(x: Tensor, p: Ints) -> Rewrite:
    """Transpose(x, perm) = x   when perm = (0, 1, ..., r-1)"""
    return rewrite(op.Transpose(x, perm=p)).to(x, p.is_identity())


@CLEANUP.rule
def transpose_transpose(x: Tensor, p: Ints, q: Ints) -> Rewrite:
    """Transpose(Transpose(x, p), q) = Transpose(x, p∘q)   with (p∘q)[i] = p[q[i]]"""
    return rewrite(op.Transpose(op.Transpose(x, perm=p), perm=q)).to(
        op.Transpose(x, perm=p.compose(q))
    )


@CLEANUP.rule
def reshape_reshape(x: Tensor, s1: Ints, s2: Ints, z: Int) -> Rewrite:
    """Reshape(Reshape(x, s1), s2) = Reshape(x, s2)   when s2 has no 0 entry (no copied dim)"""
    return rewrite(op.Reshape(op.Reshape(x, shape=s1), shape=s2, allowzero=z)).to(
        op.Reshape(x, shape=s2, allowzero=z), s2.all_nonzero()
    )


@CLEANUP.rule
def reshape_noop(x: Tensor, s: Ints) -> Rewrite:
    """Reshape(x, s) = x   when shape(Reshape(x, s)) = shape(x)"""
    y = op.Reshape(x, shape=s)
    return rewrite(y).to(x, y.shape == x.shape)


@CLEANUP.rule
def expand_noop(x: Tensor, s: Ints) -> Rewrite:
    """Expand(x, s) = x   when shape(Expand(x, s)) = shape(x)"""
    y = op.Expand(x, shape=s)
    return rewrite(y).to(x, y.shape == x.shape)


@CLEANUP.rule
def cast_noop(x: Tensor, to: Int) -> Rewrite:
    """Cast(x, to) = x   when dtype(x) = to"""
    return rewrite(op.Cast(x, to=to)).to(x, x.dtype == to)


def _neutral(y: Tensor, x: Tensor) -> tuple[object, object]:
    """y computes x unchanged in shape and dtype (the constant operand does not broadcast x)."""
    return y.shape == x.shape, y.dtype == x.dtype


@CLEANUP.rule
def mul_one(x: Tensor, c: Tensor) -> list[Rewrite]:
    """x · 1 = 1 · x = x   when shape(x · 1) = shape(x) and dtype(x · 1) = dtype(x)"""
    return [rewrite(y).to(x, c.is_one(), *_neutral(y, x)) for y in (x * c, c * x)]


@CLEANUP.rule
def add_zero(x: Tensor, c: Tensor) -> list[Rewrite]:
    """x + 0 = 0 + x = x   when shape(x + 0) = shape(x) and dtype(x + 0) = dtype(x)"""
    return [rewrite(y).to(x, c.is_zero(), *_neutral(y, x)) for y in (x + c, c + x)]


@CLEANUP.rule
def sub_zero(x: Tensor, c: Tensor) -> Rewrite:
    """x - 0 = x   when shape(x - 0) = shape(x) and dtype(x - 0) = dtype(x)"""
    y = x - c
    return rewrite(y).to(x, c.is_zero(), *_neutral(y, x))


@CLEANUP.rule
def div_one(x: Tensor, c: Tensor) -> Rewrite:
    """x / 1 = x   when shape(x / 1) = shape(x) and dtype(x / 1) = dtype(x)"""
    y = x / c
    return rewrite(y).to(x, c.is_one(), *_neutral(y, x))
