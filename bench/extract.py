"""Extraction on real and synthetic e-graphs: greedy vs ILP (cost, time, gap) and shrink.

For every corpus model, each rule-set choice builds the saturated e-graph with the real
pipeline stages (load, fold, encode, saturate, snapshot) and prices it for the CPU target.
`cleanup` is the default rule set (what `rewrite optimize` runs today); `ac` adds
commutativity, associativity and distributivity of Add/Mul (and MatMul over Add) to make
e-graphs with many equivalent alternatives, the ILP's hard case; `custom` adds the rules of
`examples/custom_rules.py`. Synthetic e-graphs come from `tests/extract/egraphs.py`.

Greedy, the baseline, is timed in the same run; ratio = ILP cost / greedy cost (< 1: the ILP
found a cheaper graph). ILP time includes shrink and model building.

    python bench/extract.py --models /tmp/corpus_mat [--only bert,gpt2] [--rules cleanup,ac]
        [--synthetic] [--time-limit 10] [--acyclic order|cuts|both] [--compare-shrink]
        [--md out.md]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewrite.extract import NodeCosts, Snapshot, check_choice, greedy, ilp, node_costs  # noqa: E402
from rewrite.extract.cost import CPU  # noqa: E402
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite  # noqa: E402

AC = RuleSet("ac", doc="commutativity, associativity, distributivity: many alternatives")


@AC.rule
def add_commutes(a: Tensor, b: Tensor) -> Rewrite:
    """a + b = b + a"""
    return rewrite(a + b).to(b + a)


@AC.rule
def mul_commutes(a: Tensor, b: Tensor) -> Rewrite:
    """a · b = b · a"""
    return rewrite(a * b).to(b * a)


@AC.rule
def add_associates(a: Tensor, b: Tensor, c: Tensor) -> list[Rewrite]:
    """(a + b) + c = a + (b + c)"""
    return [rewrite((a + b) + c).to(a + (b + c)), rewrite(a + (b + c)).to((a + b) + c)]


@AC.rule
def mul_associates(a: Tensor, b: Tensor, c: Tensor) -> list[Rewrite]:
    """(a · b) · c = a · (b · c)"""
    return [rewrite((a * b) * c).to(a * (b * c)), rewrite(a * (b * c)).to((a * b) * c)]


@AC.rule
def mul_distributes(a: Tensor, b: Tensor, c: Tensor) -> list[Rewrite]:
    """a · (b + c) = a · b + a · c"""
    return [rewrite(a * (b + c)).to(a * b + a * c), rewrite(a * b + a * c).to(a * (b + c))]


@AC.rule
def matmul_distributes(a: Tensor, b: Tensor, c: Tensor) -> list[Rewrite]:
    """a @ (b + c) = a @ b + a @ c   when b and c have one shape"""
    return [
        rewrite(op.MatMul(a, b + c)).to(a @ b + a @ c, b.shape == c.shape),
        rewrite(a @ b + a @ c).to(op.MatMul(a, b + c), b.shape == c.shape),
    ]


def rule_sets(name: str) -> list[RuleSet]:
    from rulesets.cleanup import CLEANUP

    if name == "cleanup":
        return [CLEANUP]
    if name == "ac":
        return [CLEANUP, AC]
    if name == "custom":
        from rewrite.rules.load import load_rule_file

        return [CLEANUP, *load_rule_file(ROOT / "examples" / "custom_rules.py")]
    raise SystemExit(f"unknown rule set {name!r}; known: cleanup, ac, custom")


def corpus_egraph(model: Path, rules: str, nodes: int) -> tuple[Snapshot, NodeCosts, str]:
    """The priced snapshot of `model` saturated with `rules` (at most about `nodes` e-nodes),
    and saturation's stop reason."""
    from rewrite.egraph.encode import encode
    from rewrite.egraph.snapshot import take_snapshot
    from rewrite.onnx_io import load
    from rewrite.rules.fold import fold_constants
    from rewrite.rules.saturate import Limits, saturate

    graph, _ = fold_constants(load(model))
    enc = encode(graph)
    stats = saturate(enc, rule_sets(rules), Limits(nodes=nodes, seconds=60.0))
    snap = take_snapshot(enc)
    costs = node_costs(snap, CPU)
    snap.consts = {}  # the weights: not needed to extract, and large
    return snap, costs, stats.stop_reason


SYNTHETIC = [  # (classes, window, max e-nodes per class, P(cycle)), seed 1, 3 roots
    (1_000, 10, 3, 0.1),
    (3_000, 10, 3, 0.1),
    (10_000, 20, 3, 0.05),
    (3_000, 10, 3, 0.5),
]


def synthetic() -> Iterator[tuple[str, Callable[[], tuple[Snapshot, NodeCosts, str]]]]:
    from tests.extract.egraphs import random_egraph

    for n, window, nodes, p_cycle in SYNTHETIC:

        def make(n: int = n, w: int = window, k: int = nodes, p: float = p_cycle) -> tuple:
            snap, costs = random_egraph(1, n, max_nodes=k, window=w, p_cycle=p, n_roots=3)
            return snap, costs, "random"

        yield f"random n={n} w={window} cyc={p_cycle}", make


