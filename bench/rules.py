"""Rule compile time, and saturation time and e-graph growth per rule set on real models.

Baseline in the same run: the e-graph of the same model with no rules (encode + shape
analysis only); growth is the saturated e-graph's e-nodes over that baseline, and saturation
time is reported next to the encode time it adds to.

    python bench/rules.py --models /tmp/corpus_mat --only bert,gpt2 \
        [--rules examples/custom_rules.py]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.rules.fold import fold_constants
from rewrite.rules.load import select_rulesets
from rewrite.rules.rule import RuleSet
from rewrite.rules.saturate import Limits, egraph_size, saturate


def compile_times(rulesets: list[RuleSet]) -> list[tuple[str, int, float]]:
    """(ruleset, egglog forms, seconds to build and compile every rule) per rule set."""
    out = []
    for rs in rulesets:
        t = time.perf_counter()
        forms = sum(len(r.compile("bench")) for r in rs)
        out.append((rs.name, forms, time.perf_counter() - t))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, required=True)
    ap.add_argument("--only", default="bert,gpt2")
    ap.add_argument("--rules", action="append", default=[])
    args = ap.parse_args()
    t = time.perf_counter()
    rulesets = select_rulesets(rule_files=args.rules, allow_approximate=True)
    load_s = time.perf_counter() - t
    print(f"rule loading (import + build + compile check): {load_s:.3f} s")
    print("| ruleset | rules | egglog forms | compile s |\n|---|---|---|---|")
    for name, forms, secs in compile_times(rulesets):
        n = len(next(rs for rs in rulesets if rs.name == name))
        print(f"| {name} | {n} | {forms} | {secs:.3f} |")
    print()
    print(
        "| model | ruleset | base e-nodes | saturated | growth | iterations | stop | "
        "encode s | saturate s | ratio |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    for name in args.only.split(","):
        graph, _ = fold_constants(load(args.models / f"{name}.onnx"))
        for rs in [*rulesets, RuleSet("all", [r for s in rulesets for r in s])]:
            t = time.perf_counter()
            enc = encode(graph)
            enc.egraph.parse_and_run_program("(run-schedule (saturate (run shapes)))")
            enc_s = time.perf_counter() - t
            base = egraph_size(enc.egraph)
            stats = saturate(enc, [rs], Limits())
            size = stats.sizes[-1]
            print(
                f"| {name} | {rs.name} | {base} | {size} | {size / base:.2f}x | "
                f"{stats.iterations} | {stats.stop_reason} | {enc_s:.2f} | "
                f"{stats.seconds:.3f} | {stats.seconds / enc_s:.2f}x |"
            )


if __name__ == "__main__":
    main()
