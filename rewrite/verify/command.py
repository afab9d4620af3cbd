"""`rewrite verify RULES.py...`: prove and sample rules, print a table, exit non-zero if any
rule is refuted.

With no file, the built-in rule sets are verified. For each rule the table gives its status
(proved / refuted / unknown / approximate), the bound (cases checked), its numeric class
(bit-exact / exact-in-reals / approximate, from random tests) and the time; every refuted rule
is followed by its counterexample. `--report out.json` writes every result as JSON.
Exit status: 0 when no rule is refuted, 1 when one is (or a rule file cannot be loaded).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rewrite.rules.rule import RuleSet
from rewrite.verify.bound import DEFAULT_BOUND
from rewrite.verify.gate import APPROXIMATE, REFUTED, RuleResult, verify_rules

EXIT_REFUTED = 1


def load_rulesets(paths: list[str]) -> list[RuleSet]:
    """The rule sets of the given files, or the built-in ones when there are none."""
    if not paths:
        from rulesets import builtin

        return list(builtin().values())
    from rewrite.rules.load import load_rule_file

    return [rs for p in paths for rs in load_rule_file(p)]


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify the rules of `args.rules` (see the module docstring); returns the exit status."""
    t0 = time.perf_counter()
    rulesets = load_rulesets(list(args.rules))
    rows: list[tuple[str, RuleResult]] = []
    for rs in rulesets:
        results = verify_rules(rs.rules, cache=not args.no_cache, sample=not args.no_sample)
        rows += [(rs.name, r) for r in results]
    total = time.perf_counter() - t0
    out = sys.stdout
    print(f"bound: {DEFAULT_BOUND.describe()}", file=out)
    print(table(rows), file=out)
    for name, r in rows:
        if r.status != "proved" and r.status != APPROXIMATE:
            print(f"\n{name}/{r.message()}", file=out)
        for note in r.notes:
            print(f"\n{name}/{r.rule}: note: {note}", file=out)
    refuted = sum(r.status == REFUTED for _, r in rows)
    summary = _summary(rows, total)
    print(
        f"\n{summary['rules']} rules: {summary['proved']} proved, {summary['approximate']} "
        f"approximate, {refuted} refuted, {summary['unknown']} unknown ({total:.2f} s)",
        file=out,
    )
    if args.report:
        report = {
            "bound": DEFAULT_BOUND.describe(),
            "summary": summary,
            "rules": [{"ruleset": n, **r.to_json()} for n, r in rows],
        }
        Path(args.report).write_text(json.dumps(report, indent=2, default=str))
    return EXIT_REFUTED if refuted else 0


def _summary(rows: list[tuple[str, RuleResult]], total: float) -> dict[str, Any]:
    def count(status: str) -> int:
        return sum(r.status == status for _, r in rows)

    return {
        "rules": len(rows),
        "proved": count("proved"),
        "approximate": count(APPROXIMATE),
        "refuted": count(REFUTED),
        "unknown": count("unknown"),
        "seconds": total,
    }


def table(rows: list[tuple[str, RuleResult]]) -> str:
    """The results as an aligned text table."""
    head = ("rule", "status", "bound", "numeric", "time")
    lines = [head]
    for name, r in rows:
        numeric = r.numeric or "-"
        if r.numeric == APPROXIMATE and r.max_error is not None:
            numeric += f" ({r.max_error:.2g})"
        when = "cached" if r.cached else f"{r.proof_seconds:.2f}s"
        lines.append((f"{name}/{r.rule}", r.status, f"{r.cases} cases", numeric, when))
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in lines
    )


def add_verify_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `verify` to the CLI's subparsers (its handler is `cmd_verify`)."""
    v = subparsers.add_parser(
        "verify",
        help="prove rules (Z3) and random-test them (numpy, ORT)",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    v.add_argument(
        "rules", nargs="*", metavar="RULES.py", help="rule files (default: the built-in rule sets)"
    )
    v.add_argument("--report", metavar="JSON", help="write every result as JSON here")
    v.add_argument(
        "--no-cache", action="store_true", help="ignore and do not update the proof cache"
    )
    v.add_argument("--no-sample", action="store_true", help="prove only (no random tests)")
    v.set_defaults(func=cmd_verify)
    return v
