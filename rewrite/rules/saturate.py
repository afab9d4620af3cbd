"""The saturation driver: run rule sets on an e-graph under iteration, node and time limits.

egglog's `run` has no node or time limit, so the driver runs one iteration at a time (shape
analysis to fixpoint, then one application of every rule) and checks the limits between
iterations. `SaturationStats` says how many times each rule matched, the e-graph size after
each iteration and which limit stopped the run (`saturated` when no rule changed anything).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from egglog import bindings

from rewrite.egraph.encode import Encoded
from rewrite.errors import RuleError
from rewrite.rules.rule import RuleSet

RULES = "rules"


@dataclass(frozen=True)
class Limits:
    """Saturation stops at the first limit reached (checked between iterations)."""

    iterations: int = 20
    nodes: int = 200_000
    seconds: float = 20.0


@dataclass
class SaturationStats:
    stop_reason: str = "not run"
    iterations: int = 0
    seconds: float = 0.0
    matches: dict[str, int] = field(default_factory=dict)
    """rule name -> number of matches over the run (rules that never matched included)."""
    sizes: list[int] = field(default_factory=list)
    """e-graph size (e-nodes of tensor sorts) before the first and after each iteration."""

    def to_json(self) -> dict[str, object]:
        return {
            "stop_reason": self.stop_reason,
            "iterations": self.iterations,
            "seconds": round(self.seconds, 4),
            "rule_matches": dict(sorted(self.matches.items())),
            "egraph_sizes": self.sizes,
        }


def egraph_size(eg: bindings.EGraph) -> int:
    """Number of e-nodes in the tensor constructors (shape tables and lists not counted)."""
    (out,) = eg.parse_and_run_program("(print-size)")
    skip = {"shape", "dtype", "bcast", "bcast-req", "IsOne", "IsZero", "IsConst", "IsScalar",
            "scalar-value", "ord", "TCons", "TNil"}
    return sum(n for name, n in out.sizes if name not in skip and not name.startswith("$"))


def install(enc: Encoded, rulesets: Sequence[RuleSet]) -> list[str]:
    """Declare every rule of `rulesets` in the e-graph (one egglog ruleset); returns names."""
    enc.egraph.parse_and_run_program(f"(ruleset {RULES})")
    names: list[str] = []
    for rs in rulesets:
        for rule in rs:
            try:  # one call per rule, so that an error names the rule at fault
                enc.egraph.parse_and_run_program("\n".join(rule.compile(RULES)))
            except bindings.EggSmolError as e:
                raise RuleError(
                    f"{rule.name} ({rule.source}) in ruleset '{rs.name}': could not be "
                    f"compiled to egglog: {str(e).splitlines()[0]}"
                ) from e
            names.append(rule.name)
    return names


def saturate(enc: Encoded, rulesets: Sequence[RuleSet], limits: Limits) -> SaturationStats:
    """Apply `rulesets` to `enc.egraph` until saturated or a limit is hit."""
    start = time.perf_counter()
    eg = enc.egraph
    stats = SaturationStats()
    names = install(enc, rulesets)
    stats.matches = dict.fromkeys(names, 0)
    eg.parse_and_run_program("(run-schedule (saturate (run shapes)))")
    stats.sizes.append(egraph_size(eg))
    if not names:
        stats.stop_reason = "no rules"
    while not names or stats.iterations < limits.iterations:
        if not names:
            break
        (out,) = eg.parse_and_run_program(f"(run-schedule (run {RULES}) (saturate (run shapes)))")
        stats.iterations += 1
        report = out.report
        for label, n in report.num_matches_per_rule.items():
            base = label.split("@", 1)[0]
            if base in stats.matches:
                stats.matches[base] += n
        size = egraph_size(eg)
        stats.sizes.append(size)
        rules_changed = (
            any(it.rule_set_report.changed for it in report.iterations[:1])
            if report.iterations
            else False
        )
        if not rules_changed:
            stats.stop_reason = "saturated"
            break
        if size >= limits.nodes:
            stats.stop_reason = "node_limit"
            break
        if time.perf_counter() - start >= limits.seconds:
            stats.stop_reason = "time_limit"
            break
    else:
        stats.stop_reason = "iteration_limit"
    stats.seconds = time.perf_counter() - start
    return stats
