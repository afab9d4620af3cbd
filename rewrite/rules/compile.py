"""Rule -> egglog: one `(rule (query...) ((union root rhs)...))` per rank variant.

Left sides become query atoms `(= nK (Ctor attrs... inputs...))`; tensor variables are egglog
variables (a repeated variable is a join); an attribute left unspecified on the left matches
anything. Guards become query atoms over the shape analysis (`shape`, `dtype`) and constant
facts (`IsOne`, `IsZero`, `IsConst`, `IsScalar`, `scalar-value`). Values derived from
attributes (`p.compose(q)`) are computed in the query, never in the actions: a failing
primitive there only fails the match, while in an action it would abort the process.
Operations that need a vector's length (compose, is_identity, all_nonzero) are compiled once
per rank 1..MAX_RANK with a length guard on every `Ints` variable they use.

Numbers follow the prover's arithmetic (Z3 and numpy compare an int with a float as reals): where
a comparison or an operation mixes an integer and a float expression, the integer side is a
float (`s.value() != 0` compiles as `!= 0.0`; a non-literal through `to-f64`), and a derived
value given to a float attribute is a float. A float expression given to an integer attribute
is a `RuleError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rewrite.egraph.schema import MAX_RANK, SYM_BASE, egg_name
from rewrite.errors import RuleError
from rewrite.ops.registry import lookup
from rewrite.rules import elements
from rewrite.rules.domain import Domain
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
)
from rewrite.rules.literals import expand

_RANKED = frozenset({"compose", "is_identity", "all_nonzero"})


class _NeedsRankError(Exception):
    """Raised while compiling without a rank when an operation needs one."""


@dataclass
class _Ctx:
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


def compile_rewrite(rw: Rewrite, where: str, domain: Domain | None = None) -> list[str]:
    """The egglog `rule` forms of one rewrite (one, or one per rank), without `:ruleset`;
    with a `domain`, guarded to match only inside it."""
    out: list[str] = []
    for variant in expand(rw):
        try:
            out.append(_compile(variant, _Ctx(None, where, domain)))
        except _NeedsRankError:
            out += [_compile(variant, _Ctx(r, where, domain)) for r in range(1, MAX_RANK + 1)]
    return out


def _compile(rw: Rewrite, ctx: _Ctx) -> str:
    roots = []
    for lhs in rw.lhs:
        if not isinstance(lhs, App):
            raise RuleError(f"{ctx.where}: a left side must be an op, not the variable {lhs}")
        roots.append(_pattern(lhs, ctx))
    if ctx.domain is not None:
        _domain(ctx.domain, ctx)
    for g in rw.guards:
        _guard(g, ctx)
        ctx.steps.append((len(ctx.atoms), f"condition {show(g)}"))
    actions = [
        f"(union {root} {_template(rhs, ctx)})" for root, rhs in zip(roots, rw.rhs, strict=True)
    ]
    ctx.steps.append((len(ctx.atoms), "right side computable"))
    for name in sorted(ctx.ranked):
        ctx.atoms.append(f"(= (vec-length {name}) {ctx.rank})")
    if ctx.ranked:
        ctx.steps.append((len(ctx.atoms), f"rank {ctx.rank}"))
    return f"(rule ({' '.join(ctx.atoms)}) ({' '.join(actions)}))"


@dataclass(frozen=True)
class Steps:
    """A rewrite's query as cumulative steps: `atoms[:ends[k]]` checks steps 0..k."""

    atoms: tuple[str, ...]
    ends: tuple[int, ...]
    labels: tuple[str, ...]
    anchors: tuple[tuple[str, str], ...]
    """Per step, (variable, op) of the node that names a site: the first left side's root
    once the step has bound it, before that the last op node bound."""


def compile_steps(rw: Rewrite, where: str, domain: Domain | None = None) -> list[Steps]:
    """The query of each rank variant of `rw`, split into the steps `rules explain` reports."""
    out = []
    for variant in expand(rw):
        out += _variant_steps(variant, where, domain)
    return out


