"""How good is the cost model? Whole-model prediction error, and ranking of equivalent graphs.

(a) For every corpus model: predicted latency (the DAG cost of the input graph, after the
pipeline's load, fold, encode and snapshot, greedy extraction on the un-saturated e-graph)
vs its measured ORT latency (ORT_ENABLE_ALL, 1 thread, I/O binding, fastest of interleaved
rounds in thread CPU time, as calibration times). Symbolic dims are bound to the sizes one ORT
run shows (`observed_dims`; the "as loaded" column prices them as 1, as the pipeline does
today). The calibration never sees these models.

(b) For pairs of equivalent graphs (`cost_pairs.py`: synthetic micro-graphs of the corpus'
patterns, and whole corpus models before and after one real rewrite; `extraction_pairs.py`:
distinct extractions of each model's saturated e-graph, built-in rules plus
examples/custom_rules.py, priced by the DAG cost the extractor compared): both timed in ORT,
A and B back to back in each round; a pair is *decisive* when the 95% CI of its median paired
A/B ratio excludes 1 and both that median and the ratio of its fastest runs are beyond
`--tie` (default 3%), the same way. The ranking accuracy is the fraction of decisive pairs
whose faster graph the model prices strictly lower, as an extractor would pick it, reported
per kind of pair and overall. For measured ties the table shows which side the model
prefers; that costs nothing at run time.

    python bench/cost_model.py --models /tmp/corpus_mat [--only bert,gpt2] [--rounds 21]
        [--no-models] [--no-pairs] [--no-synthetic] [--no-whole-pairs]
        [--extraction-pairs 6] [--seed 0] [--md out.md] [--json rows.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from cost_pairs import Pair, micro_pairs, sum_residuals
from extraction_pairs import extraction_pairs, rule_sets, summary

from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.extract import CPU, Snapshot, graph_cost, greedy, node_costs
from rewrite.extract.calibrate import Runner, time_cases
from rewrite.onnx_io import load
from rewrite.onnx_io.concrete import observed_types
from rewrite.onnx_io.inputs import make_inputs
from rewrite.rules.fold import fold_constants


def corpus_dims(path: Path) -> dict[str, int]:
    m = onnx.load(str(path), load_external_data=False)
    meta = {p.key: p.value for p in m.metadata_props}
    return {k: int(v) for k, v in json.loads(meta.get("corpus.dims", "{}")).items()}


def snapshot_of(src: onnx.ModelProto | Path) -> Snapshot:
    """The un-saturated e-graph of a model, through the pipeline's load, fold and encode."""
    with tempfile.TemporaryDirectory() as tmp:
        path = src if isinstance(src, Path) else Path(tmp) / "m.onnx"
        if not isinstance(src, Path):
            onnx.save(src, str(path))
        graph, _ = fold_constants(load(path))
    return take_snapshot(encode(graph))


def predict(src: onnx.ModelProto | Path | Snapshot, dims: dict[str, int] | None = None) -> float:
    """Predicted µs of a model as the pipeline prices its input graph."""
    snap = src if isinstance(src, Snapshot) else snapshot_of(src)
    costs = node_costs(snap, CPU, dims)
    return graph_cost(snap, greedy(snap, costs), costs)


def observed_dims(path: Path, snap: Snapshot, feeds: dict[str, np.ndarray]) -> dict[str, int]:
    """Sizes of the snapshot's symbolic dims as one ORT run (ORT_DISABLE_ALL, every value an
    output) shows them: for a model whose loader leaves dims symbolic (runtime-computed Pad
    sizes, dynamic axes), the shapes ORT executes. Each symbol takes its most frequent size."""
    types, note = observed_types(path, {}, feeds)
    if note:
        raise RuntimeError(note)
    shapes = {n: t.shape for n, t in types.items()}
    votes: dict[str, Counter[int]] = {}
    for cls in snap:
        shape = cls.type.shape
        for name in cls.names:
            got = shapes.get(name)
            if shape is None or got is None or len(got) != len(shape):
                continue
            for d, size in zip(shape, got, strict=True):
                if isinstance(d, str):
                    votes.setdefault(d, Counter())[int(size)] += 1
    return {d: c.most_common(1)[0][0] for d, c in votes.items()}


