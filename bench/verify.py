"""Proof time per rule and for all built-in rules, cold and cached; refutation time of the
deliberately wrong rules; random-testing time.

Cold: `verify_rules` with an empty proof cache (every rule proved in Z3). Cached: the same
call again on the warm cache (the baseline, timed in the same run, is the cold call; the ratio
is cold / cached). Sample: `verify.sample` per rule (numpy float64 + ORT float32).

    .venv/bin/python bench/verify.py [--md out.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rewrite.rules.rule import Rule
from rewrite.verify.gate import verify_rules
from rewrite.verify.sample import sample
from rulesets import builtin


def _timed(rules: list[Rule]) -> tuple[float, list[float], list[str], list[int]]:
    t0 = time.perf_counter()
    per, status, cases = [], [], []
    for r in rules:
        t = time.perf_counter()
        res = verify_rules([r])[0]
        per.append(time.perf_counter() - t)
        status.append(res.status)
        cases.append(res.cases)
    return time.perf_counter() - t0, per, status, cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--md", help="also write the table as Markdown here")
    args = ap.parse_args()
    from tests.verify.wrong_rules import WRONG

    rules = [r for rs in builtin().values() for r in rs]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["REWRITE_CACHE_DIR"] = tmp
        cold, cold_per, status, cases = _timed(rules)
        warm, warm_per, _, _ = _timed(rules)
        wrong_cold, wrong_per, wrong_status, _ = _timed(list(WRONG))
    samples = [sample(r).seconds for r in rules]
    lines = [
        "| rule | status | cases | proof cold s | cached ms | sample s |",
        "|---|---|---|---|---|---|",
    ]
    for r, s, n, c, w, sm in zip(rules, status, cases, cold_per, warm_per, samples, strict=True):
        lines.append(f"| {r.name} | {s} | {n} | {c:.3f} | {w * 1e3:.2f} | {sm:.2f} |")
    lines.append(
        f"| **all {len(rules)} built-ins** | {sum(s == 'proved' for s in status)} proved | "
        f"{sum(cases)} | **{cold:.2f}** | **{warm * 1e3:.1f}** | {sum(samples):.2f} |"
    )
    refuted = sum(s == "refuted" for s in wrong_status)
    summary = (
        f"\nbuilt-ins: cold {cold:.2f} s, cached {warm * 1e3:.1f} ms "
        f"(cold / cached = {cold / warm:.0f}x)\n"
        f"wrong rules: {refuted}/{len(wrong_status)} refuted in {wrong_cold:.2f} s "
        f"(slowest {max(wrong_per):.3f} s)"
    )
    text = "\n".join(lines) + "\n" + summary
    print(text)
    if args.md:
        Path(args.md).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
