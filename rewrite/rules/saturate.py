"""The saturation driver: run rule sets on an e-graph under iteration, node, time and memory limits.

egglog's `run` has no node, time or memory limit, so the driver runs one iteration at a time
(one application of the rules, then the shape analysis to fixpoint) and checks every limit
between iterations. It also bounds each iteration before running it, so that one iteration
cannot blow far past a limit (associativity + commutativity grows an e-graph x20 in one):

- Rules run under egglog's back-off scheduler: a rule with more matches than its match limit
  is banned for a few iterations (limit and ban double each time) instead of drowning the rest.
- A rule fires at most its scheduler threshold of matches in an iteration, and one match adds
  at most k e-nodes (k counted from the rule's egglog actions), so the next iteration adds at
  most U = sum(threshold * k) e-nodes. The driver tracks an upper bound of every threshold from
  the match counts egglog reports. When U does not fit in what is left of the budget
  (`nodes * (1 + NODE_OVERSHOOT)` minus the size, and the memory left over the bytes an e-node
  has cost so far), the iteration runs under a fresh scheduler whose match limit is
  budget / sum(k): each rule then fires all its matches or none, so the budget holds.
- An iteration is not started when the last one's time, scaled by its growth, would pass the
  deadline.

The e-node limit is therefore overshot by at most NODE_OVERSHOOT. `SaturationStats` says how
many times each rule fired, the e-graph size after each iteration and which limit stopped the
run (`saturated` when no rule can change anything).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from egglog import bindings

from rewrite.egraph.encode import Encoded
from rewrite.errors import RuleError
from rewrite.limits import Limits, default_max_memory_mb, rss_mb
from rewrite.rules import elements
from rewrite.rules.growth import growth_per_label
from rewrite.rules.rule import RuleSet

RULES = "rules"
NODE_OVERSHOOT = 0.10
"""An iteration may take the e-graph at most this fraction past `Limits.nodes`."""
BYTES_PER_NODE = 1024
"""Memory an e-node is assumed to cost until the run has measured it (at least 256 bytes)."""
SECONDS_PER_NEW_NODE = 2e-5
"""Iteration time per e-node added until the run has measured it (3.5-10 us on 2 cores)."""
__all__ = ["NODE_OVERSHOOT", "RULES", "Limits", "SaturationStats", "egraph_size", "saturate"]
STOP_REASONS = (
    "saturated",
    "no rules",
    "iteration_limit",
    "node_limit",
    "time_limit",
    "memory_limit",
)
_SCHEDULER = "rewrite_backoff"


@dataclass
class SaturationStats:
    stop_reason: str = "not run"
    """One of STOP_REASONS: `saturated`, `no rules`, or the limit that stopped the run."""
    iterations: int = 0
    seconds: float = 0.0
    matches: dict[str, int] = field(default_factory=dict)
    """rule name -> matches fired over the run (rules that never matched included)."""
    sizes: list[int] = field(default_factory=list)
    """e-graph size (e-nodes of tensor sorts) before the first and after each iteration."""
    iteration_seconds: list[float] = field(default_factory=list)
    throttled: dict[str, int] = field(default_factory=dict)
    """rule name -> iterations in which it had more matches than it was allowed to fire."""
    bounded_iterations: int = 0
    """Iterations run under a budget-derived match limit (close to a node or memory limit)."""
    node_limit: int = 0
    peak_rss_mb: float = 0.0
    """Peak resident memory seen between iterations, MiB."""
    refused: list[str] = field(default_factory=list)
    """One message per rule egglog refused (naming it); those rules were not used."""

    @property
    def limit_hit(self) -> str | None:
        """The limit that stopped the run (`node_limit`, `time_limit`, ...), None if none."""
        return self.stop_reason if self.stop_reason.endswith("_limit") else None

    @property
    def overshoot(self) -> float:
        """Largest size over the node limit, as a fraction of it (0 when never over)."""
        if not self.node_limit or not self.sizes:
            return 0.0
        return max(0.0, max(self.sizes) / self.node_limit - 1.0)

    def to_json(self) -> dict[str, object]:
        return {
            "stop_reason": self.stop_reason,
            "limit_hit": self.limit_hit,
            "iterations": self.iterations,
            "seconds": round(self.seconds, 4),
            "rule_matches": dict(sorted(self.matches.items())),
            "egraph_sizes": self.sizes,
            "iteration_seconds": [round(t, 4) for t in self.iteration_seconds],
            "throttled_rules": dict(sorted(self.throttled.items())),
            "bounded_iterations": self.bounded_iterations,
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "refused_rules": list(self.refused),
        }


def egraph_size(eg: bindings.EGraph) -> int:
    """Number of e-nodes in the tensor constructors (shape tables and lists not counted)."""
    (out,) = eg.parse_and_run_program("(print-size)")
    skip = {
        "shape",
        "dtype",
        "bcast",
        "bcast-req",
        "IsOne",
        "IsZero",
        "IsConst",
        "IsScalar",
        "AllElems",
        "scalar-value",
        "ord",
        "TCons",
        "TNil",
    }
    return sum(n for name, n in out.sizes if name not in skip and not name.startswith("$"))


def install(
    enc: Encoded, rulesets: Sequence[RuleSet], refused: list[str] | None = None
) -> list[str]:
    """Declare every rule of `rulesets` in the e-graph (one egglog ruleset); returns the names
    of the rules declared.

    A rule egglog refuses is left out alone, with a message naming it appended to `refused`
    (raised as a RuleError when `refused` is None). None of its forms is declared: a rule of
    several forms (rewrites, rank variants) is tried first in a scratch e-graph of the same
    schema.
    """
    enc.egraph.parse_and_run_program(f"(ruleset {RULES})")
    elements.install_facts(enc, [c for rs in rulesets for r in rs for c in r.element_conditions()])
    names: list[str] = []
    scratch: bindings.EGraph | None = None
    for rs in rulesets:
        for rule in rs:
            forms = rule.compile(RULES)
            try:  # one call per rule, so that an error names the rule at fault
                if len(forms) > 1:
                    scratch = scratch or _scratch_egraph()
                    for form in forms:
                        scratch.parse_and_run_program(form)
                enc.egraph.parse_and_run_program("\n".join(forms))
            except bindings.EggSmolError as e:
                message = (
                    f"{rule.name} ({rule.source}) in ruleset '{rs.name}': could not be "
                    f"compiled to egglog: {str(e).splitlines()[0]}; the rule was not used"
                )
                if refused is None:
                    raise RuleError(message) from e
                refused.append(message)
                continue
            names.append(rule.name)
    return names


def _scratch_egraph() -> bindings.EGraph:
    """An empty e-graph with the encoder's declarations (not its shape rules: a rule only
    has to compile there) and the rules' ruleset."""
    from rewrite.egraph.schema import program

    eg = bindings.EGraph()
    eg.parse_and_run_program(f"{program(shapes=False)}\n(ruleset {RULES})")
    return eg


