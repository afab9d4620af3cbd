"""Verification time: every built-in rule and the wrong-rule suite, cold and cached, and what a
warm `optimize` pays for proofs.

Cold: `verify_rules` (Z3 proof + adversarial sampling) with an empty proof cache. Cached: the
same call again on the warm cache (the baseline, timed in the same run, is the cold call; the
ratio is cold / cached). Sample: `verify.sample` alone per rule (special values in ORT and
numpy). Wrong rules: `tests/verify/wrong_rules.py` (each must be refuted) and their sound
twins `tests/verify/twin_rules.py` (each must be proved), cold. Warm optimize: `rewrite
optimize` on the demo model three times on one empty cache; the report's `prove` stage of the
cold run and of the warm ones.

    .venv/bin/python bench/verify.py [--md out.md] [--skip-wrong]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewrite.rules.rule import Rule  # noqa: E402  (after the path setup)
from rewrite.verify.gate import RuleResult, verify_rules  # noqa: E402
from rewrite.verify.sample import sample  # noqa: E402
from rulesets import builtin  # noqa: E402

DEMO = ROOT / "examples" / "models" / "tiny_bert_block.onnx"


def _timed(rules: list[Rule]) -> tuple[float, list[float], list[RuleResult]]:
    t0 = time.perf_counter()
    per, results = [], []
    for r in rules:
        t = time.perf_counter()
        results.append(verify_rules([r])[0])
        per.append(time.perf_counter() - t)
    return time.perf_counter() - t0, per, results


def _optimize_prove_stage(cache: str) -> list[float]:
    """The `prove` stage of three `rewrite optimize` runs of the demo model on `cache`."""
    out = []
    env = {**os.environ, "REWRITE_CACHE_DIR": cache}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(3):
            report = Path(tmp) / f"r{k}.json"
            cmd = [str(ROOT / ".venv/bin/rewrite"), "optimize", str(DEMO), f"{tmp}/o.onnx"]
            subprocess.run([*cmd, "--report", str(report)], env=env, capture_output=True)
            out.append(json.loads(report.read_text())["stages"]["prove"])
    return out


def _builtin_table(rules: list[Rule], cold: list[float], warm: list[float],
                   res: list[RuleResult], samples: list[float]) -> list[str]:  # fmt: skip
    lines = [
        "| rule | status | cases | cold s (proof + sample) | cached ms | sample s |",
        "|---|---|---|---|---|---|",
    ]
    for r, c, w, x, sm in zip(rules, cold, warm, res, samples, strict=True):
        lines.append(f"| {r.name} | {x.status} | {x.cases} | {c:.3f} | {w * 1e3:.2f} | {sm:.2f} |")
    proved = sum(x.status == "proved" for x in res)
    lines.append(
        f"| **all {len(rules)} built-ins** | {proved} proved | {sum(x.cases for x in res)} | "
        f"**{sum(cold):.2f}** | **{sum(warm) * 1e3:.1f}** | {sum(samples):.2f} |"
    )
    return lines


def _suite(name: str, rules: list[Rule], want: str) -> tuple[str, list[str]]:
    total, per, res = _timed(rules)
    hit = sum(x.status == want for x in res)
    rows = [f"| {r.name} | {x.status} | {t:.2f} | {x.counterexample_line[:140]} |"
            for r, x, t in zip(rules, res, per, strict=True)]  # fmt: skip
    line = f"{name}: {hit}/{len(rules)} {want} in {total:.1f} s (slowest {max(per):.2f} s)"
    return line, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--md", help="also write the tables as Markdown here")
    ap.add_argument("--skip-wrong", action="store_true", help="built-ins and optimize only")
    args = ap.parse_args()
    from tests.verify.twin_rules import TWINS
    from tests.verify.wrong_rules import WRONG

    rules = [r for rs in builtin().values() for r in rs]
    summary, detail = [], ["| rule | status | cold s | counterexample |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["REWRITE_CACHE_DIR"] = tmp
        cold, cold_per, res = _timed(rules)
        warm, warm_per, _ = _timed(rules)
        if not args.skip_wrong:
            for name, rs, want in (("wrong rules", WRONG, "refuted"), ("twins", TWINS, "proved")):
                line, rows = _suite(name, list(rs), want)
                summary.append(line)
                detail += rows
    samples = [sample(r).seconds for r in rules]
    with tempfile.TemporaryDirectory() as tmp:
        stages = _optimize_prove_stage(tmp)
    lines = _builtin_table(rules, cold_per, warm_per, res, samples)
    summary = [
        f"built-ins: cold {cold:.2f} s, cached {warm * 1e3:.1f} ms "
        f"(cold / cached = {cold / warm:.0f}x)",
        *summary,
        f"optimize (demo model), prove stage: cold {stages[0]:.2f} s, warm "
        f"{stages[1] * 1e3:.1f} ms and {stages[2] * 1e3:.1f} ms",
    ]
    text = "\n".join(lines) + "\n\n" + "\n".join(summary)
    if not args.skip_wrong:
        text += "\n\n" + "\n".join(detail)
    print(text)
    if args.md:
        Path(args.md).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
