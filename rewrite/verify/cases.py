"""The cases of a rule: shapes, dtypes and attribute values within a bound.

A `Case` instantiates one rewrite of a rule: a static type (shape, dtype) for every tensor
variable, a value for every attribute variable and for every attribute the left side leaves
open, the types of every left-side term (from the ops' own `infer`), the right side's types
(or why it is not defined), and what the guards say at the type level. Guards on shapes,
dtypes and attributes decide which cases exist; `is_one` / `is_zero` on a variable fix its
value; guards on values (`c.value() == 2.0`, `is_one` of an op result) are left in
`value_guards` for the backend (Z3 assumptions, or a filter on random samples). Left-side
bindings that the ops reject (`ShapeError` from `infer`) are not cases: no valid graph
contains them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from rewrite.errors import RuleError, ShapeError
from rewrite.ops.base import TensorType
from rewrite.rules.elements import Cond
from rewrite.rules.language import (
    Absent,
    And,
    App,
    AttrVar,
    BinOp,
    Call,
    Cmp,
    Expr,
    Lit,
    Rewrite,
    Term,
    Var,
    show,
    subterms,
)
from rewrite.rules.literals import LITERAL_SHAPES, is_literal
from rewrite.rules.rule import Rule
from rewrite.verify.bound import Bound, domain, fixed_dtypes, touches_dtype
from rewrite.verify.evaluate import NeedsValuesError, TypeLevel, infer, params, spec_of


@dataclass
class Case:
    """One instantiation of one rewrite (see the module docstring)."""

    rewrite: Rewrite
    index: int
    tensors: dict[str, TensorType]
    attrs: dict[str, Any]
    open: dict[tuple[Term, str], Any]
    types: dict[Term, TensorType]
    rhs_types: dict[Term, TensorType] = field(default_factory=dict)
    rhs_error: str | None = None
    facts: dict[str, int] = field(default_factory=dict)
    """Variable -> the value every element has (is_one: 1, is_zero: 0)."""
    value_guards: list[Expr] = field(default_factory=list)

    def element_conds(self) -> dict[str, list[Cond]]:
        """Variable -> the per-element conditions (`w.all(...)`) its value guards state."""
        out: dict[str, list[Cond]] = {}
        for g in self.value_guards:
            if isinstance(g, Call) and g.fn == "all_elems" and isinstance(g.args[0], Var):
                out.setdefault(g.args[0].name, []).append(g.args[1])
        return out

    def describe(self) -> dict[str, Any]:
        """Shapes, dtypes and attribute values, JSON-ready."""
        from rewrite.verify.bound import dtype_name

        out: dict[str, Any] = {
            "shapes": {v: list(t.shape or ()) for v, t in self.tensors.items()},
            "dtypes": {v: dtype_name(t.dtype) for v, t in self.tensors.items()},
        }
        attrs = {k: _jsonable(v) for k, v in self.attrs.items()}
        for (term, name), v in self.open.items():
            attrs[f"{show(term).split('(')[0]}.{name}"] = _jsonable(v)
        if attrs:
            out["attributes"] = attrs
        return out


def _jsonable(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def constants(rule: Rule) -> list[tuple[int, bool]]:
    """The integer constants of `rule` (attribute literals on either side, guard literals),
    each with whether it is a modulus (`x % c`)."""
    out: list[tuple[int, bool]] = []

    def walk(e: Any, modulus: bool = False) -> None:
        if isinstance(e, Lit):
            if e.kind == "int" and isinstance(e.value, int):
                out.append((e.value, modulus))
            elif e.kind == "ints":
                out.extend((int(v), False) for v in e.value)
        elif isinstance(e, App):
            for name, v in e.attrs:
                walk(v)
                if e.op == "SplitPart" and name == "sizes" and isinstance(v, Lit):
                    out.append((sum(int(x) for x in v.value), False))  # the dim it splits
            for i in e.inputs:
                walk(i)
        elif isinstance(e, BinOp):
            walk(e.left)
            walk(e.right, e.op == "%")
        elif isinstance(e, Cmp):
            walk(e.left)
            walk(e.right)
        elif isinstance(e, And):
            for part in e.parts:
                walk(part)
        elif isinstance(e, Call):
            for a in e.args:
                walk(a)

    for rw in rule.rewrites:
        for e in (*rw.lhs, *rw.rhs, *rw.guards):
            walk(e)
    return out


Fallback = Callable[[str, int], tuple[tuple[int, ...], ...]]
"""(variable, rank) -> shapes of that rank it takes where its pool has none (`cases`)."""


def cases(
    rule: Rule,
    bound: Bound,
    attempts: int | None = None,
    only: int | None = None,
    fallback: Fallback | None = None,
) -> Iterator[Case]:
    """Every case of every rewrite of `rule` within `bound` (with dims around the rule's
    integer constants, `Bound.around`) that the left side matches. `attempts`: at most that
    many typings of an op's inputs and attributes are tried in all (None: all), in the order
    of the full enumeration; a rule with many variables and open attributes (Conv's kernel,
    strides, dilations, pads, group, then BatchNormalization's four vectors) has millions,
    most ill-typed. `only`: the index of the one rewrite to enumerate. `fallback`: the shapes a
    variable whose rank a guard fixes (`x.rank == r`) takes where the bound's pool has none of
    that rank (a random subset of shapes, for a rule with many variables)."""
    bound = bound.around(constants(rule))
    tries = [attempts if attempts is not None else -1]
    for k, rw in enumerate(rule.rewrites):
        if only is not None and k != only:
            continue
        tvars: list[str] = []
        for t in rw.lhs:
            for s in subterms(t):
                if isinstance(s, Var) and s.name not in tvars:
                    tvars.append(s.name)
        fixed = fixed_dtypes(rw)
        if touches_dtype(rw):
            options = [fixed.get(v, bound.cast_dtypes) for v in tvars]
            dtype_sets = list(product(*options))
        else:
            dtype_sets = [
                combo
                for d in bound.dtypes
                for combo in product(*[fixed.get(v, (d,)) for v in tvars])
            ]
        for dtypes in dtype_sets:
            free = [d for v, d in zip(tvars, dtypes, strict=True) if v not in fixed]
            pool = bound.shapes if all(d == bound.dtypes[0] for d in free) else bound.few
            ranks = _fixed_ranks(rw)
            pools = {v: LITERAL_SHAPES if is_literal(v) else pool for v in tvars}
            for v, r in ranks.items():
                if v in pools:
                    pools[v] = tuple(s for s in pools[v] if len(s) == r)
                    if not pools[v] and fallback is not None and not is_literal(v):
                        pools[v] = fallback(v, r)
            shapes = _Shapes(tvars, dict(zip(tvars, dtypes, strict=True)), pools, tries=tries)
            yield from _bind_rewrite(rw, k, shapes, bound)


def _fixed_ranks(rw: Rewrite) -> dict[str, int]:
    """Variables whose rank a guard `x.rank == r` fixes (their other shapes fail the guard)."""
    out: dict[str, int] = {}
    for g in rw.guards:
        for part in g.parts if isinstance(g, And) else (g,):
            if not (isinstance(part, Cmp) and part.op == "=="):
                continue
            for a, b in ((part.left, part.right), (part.right, part.left)):
                if (
                    isinstance(a, Call)
                    and a.fn == "rank"
                    and isinstance(a.args[0], Var)
                    and isinstance(b, Lit)
                    and isinstance(b.value, int)
                ):
                    name = a.args[0].name
                    out[name] = b.value if out.get(name, b.value) == b.value else -1
    return out


@dataclass(frozen=True)
class _Shapes:
    """The tensor variables of a rewrite (in order), their dtypes and shape pools: every
    variable takes every shape of its pool, independently."""

    names: list[str]
    dtypes: dict[str, int]
    pools: dict[str, tuple[tuple[int, ...], ...]]
    domains: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    """(op domain, op, attribute, input types) -> the attribute's values (`bound.domain`)."""
    tries: list[int] = field(default_factory=lambda: [-1])
    """Typings left to try (`cases`' attempts, shared by its rewrites; negative: no limit)."""

    def assign(
        self, needed: set[str], types: dict[Term, TensorType]
    ) -> Iterator[dict[Term, TensorType]]:
        """`types` extended with every shape combination of the unassigned variables up to the
        last one in `needed` (in variable order, so that cases come in the order of a product
        over all variables with an op's bindings pruned as soon as its inputs are known)."""
        last = max((self.names.index(v) for v in needed), default=-1)
        todo = [v for v in self.names[: last + 1] if Var(v) not in types]
        for combo in product(*(self.pools[v] for v in todo)):
            t2 = dict(types)
            for v, shape in zip(todo, combo, strict=True):
                t2[Var(v)] = TensorType(self.dtypes[v], shape)
            yield t2


def _bind_rewrite(rw: Rewrite, k: int, shapes: _Shapes, bound: Bound) -> Iterator[Case]:
    apps: list[App] = []
    for t in rw.lhs:
        for s in subterms(t):
            if isinstance(s, App) and s not in apps:
                apps.append(s)
    for attrs, open_, types in _bind(apps, 0, {}, {}, {}, shapes, bound):
        tensors = {v: types[Var(v)] for v in shapes.names}
        case = Case(rw, k, tensors, attrs, open_, types)
        if _guards_hold(case):
            _type_rhs(case)
            yield case


def _bind(
    apps: list[App],
    i: int,
    attrs: dict[str, Any],
    open_: dict[tuple[Term, str], Any],
    types: dict[Term, TensorType],
    shapes: _Shapes,
    bound: Bound,
) -> Iterator[tuple[dict[str, Any], dict[tuple[Term, str], Any], dict[Term, TensorType]]]:
    """Bind the shapes of the variables apps[i] reads first and the attributes of apps[i:]
    (enumerating free ones), and type them; ill-typed bindings are pruned (no valid graph
    contains them)."""
    if i == len(apps):
        yield attrs, open_, types
        return
    app = apps[i]
    spec = spec_of(app)
    given = dict(app.attrs)
    needed = {t.name for t in app.inputs if isinstance(t, Var)}
    if i == len(apps) - 1:
        needed |= set(shapes.names)  # a variable no op reads directly still takes every shape
    for typed in shapes.assign(needed, types):
        in_types = [None if isinstance(t, Absent) else typed[t] for t in app.inputs]
        for combo in product(*_choices(spec, given, attrs, in_types, shapes, bound)):
            values = {p.name: val for p, val in zip(params(spec), combo, strict=True)}
            if shapes.tries[0] == 0:
                return
            shapes.tries[0] -= 1
            try:
                out = infer(spec, app, in_types, values)
            except ShapeError:
                continue
            a2 = dict(attrs)
            o2 = dict(open_)
            for p, val in zip(params(spec), combo, strict=True):
                v = given.get(p.name)
                if isinstance(v, AttrVar):
                    a2[v.name] = val
                elif v is None:
                    o2[(app, p.name)] = val
            yield from _bind(apps, i + 1, a2, o2, {**typed, app: out}, shapes, bound)


def _choices(
    spec: Any,
    given: dict[str, Any],
    attrs: dict[str, Any],
    in_types: list[TensorType | None],
    shapes: _Shapes,
    bound: Bound,
) -> list[list[Any]]:
    """The values each attribute of an op takes: a literal's, a bound variable's, else the
    bound's domain for these input types (cached per rewrite)."""
    choices: list[list[Any]] = []
    for p in params(spec):
        v = given.get(p.name)
        if isinstance(v, Lit):
            choices.append([v.value])
        elif isinstance(v, AttrVar) and v.name in attrs:
            choices.append([attrs[v.name]])
        elif isinstance(v, AttrVar) or v is None:
            key = (spec.domain, spec.name, p.name, tuple(in_types))
            if key not in shapes.domains:
                shapes.domains[key] = domain(spec, p.name, p.sort, p.default, in_types, bound)
            choices.append(shapes.domains[key])
        else:
            raise RuleError(
                f"attribute {p.name}={show(v)} on the left side must be a variable or a literal"
            )
    return choices


def _guards_hold(case: Case) -> bool:
    ev = TypeLevel(case)
    for g in case.rewrite.guards:
        parts = g.parts if isinstance(g, And) else (g,)
        for part in parts:
            if isinstance(part, Call) and part.fn in ("is_one", "is_zero"):
                term = part.args[0]
                if isinstance(term, Var):
                    val = 1 if part.fn == "is_one" else 0
                    if case.facts.get(term.name, val) != val:
                        return False
                    case.facts[term.name] = val
                else:
                    case.value_guards.append(part)
                continue
            try:
                if not ev.expr(part):
                    return False
            except NeedsValuesError:
                case.value_guards.append(part)
    return True


def _type_rhs(case: Case) -> None:
    """Type the right sides: a right side the ops reject makes the case a counterexample."""
    ev = TypeLevel(case)
    for t in case.rewrite.rhs:
        try:
            for s in subterms(t):
                if s in case.types or s in case.rhs_types or isinstance(s, Absent):
                    continue
                if isinstance(s, Var):
                    raise RuleError(f"variable {s.name} on the right side is not bound")
                assert isinstance(s, App)
                spec = spec_of(s)
                in_types = [
                    None if isinstance(c, Absent) else case.types.get(c) or case.rhs_types[c]
                    for c in s.inputs
                ]
                values = ev.app_values(s)
                case.rhs_types[s] = infer(spec, s, in_types, values)
        except ShapeError as e:
            case.rhs_error = f"{show(t)} is not defined: {e}"
            return
