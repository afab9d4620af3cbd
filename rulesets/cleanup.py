"""cleanup: remove work that computes nothing.

Written exactly as a user's `--rules` file is: a `RuleSet`, and one decorated function per
rule whose docstring is the identity and whose body returns the egglog forms that apply it.
Pattern variables are lowercase; `(shape t)` / `(dtype t)` are the shape analysis;
`IsOne`/`IsZero` hold for constants whose every element is 1 / 0.
"""

from rewrite.rules import RuleSet

CLEANUP = RuleSet("cleanup", doc="identity, no-op and cancelling ops removed")
MAX_RANK = 6


@CLEANUP.rule
def identity_elim() -> str:
    """Identity(x) = x"""
    return "(rewrite (Identity x) x)"


@CLEANUP.rule
def dropout_inference() -> str:
    """Dropout(x) = x   at inference (no training_mode, mask unused)"""
    return "(rewrite (Dropout x) x)"


@CLEANUP.rule
def double_neg() -> str:
    """Neg(Neg(x)) = x"""
    return "(rewrite (Neg (Neg x)) x)"


@CLEANUP.rule
def transpose_identity() -> list[str]:
    """Transpose(x, perm) = x   when perm = (0, 1, ..., r-1)"""
    return [
        f"(rewrite (Transpose (vec-of {' '.join(map(str, range(r)))}) x) x)"
        for r in range(1, MAX_RANK + 1)
    ]


@CLEANUP.rule
def transpose_transpose() -> list[str]:
    """Transpose(Transpose(x, p), q) = Transpose(x, p∘q)   with (p∘q)[i] = p[q[i]]"""
    forms = []
    for r in range(1, MAX_RANK + 1):
        composed = " ".join(f"(vec-get p (vec-get q {i}))" for i in range(r))
        forms.append(
            f"(rule ((= e (Transpose q (Transpose p x))) (= (vec-length q) {r})) "
            f"((union e (Transpose (vec-of {composed}) x))))"
        )
    return forms


@CLEANUP.rule
def reshape_reshape() -> list[str]:
    """Reshape(Reshape(x, s1), s2) = Reshape(x, s2)   when s2 has no 0 entry (no copied dim)"""
    forms = []
    for r in range(0, MAX_RANK + 1):
        nonzero = " ".join(f"(!= (vec-get s2 {i}) 0)" for i in range(r))
        forms.append(
            f"(rule ((= e (Reshape z2 s2 (Reshape z1 s1 x))) (= (vec-length s2) {r}) {nonzero}) "
            f"((union e (Reshape z2 s2 x))))"
        )
    return forms


@CLEANUP.rule
def reshape_noop() -> str:
    """Reshape(x, s) = x   when shape(Reshape(x, s)) = shape(x)"""
    return "(rule ((= e (Reshape z s x)) (= (shape e) (shape x))) ((union e x)))"


@CLEANUP.rule
def expand_noop() -> str:
    """Expand(x, s) = x   when shape(Expand(x, s)) = shape(x)"""
    return "(rule ((= e (Expand s x)) (= (shape e) (shape x))) ((union e x)))"


@CLEANUP.rule
def cast_noop() -> str:
    """Cast(x, to) = x   when dtype(x) = to"""
    return "(rule ((= e (Cast to x)) (= (dtype x) to)) ((union e x)))"


@CLEANUP.rule
def mul_one() -> list[str]:
    """x · 1 = 1 · x = x   when shape(x · 1) = shape(x) and dtype(x · 1) = dtype(x)"""
    return [
        "(rule ((= e (Mul x c)) (IsOne c) (= (shape e) (shape x)) (= (dtype e) (dtype x))) "
        "((union e x)))",
        "(rule ((= e (Mul c x)) (IsOne c) (= (shape e) (shape x)) (= (dtype e) (dtype x))) "
        "((union e x)))",
    ]


@CLEANUP.rule
def add_zero() -> list[str]:
    """x + 0 = 0 + x = x   when shape(x + 0) = shape(x) and dtype(x + 0) = dtype(x)"""
    return [
        "(rule ((= e (Add x c)) (IsZero c) (= (shape e) (shape x)) (= (dtype e) (dtype x))) "
        "((union e x)))",
        "(rule ((= e (Add c x)) (IsZero c) (= (shape e) (shape x)) (= (dtype e) (dtype x))) "
        "((union e x)))",
    ]


@CLEANUP.rule
def sub_zero() -> str:
    """x - 0 = x   when shape(x - 0) = shape(x) and dtype(x - 0) = dtype(x)"""
    return (
        "(rule ((= e (Sub x c)) (IsZero c) (= (shape e) (shape x)) (= (dtype e) (dtype x))) "
        "((union e x)))"
    )


@CLEANUP.rule
def div_one() -> str:
    """x / 1 = x   when shape(x / 1) = shape(x) and dtype(x / 1) = dtype(x)"""
    return (
        "(rule ((= e (Div x c)) (IsOne c) (= (shape e) (shape x)) (= (dtype e) (dtype x))) "
        "((union e x)))"
    )
