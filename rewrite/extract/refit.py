"""Refit the multipliers of some ops in an existing calibration table, keeping the rest.

`rewrite calibrate --only OP --base TABLE` times only OP's cases (the `calib_cases.cases()`
of op OP) and refits only the multipliers of the cost keys those cases have (for Where: `Where` and
`Where:broadcast`). The table's globals (GEMM and vector FLOP/s, both bandwidths, the per-node
overhead) and every other key's multiplier stay exactly as they are. Each refitted log c
minimizes `Σ (log pred - log measured)² + RIDGE · (log c)²` over its key's cases: the full
fit's objective (`calibrate.fit`) restricted to that one coordinate, which is exact because a
key's multiplier enters no other case's prediction. Measurements from another machine would
not mix with the table's, so the base table's key must match this machine's.

Anchors. The same machine runs slower or faster from one hour to the next (on the shared 2-core
VM, with other processes' load, two back-to-back 15-round timings of the same Where case gave
243 and 169 µs, thread CPU time). So `ANCHORS`, cases of other ops the table already holds,
are timed in the same interleaved rounds, and the new cases' times are divided by the
anchors' geometric-mean ratio of measured to recorded time: the refitted multipliers are on the
scale of the table they join, not on the scale of the hour they were measured in. The ratio is
recorded.

The table's recorded samples of the refitted keys are replaced by the new ones, the fit's
error summaries are recomputed over all samples, and `fit["refits"]` records what was refitted,
when, with which per-node dispatch time, the multipliers before and after, and per new case
the measured time with the predictions before and after (`refit_summary` prints them).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rewrite.errors import RewriteError
from rewrite.extract.calibrate import RIDGE, Sample, fit_errors, measure, predict
from rewrite.extract.table import DEFAULTS, CalibrationTable, cache_path, load_table, machine_key


def log_params(table: CalibrationTable, keys: list[str]) -> np.ndarray:
    """The table as `calibrate.predict`'s log-parameter vector (µs units) over `keys`."""
    globals_us = [
        table.peak_flops / 1e6,
        table.vector_flops / 1e6,
        table.bandwidth / 1e6,
        table.mem_bandwidth / 1e6,
        table.overhead * 1e6,
    ]
    coeffs = [table.coeffs.get(k, 1.0) for k in keys]
    return np.log(np.array(globals_us + coeffs, dtype=float))


def fit_key(p: np.ndarray, keys: list[str], key: str, samples: list[Sample]) -> float:
    """log c of `key` minimizing the ridge-weighted squared log error, other parameters fixed
    (Gauss-Newton on one variable, steps clipped to ±2)."""
    i = 5 + keys.index(key)
    p = p.copy()
    for _ in range(100):
        r, j = [], []
        for s in samples:
            pred, part, _, _ = predict(p, keys, s)
            r.append(math.log(pred) - math.log(s.measured_us))
            j.append(part / pred)
        r.append(math.sqrt(RIDGE) * p[i])
        j.append(math.sqrt(RIDGE))
        ra, ja = np.array(r), np.array(j)
        step = -float(ja @ ra) / float(ja @ ja)
        p[i] += max(-2.0, min(2.0, step))
        if abs(step) < 1e-9:
            break
    return float(p[i])


ANCHORS = (
    "Add (1, 12, 128, 128)",
    "Mul (1, 128, 768)",
    "Relu (1, 128, 3072)",
    "Exp (1, 12, 128, 128)",
    "Add (1, 16, 768)",
)
"""Memory-bound elementwise cases of the full calibration, timed beside a partial refit."""

ROUNDS = 200
"""Interleaved rounds of a partial refit (a case's time is its fastest round; about 10 s for
Where): few cases, so many rounds are cheap, and they catch the quiet moments of a shared
machine. Four refits of Where at 200 rounds gave multipliers within 5% of each other (4.58-4.82,
broadcast 4.79-5.11); at 60 rounds one of five was 20-40% off."""


def anchor_ratios(table: CalibrationTable, anchors: list[Sample]) -> dict[str, list[float]]:
    """Anchor name -> [recorded µs, measured µs], for the anchors the table records."""
    recorded = {r[0]: r[5] for r in table.fit.get("samples", [])}
    return {
        s.name: [recorded[s.name], round(s.measured_us, 3)] for s in anchors if s.name in recorded
    }


