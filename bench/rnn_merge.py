"""The merge rules on unrolled RNN / LSTM cells: input vs `rewrite optimize` output in ORT.

    python bench/rnn_merge.py [--rounds 15] [--quick] [--json out.json]

Each model is a family of `tests/families_seq.py` (`rnn_unrolled`, `lstm_unrolled`: x_t =
Gather(x, t, axis=1), h_t from x_t·W + h·U + b) at n_in = hidden in {256, 512}, T in {16, 32},
batch in {1, 8}. `rewrite optimize` runs as a user runs it: every built-in rule set (`merge`
among them), the rules proved, the written model checked against the input. Three sessions
per model, all CPU EP, 1 intra-op thread, ORT_ENABLE_ALL: the input, a copy of the input
(the noise floor), the output. Timed in interleaved rounds (the order rotating each round)
after warm-up; printed: the median per-run time of input and output, the median of
per-round ratios input/output (> 1: faster), and the input/copy ratio (how far from 1 a
ratio can be by noise alone).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rewrite.pipeline import Options, optimize
from rewrite.rules.load import select_rulesets
from tests.families_seq import lstm_unrolled, rnn_unrolled

FAMILIES = {"rnn": rnn_unrolled, "lstm": lstm_unrolled}


def session(path: Path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def per_run(s: ort.InferenceSession, feed: dict[str, np.ndarray], reps: int) -> float:
    """Seconds per run over `reps` runs."""
    t0 = time.perf_counter()
    for _ in range(reps):
        s.run(None, feed)
    return (time.perf_counter() - t0) / reps


def time_three(paths: list[Path], feed: dict[str, np.ndarray], rounds: int) -> list[list[float]]:
    """Per-round seconds per run of each session, interleaved, the order rotating."""
    sessions = [session(p) for p in paths]
    once = max(per_run(s, feed, 3) for s in sessions)
    reps = max(1, int(0.02 / max(once, 1e-6)))  # about 20 ms per measurement
    for s in sessions:
        per_run(s, feed, reps)
    out: list[list[float]] = [[] for _ in sessions]
    for r in range(rounds):
        order = [(r + k) % len(sessions) for k in range(len(sessions))]
        for k in order:
            out[k].append(per_run(sessions[k], feed, reps))
    return out


def bench_one(family: str, hidden: int, steps: int, batch: int, rounds: int, tmp: Path) -> dict:
    """Optimize one model and time input, copy and output; the row printed and returned."""
    m = FAMILIES[family](n_in=hidden, hidden=hidden, steps=steps)
    src, copy, dst = tmp / "in.onnx", tmp / "copy.onnx", tmp / "out.onnx"
    onnx.save(m, src)
    onnx.save(m, copy)
    t0 = time.perf_counter()
    opts = Options(rulesets=select_rulesets(target="cpu"), dims={"batch": batch})
    report = optimize(src, dst, opts)
    secs = time.perf_counter() - t0
    out = onnx.load(dst)
    mm = [sum(n.op_type == "MatMul" for n in g.graph.node) for g in (m, out)]
    x = np.random.default_rng(0).standard_normal((batch, steps, hidden)).astype(np.float32)
    t_in, t_copy, t_out = time_three([src, copy, dst], {"x": x}, rounds)
    ratio = statistics.median(a / b for a, b in zip(t_in, t_out, strict=True))
    noise = statistics.median(a / b for a, b in zip(t_in, t_copy, strict=True))
    return {
        "model": f"{family}_h{hidden}_T{steps}_b{batch}",
        "status": report.status,
        "matmuls": f"{mm[0]}->{mm[1]}",
        "in_us": 1e6 * statistics.median(t_in),
        "out_us": 1e6 * statistics.median(t_out),
        "ratio": ratio,
        "noise": noise,
        "optimize_s": secs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="hidden 256, T 16 only")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    hiddens, stepss = ((256,), (16,)) if args.quick else ((256, 512), (16, 32))
    print(f"ORT {ort.__version__}, CPU EP, 1 thread, ORT_ENABLE_ALL, {args.rounds} rounds")
    head = f"{'model':24} {'MatMuls':>8} {'in µs':>9} {'out µs':>9} {'in/out':>7} {'noise':>6}"
    print(head)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for family in FAMILIES:
            for hidden in hiddens:
                for steps in stepss:
                    for batch in (1, 8):
                        r = bench_one(family, hidden, steps, batch, args.rounds, Path(d))
                        rows.append(r)
                        print(
                            f"{r['model']:24} {r['matmuls']:>8} {r['in_us']:9.1f} "
                            f"{r['out_us']:9.1f} {r['ratio']:7.3f} {r['noise']:6.3f}",
                            flush=True,
                        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
