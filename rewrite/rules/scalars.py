"""New constants on a right side: `x * 2.0`, `var + eps` (a `Float` attribute variable).

A number on a right side that is not one of the left side's, or a `Float` attribute variable
used as a tensor, becomes a new scalar constant: the term

    ConstantOfShape(value=v, dtype=<dtype of the operand beside it>, input=[])

(shape (), the dtype of the other operand of the op it feeds, the value `v` rounded to that
dtype). Everything downstream already knows this op: its Z3 semantics are the numeral of the
rounded value (`ops.shape.z3_constant_of_shape`), the schema marks it `IsConst`/`IsScalar`
with its `scalar-value` (`egraph.schema`), decode writes it as an initializer, and the rule
samplers as an initializer of the side models.

The dtype comes from a left-side term (the compiled rule reads `(dtype t)` in its query): the
operand beside the constant when the left side has it, else the first tensor operand of that
operand, and so on down (`dtype_source`; elementwise ops keep their input's dtype; where they
do not, the prover refuses the rule). `expand_values` splits a compiled rule by the dtype
groups in which `v` rounds differently (`literals.value_variants`), so the e-graph holds the
value the constant has: float32(0.1) in a float32 model, float16(0.1) in a float16 one; a
value no integer holds gets no integer variant. A `Float` attribute's value is a float32
(ONNX stores float attributes as float32): exact in float32 and float64 models; in float16
and bfloat16 ones decode and the prover round it, while its `scalar-value` in the e-graph
stays the float32 value.
"""

from __future__ import annotations

from rewrite.errors import RuleError
from rewrite.rules.language import (
    Absent,
    App,
    AttrVar,
    Call,
    Const,
    Expr,
    Lit,
    Rewrite,
    Term,
    Var,
    show,
    subterms,
)

SCALAR_OP = "ConstantOfShape"


def scalar(value: float | AttrVar, source: Term) -> App:
    """The right-side term of a new scalar constant `value` of `source`'s dtype."""
    v: Expr = value if isinstance(value, AttrVar) else Lit(float(value), "float")
    dtype = Call("dtype", (source,), "dtype")
    return App(SCALAR_OP, (("value", v), ("dtype", dtype), ("input", Lit((), "ints"))), ())


def is_scalar_term(t: Term) -> bool:
    """Is `t` a term `scalar` built (a ConstantOfShape of the empty shape)?"""
    if not (isinstance(t, App) and t.op == SCALAR_OP and not t.domain and not t.inputs):
        return False
    shape = dict(t.attrs).get("input")
    return isinstance(shape, Lit) and tuple(shape.value) == ()


def dtype_source(beside: Term, left: set[Term]) -> Term:
    """A left-side term with the dtype of `beside` (a right-side operand next to a new
    constant): `beside` itself, else its first tensor operand's source (module doc)."""
    t = beside
    while t not in left:
        if not isinstance(t, App):
            raise RuleError(f"{show(beside)} next to a new constant is not bound by the left side")
        kids = [k for k in t.inputs if not isinstance(k, Const | Absent) and not is_scalar_term(k)]
        if not kids:
            raise RuleError(
                f"a new constant beside {show(beside)}: no tensor of the left side to take the "
                "dtype from"
            )
        t = kids[0]
    return t


def left_terms(rw: Rewrite) -> set[Term]:
    """The tensor terms of the left sides (variables and op applications)."""
    return {s for t in rw.lhs for s in subterms(t) if isinstance(s, Var | App)}


def new_constants(t: App, inputs: tuple[Term, ...], left: set[Term]) -> tuple[Term, ...]:
    """`inputs` (t's right-side inputs) with each remaining `Const` made a new scalar constant
    whose dtype is the first other tensor operand's."""
    if not any(isinstance(i, Const) for i in inputs):
        return inputs
    others = [i for i in inputs if not isinstance(i, Const | Absent)]
    if not others:
        raise RuleError(
            f"{show(t)} on the right side: a new constant needs a tensor operand beside it "
            "to take its dtype from"
        )
    source = dtype_source(others[0], left)
    return tuple(scalar(i.number, source) if isinstance(i, Const) else i for i in inputs)
