"""Guards and attribute expressions -> egglog query atoms, and the query being built (`Ctx`).

A guard becomes query atoms over the shape analysis (`shape`, `dtype`) and constant facts
(`IsOne`, `IsZero`, `IsConst`, `IsScalar`, `scalar-value`, `AllElems`); an expression (a
derived attribute value, an operand of a comparison) becomes an egglog expression computed in
the query. Operations that need a vector's length (compose, is_identity, all_nonzero) raise
`NeedsRankError` without a rank: `compile` then compiles the rule once per rank 1..MAX_RANK,
with a length guard on every `Ints` variable they use (`Ctx.ranked`).

Numbers follow the prover's arithmetic (Z3 and numpy compare an int with a float as reals): where
a comparison or an operation mixes an integer and a float expression, the integer side is a
float (`s.value() != 0` compiles as `!= 0.0`; a non-literal through `to-f64`), and a derived
value given to a float attribute is a float.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rewrite.errors import RuleError
from rewrite.rules import elements
from rewrite.rules.domain import Domain
from rewrite.rules.language import And, AttrVar, BinOp, Call, Cmp, Expr, Lit, Term, show

_RANKED = frozenset({"compose", "is_identity", "all_nonzero"})


class NeedsRankError(Exception):
    """Raised while compiling without a rank when an operation needs one."""


@dataclass
class Ctx:
    """One rank variant's query being built: its atoms, the variables bound to left-side terms
    and attribute variables, the `Ints` variables a rank-dependent operation used."""

    rank: int | None
    where: str
    domain: Domain | None = None
    atoms: list[str] = field(default_factory=list)
    steps: list[tuple[int, str]] = field(default_factory=list)
    """(number of atoms after this step, what the step checks), for `rules explain`."""
    terms: dict[Term, str] = field(default_factory=dict)
    nodes: list[tuple[int, str, str]] = field(default_factory=list)
    """(number of atoms once bound, variable, op) of every left-side op node, in binding order."""
    attrs: dict[str, str] = field(default_factory=dict)
    ranked: set[str] = field(default_factory=set)
    counter: int = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


def guard(g: Expr, ctx: Ctx) -> None:
    """Append the query atoms of condition `g`; an error names the condition's origin."""
    try:
        _condition(g, ctx)
    except RuleError as e:
        where = getattr(g, "origin", "")
        if where and where not in str(e):
            raise RuleError(f"{e} (the condition at {where})") from e
        raise


def _condition(g: Expr, ctx: Ctx) -> None:
    if isinstance(g, And):
        for p in g.parts:
            guard(p, ctx)
    elif isinstance(g, Cmp):
        op = {"==": "=", "!=": "!="}.get(g.op, g.op)
        ctx.atoms.append(f"({op} {_operands(g, ctx)})")
    elif isinstance(g, Call) and g.kind == "bool":
        ctx.atoms.append(_bool_call(g, ctx))
    else:
        raise RuleError(f"{ctx.where}: {show(g)} is not a condition")


_FACTS = {"is_one": "IsOne", "is_zero": "IsZero", "is_const": "IsConst", "is_scalar": "IsScalar"}


def _bool_call(c: Call, ctx: Ctx) -> str:
    if c.fn == "dtype_in":
        mask = sum(1 << int(d) for d in set(c.args[1]))
        return f"(!= 0 (& (<< 1 (dtype {term_ref(c.args[0], ctx)})) {mask}))"
    if c.fn == "approx":
        v, rtol, atol = (float(a) for a in c.args[1:])
        tol = lit(Lit(atol + rtol * abs(v)), "f64")
        d = f"(- (scalar-value {term_ref(c.args[0], ctx)}) {lit(Lit(v), 'f64')})"
        return f"(<= (abs {d}) {tol})"
    if c.fn == "all_elems":  # facts `elements.install_facts` asserts of constants
        return f'(AllElems "{elements.key(c.args[1])}" {term_ref(c.args[0], ctx)})'
    if c.fn == "precedes":
        return f"(< (ord {term_ref(c.args[0], ctx)}) (ord {term_ref(c.args[1], ctx)}))"
    if c.fn in _FACTS:
        return f"({_FACTS[c.fn]} {term_ref(c.args[0], ctx)})"
    if c.fn in _RANKED:
        return _ranked(c, ctx)
    raise RuleError(f"{ctx.where}: unknown condition {show(c)}")


def term_ref(t: Any, ctx: Ctx) -> str:
    """The query variable bound to left-side term `t`."""
    if not isinstance(t, Term) or t not in ctx.terms:
        raise RuleError(f"{ctx.where}: {show(t)} in a condition is not part of the left side")
    return ctx.terms[t]


