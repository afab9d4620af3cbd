"""Literals in rules: constants in patterns and values compared in the constant's dtype.

`rewrite(x * 0.5).to(...)`: each number on a left side (a `Const`) becomes a fresh variable
`_k<i>` with the conditions `_k<i>.is_scalar()`, `_k<i>.rank <= 1` (shape () or (1,): what
exports write; the prover covers exactly those, `is_literal`), `_k<i>.value() == 0.5` and, for
each other
input of the op it feeds, `_k<i>.rank <= other.rank` (a one-element constant never broadcasts
the other operand up: `x * 0.5` has x's shape); a number on a
right side that is one of the left side's is the same variable, any other is a new scalar
constant of the dtype of the operand beside it (`rules.scalars`). `c.value() == v` holds
where the constant equals `v` rounded to the constant's own dtype (`in_dtype`):
0.7071067811865476 matches a float32 model's float32(1/√2), 0.1 matches float16(0.1) in a
float16 model. The compiled rule gets one variant per group of dtypes whose roundings of
`v` agree (`value_variants`).
"""

from __future__ import annotations

import math
import struct
from dataclasses import replace
from typing import Any

import numpy as np

from rewrite.errors import RuleError
from rewrite.rules.language import (
    Absent,
    And,
    App,
    AttrVar,
    BinOp,
    Call,
    Cmp,
    Const,
    Expr,
    Lit,
    Rewrite,
    Term,
    Var,
    subterms,
)
from rewrite.rules.scalars import is_scalar_term, left_terms, new_constants

DOUBLE, FLOAT, FLOAT16, BFLOAT16 = 11, 1, 10, 16
LITERAL_PREFIX = "_k"
LITERAL_SHAPES: tuple[tuple[int, ...], ...] = ((), (1,))
"""The shapes a literal's variable takes (its `rank <= 1` condition keeps the rule there)."""


def is_literal(name: str) -> bool:
    """Is `name` the variable `desugar` made for a number in a pattern?"""
    return name.startswith(LITERAL_PREFIX) and name[len(LITERAL_PREFIX) :].isdigit()


INTS = (2, 3, 4, 5, 6, 7, 12, 13)


def desugar(rw: Rewrite) -> Rewrite:
    """`rw` with its literals replaced by variables and their conditions (module docstring)."""
    names: dict[float, Var] = {}
    guards: list[Expr] = []
    moved: dict[int, Term] = {}  # id of a left-side term holding a literal -> its new form

    count = [0]

    def left(t: Term) -> Term:
        new = _left(t)
        if new is not t:
            moved[id(t)] = new
        return new

    def _left(t: Term) -> Term:
        if isinstance(t, Const):
            if isinstance(t.number, AttrVar):
                raise RuleError(
                    f"the Float attribute {t.number.name} is used as a tensor on the left side "
                    "(only a right side can make it a constant; compare c.value() == ... instead)"
                )
            var = Var(f"{LITERAL_PREFIX}{count[0]}")
            count[0] += 1
            names.setdefault(t.number, var)
            guards.append(Call("is_scalar", (var,), "bool"))
            guards.append(Cmp("<=", _rank(var), Lit(1, "int")))
            guards.append(Cmp("==", Call("value", (var,), "float"), Lit(t.number, "float")))
            return var
        if isinstance(t, App):
            inputs = tuple(left(i) for i in t.inputs)
            for i, (was, now) in enumerate(zip(t.inputs, inputs, strict=True)):
                if isinstance(was, Const):
                    for j, other in enumerate(inputs):
                        if j != i and not isinstance(t.inputs[j], Const | Absent):
                            guards.append(Cmp("<=", _rank(now), _rank(other)))
            return App(t.op, t.attrs, inputs, t.domain)
        return t

    def right(t: Term) -> Term:
        if isinstance(t, Const):
            if not isinstance(t.number, AttrVar) and t.number in names:
                return names[t.number]
            return t  # a new constant: its op gives it a dtype (`scalars.new_constants`)
        if isinstance(t, App):
            inputs = new_constants(t, tuple(right(i) for i in t.inputs), left_set)
            return App(t.op, t.attrs, inputs, t.domain)
        return t

    lhs = tuple(left(t) for t in rw.lhs)
    if not guards and not any(_has_const(t) for t in rw.rhs):
        return rw
    left_set = left_terms(Rewrite(lhs))
    rhs = tuple(right(t) for t in rw.rhs)
    if any(isinstance(t, Const) for t in rhs):
        raise RuleError("a right side that is only a new constant has no dtype to take")
    own = tuple(_retarget(g, moved) for g in rw.guards)  # `lhs.shape == x.shape` still names lhs
    return Rewrite(lhs, rhs, (*guards, *own))


def _retarget(e: Any, moved: dict[int, Term]) -> Any:
    """`e` with every left-side term `desugar` rebuilt replaced by its new form."""
    if isinstance(e, Term):
        return moved.get(id(e), e)
    if isinstance(e, tuple):
        return tuple(_retarget(x, moved) for x in e)
    if isinstance(e, Call):
        return replace(e, args=_retarget(e.args, moved))
    if isinstance(e, Cmp | BinOp):
        return replace(e, left=_retarget(e.left, moved), right=_retarget(e.right, moved))
    if isinstance(e, And):
        return replace(e, parts=_retarget(e.parts, moved))
    return e