def saturate(
    enc: Encoded,
    rulesets: Sequence[RuleSet],
    limits: Limits,
    *,
    deadline: float | None = None,
    seconds_per_node: float = 0.0,
) -> SaturationStats:
    """Apply `rulesets` to `enc.egraph` until saturated or a limit is hit.

    `deadline` (a `time.monotonic()` time) ends the run in addition to `limits.seconds`;
    `seconds_per_node` is the time what follows saturation (snapshot, extraction, decoding)
    will take per e-node, reserved before the deadline for the e-graph saturation leaves.
    Never raises for a limit: the e-graph keeps what the iterations run so far added, and
    `stop_reason` names the limit. A rule egglog refuses is left out (`install`) and named in
    `SaturationStats.refused`.
    """
    start = time.monotonic()
    stop_at = min(
        math.inf if limits.seconds is None else start + limits.seconds,
        math.inf if deadline is None else deadline,
    )
    eg = enc.egraph
    stats = SaturationStats(node_limit=limits.nodes)
    names = install(enc, rulesets, stats.refused)
    stats.matches = dict.fromkeys(names, 0)
    eg.parse_and_run_program("(run-schedule (saturate (run shapes)))")
    stats.sizes.append(egraph_size(eg))
    if not names:
        stats.stop_reason = "no rules"
        return stats
    driver = _Driver(
        eg, limits, stats, growth_per_label(rulesets, RULES), stop_at, seconds_per_node
    )
    try:
        stats.stop_reason = driver.run()
    finally:
        stats.seconds = time.monotonic() - start
    return stats


