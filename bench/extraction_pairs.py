"""Pairs of equivalent graphs drawn from real extractions of real saturated e-graphs.

For one model, `saturated` runs the pipeline's own stages in this process (load, fold,
encode, saturate with the default limits, snapshot, `node_costs` for the CPU target at the
sizes of the pipeline's sizing run: what `rewrite/stages.py` runs with default options) with
the rule sets `rule_sets` returns: the built-ins plus `examples/custom_rules.py`, through the
proof gate `optimize` uses.
`sample_choices` takes the first k distinct extractions of that one snapshot, in this order:

- `ilp`: `run_extraction` (greedy, then the ILP warm-started from it): what `optimize` writes;
- `greedy`: the greedy choice on the same costs;
- `input`: greedy restricted to the input graph's own e-nodes (found again in the saturated
  e-graph by structure), i.e. the input graph after the e-graph's merges (CSE, clean-ups);
- `jitter-i`, `random-i` alternating, i = 0, 1, ...: greedy on the costs times seeded
  log-normal noise (sigma 1: near-optimal choices), and greedy on seeded uniform random costs
  (a random acyclic choice per class).

Every choice passes `check_choice`; a choice that picks the same e-nodes as an earlier one for
the classes the roots need is the same graph and is skipped. `extraction_pairs` decodes each
choice, folds the constants it computes (as `optimize` does), saves it and checks it against
the input model with the pipeline's differential check (2 seeded feed sets, calibrated
tolerance); a failing one is dropped and reported. The pairs are pairs of verified choices
(`ilp` vs `input` first when both exist: the decision `optimize` makes; the others in a
seeded shuffled order), named by how B's saved graph differs from A's in nodes per op (what
ORT is given, constants folded); each side is priced with `graph_cost` of its choice under the
unperturbed costs: the number the extractor compared.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path

from cost_pairs import Pair

from rewrite.egraph.decode import decode
from rewrite.egraph.encode import Encoded, encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.extract import (
    CPU,
    Choice,
    ENode,
    NodeCosts,
    Snapshot,
    check_choice,
    graph_cost,
    greedy,
    node_costs,
    run_extraction,
)
from rewrite.extract.cost import FREE_OPS, reachable
from rewrite.onnx_io import load, save
from rewrite.onnx_io.concrete import sizing_types
from rewrite.onnx_io.inputs import make_inputs
from rewrite.pipeline import Options
from rewrite.rules.fold import fold_constants
from rewrite.rules.rule import RuleSet
from rewrite.rules.saturate import saturate
from rewrite.verify.differential import differential

ROOT = Path(__file__).resolve().parents[1]
CUSTOM_RULES = ROOT / "examples" / "custom_rules.py"
JITTER_SIGMA = 1.0
"""Standard deviation of the log-normal factor on each e-node's cost in `jitter-i` choices."""


def rule_sets(prove: bool = True) -> list[RuleSet]:
    """The built-in rule sets plus `examples/custom_rules.py`, for the CPU target, exact rules
    only; with `prove`, only the rules `rewrite.verify.gate` accepts (as `optimize` does)."""
    from rewrite.rules.load import select_rulesets

    chosen = select_rulesets(rule_files=[str(CUSTOM_RULES)], target="cpu")
    if not prove:
        return chosen
    from rewrite.verify.gate import gate

    accepted, refused = gate(chosen, allow_approximate=False)
    for r in refused:
        print(f"    rule refused by the gate: {r.refusal()}")
    return accepted


@dataclass
class Saturated:
    """A model's saturated e-graph, its snapshot and the costs the extractor compares."""

    path: Path
    enc: Encoded
    snap: Snapshot
    costs: NodeCosts
    original: set[tuple[int, ENode]]
    """(class, e-node) of the saturated snapshot that are e-nodes of the input graph."""
    stop_reason: str