def refit_keys(
    table: CalibrationTable,
    samples: list[Sample],
    node_us: float,
    ops: Sequence[str],
    anchors: Sequence[Sample] = (),
) -> CalibrationTable:
    """`table` with the multipliers of the keys in `samples` refitted (module doc), the
    samples' times first divided by the anchors' geometric-mean measured/recorded ratio."""
    pairs = anchor_ratios(table, list(anchors))
    logs = [math.log(m / r) for r, m in pairs.values()]
    ratio = math.exp(sum(logs) / len(logs)) if logs else 1.0
    scaled = [replace(s, measured_us=s.measured_us / ratio) for s in samples]
    new_keys = sorted({s.key for s in scaled})
    keys = sorted(set(table.coeffs) | set(new_keys))
    p = log_params(table, keys)
    before = [predict(p, keys, s)[0] for s in scaled]
    coeffs = dict(table.coeffs)
    for key in new_keys:
        coeffs[key] = round(math.exp(fit_key(p, keys, key, [s for s in scaled if s.key == key])), 4)
    p = log_params(replace(table, coeffs=coeffs), keys)
    after = [predict(p, keys, s)[0] for s in scaled]
    rows = [r for r in table.fit.get("samples", []) if r[1] not in new_keys]
    rows += [[s.name, s.key, s.flops, s.nbytes, s.weights, round(s.measured_us, 3), round(a, 3)]
             for s, a in zip(scaled, after, strict=True)]  # fmt: skip
    compared = [[s.name, round(s.measured_us, 3), round(s.measured_us / ratio, 3), round(b, 3),
                 round(a, 3)] for s, b, a in zip(samples, before, after, strict=True)]  # fmt: skip
    record = {
        "ops": list(ops),
        "keys": new_keys,
        "cases": len(samples),
        "node_us": round(node_us, 3),
        "anchor_ratio": round(ratio, 4),
        "anchors_recorded_measured_us": pairs,
        "before": {k: table.coeffs[k] for k in new_keys if k in table.coeffs},
        "after": {k: coeffs[k] for k in new_keys},
        "raw_scaled_predicted_before_after_us": compared,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "method": f"multipliers of these keys only (globals and other keys kept); ridge on "
        f"log c = {RIDGE}; times divided by the anchors' measured/recorded ratio",
    }
    fit = {**table.fit, **summaries(rows), "samples": rows}
    fit["refits"] = [*table.fit.get("refits", []), record]
    return replace(table, coeffs=coeffs, fit=fit)


def summaries(rows: list[list[Any]]) -> dict[str, Any]:
    """`calibrate.fit_errors` over sample rows
    `[name, key, flops, bytes, weights, measured_us, predicted_us]`."""
    return fit_errors([r[1] for r in rows], [math.log(r[6] / r[5]) for r in rows])


def refit(
    ops: Sequence[str],
    target: str = "cpu",
    *,
    threads: int = 1,
    base: Path | None = None,
    out: Path | None = None,
    rounds: int = ROUNDS,
) -> tuple[CalibrationTable, Path]:
    """Time `ops`' cases here and refit their keys in `base` (default: the shipped table for
    `target`); write to `out` (default: the user cache). Returns the table and where it went.

    Raises RewriteError when `ops` has no calibration case, or the base table cannot be read or
    was measured on another machine, ORT, EP or thread count."""
    base = base or DEFAULTS[target]
    try:
        table = load_table(base)
    except (OSError, ValueError) as e:
        raise RewriteError(f"calibrate --base {base}: {e}") from e
    here = machine_key(target, threads)
    if table.key != here:
        raise RewriteError(
            f"calibrate --only: {base} was measured on {table.key}, this is {here}; "
            "a partial refit only mixes measurements of one machine (run a full calibrate)"
        )
    timed, node_us = measure(
        target,
        threads,
        quick=False,
        select=lambda c: c.op in ops or c.name in ANCHORS,
        rounds=rounds,
    )
    samples = [s for s in timed if s.op in ops]
    if not samples:
        raise RewriteError(f"calibrate --only {' '.join(ops)}: no calibration case for these ops")
    anchors = [s for s in timed if s.op not in ops]
    table = refit_keys(table, samples, node_us, ops, anchors)
    table.fit["refits"][-1]["rounds"] = rounds
    path = out or cache_path(table.key)
    try:
        table.save(path)
    except OSError as e:
        raise RewriteError(f"{path}: cannot write the calibration table: {e.strerror}") from e
    return table, path


def refit_summary(table: CalibrationTable) -> str:
    """The last refit's multipliers and, per case, measured vs predicted µs before -> after."""
    last = table.fit["refits"][-1]
    lines = [
        f"anchors ran {last['anchor_ratio']:.3f}x their recorded time: new times divided by it",
        "refitted "
        + ", ".join(
            f"{k} {last['before'].get(k, 1.0):.4g} -> {v:.4g}" for k, v in last["after"].items()
        ),
    ]
    for name, raw, scaled, old, new in last["raw_scaled_predicted_before_after_us"]:
        lines.append(
            f"  {name}: measured {raw:.1f} us ({scaled:.1f} on the table's scale), "
            f"predicted {old:.1f} -> {new:.1f} us"
        )
    return "\n".join(lines)
