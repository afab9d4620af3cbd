"""`Report`: the facts every stage adds, as JSON and as a readable summary.

A report says what was rewritten (matches per rule, node counts by op before/after), why it is
cheaper (estimated cost before/after under the target's cost model), how it was verified
(the differential check, per output), what stopped saturation, and how long each stage took.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from rewrite.files import atomic_text

STATUS_OPTIMIZED = "optimized"
STATUS_FALLBACK = "fallback"
"""The optimized graph failed verification (or a stage failed): the input graph was written."""
STATUS_NOT_FASTER = "not faster"
"""`--measure`: the verified output was not faster beyond noise; the input graph was written."""


@dataclass
class Report:
    input: str
    output: str
    status: str = "not run"
    stages: dict[str, float] = field(default_factory=dict)
    """stage -> wall seconds."""
    peak_rss_mb: float = 0.0
    saturation: dict[str, Any] = field(default_factory=dict)
    egraph: dict[str, int] = field(default_factory=dict)
    extraction: dict[str, Any] = field(default_factory=dict)
    cost_before_us: float = 0.0
    cost_after_us: float = 0.0
    cost_by_op: dict[str, list[float]] = field(default_factory=dict)
    """op -> [estimated µs in the input graph, in the output graph]: where the saving is."""
    nodes_before: dict[str, int] = field(default_factory=dict)
    nodes_after: dict[str, int] = field(default_factory=dict)
    folded: dict[str, int] = field(default_factory=dict)
    verification: dict[str, Any] = field(default_factory=dict)
    measured: dict[str, Any] = field(default_factory=dict)
    """`--measure`: latencies of input and output in ORT, speedup, noise floor, rounds."""
    precision: dict[str, Any] = field(default_factory=dict)
    """`--precision auto`: budget, metric, inputs, candidates, the ops lowered (each with its
    measured sensitivity and kernel times), the error per output on the calibration and the
    held-back inputs, the rounds, the measured speedup (`rewrite.precision.lower`)."""
    warnings: list[str] = field(default_factory=list)
    rules_verified: list[dict[str, Any]] = field(default_factory=list)
    """Rules used, each with how it was verified (status, bound, cases, cached, sampled error)."""
    rules_refused: list[dict[str, Any]] = field(default_factory=list)
    rules_unmatchable: list[str] = field(default_factory=list)
    """Rules left out, unproved: their left sides need an op neither the model nor any other
    rule's right side has (`rules.relevance`)."""
    """Rules verification refused (with counterexamples); they were not used."""
    rule_effects: dict[str, Any] = field(default_factory=dict)
    """`per_rule`: rule -> matches, e-nodes of the written graph it created, input e-nodes it
    removed, how many of those it shares with other rules, estimated µs moved;
    `unattributed`: the rest (`rewrite.provenance`: how it is attributed). Empty when the
    input graph was written."""
    notes: list[str] = field(default_factory=list)
    """What loading changed (opset conversion, ...), for the record."""
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def n_before(self) -> int:
        return sum(self.nodes_before.values())

    @property
    def n_after(self) -> int:
        return sum(self.nodes_after.values())

    @property
    def rules_applied(self) -> dict[str, int]:
        matches = self.saturation.get("rule_matches", {})
        return {k: v for k, v in matches.items() if v}

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["stages"] = {k: round(v, 4) for k, v in self.stages.items()}
        out["total_seconds"] = round(sum(self.stages.values()), 4)
        out["rules_applied"] = self.rules_applied
        out["node_count_before"] = self.n_before
        out["node_count_after"] = self.n_after
        return out

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the JSON report atomically, mode 0666 & ~umask (`rewrite.files`)."""
        with atomic_text(path) as f:
            json.dump(self.to_json(), f, indent=2, default=str)
            f.write("\n")

    def summary(self) -> str:
        """A few readable lines: status, nodes, cost, rules, verification, time."""
        lines = [f"{self.status}: {self.input} -> {self.output}"]
        lines.append(f"  nodes      {self.n_before} -> {self.n_after}")
        changed = sorted(set(self.nodes_before) | set(self.nodes_after))
        diffs = [
            f"{op} {self.nodes_before.get(op, 0)}->{self.nodes_after.get(op, 0)}"
            for op in changed
            if self.nodes_before.get(op, 0) != self.nodes_after.get(op, 0)
        ]
        if diffs:
            lines.append(f"  by op      {', '.join(diffs)}")
        if self.cost_before_us:
            ratio = self.cost_after_us / self.cost_before_us
            lines.append(
                f"  est. cost  {self.cost_before_us:,.0f} us -> {self.cost_after_us:,.0f} us "
                f"({ratio:.3f}x)"
            )
        moves = sorted(
            ((a - b, op) for op, (b, a) in self.cost_by_op.items() if abs(a - b) >= 0.5),
            key=lambda t: t[0],
        )
        if moves:
            lines.append(
                "  by cost    " + ", ".join(f"{op} {delta:+,.0f} us" for delta, op in moves[:8])
            )
        lines += self._rule_lines()
        if self.rules_verified:
            status: dict[str, int] = {}
            for r in self.rules_verified:
                status[r["status"]] = status.get(r["status"], 0) + 1
            cached = sum(1 for r in self.rules_verified if r.get("cached"))
            lines.append(
                "  proofs     "
                + ", ".join(f"{n} {k}" for k, n in sorted(status.items()))
                + f" (Z3, {self.rules_verified[0].get('bound', '')}; {cached} from the cache)"
                + self._unmatchable_note()
            )
        if self.folded:
            lines.append(f"  folded     {sum(self.folded.values())} constant nodes")
        sat = self.saturation
        if sat:
            lines.append(
                f"  saturation {sat.get('iterations', 0)} iterations, stopped: "
                f"{sat.get('stop_reason')}, e-graph {sat.get('egraph_sizes', [0])[-1]} nodes"
            )
        v = self.verification
        if v:
            lines.append(f"  verified   {v.get('summary', v.get('ok'))}")
        m = self.measured
        if m:
            kept = "kept the output" if m.get("faster") else "not faster: kept the input"
            lines.append(
                f"  measured   {m['input_ms']:.2f} ms -> {m['output_ms']:.2f} ms "
                f"({m['speedup']:.3f}x, noise ±{100 * m['noise']:.1f}%, {m['rounds']} rounds, "
                f"{m['threads']} thread(s), {m['provider']}); {kept}"
            )
        lines += self._precision_lines()
        for n in self.notes:
            lines.append(f"  note       {n}")
        for w in self.warnings:
            lines.append(f"  warning    {w}")
        total = sum(self.stages.values())
        stages = " ".join(f"{k} {v:.2f}" for k, v in self.stages.items())
        lines.append(f"  time       {total:.2f} s ({stages})")
        return "\n".join(lines)

    def _precision_lines(self) -> list[str]:
        """`precision`: the pass's result, error per output (calibration / held back) against
        the budget, and the lowered model's measured speedup."""
        p = self.precision
        if not p:
            return []
        out = [f"  precision  {p.get('result', '')} ({p.get('metric')} <= {p.get('max_error')})"]
        err = p.get("error")
        if err:
            cal, held = err.get("calibration", {}), err.get("held_back", {})
            items = [f"{k} {v:.3g} / {held.get(k, float('nan')):.3g}" for k, v in cal.items()]
            if len(items) > 3:  # many outputs (a decoder's KV cache): the worst of them
                worst = max(cal, key=lambda k: max(cal[k], held.get(k, 0.0)))
                items = [f"{worst} {cal[worst]:.3g} / {held.get(worst, float('nan')):.3g} "
                         f"(worst of {len(cal)} outputs)"]  # fmt: skip
            out.append("  error      " + ", ".join(items) + " (calibration / held back)")
        if p.get("inputs"):
            out.append(f"  calibrated {p['inputs']}")
        m = p.get("measured")
        if m and m != self.measured:  # when kept, the `measured` line shows it
            out.append(
                f"  lowered    {m['input_ms']:.2f} ms -> {m['output_ms']:.2f} ms "
                f"({m['speedup']:.3f}x, noise ±{100 * m['noise']:.1f}%)"
            )
        return out

    def _unmatchable_note(self) -> str:
        n = len(self.rules_unmatchable)
        if not n:
            return ""
        return f"; {n} rule{'s' if n > 1 else ''} cannot match this model, not proved"

    def _rule_lines(self) -> list[str]:
        """`rules`: the rules the written graph owes nodes to, with the nodes they created (+)
        and removed (-) and the estimated µs they moved (`rewrite.provenance`); `matched`:
        every rule that matched in saturation, with its matches."""
        out = []
        per_rule = self.rule_effects.get("per_rule", {})
        used = [(n, e) for n, e in sorted(per_rule.items()) if e["created"] or e["removed"]]
        if used:
            out.append("  rules      " + ", ".join(_effect(n, e) for n, e in used))
        elif per_rule:
            out.append("  rules      none in the output")
        matched = self.rules_applied
        if matched:
            out.append("  matched    " + ", ".join(f"{k} x{v}" for k, v in sorted(matched.items())))
        return out


def _effect(name: str, e: dict[str, Any]) -> str:
    """`name +created/-removed nodes (k shared, ±µs)`, e.g. `add_as_sum +1/-1 nodes (-4 us)`;
    `k shared`: nodes credited to other rules as well."""
    nodes = "/".join(t for t in (f"+{e['created']}" * bool(e["created"]),
                                 f"-{e['removed']}" * bool(e["removed"])) if t)  # fmt: skip
    noun = "node" if e["created"] + e["removed"] == 1 else "nodes"
    shared = f"{e['shared']} shared, " if e.get("shared") else ""
    return f"{name} {nodes} {noun} ({shared}{e['cost_delta_us']:+,.0f} us)"