def saturated(path: Path, rulesets: list[RuleSet]) -> Saturated:
    """Load -> fold -> encode -> saturate (the pipeline's default limits) -> snapshot -> costs,
    as `rewrite/stages.py` `_optimize_graph` runs them with default options: CPU target, no
    `--dim`, the snapshot priced at the sizes of the pipeline's sizing run (`sizing_types`:
    one ORT run when some value's size is symbolic and the inputs are static)."""
    graph = load(path)
    work, _ = fold_constants(graph)
    enc = encode(work)
    before = take_snapshot(enc)
    concrete, _ = sizing_types(graph, {})
    stats = saturate(enc, rulesets, Options().limits)
    snap = take_snapshot(enc)
    costs = node_costs(snap.retyped(concrete), CPU, {}, snap)
    return Saturated(path, enc, snap, costs, input_enodes(before, snap), stats.stop_reason)


def input_enodes(before: Snapshot, after: Snapshot) -> set[tuple[int, ENode]]:
    """The e-nodes of `before` (the encoded input graph) as they appear in `after` (the same
    e-graph saturated): each e-node with its children mapped to their classes in `after`,
    looked up by structure (egglog keeps one row per op and canonical children). An e-node
    whose children cannot be mapped, or that `after` does not hold, is left out."""
    index = {node: cid for cid, node in after.enodes()}
    mapped: dict[int, int] = {}
    out: set[tuple[int, ENode]] = set()
    state: dict[int, int] = {}  # 1: on the stack, 2: done
    for start in before.classes:
        stack = [start]
        while stack:
            cid = stack[-1]
            if state.get(cid) == 2:
                stack.pop()
                continue
            kids = [k for n in before.classes[cid].nodes for k in n.children if k in before.classes]
            todo = [k for k in kids if state.get(k) is None]
            if todo and state.get(cid) is None:
                state[cid] = 1
                stack.extend(todo)
                continue
            stack.pop()
            state[cid] = 2
            for n in before.classes[cid].nodes:
                if not all(k in mapped for k in n.children):
                    continue
                m = replace(n, children=tuple(mapped[k] for k in n.children))
                got = index.get(m)
                if got is not None:
                    out.add((got, m))
                    mapped.setdefault(cid, got)
    return out


def signature(choice: Choice) -> frozenset[tuple[int, ENode]]:
    """What makes two choices the same graph: the picks of the classes the roots need."""
    return frozenset((cid, choice.picks[cid]) for cid in reachable(choice))


def op_diff(a: Mapping[str, int], b: Mapping[str, int]) -> str:
    """B's op counts minus A's, e.g. `Add -12, Sum +12` ('same ops' when equal)."""
    ca, cb = Counter(a), Counter(b)
    parts = [f"{op} {cb[op] - ca[op]:+d}" for op in sorted(ca | cb) if cb[op] != ca[op]]
    return ", ".join(parts) or "same ops"


def _restricted(costs: NodeCosts, keep: set[tuple[int, ENode]]) -> NodeCosts:
    return {k: (v if k in keep else math.inf) for k, v in costs.items()}


def _jitter(costs: NodeCosts, rng: random.Random) -> NodeCosts:
    return {k: v * math.exp(rng.gauss(0.0, JITTER_SIGMA)) for k, v in costs.items()}


def _uniform(costs: NodeCosts, rng: random.Random) -> NodeCosts:
    return {
        k: v if v == math.inf or k[1].op in FREE_OPS else rng.random() for k, v in costs.items()
    }


