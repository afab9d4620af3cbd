"""`optimize --measure`: the input and the output timed in ONNX Runtime, interleaved.

Both models run in this process on the same feeds (the user's `--inputs`, else one seeded
random set as the differential check draws them), each in its own ORT session as a user runs
it: `ORT_ENABLE_ALL`, `threads` intra-op threads, the target's provider. After two warm-up
runs of each, rounds alternate which model goes first; in a round each model runs `runs`
times and the median of those counts. `speedup` is the median over rounds of input / output
latency; `noise` is how much the per-round ratios spread (half their interquartile range,
at least `MIN_NOISE`). The output is kept when it is faster beyond noise (`speedup - noise >
1`); otherwise `optimize` writes the input graph and says so (status `not faster`, exit 0).
Rounds stop early once `budget_s` is spent (at least `MIN_ROUNDS`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rewrite.providers import provider

MIN_NOISE = 0.01
MIN_ROUNDS = 3


@dataclass
class Measurement:
    """Latencies (ms, medians over rounds), the speedup input/output and its noise floor."""

    input_ms: float
    output_ms: float
    speedup: float
    noise: float
    rounds: int
    runs: int
    threads: int
    provider: str
    ratios: list[float]

    @property
    def faster(self) -> bool:
        return self.speedup - self.noise > 1.0

    def line(self) -> str:
        """`12.31 ms -> 11.08 ms (1.111x, noise ±1.0%, 7 rounds of 5, 1 thread)`."""
        threads = f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        return (
            f"{self.input_ms:.2f} ms -> {self.output_ms:.2f} ms ({self.speedup:.3f}x, noise "
            f"±{100 * self.noise:.1f}%, {self.rounds} rounds of {self.runs}, {threads})"
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["faster"] = self.faster
        return out


def measure(
    before: str | Path,
    after: str | Path,
    feeds: Mapping[str, Any],
    *,
    rounds: int = 7,
    runs: int = 5,
    threads: int = 1,
    target: str = "cpu",
    budget_s: float = 30.0,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Time `before` and `after` on `feeds` (see the module docstring)."""
    import onnxruntime as ort

    ep = provider(target)

    def session(path: str | Path) -> Any:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        return ort.InferenceSession(str(path), so, providers=[ep])

    sessions = [session(before), session(after)]
    names = [{i.name for i in s.get_inputs()} for s in sessions]
    feed_sets = [{k: v for k, v in feeds.items() if k in n} for n in names]

    def once(k: int) -> float:
        t = clock()
        sessions[k].run(None, feed_sets[k])
        return clock() - t

    for k in (0, 1):
        for _ in range(2):
            once(k)
    ratios: list[float] = []
    medians: tuple[list[float], list[float]] = ([], [])
    start = clock()
    for r in range(rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        got = {}
        for k in order:
            got[k] = statistics.median(once(k) for _ in range(runs))
        medians[0].append(got[0])
        medians[1].append(got[1])
        ratios.append(got[0] / max(got[1], 1e-12))
        if r + 1 >= MIN_ROUNDS and clock() - start > budget_s:
            break
    q1, q3 = np.percentile(ratios, [25, 75]) if len(ratios) > 1 else (ratios[0], ratios[0])
    return Measurement(
        input_ms=1000 * statistics.median(medians[0]),
        output_ms=1000 * statistics.median(medians[1]),
        speedup=float(statistics.median(ratios)),
        noise=max(MIN_NOISE, float(q3 - q1) / 2),
        rounds=len(ratios),
        runs=runs,
        threads=threads,
        provider=ep,
        ratios=[round(x, 4) for x in ratios],
    )