class _Driver:
    """One saturation run: iterations, budgets, and the back-off threshold bounds."""

    def __init__(
        self,
        eg: bindings.EGraph,
        limits: Limits,
        stats: SaturationStats,
        growth: dict[str, int],
        stop_at: float,
        seconds_per_node: float,
    ) -> None:
        self.eg, self.limits, self.stats, self.stop_at = eg, limits, stats, stop_at
        self.per_node = seconds_per_node
        self.growth = growth
        """egglog rule label -> most e-nodes one match adds (k)."""
        self.k_scale = 1.0
        """Raised if an iteration ever grows more than sum(fired * k) (k was undercounted)."""
        self.memory_mb = limits.memory_mb or default_max_memory_mb()
        self.node_cap = limits.nodes * (1.0 + NODE_OVERSHOOT)
        self.rss0 = rss_mb()
        self.size0 = stats.sizes[0]
        # Persistent scheduler: its match limit is chosen so that the bound below fits in
        # half the node budget at the start, however many rules there are.
        total_k = max(1, sum(growth.values()))
        self.match_limit = max(1, min(limits.match_limit, int(self.node_cap / 2 / total_k)))
        self.bans: dict[str, int] = {}
        """label -> upper bound on the times the persistent scheduler banned it."""
        self.max_seen: dict[str, int] = {}
        """label -> most matches the persistent scheduler has seen for it at once."""
        self.pending: dict[str, int] = {}
        """label -> matches found but not fired (a banned rule keeps them)."""
        eg.parse_and_run_program(
            f"(let-scheduler {_SCHEDULER} (back-off :match-limit {self.match_limit} "
            f":ban-length {max(1, limits.ban_length)}))"
        )

    # -- bounds ---------------------------------------------------------------------------

    def threshold_bound(self, label: str) -> float:
        """Most matches `label` can fire next iteration under the persistent scheduler.

        Its threshold is match_limit * 2**bans, and a ban happens only when a rule has more
        matches than its threshold, so the threshold is also below 2 * the most matches seen.
        """
        by_bans = self.match_limit * 2.0 ** self.bans.get(label, 0)
        by_seen = max(self.match_limit, 2 * self.max_seen.get(label, 0))
        return min(by_bans, by_seen)

    def loose_bound(self) -> float:
        """Most e-nodes the next iteration can add under the persistent scheduler."""
        return self.k_scale * sum(self.threshold_bound(lb) * k for lb, k in self.growth.items())

    def budget(self, size: int, rss: float) -> tuple[float, str]:
        """E-nodes the next iteration may add, and the limit that sets that number."""
        by_nodes = self.node_cap - size
        grown = size - self.size0
        per_node = float(BYTES_PER_NODE)
        if grown > 1000:
            per_node = max(256.0, (rss - self.rss0) * 2**20 / grown)
        by_memory = (self.memory_mb - rss) * 2**20 / per_node
        options = [(by_nodes, "node_limit"), (by_memory, "memory_limit")]
        if math.isfinite(self.stop_at):
            # The iteration's fixed part, then `rate` a new e-node, then `per_node` for every
            # e-node after saturation (snapshot, extraction): all before the deadline.
            left = self.stop_at - time.monotonic() - self.predicted_seconds()
            left -= self.per_node * size
            options.append((left / (self.seconds_per_new_node() + self.per_node), "time_limit"))
        return min(options)

    def seconds_per_new_node(self) -> float:
        """Iteration seconds per e-node added: the worst measured so far (x1.5), or a default."""
        times, sizes = self.stats.iteration_seconds, self.stats.sizes
        rates = [
            t / (sizes[i + 1] - sizes[i])
            for i, t in enumerate(times)
            if sizes[i + 1] - sizes[i] >= 1000
        ]
        return 1.5 * max(rates) if rates else SECONDS_PER_NEW_NODE

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> str:
        """Iterate until saturated or a limit; returns the stop reason."""
        stats, limits = self.stats, self.limits
        while True:
            size = stats.sizes[-1]
            rss = rss_mb()
            stats.peak_rss_mb = max(stats.peak_rss_mb, rss)
            now = time.monotonic()
            if stats.iterations >= limits.iterations:
                return "iteration_limit"
            if size >= limits.nodes:
                return "node_limit"
            if rss >= self.memory_mb:
                return "memory_limit"
            if now + self.predicted_seconds() + self.per_node * size >= self.stop_at:
                return "time_limit"
            budget, binding = self.budget(size, rss)
            bounded = self.loose_bound() > budget
            match_limit = 0
            if bounded:
                total_k = self.k_scale * sum(self.growth.values())
                match_limit = int(budget // max(1.0, total_k))
                if match_limit < 1:
                    return binding
            t = time.monotonic()
            report = self.iterate(match_limit)
            stats.iteration_seconds.append(time.monotonic() - t)
            stats.iterations += 1
            stats.bounded_iterations += bounded
            new_size = egraph_size(self.eg)
            stats.sizes.append(new_size)
            held = self.account(report, match_limit, new_size - size)
            if not report.updated:
                if bounded and held:
                    return binding  # what is left does not fit in the budget
                if bounded or report.can_stop:
                    return "saturated"

    def iterate(self, match_limit: int) -> bindings.RunReport:
        """One application of the rules (persistent scheduler, or a fresh one limited to
        `match_limit` matches a rule), then the shape analysis to fixpoint."""
        if match_limit:
            program = (
                f"(run-schedule (seq (let-scheduler bounded (back-off :match-limit "
                f"{match_limit} :ban-length 1)) (run-with bounded {RULES})))"
            )
        else:
            program = f"(run-schedule (run-with {_SCHEDULER} {RULES}))"
        (out,) = self.eg.parse_and_run_program(program)
        self.eg.parse_and_run_program("(run-schedule (saturate (run shapes)))")
        assert isinstance(out, bindings.RunScheduleOutput)
        return out.report

    def account(self, report: bindings.RunReport, match_limit: int, growth: int) -> list[str]:
        """Record fired matches and held-back rules, update the threshold bounds; returns the
        labels of the rules that had more matches than they were allowed to fire."""
        fired = dict(report.num_matches_per_rule)
        found: dict[str, int] = {}
        if len(report.iterations) >= 2:  # the scheduler's query step, then its action step
            for label, parts in report.iterations[0].rule_set_report.rule_reports.items():
                found[label] = sum(p.num_matches for p in parts)
        held: list[str] = []
        for label in self.growth:
            if match_limit:
                if found.get(label, 0) > match_limit:
                    held.append(label)
                continue
            seen = found[label] if label in found else self.pending.get(label, 0)
            self.max_seen[label] = max(self.max_seen.get(label, 0), seen)
            if fired.get(label, 0) == 0 and seen > self.match_limit:
                # Possibly banned (counting every such iteration over-counts bans: safe).
                self.bans[label] = self.bans.get(label, 0) + 1
                self.pending[label] = seen
                held.append(label)
            else:
                self.pending[label] = 0
        for label in held:
            name = label.split("@", 1)[0]
            self.stats.throttled[name] = self.stats.throttled.get(name, 0) + 1
        for label, n in fired.items():
            name = label.split("@", 1)[0]
            if name in self.stats.matches:
                self.stats.matches[name] += n
        worst = sum(n * self.growth.get(label, 1) for label, n in fired.items())
        if growth > worst * self.k_scale:
            self.k_scale = growth / max(1, worst)
        return held

    def predicted_seconds(self) -> float:
        """The next iteration's fixed part (matching, rebuilding): the slowest of the last few,
        scaled by how much the e-graph has grown since (matching grows with the e-graph)."""
        times, sizes = self.stats.iteration_seconds, self.stats.sizes
        recent = range(max(0, len(times) - 5), len(times))
        return max((times[i] * sizes[-1] / max(1, sizes[i]) for i in recent), default=0.0)
