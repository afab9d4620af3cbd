"""Which rules can match a model: only those are proved and used for it.

Contract: `relevant(rulesets, op_types)` returns (the rule sets holding only the rules that can
match, the names of the others). A rule can match when every op its left sides name is
reachable: an op of the model (`op_types`, the ONNX op types of its nodes; a typed form's
`<Op>Part` and `<Op>Dyn` terms count as the ONNX op they encode), or an op the right
side of a rule that can match builds (to a fixpoint, so a rule matching a term another rule
builds is kept). A rule left out cannot fire in this run: leaving it unproved changes nothing
the run writes, and the first run on a model pays only for the proofs it can use (each proved
rule is cached, as before, for the next model that needs it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rewrite.ops import lookup
from rewrite.rules.language import App, Term, nodes
from rewrite.rules.rule import Rule, RuleSet

_SUFFIXES = ("Part", "Dyn")


def onnx_op(name: str, domain: str = "") -> str:
    """The ONNX op type a typed op name stands for: its spec's (`LayerNormalizationPart` ->
    `LayerNormalization`, `SliceDyn` -> `Slice`); else the name less a Part/Dyn suffix
    (`SplitPart` -> `Split`)."""
    spec = lookup(name, domain)
    if spec is not None and spec.onnx_op:
        return spec.onnx_op
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def ops_of(terms: Iterable[Term]) -> set[str]:
    """The ONNX op types the op applications in `terms` (and their inputs) name."""
    return {onnx_op(t.op, t.domain) for t in nodes(tuple(terms)) if isinstance(t, App)}


def _needs(rule: Rule) -> set[str]:
    return ops_of(t for rw in rule.rewrites for t in rw.lhs)


def _builds(rule: Rule) -> set[str]:
    return ops_of(t for rw in rule.rewrites for t in rw.rhs)


def relevant(
    rulesets: Sequence[RuleSet], op_types: Iterable[str]
) -> tuple[list[RuleSet], list[str]]:
    """(rule sets of the rules that can match, names of those that cannot): module docstring."""
    reachable = {op.split("::")[-1] for op in op_types}
    rules = [r for rs in rulesets for r in rs.rules]
    kept: set[int] = set()
    grown = True
    while grown:
        grown = False
        for i, r in enumerate(rules):
            if i not in kept and _needs(r) <= reachable:
                kept.add(i)
                new = _builds(r) - reachable
                reachable |= new
                grown = grown or bool(new)
    keep_ids = {id(rules[i]) for i in kept}
    out = [RuleSet(rs.name, [r for r in rs.rules if id(r) in keep_ids], rs.doc) for rs in rulesets]
    skipped = [r.name for r in rules if id(r) not in keep_ids]
    return out, skipped