def measure(
    name: str, snap: Snapshot, costs: NodeCosts, args: argparse.Namespace
) -> dict[str, object]:
    t = time.perf_counter()
    base = greedy(snap, costs)
    row: dict[str, object] = {
        "egraph": name,
        "classes": len(snap),
        "enodes": snap.n_nodes,
        "greedy": base.cost,
        "greedy_s": time.perf_counter() - t,
    }
    modes = ["order", "cuts"] if args.acyclic == "both" else [args.acyclic]
    for mode in modes:
        t = time.perf_counter()
        choice, stats = ilp(snap, costs, warm=base, time_limit=args.time_limit, acyclic=mode)
        seconds = time.perf_counter() - t
        check_choice(snap, choice)
        sfx = "" if mode == modes[0] else f"_{mode}"
        row.update(
            {
                f"ilp{sfx}": choice.cost,
                f"ilp_s{sfx}": seconds,
                f"gap{sfx}": stats.gap,
                f"status{sfx}": stats.status,
            }
        )
        row.setdefault("shrink", stats.shrink)
        row.setdefault("blocks", stats.blocks)
    if args.compare_shrink:
        t = time.perf_counter()
        _, stats = ilp(snap, costs, warm=base, time_limit=args.time_limit, reduce=False)
        row["noshrink_s"], row["noshrink_gap"] = time.perf_counter() - t, stats.gap
    row["ratio"] = row["ilp"] / base.cost if base.cost else 1.0  # type: ignore[operator]
    return row


def tables(rows: list[dict[str, object]], args: argparse.Namespace) -> list[str]:
    """Markdown lines: the extraction table, then what each shrink step removed."""
    both = args.acyclic == "both"
    head = ["e-graph", "classes", "e-nodes", "after shrink", "blocks", "greedy cost", "greedy s"]
    head += ["ILP cost", "ILP s", "gap", "status", "ILP/greedy"]
    if both:
        head += ["cuts s", "cuts gap"]
    if args.compare_shrink:
        head += ["no-shrink s", "no-shrink gap"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r["shrink"]
        cells = [
            str(r["egraph"]),
            f"{r['classes']:,}",
            f"{r['enodes']:,}",
            f"{s.classes_after:,} / {s.nodes_after:,}",  # type: ignore[attr-defined]
            str(r["blocks"]),
            f"{r['greedy']:.6g}",
            f"{r['greedy_s']:.2f}",
            f"{r['ilp']:.6g}",
            f"{r['ilp_s']:.2f}",
            f"{r['gap']:.2%}",
            str(r["status"]),
            f"{r['ratio']:.4f}",
        ]
        if both:
            cells += [f"{r['ilp_s_cuts']:.2f}", f"{r['gap_cuts']:.2%}"]
        if args.compare_shrink:
            cells += [f"{r['noshrink_s']:.2f}", f"{r['noshrink_gap']:.2%}"]
        out.append("| " + " | ".join(cells) + " |")
    steps = ["pruned_classes", "unusable_nodes", "dominated_nodes", "fixed_classes"]
    steps += ["merged_classes"]
    out += ["", "| e-graph | e-nodes | " + " | ".join(steps) + " | left | shrink s |"]
    out.append("|" + "---|" * (len(steps) + 4))
    for r in rows:
        s = r["shrink"]
        vals = [f"{getattr(s, k):,}" for k in steps]
        out.append(
            f"| {r['egraph']} | {s.nodes_before:,} | "  # type: ignore[attr-defined]
            + " | ".join(vals)
            + f" | {s.nodes_after:,} | {s.seconds:.2f} |"  # type: ignore[attr-defined]
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="/tmp/corpus_mat", help="folder of materialized models")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--rules", default="cleanup,ac", help="rule-set choices: cleanup,ac,custom")
    ap.add_argument("--synthetic", action="store_true", help="also random e-graphs")
    ap.add_argument("--no-corpus", action="store_true", help="only the synthetic e-graphs")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument(
        "--nodes",
        type=int,
        default=400_000,
        help="saturation's e-node limit (with `ac`: gpt2 reaches ~47k e-nodes, vit ~18k)",
    )
    ap.add_argument("--acyclic", choices=["order", "cuts", "both"], default="order")
    ap.add_argument("--compare-shrink", action="store_true", help="also time the ILP unshrunk")
    ap.add_argument("--md", help="write the tables to this Markdown file")
    args = ap.parse_args()

    jobs: list[tuple[str, Callable[[], tuple[Snapshot, NodeCosts, str]]]] = []
    if not args.no_corpus:
        only = {s for s in args.only.split(",") if s}
        for model in sorted(Path(args.models).glob("*.onnx")):
            if only and model.stem not in only:
                continue
            for rules in args.rules.split(","):
                job = lambda m=model, r=rules: corpus_egraph(m, r, args.nodes)  # noqa: E731
                jobs.append((f"{model.stem} {rules}", job))
    if args.synthetic or args.no_corpus:
        jobs += list(synthetic())
    rows = []
    for name, make in jobs:
        try:
            snap, costs, stop = make()
        except Exception as e:  # a stage before extraction failed: say so, go on
            print(f"{name}: e-graph not built ({type(e).__name__}: {e})", flush=True)
            continue
        row = measure(
            f"{name} ({stop})" if stop not in ("saturated", "random") else name, snap, costs, args
        )
        rows.append(row)
        print(
            f"{row['egraph']}: {row['classes']} classes, {row['enodes']} e-nodes; greedy "
            f"{row['greedy']:.6g} in {row['greedy_s']:.2f}s; ILP {row['ilp']:.6g} in "
            f"{row['ilp_s']:.2f}s, gap {row['gap']:.2%} ({row['status']}); "
            f"ratio {row['ratio']:.4f}",
            flush=True,
        )
        del snap, costs
        gc.collect()
    text = "\n".join(tables(rows, args))
    print()
    print(text)
    if args.md:
        Path(args.md).write_text(
            f"Extraction bench (`python bench/extract.py {' '.join(sys.argv[1:])}`), "
            f"ILP time limit {args.time_limit:g} s, costs in µs (CPU target).\n\n{text}\n"
        )


if __name__ == "__main__":
    main()
