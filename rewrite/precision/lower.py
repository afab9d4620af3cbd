"""The precision pass: choose, lower, check end to end, tighten and repeat (bounded).

`lower_model(src, exact, config)` reads the input model `src` and the verified exact output
`exact`, and returns a `Lowered`: the low-precision model (or None: keep the exact one) and the
report's `precision` section. Steps:

1. Feed sets: the user's calibration `.npz` files (each one set, the `--inputs` format), else
   `RANDOM_SETS` seeded random ones (the report says so). Even-numbered sets calibrate, odd
   ones are held back; a single set serves both (the report says so).
2. Candidates (`forms.candidates`) priced by `kernels.KernelTable` at their activations'
   shapes on the first calibration set; those that save nothing stay exact. The same run
   records each activation's channel maxima (SmoothQuant factors of the MatMul forms) and
   the ranges of the `int8_static` Convs' inputs and outputs (their scales).
3. Sensitivities (`sensitivity.sensitivities`) on the calibration sets, against the input
   model's outputs.
4. `select.select` under a budget (first `max_error`); the chosen ops lowered; the result run
   on the calibration and the held-back sets against the input model; its error is the
   largest over outputs and sets. Errors do not add up exactly, so the next budget is scaled
   by 0.9 · max_error / error: down when the choice exceeded `max_error`, from the choice's
   own estimate (its root-sum-square of sensitivities; scaling the budget alone may leave the
   same choice inside it), up when it stayed below 0.9 · max_error (room left), from the
   budget. At most `MAX_ROUNDS` end-to-end checks; a tightened budget that repeats a checked
   choice is tightened again (at most `MAX_ROUNDS` more selections), a loosened one ends the
   search. The choice kept is the one that saves the most among those within `max_error` end
   to end; when none is, the exact graph (None).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from rewrite.onnx_io.feeds import load_inputs
from rewrite.onnx_io.inputs import make_inputs
from rewrite.precision.forms import FORMS, Candidate, candidates, lower, smoothing
from rewrite.precision.kernels import KernelTable
from rewrite.precision.metrics import errors
from rewrite.precision.select import Boundary, boundary_cost, select
from rewrite.precision.sensitivity import activation_stats, run, sensitivities
from rewrite.precision.static import FORM, names_read

Key = tuple[int, str]
"""A candidate: (node index, form)."""
RANDOM_SETS = 8
MAX_ROUNDS = 4
SENSITIVITY_SETS = 2
"""Sensitivities are measured on the first calibration sets only (one session per candidate;
the end-to-end check runs on all of them)."""
MAX_BYTES = int(1.8e9)
"""Models at least this large (external data) are not lowered yet."""


@dataclass
class Config:
    max_error: float
    metric: str = "maxrel"
    calibration: tuple[str, ...] = ()
    seed: int = 0
    dims: dict[str, int] = field(default_factory=dict)
    target: str = "cpu"
    threads: int = 1
    deadline: float | None = None
    """`time.monotonic()` by which sensitivities stop (the rest stay exact)."""
    kernel_table: Path | None = None
    forms: tuple[str, ...] = FORMS
    """The low-precision forms the pass may choose (`--target portable`: `STANDARD_FORMS`)."""


@dataclass
class Priced:
    saving: dict[Key, float]
    """Per candidate, its exact µs less its low-precision µs (`kernels.py`)."""
    timed: dict[Key, tuple[float, float]]
    """Per candidate, (exact µs, low-precision µs)."""
    edges: list[Boundary]
    """Where QDQ forms meet float ops, and what a quantize / dequantize costs there."""


@dataclass
class Lowered:
    model: onnx.ModelProto | None
    report: dict[str, Any]


def _rounded(d: dict[str, float]) -> dict[str, float]:
    return {k: float(f"{v:.4g}") for k, v in d.items()}


def feed_sets(src: Path, cfg: Config) -> tuple[list[dict], list[dict], str]:
    """(calibration sets, held-back sets, how they were made)."""
    if cfg.calibration:
        sets = [dict(load_inputs(p, str(src))) for p in cfg.calibration]
        how = f"{len(sets)} user set(s) from --calibration"
    else:
        dims = cfg.dims or None
        sets = [
            dict(make_inputs(str(src), seed=cfg.seed + 1 + i, dims=dims))
            for i in range(RANDOM_SETS)
        ]
        how = f"{RANDOM_SETS} seeded random sets (no --calibration given)"
    if len(sets) == 1:
        return sets, sets, how + "; the one set is also the held-back set"
    return sets[0::2], sets[1::2], how + f"; {len(sets[1::2])} held back"


def lower_model(src: Path, exact: Path, cfg: Config) -> Lowered:
    """The pass (module docstring)."""
    rep: dict[str, Any] = {
        "mode": "auto",
        "metric": cfg.metric,
        "max_error": cfg.max_error,
        "target": cfg.target,
    }
    model = onnx.load(str(exact))
    if model.ByteSize() >= MAX_BYTES:
        rep["result"] = "exact: models of 1.8 GB or more are not lowered yet"
        return Lowered(None, rep)
    cands = candidates(model, cfg.forms)
    rep["candidates"] = len({c.index for c in cands})
    rep["forms"] = sorted({c.form for c in cands})
    if not cands:
        what = "MatMul/Gemm/Conv with float32 constant weights, Add, MaxPool"
        if cfg.forms != FORMS:
            what = f"forms {', '.join(cfg.forms)}"
        rep["result"] = f"exact: no op has a low-precision form ({what})"
        return Lowered(None, rep)
    cal, held, how = feed_sets(src, cfg)
    rep["inputs"] = how
    kw = {"target": cfg.target, "threads": cfg.threads}
    reference = onnx.load(str(src))
    ref_cal, ref_held = run(reference, cal, **kw), run(reference, held, **kw)
    del reference
    t = time.perf_counter()
    ranges: dict[str, tuple[float, float]] = {}
    shapes, amax = activation_stats(model, cands, cal, ranges, **kw)
    smooth = smoothing(cands, model, amax)
    priced = price(model, cands, shapes, cfg, rep)
    rep["kernel_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    paying = [c for c in cands if priced.saving[c.key] > 0 and not loses_alone(c, priced)]
    n = SENSITIVITY_SETS
    sens = sensitivities(
        model,
        paying,
        cal[:n],
        ref_cal[:n],
        cfg.metric,
        smooth=smooth,
        ranges=ranges,
        deadline=cfg.deadline,
        **kw,
    )
    rep["sensitivity_s"] = round(time.perf_counter() - t, 2)
    rep["measured_sensitivities"] = len(sens)
    if len(sens) < len(paying):
        rep["warning"] = (
            f"time limit: {len(paying) - len(sens)} candidate(s) not measured, kept exact"
        )
    return _choose(
        model,
        cands,
        (smooth, ranges),
        priced,
        sens,
        (cal, ref_cal),
        (held, ref_held),
        cfg,
        rep,
    )


def _choose(
    model: onnx.ModelProto,
    cands: list[Candidate],
    scales: tuple[dict[str, np.ndarray], dict[str, tuple[float, float]]],
    priced: Priced,
    sens: dict[Key, dict[str, float]],
    cal: tuple[list[dict], list[dict]],
    held: tuple[list[dict], list[dict]],
    cfg: Config,
    rep: dict[str, Any],
) -> Lowered:
    by_key = {c.key: c for c in cands}
    saving, timed = priced.saving, priced.timed
    budget = cfg.max_error
    rounds: list[dict[str, Any]] = []
    rep["rounds"] = rounds
    kw = {"target": cfg.target, "threads": cfg.threads}
    best: tuple[float, list[Candidate], onnx.ModelProto, dict, dict] | None = None
    seen: set[tuple[Key, ...]] = set()
    checks = repeats = 0
    tightening = False
    while checks < MAX_ROUNDS:
        sel = select(saving, sens, budget, boundaries=priced.edges)
        key = tuple(sorted(sel.chosen))
        if not sel.chosen or key in seen:
            rounds.append({"budget": _g(budget), "chosen": len(key), "status": sel.status})
            if sel.chosen and tightening and repeats < MAX_ROUNDS:
                repeats += 1
                budget = 0.5 * min(budget, estimate(sens, sel.chosen))
                continue
            break
        seen.add(key)
        checks += 1
        chosen = [by_key[k] for k in sel.chosen]
        low = lower(model, chosen, *scales)
        e_cal = errors(cfg.metric, cal[1], run(low, cal[0], **kw))
        e_held = errors(cfg.metric, held[1], run(low, held[0], **kw))
        worst = max([*e_cal.values(), *e_held.values()], default=0.0)
        ok = worst <= cfg.max_error
        rounds.append(
            {
                "budget": _g(budget),
                "chosen": len(chosen),
                "estimated_saving_us": round(sel.saving_us, 1),
                "status": sel.status,
                "worst_error": _g(worst),
                "within_budget": ok,
            }
        )
        if ok and (best is None or sel.saving_us > best[0]):
            best = (sel.saving_us, chosen, low, e_cal, e_held)
        if ok and worst > 0.9 * cfg.max_error:
            break
        tightening = not ok
        base = min(budget, estimate(sens, sel.chosen)) if tightening else budget
        budget = base * 0.9 * cfg.max_error / max(worst, 1e-12)
    if best is None:
        rep["result"] = "exact: no choice stayed within the budget end to end"
        return Lowered(None, rep)
    _, chosen, low, e_cal, e_held = best
    rep["changed"] = [
        {
            **c.to_json(),
            "sensitivity": _rounded(sens[c.key]),
            "exact_us": round(timed[c.key][0], 1),
            "low_us": round(timed[c.key][1], 1),
        }
        for c in chosen
    ]
    rep["error"] = {"calibration": _rounded(e_cal), "held_back": _rounded(e_held)}
    rep["result"] = f"lowered {len(chosen)} of {rep['candidates']} candidate op(s)"
    return Lowered(low, rep)


def price(
    model: onnx.ModelProto,
    cands: list[Candidate],
    shapes: dict[str, tuple[int, ...]],
    cfg: Config,
    rep: dict[str, Any],
) -> Priced:
    """Each candidate's exact and low-precision µs at its activation's shape and the QDQ
    boundaries' (`kernels.KernelTable`, its cache written back; `rep["kernels"]` says which
    table and how many timings were new)."""
    table = KernelTable(cfg.target, cfg.threads, cfg.kernel_table)
    timed = {c.key: table.cost(c, shapes[c.activation]) for c in cands}
    saving = {k: exact - low for k, (exact, low) in timed.items()}
    priced = Priced(saving, timed, boundaries(model, cands, shapes, table))
    table.save()
    rep["kernels"] = {"key": table.key, "measured_now": table.measured}
    return priced


def boundaries(
    model: onnx.ModelProto,
    cands: list[Candidate],
    shapes: dict[str, tuple[int, ...]],
    table: KernelTable,
) -> list[Boundary]:
    """The values the `int8_static` candidates read or write, with their writer and readers
    (op indices where they are such candidates, else None) and the µs of a QuantizeLinear
    and a DequantizeLinear of each (`select.py`)."""
    static = [c for c in cands if c.form == FORM]
    writer = {c.output: c.index for c in static}
    reads = {(c.index, v) for c in static for v in (c.activation, c.operand) if v}
    values = list(dict.fromkeys(v for c in static for v in (c.activation, c.operand, c.output)))
    readers: dict[str, list[int | None]] = {v: [] for v in values}
    for i, n in enumerate(model.graph.node):
        for v in dict.fromkeys(n.input):
            if v in readers:
                readers[v].append(i if (i, v) in reads else None)
        for a in n.attribute:
            for sub in (*([a.g] if a.HasField("g") else []), *a.graphs):
                for v in names_read(sub) & readers.keys():
                    readers[v].append(None)
    outputs = {o.name for o in model.graph.output}
    out = []
    for v in values:
        if v not in shapes:
            continue
        q_us, dq_us = table.qdq_pair(shapes[v])
        out.append(Boundary(writer.get(v), tuple(readers[v]), v in outputs, q_us, dq_us))
    return out


def loses_alone(c: Candidate, priced: Priced) -> bool:
    """Whether QDQ candidate `c` meets no other QDQ candidate (no boundary of it has another
    op) and its saving does not pay for its quantize / dequantize kernels."""
    if c.form != FORM:
        return False
    mine = [b for b in priced.edges if c.index in (b.writer, *b.readers)]
    others = {o for b in mine for o in (b.writer, *b.readers) if o is not None} - {c.index}
    return not others and priced.saving[c.key] <= boundary_cost({c.index}, mine)


def estimate(sens: dict[Key, dict[str, float]], chosen: list[Key]) -> float:
    """The error `select` assumes for `chosen`: per output the root-sum-square of the chosen
    candidates' sensitivities, the largest over outputs."""
    outputs = {o for k in chosen for o in sens[k]}
    return max(
        (float(np.sqrt(sum(sens[k].get(o, 0.0) ** 2 for k in chosen))) for o in outputs),
        default=0.0,
    )


def _g(x: float) -> float:
    return float(f"{x:.4g}")