def _rank(t: Term) -> Call:
    return Call("rank", (t,), "int")


def _has_const(t: Term) -> bool:
    return isinstance(t, Const) or (isinstance(t, App) and any(map(_has_const, t.inputs)))


def in_dtype(v: float, dtype: int) -> float | None:
    """`v` as a constant of ONNX `dtype` holds it (None: no value of that dtype equals it, as
    when a finite `v` overflows the dtype)."""
    with np.errstate(over="ignore"):
        held = _rounded(v, dtype)
    if held is not None and math.isfinite(v) and not math.isfinite(held):
        return None
    return held


def _rounded(v: float, dtype: int) -> float | None:
    if dtype == DOUBLE:
        return float(v)
    if dtype == FLOAT:
        return float(np.float32(v))
    if dtype == FLOAT16:
        return float(np.float16(v))
    if dtype == BFLOAT16:
        bits = struct.unpack("<I", struct.pack("<f", np.float32(v)))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # round to nearest even
        return float(struct.unpack("<f", struct.pack("<I", bits))[0])
    if dtype == 9:  # bool holds 0 and 1 only
        return float(v) if float(v) in (0.0, 1.0) else None
    if dtype in INTS:  # integers hold integral values only
        return float(v) if float(v).is_integer() else None
    return float(v)


def value_literal(g: Expr) -> tuple[Call, float] | None:
    """(the `value()` call, v) when `g` is `c.value() == v` with a float literal v."""
    if not isinstance(g, Cmp) or g.op != "==":
        return None
    for a, b in ((g.left, g.right), (g.right, g.left)):
        number = isinstance(b, Lit) and type(b.value) in (int, float)
        if isinstance(a, Call) and a.fn == "value" and number:
            return a, float(b.value)  # type: ignore[union-attr]
    return None


def value_variants(v: float) -> list[tuple[tuple[int, ...] | None, float]]:
    """(dtypes, value) groups: a constant of those dtypes equals `v` when it holds `value`;
    one group (dtypes None: any) when every float rounding of `v` is `v` itself."""
    groups: dict[float, list[int]] = {}
    for d in (DOUBLE, FLOAT, FLOAT16, BFLOAT16, *INTS, 9):
        r = in_dtype(v, d)
        if r is not None:
            groups.setdefault(r, []).append(d)
    if list(groups) == [float(v)]:
        return [(None, float(v))]
    return [(tuple(ds), r) for r, ds in groups.items()]


def expand(rw: Rewrite) -> list[Rewrite]:
    """`rw` once per combination of dtype groups of its `value() == v` conditions, each
    condition replaced by `dtype_in(c, group) and value() == rounded`."""
    out = [rw]
    for i, g in enumerate(rw.guards):
        found = value_literal(g)
        if found is None:
            continue
        call, v = found
        variants = value_variants(v)
        if variants == [(None, v)]:
            continue
        nxt = []
        for r in out:
            for dtypes, rounded in variants:
                part = And(
                    (
                        Call("dtype_in", (call.args[0], dtypes), "bool"),
                        Cmp("==", call, Lit(rounded, "float")),
                    )
                )
                guards = (*r.guards[:i], part, *r.guards[i + 1 :])
                nxt.append(Rewrite(r.lhs, r.rhs, guards))
        out = nxt
    return [x for r in out for x in expand_values(r)]


def expand_values(rw: Rewrite) -> list[Rewrite]:
    """`rw` once per combination of dtype groups of its right side's new constants
    (`scalars`): each variant guards the constant's dtype source with `dtype_in(t, group)` and
    holds the value rounded to that group, as the constant will hold it."""
    found = [
        s
        for t in rw.rhs
        for s in subterms(t)
        if isinstance(s, App) and is_scalar_term(s) and isinstance(_value(s), Lit)
    ]
    out = [rw]
    for app in dict.fromkeys(found):
        variants = value_variants(float(_value(app).value))
        source = dict(app.attrs)["dtype"].args[0]
        nxt = []
        for r in out:
            for dtypes, rounded in variants:
                held = Lit(rounded, "float")
                attrs = tuple((n, held if n == "value" else v) for n, v in app.attrs)
                new = App(app.op, attrs, app.inputs, app.domain)
                guards = r.guards
                if dtypes is not None:
                    guards = (*guards, Call("dtype_in", (source, dtypes), "bool"))
                rhs = tuple(_replace(t, app, new) for t in r.rhs)
                nxt.append(Rewrite(r.lhs, rhs, guards))
        out = nxt
    return out


def _value(app: App) -> Any:
    return dict(app.attrs)["value"]


def _replace(t: Term, old: App, new: App) -> Term:
    """`t` with every occurrence of `old` replaced by `new`."""
    if t == old:
        return new
    if isinstance(t, App):
        return App(t.op, t.attrs, tuple(_replace(i, old, new) for i in t.inputs), t.domain)
    return t
