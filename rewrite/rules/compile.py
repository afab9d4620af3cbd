"""Rule -> egglog: one `(rule (query...) ((union root rhs)...))` per rank variant.

A rewrite is compiled once per dtype variant of its literals (`rules.literals.expand`) and,
for each, once per part-form variant (`rules.part_forms`): a left side on output 0 of
LayerNormalization and the like also matches the part a node whose extra outputs are used is
typed as.

Left sides become query atoms `(= nK (Ctor attrs... inputs...))`; tensor variables are egglog
variables (a repeated variable is a join); an attribute left unspecified on the left matches
anything. Guards become query atoms (`rules.guards`). Values derived from attributes
(`p.compose(q)`) are computed in the query, never in the actions: a failing primitive there
only fails the match, while in an action it would abort the process. A rewrite whose guards or
derived values need a vector's length is compiled once per rank 1..MAX_RANK. A float
expression given to an integer attribute is a `RuleError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rewrite.egraph.schema import MAX_RANK, SYM_BASE, egg_name
from rewrite.errors import RuleError
from rewrite.ops.registry import lookup
from rewrite.rules.domain import Domain
from rewrite.rules.guards import Ctx, NeedsRankError, expr, expr_kind, guard, lit
from rewrite.rules.language import Absent, App, AttrVar, Lit, Rewrite, Term, Var, show
from rewrite.rules.literals import expand
from rewrite.rules.part_forms import part_variants


def compile_rewrite(rw: Rewrite, where: str, domain: Domain | None = None) -> list[str]:
    """The egglog `rule` forms of one rewrite (one, or one per rank), without `:ruleset`;
    with a `domain`, guarded to match only inside it."""
    out: list[str] = []
    for variant in _variants(rw):
        try:
            out.append(_compile(variant, Ctx(None, where, domain)))
        except NeedsRankError:
            out += [_compile(variant, Ctx(r, where, domain)) for r in range(1, MAX_RANK + 1)]
    return out


def _compile(rw: Rewrite, ctx: Ctx) -> str:
    roots = []
    for lhs in rw.lhs:
        if not isinstance(lhs, App):
            raise RuleError(f"{ctx.where}: a left side must be an op, not the variable {lhs}")
        roots.append(_pattern(lhs, ctx))
    if ctx.domain is not None:
        _domain(ctx.domain, ctx)
    for g in rw.guards:
        guard(g, ctx)
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
    """The query of each variant of `rw` (literal dtypes, part forms, ranks), split into the
    steps `rules explain` reports."""
    out = []
    for variant in _variants(rw):
        out += _variant_steps(variant, where, domain)
    return out


def _variants(rw: Rewrite) -> list[Rewrite]:
    """The rewrites `rw` compiles to before ranks: each literal-dtype variant's part-form
    variants."""
    return [p for v in expand(rw) for p in part_variants(v)]


def _variant_steps(rw: Rewrite, where: str, domain: Domain | None) -> list[Steps]:
    out = []
    ranks: list[int | None] = [None]
    try:
        _compile(rw, Ctx(None, where, domain))
    except NeedsRankError:
        ranks = list(range(1, MAX_RANK + 1))
    for r in ranks:
        ctx = Ctx(r, where, domain)
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


def _signature(app: App, ctx: Ctx) -> tuple[Any, list[tuple[str, str, Any]]]:
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


def _pattern(t: Term, ctx: Ctx) -> str:
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
            args.append(lit(v, sort))
        else:
            raise RuleError(
                f"{ctx.where}: attribute {name}={show(v)} on the left side must be "
                "a variable or a literal"
            )
    kids = [_pattern(i, ctx) for i in t.inputs]
    node = ctx.fresh("_n")
    ctx.atoms.append(f"(= {node} ({egg_name(spec, len(kids))} {' '.join(args + kids)}))")
    ctx.nodes.append((len(ctx.atoms), node, spec.op_type))
    ctx.steps.append((len(ctx.atoms), f"pattern {show(t)}"))
    ctx.terms[t] = node
    return node


def _attr_var(v: AttrVar, ctx: Ctx) -> str:
    if v.name not in ctx.attrs:
        ctx.attrs[v.name] = f"_a_{v.name}"
    return ctx.attrs[v.name]


def _domain(domain: Domain, ctx: Ctx) -> None:
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


def _template(t: Term, ctx: Ctx) -> str:
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
            args.append(lit(Lit(default), sort))
        elif isinstance(v, AttrVar):
            if v.name not in ctx.attrs:
                raise RuleError(
                    f"{ctx.where}: attribute variable {v.name} on the right side is "
                    "not bound by the left side"
                )
            args.append(ctx.attrs[v.name])
        elif isinstance(v, Lit):
            args.append(lit(v, sort))
        else:  # derived: computed in the query
            if sort == "i64" and expr_kind(v) == "float":
                raise RuleError(f"{ctx.where}: {t.op}'s {name} is an integer; {show(v)} is a float")
            d = ctx.fresh("_d")
            ctx.atoms.append(f"(= {d} {expr(v, ctx, as_float=sort == 'f64')})")
            args.append(d)
    kids = [_template(i, ctx) for i in t.inputs]
    return f"({egg_name(spec, len(kids))} {' '.join(args + kids)})"


__all__ = ["SYM_BASE", "compile_rewrite"]
