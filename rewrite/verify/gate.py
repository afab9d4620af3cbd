"""The gate: which rules `optimize` may use, and the verification results behind it.

`verify_rules(rules)` proves and adversarially samples (`verify.sample`: special values in
ORT and numpy) every rule, with results cached (`verify.cache`: a warm call reads them), and
returns one `RuleResult` per rule. Its `status`:
- `proved`: proved for the bound (`verify.prove`) and no sample breaks the rule's claimed
  class (`bit-exact`, `exact`);
- `approximate`: an `approximate`-tagged rule that is not exact but whose sampled error is
  within `tolerance`;
- `refuted`: a counterexample (`counterexample`) from the prover, or from a sample that breaks
  the claimed class or that ORT refuses on the right side only (`ort-rejects-rhs`; a sampled
  counterexample reproduces in ORT by construction), or an approximate rule sampled outside
  its tolerance;
- `unknown`: neither (`reason` says why).
`sample=False` skips sampling (`rewrite verify --no-sample`): the status is the proof's.

`gate(rulesets, allow_approximate=...)` keeps an exact rule only if `proved`, and an
approximate rule only if approximate rules are allowed and it is `proved` or `approximate`;
approximate rules that are not allowed are dropped without verification. It returns the
accepted rule sets (same names and order) and the results of the refused rules, each with
its counterexample or reason, for the report.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache as _memo
from importlib.metadata import version
from typing import Any

from rewrite.rules.rule import Rule, RuleSet
from rewrite.verify import cache as proof_cache
from rewrite.verify.bound import DEFAULT_BOUND, Bound, rule_domain
from rewrite.verify.prove import PROVED, REFUTED, UNKNOWN, ProofResult, prove
from rewrite.verify.refute import APPROX_TOLERANCE

APPROXIMATE = "approximate"


@dataclass
class RuleResult:
    """What verification says about one rule (JSON-ready via `to_json`)."""

    rule: str
    source: str
    identity: str
    tags: list[str]
    status: str
    bound: str
    cases: int
    seconds: float
    """Time this call spent on the rule (a cache hit: reading the entry)."""
    proof_seconds: float
    """Time the proof took when it was computed."""
    counterexample: dict[str, Any] | None = None
    counterexample_line: str = ""
    reason: str = ""
    numeric: str | None = None
    max_error: float | None = None
    max_error_f32: float | None = None
    domain: str = ""
    """Where the proof holds and the compiled rule matches (`rules.domain.Domain`)."""
    cached: bool = False
    """The proof was read from the proof cache (`proof_seconds` is then from when it ran);
    a numeric sample run now does not change that."""
    notes: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.status == PROVED or self.status == APPROXIMATE

    def message(self) -> str:
        """One line: the rule, where it is, its status and why (the counterexample)."""
        why = self.counterexample_line or self.reason or self.status
        return f"{self.rule} ({self.source}): {self.status}: {why}"

    def refusal(self) -> str:
        """The warning `optimize` gives for a refused rule."""
        return f"{self.message()}; the rule was not used. Fix or drop it."

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def verify_rules(
    rules: Iterable[Rule],
    *,
    bound: Bound = DEFAULT_BOUND,
    cache: bool = True,
    sample: bool = True,
    tolerance: float | None = None,
) -> list[RuleResult]:
    """Verify every rule (see the module docstring). `sample=False` samples only approximate
    rules whose proof fails."""
    tol = APPROX_TOLERANCE if tolerance is None else tolerance
    return [_verify(r, bound, cache, sample, tol) for r in rules]


@_memo
def _ort_version() -> str:
    return version("onnxruntime")


def _verify(rule: Rule, bound: Bound, use_cache: bool, want_sample: bool, tol: float) -> RuleResult:
    t0 = time.perf_counter()
    k = proof_cache.key(rule, bound)
    entry = (proof_cache.load(k) if use_cache else None) or {}
    cached = "proof" in entry
    changed = not cached
    if not cached:
        entry["proof"] = _proof_json(prove(rule, bound))
    proof = entry["proof"]
    needs_sample = want_sample or (not rule.exact and proof["status"] != PROVED)
    ort = _ort_version() if needs_sample else ""
    if needs_sample and (entry.get("sample") or {}).get("ort") != ort:
        from rewrite.verify.sample import sample

        s = sample(rule, tolerance=tol)
        entry["sample"] = {"ort": ort, **asdict(s)}
        changed = True
    if changed and use_cache:
        proof_cache.store(k, entry)
    res = _result(
        rule,
        proof,
        entry.get("sample") if needs_sample else None,
        tol,
        time.perf_counter() - t0,
        cached,
    )
    res.domain = rule_domain(rule, bound).describe()
    return res


def _proof_json(p: ProofResult) -> dict[str, Any]:
    cx = p.counterexample
    return {
        "status": p.status,
        "bound": p.bound,
        "cases": p.cases,
        "seconds": p.seconds,
        "reason": p.reason,
        "counterexample": cx.to_json() if cx else None,
        "counterexample_line": cx.line() if cx else "",
    }


STRUCTURAL = (
    "the sides differ in type",
    "the right side is not defined",
    "the right side is undefined",
)
"""Counterexamples no tolerance excuses: an approximate rule refuted so stays refuted, whatever
its sample shows (its values may agree where both sides are defined)."""


def _structural(cx: dict[str, Any] | None) -> bool:
    return bool(cx) and str(cx.get("why", "")).startswith(STRUCTURAL)  # type: ignore[union-attr]


def _result(
    rule: Rule,
    proof: dict[str, Any],
    sampled: dict[str, Any] | None,
    tol: float,
    seconds: float,
    cached: bool,
) -> RuleResult:
    status, reason = proof["status"], proof["reason"]
    cx, cx_line = proof["counterexample"], proof["counterexample_line"]
    if not rule.exact and status != PROVED and sampled is not None and not _structural(cx):
        err = sampled["max_error"]
        if sampled.get("crashed") and not sampled.get("counterexample"):
            status = UNKNOWN
            reason = f"sampling failed on {sampled['crashed']} case(s), a bug of rewrite's"
            reason += f" ({'; '.join(sampled['notes'])[:300]}): not accepted as approximate"
        elif sampled.get("unsampled") and not sampled.get("counterexample"):
            status = UNKNOWN
            missed = ", ".join(str(k) for k in sampled["unsampled"])
            reason = f"no sample of rewrite(s) {missed} of {len(rule.rewrites)} (too many typings"
            reason += " to enumerate): not accepted as approximate"
        elif sampled["samples"] > 0 and err <= tol and not sampled.get("counterexample"):
            status, reason = APPROXIMATE, f"not exact; sampled max error {err:.3g} <= {tol:g}"
        else:
            status = REFUTED
            reason = f"sampled max error {err:.3g} exceeds the tolerance {tol:g}"
    if status != REFUTED and sampled is not None and sampled.get("counterexample"):
        status = REFUTED
        reason = f"a sample breaks the rule's `{sampled.get('claim', 'exact')}` claim"
    if status == REFUTED and not cx and sampled is not None and sampled.get("counterexample"):
        cx, cx_line = sampled["counterexample"], sampled["counterexample_line"]
    res = RuleResult(
        rule=rule.name,
        source=rule.source,
        identity=rule.identity,
        tags=sorted(rule.tags),
        status=status,
        bound=proof["bound"],
        cases=proof["cases"],
        seconds=seconds,
        proof_seconds=proof["seconds"],
        counterexample=cx,
        counterexample_line=cx_line,
        reason=reason,
        cached=cached,
    )
    if sampled is not None:
        res.numeric = sampled["numeric"]
        res.max_error = sampled["max_error"]
        res.max_error_f32 = sampled["max_error_f32"]
        res.notes = list(sampled["notes"])
    return res


def gate(
    rulesets: Sequence[RuleSet],
    *,
    allow_approximate: bool,
    bound: Bound = DEFAULT_BOUND,
    cache: bool = True,
    tolerance: float | None = None,
    accepted_results: list[RuleResult] | None = None,
) -> tuple[list[RuleSet], list[RuleResult]]:
    """(accepted rule sets, results of the refused rules); see the module docstring. The
    results of the accepted rules are appended to `accepted_results` when it is given."""
    accepted: list[RuleSet] = []
    refused: list[RuleResult] = []
    for rs in rulesets:
        wanted = [r for r in rs.rules if r.exact or allow_approximate]
        results = verify_rules(wanted, bound=bound, cache=cache, tolerance=tolerance)
        keep = []
        for rule, res in zip(wanted, results, strict=True):
            if res.accepted:
                keep.append(replace(rule, domain=rule_domain(rule, bound)))
                if accepted_results is not None:
                    accepted_results.append(res)
            else:
                refused.append(res)
        accepted.append(RuleSet(rs.name, keep, rs.doc))
    return accepted, refused


__all__ = ["APPROXIMATE", "PROVED", "REFUTED", "UNKNOWN", "RuleResult", "gate", "verify_rules"]
