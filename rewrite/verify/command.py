"""`rewrite verify RULES.py...`: prove and sample rules, print a table, exit non-zero if any
rule is refuted.

With no file, the built-in rule sets are verified. For each rule the table gives its status
(proved / refuted / unknown / approximate), the bound (cases checked), its numeric class
(bit-exact / exact-in-reals / approximate, from random tests) and the proof's time, marked
`(cached)` when the proof was read from the proof cache (the time is then the one it took when
it was computed); the summary says how many proofs came from the cache and where it is. Every
refuted rule is followed by its counterexample. `--report out.json` writes every result as
JSON. Exit status: 0 when no rule is refuted, 1 when one is, or a rule file cannot be loaded
(a rule name defined twice included, as `optimize` refuses it), or the report cannot be
written.

`--ruleset NAME` and `--rule NAME` (each repeatable) verify only those rule sets / rules of
the loaded ones (both given: the named rules of the named sets); an unknown name is an error
that lists the names there are and suggests the nearest. Unless `-q`, one line per rule goes
to stderr as soon as it is verified (`verify: SET/RULE: STATUS (T s; proof P s)`), the
table and summary to stdout at the end. The table's time is the proof's; the progress line
also gives the rule's whole time, its adversarial sampling included (choosing the sampled
cases among the larger shapes, then ORT and numpy runs), which an approximate rule always
gets and `--no-sample` skips for an exact one.

`rewrite verify --self-test` checks the semantics instead (`verify.selftest`): every typed
op's numpy reference and Z3 semantics against ONNX Runtime on special values (±0, ±inf, NaN,
subnormals, large magnitudes, integer extremes), one row per op (input sets checked,
mismatches of each); exit status 1 when any op mismatches.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from rewrite.errors import RewriteError, RuleError
from rewrite.rules.rule import RuleSet
from rewrite.verify import cache as proof_cache
from rewrite.verify.bound import DEFAULT_BOUND
from rewrite.verify.gate import APPROXIMATE, REFUTED, RuleResult, verify_rules

EXIT_REFUTED = 1


def load_rulesets(paths: list[str]) -> list[RuleSet]:
    """The rule sets of the given files, or the built-in ones when there are none. Raises
    RuleError where `optimize` would refuse the files (a name defined twice included)."""
    from rewrite.rules.load import load_rulesets as load_with_builtins
    from rulesets import builtin

    available = load_with_builtins(paths)
    if not paths:
        return list(available.values())
    built_in = builtin()
    return [rs for name, rs in available.items() if name not in built_in]


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify the rules of `args.rules` (see the module docstring); returns the exit status."""
    if args.self_test:
        return cmd_self_test()
    t0 = time.perf_counter()
    if args.report:
        _check_writable(Path(args.report))
    rulesets = select(load_rulesets(list(args.rules)), args.ruleset or [], args.rule or [])
    rows: list[tuple[str, RuleResult]] = []
    for rs in rulesets:
        for rule in rs.rules:
            (r,) = verify_rules([rule], cache=not args.no_cache, sample=not args.no_sample)
            rows.append((rs.name, r))
            if not args.quiet:
                print(progress_line(rs.name, r), file=sys.stderr, flush=True)
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
    print(_cache_line(summary, args.no_cache), file=out)
    if args.report:
        report = {
            "bound": DEFAULT_BOUND.describe(),
            "summary": summary,
            "rules": [{"ruleset": n, **r.to_json()} for n, r in rows],
        }
        try:
            Path(args.report).write_text(json.dumps(report, indent=2, default=str))
        except OSError as e:
            raise RewriteError(f"{args.report}: cannot write the report: {e.strerror}") from e
    return EXIT_REFUTED if refuted else 0


def select(rulesets: list[RuleSet], sets: list[str], rules: list[str]) -> list[RuleSet]:
    """The rule sets named in `sets` (all when empty), each with only the rules named in
    `rules` (all when empty), in load order; sets left without a rule are dropped. RuleError
    for a name that is not there, listing the names there are and the nearest."""
    if sets:
        _check_names("rule set", sets, [rs.name for rs in rulesets])
        rulesets = [rs for rs in rulesets if rs.name in sets]
    if not rules:
        return rulesets
    _check_names("rule", rules, [r.name for rs in rulesets for r in rs.rules])
    kept = [RuleSet(rs.name, [r for r in rs.rules if r.name in rules], rs.doc) for rs in rulesets]
    return [rs for rs in kept if rs.rules]