def _variant_steps(rw: Rewrite, where: str, domain: Domain | None) -> list[Steps]:
    out = []
    ranks: list[int | None] = [None]
    try:
        _compile(rw, _Ctx(None, where, domain))
    except _NeedsRankError:
        ranks = list(range(1, MAX_RANK + 1))
    for r in ranks:
        ctx = _Ctx(r, where, domain)
        _compile(rw, ctx)
        ends = tuple(e for e, _ in ctx.steps)
        root = ctx.terms[rw.lhs[0]]
        anchors = []
        for end in ends:
            bound = [(var, op) for at, var, op in ctx.nodes if at <= end]
            anchors.append(next((b for b in bound if b[0] == root), bound[-1]))
        out.append(
            Steps(tuple(ctx.atoms), ends, tuple(lbl for _, lbl in ctx.steps), tuple(anchors))
        )
    return out


# -- left side -------------------------------------------------------------------------------


def _signature(app: App, ctx: _Ctx) -> tuple[Any, list[tuple[str, str, Any]]]:
    spec = lookup(app.op, app.domain)
    if spec is None or spec.egg is None:
        raise RuleError(f"{ctx.where}: op {app.op} cannot be used in rules (no typed form)")
    return spec, _param_list(spec)


def _param_list(spec: Any) -> list[tuple[str, str, Any]]:
    """(name, sort, default) of every non-tensor argument, in constructor order."""
    from rewrite.rules.ops import const_input_names

    params = list(spec.egg.attrs)
    params += [(n, "VecI", None) for n in const_input_names(spec)]
    return params


def _pattern(t: Term, ctx: _Ctx) -> str:
    if isinstance(t, Absent):
        return "(Absent)"
    if t in ctx.terms:
        return ctx.terms[t]
    if isinstance(t, Var):
        ctx.terms[t] = f"_v_{t.name}"
        return ctx.terms[t]
    assert isinstance(t, App)
    spec, params = _signature(t, ctx)
    given = dict(t.attrs)
    args = []
    for name, sort, _default in params:
        v = given.get(name)
        if v is None:
            args.append(ctx.fresh("_w"))
        elif isinstance(v, AttrVar):
            args.append(_attr_var(v, ctx))
        elif isinstance(v, Lit):
            args.append(_lit(v, sort))
        else:
            raise RuleError(
                f"{ctx.where}: attribute {name}={show(v)} on the left side must be "
                "a variable or a literal"
            )
    kids = [_pattern(i, ctx) for i in t.inputs]
    node = ctx.fresh("_n")
    ctx.atoms.append(f"(= {node} ({egg_name(spec, len(kids))} {' '.join(args + kids)}))")
    ctx.nodes.append((len(ctx.atoms), node, t.op))
    ctx.steps.append((len(ctx.atoms), f"pattern {show(t)}"))
    ctx.terms[t] = node
    return node


def _attr_var(v: AttrVar, ctx: _Ctx) -> str:
    if v.name not in ctx.attrs:
        ctx.attrs[v.name] = f"_a_{v.name}"
    return ctx.attrs[v.name]


def _domain(domain: Domain, ctx: _Ctx) -> None:
    """Keep the match inside the proved domain (`rules.domain`)."""
    variables = {t.name: name for t, name in ctx.terms.items() if isinstance(t, Var)}
    nodes = [name for t, name in ctx.terms.items() if isinstance(t, App)]
    casts = [
        name
        for t, name in ctx.terms.items()
        if isinstance(t, App) and t.op == "Cast" and not isinstance(dict(t.attrs).get("to"), Lit)
    ]
    ctx.atoms += domain.atoms(variables, nodes, casts)
    ctx.steps.append((len(ctx.atoms), f"inside the proved domain ({domain.describe()})"))


# -- right side ------------------------------------------------------------------------------