def expr_kind(e: Any) -> str:
    """What an expression computes in egglog: "float", "int" (dtypes too), "ints" (shapes
    too) or "bool"."""
    if isinstance(e, BinOp):
        kinds = {expr_kind(e.left), expr_kind(e.right)}
        return "float" if "float" in kinds else expr_kind(e.left)
    kind = str(getattr(e, "kind", "int"))
    return {"dtype": "int", "shape": "ints"}.get(kind, kind)


def _operands(e: BinOp | Cmp, ctx: Ctx) -> str:
    """Both operands of `e`; ints as floats when the other side is a float."""
    left, right = expr_kind(e.left), expr_kind(e.right)
    mixed = {left, right} == {"int", "float"}
    if left != right and not mixed:
        raise RuleError(f"{ctx.where}: {show(e)} mixes a value of kind {left} and one of {right}")
    return f"{expr(e.left, ctx, as_float=mixed)} {expr(e.right, ctx, as_float=mixed)}"


def expr(e: Any, ctx: Ctx, *, as_float: bool = False) -> str:
    """`e` in egglog; with `as_float`, an integer expression is converted to f64."""
    if as_float and expr_kind(e) == "int":
        if isinstance(e, Lit):
            return lit(e, "f64")
        return f"(to-f64 {expr(e, ctx)})"
    if isinstance(e, AttrVar):
        if e.name not in ctx.attrs:
            raise RuleError(
                f"{ctx.where}: attribute variable {e.name} is not bound by the left side"
            )
        return ctx.attrs[e.name]
    if isinstance(e, Lit):
        return lit(e, {"ints": "VecI", "float": "f64"}.get(e.kind, "i64"))
    if isinstance(e, BinOp):
        return f"({e.op} {_operands(e, ctx)})"
    if isinstance(e, Call):
        if e.fn == "shape":
            return f"(shape {term_ref(e.args[0], ctx)})"
        if e.fn == "dtype":
            return f"(dtype {term_ref(e.args[0], ctx)})"
        if e.fn == "rank":
            return f"(vec-length (shape {term_ref(e.args[0], ctx)}))"
        if e.fn == "dim":
            s = f"(shape {term_ref(e.args[0], ctx)})"
            i = int(e.args[1])
            d = f"(vec-get {s} {i})" if i >= 0 else f"(vec-get {s} (+ (vec-length {s}) {i}))"
            return d
        if e.fn == "value":
            return f"(scalar-value {term_ref(e.args[0], ctx)})"
        if e.fn == "length":
            return f"(vec-length {expr(e.args[0], ctx)})"
        if e.fn == "vec":
            return "(vec-of " + " ".join(expr(a, ctx) for a in e.args) + ")"
        if e.fn == "index":
            return f"(vec-get {expr(e.args[0], ctx)} {int(e.args[1])})"
        if e.fn in _RANKED:
            return _ranked(e, ctx)
    raise RuleError(f"{ctx.where}: cannot compile {show(e)}")


def _ranked(c: Call, ctx: Ctx) -> str:
    if ctx.rank is None:
        raise NeedsRankError
    r = ctx.rank
    vecs = [expr(a, ctx) for a in c.args]
    for a in c.args:
        if isinstance(a, AttrVar):
            ctx.ranked.add(expr(a, ctx))
    if c.fn == "is_identity":
        return f"(= {vecs[0]} (vec-of {' '.join(map(str, range(r)))}))"
    if c.fn == "all_nonzero":
        return " ".join(f"(!= (vec-get {vecs[0]} {i}) 0)" for i in range(r))
    p, q = vecs
    return "(vec-of " + " ".join(f"(vec-get {p} (vec-get {q} {i}))" for i in range(r)) + ")"


def lit(v: Lit, sort: str) -> str:
    """Literal `v` as an egglog value of `sort` (`VecI`, `f64` always with a point, `String`,
    else an integer)."""
    val = v.value
    if sort == "VecI" or isinstance(val, tuple):
        items = " ".join(str(int(x)) for x in val)
        return f"(vec-of {items})" if items else "(vec-empty)"
    if sort == "f64":
        f = float(val)
        s = repr(f)
        return s if ("." in s or "e" in s or "inf" in s or "nan" in s) else f"{s}.0"
    if sort == "String":
        return '"' + str(val).replace('"', '\\"') + '"'
    return str(int(val))


__all__ = ["Ctx", "NeedsRankError", "expr", "expr_kind", "guard", "lit"]