def _check_names(what: str, wanted: list[str], known: list[str]) -> None:
    unknown = [n for n in dict.fromkeys(wanted) if n not in known]
    if not unknown:
        return
    near = [m for u in unknown for m in get_close_matches(u, known, n=1)]
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    there = ", ".join(known) if known else "none"
    raise RuleError(f"no {what} named {', '.join(unknown)}{hint}; {what}s: {there}")


def progress_line(ruleset: str, r: RuleResult) -> str:
    """The line printed as soon as a rule is verified: its status, this call's time on it,
    and the proof's time (from the cache when it was read from there)."""
    proof = f"proof {r.proof_seconds:.2f} s" + (", cached" if r.cached else "")
    return f"verify: {ruleset}/{r.rule}: {r.status} ({r.seconds:.2f} s; {proof})"


def cmd_self_test() -> int:
    """`rewrite verify --self-test`: the table of `verify.selftest`; 1 on a mismatch."""
    from rewrite.verify.selftest import self_test
    from rewrite.verify.selftest import table as op_table

    t0 = time.perf_counter()
    rows = self_test()
    print(op_table(rows))
    bad = [r.label for r in rows if not r.ok]
    summary = f"{len(rows)} ops: {len(rows) - len(bad)} match ORT"
    print(f"\n{summary}, {len(bad)} do not{': ' + ', '.join(bad) if bad else ''} "
          f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip
    return EXIT_REFUTED if bad else 0


def _check_writable(path: Path) -> None:
    """RewriteError unless `path` can be written as a file (checked before any proof runs)."""
    if path.is_dir():
        raise RewriteError(f"{path}: is a directory; --report needs a file name")
    if not path.parent.is_dir():
        raise RewriteError(f"{path}: the folder {path.parent} does not exist")


def _cache_line(summary: dict[str, Any], no_cache: bool) -> str:
    """How many proofs came from the proof cache, and where it is."""
    if no_cache:
        return "proof cache: not used (--no-cache); every proof ran now"
    where = proof_cache.cache_dir()
    line = f"proof cache: {summary['cached']} of {summary['rules']} proofs read from {where}"
    return line + (" (marked (cached): times from when they ran)" if summary["cached"] else "")


def _summary(rows: list[tuple[str, RuleResult]], total: float) -> dict[str, Any]:
    def count(status: str) -> int:
        return sum(r.status == status for _, r in rows)

    return {
        "rules": len(rows),
        "proved": count("proved"),
        "approximate": count(APPROXIMATE),
        "refuted": count(REFUTED),
        "unknown": count("unknown"),
        "cached": sum(r.cached for _, r in rows),
        "cache": str(proof_cache.cache_dir()),
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
        when = f"{r.proof_seconds:.2f}s" + (" (cached)" if r.cached else "")
        lines.append((f"{name}/{r.rule}", r.status, f"{r.cases} cases", numeric, when))
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in lines
    )


def add_verify_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `verify` to the CLI's subparsers (its handler is `cmd_verify`)."""
    v = subparsers.add_parser(
        "verify",
        help="prove rules (Z3) and sample them adversarially (numpy, ORT)",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    v.add_argument(
        "rules", nargs="*", metavar="RULES.py", help="rule files (default: the built-in rule sets)"
    )
    v.add_argument("--report", metavar="JSON", help="write every result as JSON here")
    v.add_argument(
        "--no-cache", action="store_true", help="ignore and do not update the proof cache"
    )
    v.add_argument("--no-sample", action="store_true", help="prove only (no adversarial sampling)")
    v.add_argument(
        "--ruleset",
        action="append",
        metavar="NAME",
        help="verify only this rule set of the loaded ones (repeatable)",
    )
    v.add_argument(
        "--rule",
        action="append",
        metavar="NAME",
        help="verify only this rule of the loaded rule sets (repeatable)",
    )
    v.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress line per rule on stderr (the table still prints)",
    )
    v.add_argument(
        "--self-test",
        action="store_true",
        help="check every typed op's numpy reference and Z3 semantics against ONNX Runtime "
        "on special values (no rules are verified)",
    )
    v.set_defaults(func=cmd_verify)
    return v