def _template(t: Term, ctx: _Ctx) -> str:
    if isinstance(t, Absent):
        return "(Absent)"
    if t in ctx.terms:
        return ctx.terms[t]
    if isinstance(t, Var):
        raise RuleError(
            f"{ctx.where}: variable {t.name} on the right side is not bound by the left side"
        )
    assert isinstance(t, App)
    spec, params = _signature(t, ctx)
    given = dict(t.attrs)
    args = []
    for name, sort, default in params:
        v = given.get(name)
        if v is None:
            if default is None:
                raise RuleError(f"{ctx.where}: {t.op} on the right side needs {name}=...")
            args.append(_lit(Lit(default), sort))
        elif isinstance(v, AttrVar):
            if v.name not in ctx.attrs:
                raise RuleError(
                    f"{ctx.where}: attribute variable {v.name} on the right side is "
                    "not bound by the left side"
                )
            args.append(ctx.attrs[v.name])
        elif isinstance(v, Lit):
            args.append(_lit(v, sort))
        else:  # derived: computed in the query
            if sort == "i64" and _kind(v) == "float":
                raise RuleError(f"{ctx.where}: {t.op}'s {name} is an integer; {show(v)} is a float")
            d = ctx.fresh("_d")
            ctx.atoms.append(f"(= {d} {_expr(v, ctx, as_float=sort == 'f64')})")
            args.append(d)
    kids = [_template(i, ctx) for i in t.inputs]
    return f"({egg_name(spec, len(kids))} {' '.join(args + kids)})"


# -- guards and expressions --------------------------------------------------------------------


def _guard(g: Expr, ctx: _Ctx) -> None:
    try:
        _condition(g, ctx)
    except RuleError as e:
        where = getattr(g, "origin", "")
        if where and where not in str(e):
            raise RuleError(f"{e} (the condition at {where})") from e
        raise


def _condition(g: Expr, ctx: _Ctx) -> None:
    if isinstance(g, And):
        for p in g.parts:
            _guard(p, ctx)
    elif isinstance(g, Cmp):
        op = {"==": "=", "!=": "!="}.get(g.op, g.op)
        ctx.atoms.append(f"({op} {_operands(g, ctx)})")
    elif isinstance(g, Call) and g.kind == "bool":
        ctx.atoms.append(_bool_call(g, ctx))
    else:
        raise RuleError(f"{ctx.where}: {show(g)} is not a condition")


_FACTS = {"is_one": "IsOne", "is_zero": "IsZero", "is_const": "IsConst", "is_scalar": "IsScalar"}


def _bool_call(c: Call, ctx: _Ctx) -> str:
    if c.fn == "dtype_in":
        mask = sum(1 << int(d) for d in set(c.args[1]))
        return f"(!= 0 (& (<< 1 (dtype {_term_ref(c.args[0], ctx)})) {mask}))"
    if c.fn == "approx":
        v, rtol, atol = (float(a) for a in c.args[1:])
        tol = _lit(Lit(atol + rtol * abs(v)), "f64")
        d = f"(- (scalar-value {_term_ref(c.args[0], ctx)}) {_lit(Lit(v), 'f64')})"
        return f"(<= (abs {d}) {tol})"
    if c.fn == "all_elems":  # facts install() asserts of the model's constants
        return f'(AllElems "{elements.key(c.args[1])}" {_term_ref(c.args[0], ctx)})'
    if c.fn == "precedes":
        return f"(< (ord {_term_ref(c.args[0], ctx)}) (ord {_term_ref(c.args[1], ctx)}))"
    if c.fn in _FACTS:
        return f"({_FACTS[c.fn]} {_term_ref(c.args[0], ctx)})"
    if c.fn in _RANKED:
        return _ranked(c, ctx)
    raise RuleError(f"{ctx.where}: unknown condition {show(c)}")


def _term_ref(t: Any, ctx: _Ctx) -> str:
    if not isinstance(t, Term) or t not in ctx.terms:
        raise RuleError(f"{ctx.where}: {show(t)} in a condition is not part of the left side")
    return ctx.terms[t]