def sample_choices(sat: Saturated, k: int, seed: int = 0) -> list[tuple[str, Choice]]:
    """The first `k` distinct valid extractions of `sat.snap` in the order `ilp`, `greedy`,
    `input`, `jitter-0`, `random-0`, `jitter-1`, ... (module doc), each with `cost` = its
    `graph_cost` under `sat.costs`. A choice equal to an earlier one is skipped; at most
    `4 k` seeds of each random kind are tried, so fewer than `k` come back from an e-graph
    with few alternatives."""
    snap, costs = sat.snap, sat.costs
    makers: list[tuple[str, Callable[[], Choice]]] = [
        ("ilp", lambda: run_extraction(snap, costs).choice),
        ("greedy", lambda: greedy(snap, costs)),
        ("input", lambda: greedy(snap, _restricted(costs, sat.original))),
    ]
    for i in range(4 * k):
        rj, ru = random.Random(f"{seed}-jitter-{i}"), random.Random(f"{seed}-random-{i}")
        makers.append((f"jitter-{i}", lambda r=rj: greedy(snap, _jitter(costs, r))))
        makers.append((f"random-{i}", lambda r=ru: greedy(snap, _uniform(costs, r))))
    out: list[tuple[str, Choice]] = []
    seen: set[frozenset[tuple[int, ENode]]] = set()
    for label, make in makers:
        if len(out) == k:
            break
        choice = make()
        choice.extractor = label
        check_choice(snap, choice)
        sig = signature(choice)
        if sig in seen:
            continue
        seen.add(sig)
        choice.cost = graph_cost(snap, choice, costs)
        out.append((label, choice))
    return out


def choices_for(n_pairs: int) -> int:
    """How many extractions give `n_pairs` distinct pairs: the least k with k(k-1)/2 >= n."""
    return next(k for k in range(2, n_pairs + 3) if k * (k - 1) // 2 >= n_pairs)


@dataclass
class Drawn:
    """One model's extraction pairs and what was found on the way."""

    pairs: list[Pair]
    choices: list[tuple[str, float, str]] = field(default_factory=list)
    """(label, predicted µs, verification summary) of every distinct choice."""
    dropped: list[str] = field(default_factory=list)
    """Choices that failed the differential check, with its summary."""


def pick_pairs(labels: list[str], n: int, seed: int = 0) -> list[tuple[int, int]]:
    """`n` index pairs (i < j) among `labels`: `ilp` vs `input` first when both are there,
    the rest in an order shuffled by a generator seeded by `seed`."""
    every = list(combinations(range(len(labels)), 2))
    first = []
    if "ilp" in labels and "input" in labels:
        first = [tuple(sorted((labels.index("ilp"), labels.index("input"))))]
    rest = [p for p in every if p not in first]
    random.Random(seed).shuffle(rest)
    return [*first, *rest][:n]  # type: ignore[list-item]


def extraction_pairs(
    path: Path,
    rulesets: list[RuleSet],
    n_pairs: int,
    workdir: Path,
    *,
    seed: int = 0,
    trials: int = 2,
) -> Drawn:
    """Up to `n_pairs` pairs among `choices_for(n_pairs)` verified, distinct extractions of
    `path`'s saturated e-graph; their models are saved under `workdir` (the caller removes
    them). Pairs carry `costs` (the extractor's DAG costs, µs), kind 'real extraction'."""
    sat = saturated(path, rulesets)
    sampled = sample_choices(sat, choices_for(n_pairs), seed)
    drawn = Drawn([])
    kept: list[tuple[str, Choice, Path, dict[str, int]]] = []
    for label, choice in sampled:
        out = workdir / f"{path.stem}.{label}.onnx"
        graph, _ = fold_constants(decode(sat.enc, sat.snap, choice))  # as stages.py does
        save(graph, out, source=path)
        result = differential(str(path), str(out), seed=0, trials=trials, calibrate=True)
        drawn.choices.append((label, choice.cost, result.summary()))
        if not result.ok:
            drawn.dropped.append(f"{path.stem} {label}: {result.summary()}")
            out.unlink()
            continue
        kept.append((label, choice, out, graph.op_counts()))
    feeds = make_inputs(str(path))
    for i, j in pick_pairs([k[0] for k in kept], n_pairs, seed):
        (la, ca, pa, na), (lb, cb, pb, nb) = kept[i], kept[j]
        name = f"{path.stem}: {la} vs {lb} ({op_diff(na, nb)})"
        drawn.pairs.append(
            Pair(name, str(pa), str(pb), feeds, kind="real extraction", costs=(ca.cost, cb.cost))
        )
    return drawn


def summary(drawn: Drawn, model: str) -> str:
    """One line per distinct choice: label, predicted µs, verification."""
    return "\n".join(f"    {model} {c:10s} {us:12.1f} µs  {ver}" for c, us, ver in drawn.choices)