def measure(models: list[onnx.ModelProto | str], feeds: list[dict], rounds: int) -> list[float]:
    """Median µs per run of each model, interleaved rounds, 1 thread, ORT_ENABLE_ALL."""
    runners = [Runner(m, f) for m, f in zip(models, feeds, strict=True)]
    return time_cases(runners, rounds)


def whole_models(paths: list[Path], rounds: int) -> list[dict]:
    rows = []
    for p in paths:
        t = time.perf_counter()
        snap = snapshot_of(p)
        feeds = make_inputs(str(p))
        named = corpus_dims(p)
        loaded = predict(snap, named)
        bound = predict(snap, {**observed_dims(p, snap, feeds), **named})
        t_pred = time.perf_counter() - t
        (meas,) = measure([str(p)], [feeds], rounds)
        rows.append(
            {
                "model": p.stem,
                "loaded_ms": loaded / 1e3,
                "predicted_ms": bound / 1e3,
                "measured_ms": meas / 1e3,
                "ratio": bound / meas,
                "predict_s": t_pred,
            }
        )
        print(
            f"  {p.stem:14s} predicted {bound / 1e3:9.2f} ms (as loaded {loaded / 1e3:8.2f})"
            f"  measured {meas / 1e3:9.2f} ms  ratio {bound / meas:5.2f}",
            flush=True,
        )
    return rows


def whole_pairs(paths: list[Path]) -> list[Pair]:
    """Each transformer model vs itself with residual Adds written as Sum (a real rewrite)."""
    out = []
    for p in paths:
        m = onnx.load(str(p))
        if not sum_residuals(m):
            continue
        with tempfile.NamedTemporaryFile(suffix=".onnx", delete=False) as f:
            onnx.save(m, f.name)
        out.append(
            Pair(
                f"{p.stem}: residual Add -> Sum",
                str(p),
                f.name,
                make_inputs(str(p)),
                kind="whole model",
            )
        )
    return out


def time_pairs(pairs: list[Pair], rounds: int) -> list[tuple[float, float, list[float]]]:
    """Per pair: fastest µs of A and of B, and the log(A/B) of each round. A and B run back
    to back in each round (alternating which goes first), so load that drifts between rounds
    cancels in the paired ratio."""
    runners = [(Runner(p.a, p.feeds), Runner(p.b, p.feeds)) for p in pairs]
    batch = []
    for ra, rb in runners:
        ra.run(2), rb.run(2)
        t = min(ra.run(3), rb.run(3))
        batch.append(max(1, min(200, round(0.002 / max(t, 1e-7)))))
    ta: list[list[float]] = [[] for _ in pairs]
    tb: list[list[float]] = [[] for _ in pairs]
    for r in range(rounds):
        for i, (ra, rb) in enumerate(runners):
            if r % 2:
                tb[i].append(rb.run(batch[i]))
                ta[i].append(ra.run(batch[i]))
            else:
                ta[i].append(ra.run(batch[i]))
                tb[i].append(rb.run(batch[i]))
    return [
        (min(a) * 1e6, min(b) * 1e6, [math.log(x / y) for x, y in zip(a, b, strict=True)])
        for a, b in zip(ta, tb, strict=True)
    ]


def median_ci(xs: list[float]) -> tuple[float, float, float]:
    """Median and its distribution-free 95% CI (order statistics)."""
    s = sorted(xs)
    n = len(s)
    k = max(0, math.floor(n / 2 - 1.96 * math.sqrt(n) / 2))
    return float(np.median(s)), s[k], s[min(n - 1, n - 1 - k)]