def _kind(e: Any) -> str:
    """What an expression computes in egglog: "float", "int" (dtypes too), "ints" (shapes
    too) or "bool"."""
    if isinstance(e, BinOp):
        kinds = {_kind(e.left), _kind(e.right)}
        return "float" if "float" in kinds else _kind(e.left)
    kind = str(getattr(e, "kind", "int"))
    return {"dtype": "int", "shape": "ints"}.get(kind, kind)


def _operands(e: BinOp | Cmp, ctx: _Ctx) -> str:
    """Both operands of `e`; ints as floats when the other side is a float."""
    left, right = _kind(e.left), _kind(e.right)
    mixed = {left, right} == {"int", "float"}
    if left != right and not mixed:
        raise RuleError(f"{ctx.where}: {show(e)} mixes a value of kind {left} and one of {right}")
    return f"{_expr(e.left, ctx, as_float=mixed)} {_expr(e.right, ctx, as_float=mixed)}"


def _expr(e: Any, ctx: _Ctx, *, as_float: bool = False) -> str:
    """`e` in egglog; with `as_float`, an integer expression is converted to f64."""
    if as_float and _kind(e) == "int":
        if isinstance(e, Lit):
            return _lit(e, "f64")
        return f"(to-f64 {_expr(e, ctx)})"
    if isinstance(e, AttrVar):
        if e.name not in ctx.attrs:
            raise RuleError(
                f"{ctx.where}: attribute variable {e.name} is not bound by the left side"
            )
        return ctx.attrs[e.name]
    if isinstance(e, Lit):
        return _lit(e, {"ints": "VecI", "float": "f64"}.get(e.kind, "i64"))
    if isinstance(e, BinOp):
        return f"({e.op} {_operands(e, ctx)})"
    if isinstance(e, Call):
        if e.fn == "shape":
            return f"(shape {_term_ref(e.args[0], ctx)})"
        if e.fn == "dtype":
            return f"(dtype {_term_ref(e.args[0], ctx)})"
        if e.fn == "rank":
            return f"(vec-length (shape {_term_ref(e.args[0], ctx)}))"
        if e.fn == "dim":
            s = f"(shape {_term_ref(e.args[0], ctx)})"
            i = int(e.args[1])
            d = f"(vec-get {s} {i})" if i >= 0 else f"(vec-get {s} (+ (vec-length {s}) {i}))"
            return d
        if e.fn == "value":
            return f"(scalar-value {_term_ref(e.args[0], ctx)})"
        if e.fn == "length":
            return f"(vec-length {_expr(e.args[0], ctx)})"
        if e.fn == "vec":
            return "(vec-of " + " ".join(_expr(a, ctx) for a in e.args) + ")"
        if e.fn == "index":
            return f"(vec-get {_expr(e.args[0], ctx)} {int(e.args[1])})"
        if e.fn in _RANKED:
            return _ranked(e, ctx)
    raise RuleError(f"{ctx.where}: cannot compile {show(e)}")


def _ranked(c: Call, ctx: _Ctx) -> str:
    if ctx.rank is None:
        raise _NeedsRankError
    r = ctx.rank
    vecs = [_expr(a, ctx) for a in c.args]
    for a in c.args:
        if isinstance(a, AttrVar):
            ctx.ranked.add(_expr(a, ctx))
    if c.fn == "is_identity":
        return f"(= {vecs[0]} (vec-of {' '.join(map(str, range(r)))}))"
    if c.fn == "all_nonzero":
        return " ".join(f"(!= (vec-get {vecs[0]} {i}) 0)" for i in range(r))
    p, q = vecs
    return "(vec-of " + " ".join(f"(vec-get {p} (vec-get {q} {i}))" for i in range(r)) + ")"


def _lit(v: Lit, sort: str) -> str:
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


__all__ = ["SYM_BASE", "compile_rewrite"]
