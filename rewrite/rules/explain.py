"""`rewrite rules list` and `rewrite rules explain`: what the rules are, and why one matched
or did not match a model.

Explain runs the model through the optimizer's front half (load, fold, encode, saturate with
the chosen rule sets), then checks the rule's query one step at a time (each pattern node,
each condition) and counts the distinct sites that survive each step. A site is the e-class
of the node the pattern's root op matched (before the step that matches the root: of the last
op node matched so far), named by the input graph's value in it that a node of that op
produced (`y (node Relu_3)`). Counts are of every site; at most MAX_SITES are named. Where the
rule matched, it names the sites; where it did not, the step at which the last sites dropped
out and those sites: "the nearest partial matches and which condition failed".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from egglog import bindings

from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import class_id, take_snapshot
from rewrite.errors import RuleError
from rewrite.extract.snapshot import Snapshot
from rewrite.onnx_io import Graph, load
from rewrite.rules.compile import Steps, compile_steps
from rewrite.rules.fold import fold_constants
from rewrite.rules.rule import Rule, RuleSet
from rewrite.rules.saturate import Limits, saturate

MAX_SITES = 5


def list_rules(rulesets: list[RuleSet]) -> str:
    """One block per rule: name, ruleset, tags, source, identity, and the domain it is
    proved on and compiled to (when set)."""
    lines = []
    for rs in rulesets:
        lines.append(f"{rs.name} ({len(rs)} rules){': ' + rs.doc if rs.doc else ''}")
        for r in rs:
            tags = ",".join(sorted(r.tags))
            lines.append(f"  {r.name:<24} [{tags}] {r.source}")
            lines.append(f"      {r.identity}")
            if r.domain is not None:
                lines.append(f"      domain: {r.domain.describe()}")
    return "\n".join(lines)


@dataclass
class StepCount:
    label: str
    sites: int


@dataclass
class RewriteExplanation:
    index: int
    steps: list[StepCount]
    matched: list[str]
    """The first MAX_SITES matched sites, by name; `n_matched` counts them all."""
    n_matched: int = 0
    failed_step: str | None = None
    near: list[str] = field(default_factory=list)
    n_near: int = 0


@dataclass
class Explanation:
    rule: Rule
    model: str
    rewrites: list[RewriteExplanation]

    @property
    def matched(self) -> bool:
        return any(r.n_matched for r in self.rewrites)

    def text(self) -> str:
        out = [f"{self.rule.name} ({self.rule.source}): {self.rule.identity}", f"  on {self.model}"]
        for rx in self.rewrites:
            head = f"  form {rx.index}" if len(self.rewrites) > 1 else "  steps"
            out.append(head + ":")
            for s in rx.steps:
                out.append(f"    {s.sites:>6} site(s) after {s.label}")
            if rx.n_matched:
                out.append(
                    f"  MATCHED at {rx.n_matched} site(s): {_some(rx.matched, rx.n_matched)}"
                )
            else:
                out.append(f"  no match: failed at {rx.failed_step}")
                if rx.near:
                    out.append(f"  nearest partial matches: {_some(rx.near, rx.n_near)}")
        return "\n".join(out)


def _some(names: list[str], total: int) -> str:
    more = total - len(names)
    return ", ".join(names) + (f", and {more} more" if more > 0 else "")


def find_rule(rulesets: list[RuleSet], name: str) -> Rule:
    for rs in rulesets:
        for r in rs:
            if r.name == name:
                return r
    known = sorted(r.name for rs in rulesets for r in rs)
    raise RuleError(f"no rule named {name}; rules: {', '.join(known)}")


_Plan = list[tuple[int, Steps, list[str]]]
"""(rewrite index, one rank variant's steps, the relation that records each step's sites)."""


def explain(
    name: str, model: str | Path, rulesets: list[RuleSet], limits: Limits | None = None
) -> Explanation:
    """Why rule `name` matches (or not) in `model`, after saturating with `rulesets`.

    Raises ModelError for a model that cannot be loaded or has no weights, RuleError for an
    unknown rule or one that egglog refuses.
    """
    rule = find_rule(rulesets, name)
    loaded = load(model)
    loaded.require_data()
    graph, _ = fold_constants(loaded)
    enc = encode(graph)
    saturate(enc, rulesets, limits or Limits())
    snap = take_snapshot(enc)
    plan = _install_steps(enc.egraph, rule)
    enc.egraph.parse_and_run_program("(run __explain 1)")
    frozen = enc.egraph.freeze()
    hits = {
        rel: {class_id(row.inputs[0]) for row in frozen.functions[rel].rows}
        for _, _, rels in plan
        for rel in rels
    }
    site = _site_namer(snap, graph)
    out = []
    for i in range(len(rule.rewrites)):
        variants = [(steps, rels) for j, steps, rels in plan if j == i]
        out.append(_explain_rewrite(i, variants, hits, site))
    return Explanation(rule, str(model), out)


def _install_steps(eg: bindings.EGraph, rule: Rule) -> _Plan:
    """One egglog rule per step of every rank variant, each recording its sites."""
    eg.parse_and_run_program("(ruleset __explain)")
    plan: _Plan = []
    for i, rw in enumerate(rule.rewrites):
        for v, steps in enumerate(compile_steps(rw, rule.where, rule.domain)):
            rels = []
            for k, (end, (anchor, _)) in enumerate(zip(steps.ends, steps.anchors, strict=True)):
                rel = f"__ex_{i}_{v}_{k}"
                rels.append(rel)
                try:
                    eg.parse_and_run_program(
                        f"(relation {rel} (T))\n"
                        f"(rule ({' '.join(steps.atoms[:end])}) (({rel} {anchor})) "
                        f":ruleset __explain)"
                    )
                except bindings.EggSmolError as e:
                    raise RuleError(
                        f"{rule.where}: could not be compiled to egglog: {str(e).splitlines()[0]}"
                    ) from e
            plan.append((i, steps, rels))
    return plan


def _site_namer(snap: Snapshot, graph: Graph) -> Callable[[int, str], str]:
    """Names an e-class by the graph value in it that a node of `op` produced."""
    producers = graph.producers()

    def site(cid: int, op: str) -> str:
        c = snap.classes.get(cid)
        names = c.names if c else []
        for value in names:
            node = producers.get(value)
            if node is not None and node.op_type == op:
                return f"{value} (node {node.name})" if node.name else value
        return names[0] if names else f"class {cid}"

    return site


def _explain_rewrite(
    index: int,
    variants: list[tuple[Steps, list[str]]],
    hits: dict[str, set[int]],
    site: Callable[[int, str], str],
) -> RewriteExplanation:
    """The rank variant that got furthest (most steps with sites, then most matches)."""
    steps, rels = max(
        variants, key=lambda vr: (sum(1 for r in vr[1] if hits[r]), len(hits[vr[1][-1]]))
    )

    def named(k: int) -> list[str]:
        op = steps.anchors[k][1]
        return sorted(site(c, op) for c in hits[rels[k]])

    counts = [StepCount(lbl, len(hits[r])) for lbl, r in zip(steps.labels, rels, strict=True)]
    matched = named(len(rels) - 1)
    rx = RewriteExplanation(index, counts, matched[:MAX_SITES], len(matched))
    if not matched:
        k = next(k for k, r in enumerate(rels) if not hits[r])
        rx.failed_step = steps.labels[k]
        if k > 0:
            near = named(k - 1)
            rx.near, rx.n_near = near[:MAX_SITES], len(near)
    return rx
