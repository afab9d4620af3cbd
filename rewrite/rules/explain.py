"""`rewrite rules list` and `rewrite rules explain`: what the rules are, and why one matched
or did not match a model.

Explain runs the model through the optimizer's front half (load, fold, encode, saturate with
the chosen rule sets), then checks the rule's query one step at a time (each pattern node,
each condition) and counts the sites that survive each step. A site is the e-class of the
first op the pattern matches, named by the model's value names it holds. Where the rule
matched, it lists the sites; where it did not, the step at which the last sites dropped out
and those sites: "the nearest partial matches and which condition failed".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import class_id, take_snapshot
from rewrite.errors import RuleError
from rewrite.onnx_io import load
from rewrite.rules.compile import compile_steps
from rewrite.rules.fold import fold_constants
from rewrite.rules.rule import Rule, RuleSet
from rewrite.rules.saturate import Limits, saturate

MAX_SITES = 5


def list_rules(rulesets: list[RuleSet]) -> str:
    """One block per rule: name, ruleset, tags, source, identity."""
    lines = []
    for rs in rulesets:
        lines.append(f"{rs.name} ({len(rs)} rules){': ' + rs.doc if rs.doc else ''}")
        for r in rs:
            tags = ",".join(sorted(r.tags))
            lines.append(f"  {r.name:<24} [{tags}] {r.source}")
            lines.append(f"      {r.identity}")
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
    failed_step: str | None = None
    near: list[str] = field(default_factory=list)


@dataclass
class Explanation:
    rule: Rule
    model: str
    rewrites: list[RewriteExplanation]

    @property
    def matched(self) -> bool:
        return any(r.matched for r in self.rewrites)

    def text(self) -> str:
        out = [f"{self.rule.name} ({self.rule.source}): {self.rule.identity}", f"  on {self.model}"]
        for rx in self.rewrites:
            head = f"  form {rx.index}" if len(self.rewrites) > 1 else "  steps"
            out.append(head + ":")
            for s in rx.steps:
                out.append(f"    {s.sites:>6} site(s) after {s.label}")
            if rx.matched:
                out.append(f"  MATCHED at {len(rx.matched)} site(s): {', '.join(rx.matched)}")
            else:
                out.append(f"  no match: failed at {rx.failed_step}")
                if rx.near:
                    out.append(f"  nearest partial matches: {', '.join(rx.near)}")
        return "\n".join(out)


def find_rule(rulesets: list[RuleSet], name: str) -> Rule:
    for rs in rulesets:
        for r in rs:
            if r.name == name:
                return r
    known = sorted(r.name for rs in rulesets for r in rs)
    raise RuleError(f"no rule named {name}; rules: {', '.join(known)}")


def explain(
    name: str, model: str | Path, rulesets: list[RuleSet], limits: Limits | None = None
) -> Explanation:
    """Why rule `name` matches (or not) in `model`, after saturating with `rulesets`."""
    rule = find_rule(rulesets, name)
    graph, _ = fold_constants(load(model))
    enc = encode(graph)
    saturate(enc, rulesets, limits or Limits())
    snap = take_snapshot(enc)
    eg = enc.egraph
    eg.parse_and_run_program("(ruleset __explain)")
    plan: list[tuple[int, int, list[str]]] = []  # (rewrite, variant, relation per step)
    for i, rw in enumerate(rule.rewrites):
        for v, steps in enumerate(compile_steps(rw, rule.where)):
            rels = []
            for k, end in enumerate(steps.ends):
                rel = f"__ex_{i}_{v}_{k}"
                rels.append(rel)
                eg.parse_and_run_program(
                    f"(relation {rel} (T))\n"
                    f"(rule ({' '.join(steps.atoms[:end])}) (({rel} {steps.anchor})) "
                    f":ruleset __explain)"
                )
            plan.append((i, v, rels))
    eg.parse_and_run_program("(run __explain 1)")
    frozen = eg.freeze()
    hits = {
        rel: {class_id(row.inputs[0]) for row in frozen.functions[rel].rows}
        for _, _, rels in plan
        for rel in rels
    }

    def site(cid: int) -> str:
        c = snap.classes.get(cid)
        return c.names[0] if c and c.names else f"class {cid}"

    out = []
    for i, rw in enumerate(rule.rewrites):
        variants = [(v, rels) for j, v, rels in plan if j == i]
        labels = compile_steps(rw, rule.where)
        best = max(
            variants, key=lambda vr: (sum(1 for r in vr[1] if hits[r]), len(hits[vr[1][-1]]))
        )
        v, rels = best
        steps = [
            StepCount(lbl, len(hits[r])) for lbl, r in zip(labels[v].labels, rels, strict=True)
        ]
        matched = sorted(site(c) for c in hits[rels[-1]])
        rx = RewriteExplanation(i, steps, matched[:MAX_SITES])
        if not matched:
            k = next(k for k, r in enumerate(rels) if not hits[r])
            rx.failed_step = labels[v].labels[k]
            if k > 0:
                rx.near = sorted(site(c) for c in hits[rels[k - 1]])[:MAX_SITES]
        out.append(rx)
    return Explanation(rule, str(model), out)