def judge(pairs: list[Pair], rounds: int, tie: float) -> list[dict]:
    """Time and price every pair. `measured` is decisive ('A'/'B': A/B faster) when the 95% CI
    of the median paired ratio excludes 1 and both that median and the ratio of the fastest
    rounds are beyond `tie`, the same way (a load spike on one side of one round moves
    neither); else 'tie'. `predicted` is the strict order of the two costs, as an extractor
    acts on it."""
    rows = []
    for pr, (ta, tb, logs) in zip(pairs, time_pairs(pairs, rounds), strict=True):
        ca, cb = pr.costs if pr.costs is not None else (price(x, pr.feeds) for x in (pr.a, pr.b))
        med, lo, hi = median_ci(logs)
        fastest = math.log(ta / tb)
        cut = math.log1p(tie)
        significant = lo > 0 or hi < 0
        decisive = significant and min(abs(med), abs(fastest)) > cut and (med > 0) == (fastest > 0)
        measured = ("A" if med < 0 else "B") if decisive else "tie"
        predicted = "A" if ca < cb else "B" if cb < ca else "tie"
        rows.append({"pair": pr.name, "kind": pr.kind, "expect": pr.expect,
                     "measured_us": [ta, tb], "ratio": math.exp(med),
                     "ratio_ci": [math.exp(lo), math.exp(hi)], "predicted_us": [ca, cb],
                     "measured": measured, "predicted": predicted,
                     "correct": measured == predicted})  # fmt: skip
    return rows


def price(src: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> float:
    """Predicted µs of one side of a pair; a model file gets its dims bound by `observed_dims`."""
    if not isinstance(src, str):
        return predict(src)
    snap = snapshot_of(Path(src))
    dims = {**observed_dims(Path(src), snap, feeds), **corpus_dims(Path(src))}
    return predict(snap, dims)


def accuracy(rows: list[dict], label: str) -> tuple[str, float]:
    """One line: the ranking accuracy on the decisive pairs among `rows`, and the ties."""
    decisive = [r for r in rows if r["measured"] != "tie"]
    ties = [r for r in rows if r["measured"] == "tie"]
    hit = sum(r["correct"] for r in decisive)
    acc = hit / len(decisive) if decisive else float("nan")
    line = (
        f"{label}: ranking accuracy on decisive pairs: {hit}/{len(decisive)} = {acc:.1%}; "
        f"measured ties: {len(ties)} of {len(rows)} pairs "
        f"({sum(r['correct'] for r in ties)} also predicted as ties)"
    )
    return line, acc


def report(rows: list[dict]) -> tuple[str, float]:
    """The pair table, then the accuracy per kind of pair and overall (the overall one is
    returned)."""
    lines = [
        "| pair | kind | fastest A / B µs | A/B (95% CI) | predicted A / B µs | predicted A/B "
        "| measured | predicted | ok |",
        "|---|---|---:|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        ma, mb = r["measured_us"]
        pa, pb = r["predicted_us"]
        ok = "yes" if r["correct"] else ("tie*" if r["measured"] == "tie" else "NO")
        lo, hi = r["ratio_ci"]
        lines.append(
            f"| {r['pair']} | {r['kind']} | {ma:.1f} / {mb:.1f} | {r['ratio']:.3f} ({lo:.3f}-"
            f"{hi:.3f}) | {pa:.1f} / {pb:.1f} | {pa / pb if pb else math.inf:.4f} "
            f"| {r['measured']} | {r['predicted']} | {ok} |"
        )
    lines.append("\ntie* = the model prefers one side of a measured tie, costing nothing\n")
    for kind in dict.fromkeys(r["kind"] for r in rows):
        lines.append("- " + accuracy([r for r in rows if r["kind"] == kind], kind)[0])
    line, acc = accuracy(rows, "all pairs")
    lines.append("- " + line)
    return "\n".join(lines), acc


def model_table(rows: list[dict]) -> str:
    lines = [
        "| model | predicted ms | measured ms | predicted / measured | predicted, dims as loaded |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['model']} | {r['predicted_ms']:.2f} | {r['measured_ms']:.2f} | "
        f"{r['ratio']:.2f} | {r['loaded_ms']:.2f} |"
        for r in rows
    ]
    logs = [math.log(r["ratio"]) for r in rows]
    if logs:
        gm = math.exp(sum(logs) / len(logs))
        worst = max(rows, key=lambda r: abs(math.log(r["ratio"])))
        lines.append(
            f"\ngeometric-mean ratio {gm:.2f}; median |error| "
            f"{float(np.median([abs(r['ratio'] - 1) for r in rows])):.1%}; worst "
            f"{worst['model']} {worst['ratio']:.2f}"
        )
    return "\n".join(lines)


def real_extractions(paths: list[Path], n: int, seed: int, rounds: int, tie: float) -> list[dict]:
    """Judge up to `n` pairs of verified real extractions per model (`extraction_pairs`)."""
    rulesets = rule_sets()
    rows = []
    for p in paths:
        t = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="extraction-pairs-") as tmp:
            drawn = extraction_pairs(p, rulesets, n, Path(tmp), seed=seed)
            took = time.perf_counter() - t
            print(f"(c) {p.stem}: {len(drawn.choices)} distinct extractions, "
                  f"{len(drawn.pairs)} pairs ({took:.0f} s)", flush=True)  # fmt: skip
            print(summary(drawn, p.stem), flush=True)
            for why in drawn.dropped:
                print(f"    dropped (not equivalent in ORT): {why}", flush=True)
            for pr in drawn.pairs:
                print(f"    {pr.name}", flush=True)
                rows += judge([pr], rounds, tie)  # one at a time: 2 big sessions in memory
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path("/tmp/corpus_mat"))
    ap.add_argument("--only", help="comma-separated model stems")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--tie", type=float, default=0.03, help="relative difference that is a tie")
    ap.add_argument("--no-models", action="store_true")
    ap.add_argument("--no-pairs", action="store_true")
    ap.add_argument("--no-synthetic", action="store_true", help="skip the micro pairs")
    ap.add_argument("--no-whole-pairs", action="store_true")
    ap.add_argument(
        "--extraction-pairs",
        type=int,
        default=6,
        metavar="N",
        help="pairs of real extractions per model (0: none)",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the sampled extractions")
    ap.add_argument("--md", type=Path, help="also write the tables here")
    ap.add_argument("--json", type=Path, help="also write every row here")
    a = ap.parse_args(argv)
    paths = sorted(a.models.glob("*.onnx"))
    if a.only:
        keep = set(a.only.split(","))
        paths = [p for p in paths if p.stem in keep]
    print(f"cost model: {CPU.source}")
    out = [f"Cost model: {CPU.source}\n"]
    dump: dict[str, list[dict]] = {}
    if not a.no_models and paths:
        print("(a) whole models, predicted vs measured (1 thread)")
        dump["models"] = whole_models(paths, max(5, a.rounds // 2))
        out += ["## Whole models\n", model_table(dump["models"]), ""]
    if not a.no_pairs:
        pairs = [] if a.no_synthetic else micro_pairs()
        print(f"(b) {len(pairs)} synthetic pairs, {a.rounds} interleaved rounds", flush=True)
        rows = judge(pairs, a.rounds, a.tie) if pairs else []
        if not a.no_whole_pairs:
            cnn = ("resnet50", "mobilenetv2", "efficientnet")
            for pr in whole_pairs([p for p in paths if p.stem not in cnn]):
                print(f"    {pr.name}", flush=True)
                rows += judge([pr], a.rounds, a.tie)  # one at a time: 2 big sessions in memory
                Path(str(pr.b)).unlink(missing_ok=True)
        if a.extraction_pairs > 0:
            rows += real_extractions(paths, a.extraction_pairs, a.seed, a.rounds, a.tie)
        dump["pairs"] = rows
        table, _ = report(rows)
        out += ["## Ranking of equivalent graphs\n", table]
    text = "\n".join(out)
    print(text)
    if a.md:
        a.md.write_text(text + "\n")
    if a.json:
        a.json.write_text(json.dumps(dump, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
