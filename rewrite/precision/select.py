"""Which candidates to lower: a 0/1 MIP solved by HiGHS.

    maximize   Σ_c saving_c · x_c − Σ_t (cq_t · q_t + cdq_t · dq_t)
    subject to Σ_c error_{c,o}² · x_c ≤ budget²   for every output o
               Σ_{c of op p} x_c ≤ 1               for every op p (one form per op)
               q_t ≥ y_r − y_w,  dq_t ≥ y_w − y_r  for every boundary t, reader r
               x_c ∈ {0, 1}, q_t, dq_t ∈ [0, 1]

with y_p = Σ_{c of op p} x_c (1 when op p is lowered). A boundary is a value t of the QDQ
forms (`static.py`), which are priced as running int8 in and int8 out: it costs a
QuantizeLinear (cq_t) where its writer w stays float and a reader is lowered, and a
DequantizeLinear (cdq_t) where w is lowered and a reader (or the graph's output) stays
float; a writer or reader that is not a candidate counts as float (y = 0).

A candidate c is an (op, form) key: a tuple whose first item names the op (or a plain key,
its own op).

`saving_c` is the exact form's µs minus the low-precision form's (`kernels.py`); candidates
that save nothing, or whose error alone exceeds the budget, are left out. Rounding errors of
different ops are independent, so they add in variance (root-sum-square), not in magnitude:
on distilbert's 36 MatMuls the measured sensitivities sum to 4.9e-2 while lowering all of
them measures 1.8e-2, and their root-sum-square is 1.5e-2 (and x² = x for a 0/1 choice, so
the constraint stays linear). The end-to-end check of `lower.py` does not rely on it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

import highspy
import numpy as np

from rewrite.extract.mip import quiet_highs


@dataclass
class Selection:
    chosen: list[Hashable]
    """The candidates to lower (at most one per op)."""
    saving_us: float
    status: str
    gap: float


@dataclass(frozen=True)
class Boundary:
    """A value the QDQ forms read or write (module docstring)."""

    writer: Hashable | None
    """The op writing it, when it has a QDQ form; else None (a float writer)."""
    readers: tuple[Hashable | None, ...]
    """Per node reading it, the op when it has a QDQ form, else None (a float reader)."""
    graph_output: bool
    q_us: float
    dq_us: float


def _op(key: Hashable) -> Hashable:
    return key[0] if isinstance(key, tuple) else key


def select(
    saving: dict[Hashable, float],
    error: dict[Hashable, dict[str, float]],
    budget: float,
    *,
    boundaries: list[Boundary] | None = None,
    time_limit: float = 10.0,
) -> Selection:
    """The candidates to lower (module docstring); `error[c][o]` is c's error on output o."""
    boundaries = boundaries or []
    cands = [
        c
        for c in sorted(saving, key=repr)
        if c in error
        and saving[c] > 0
        and all(math.isfinite(e) and e <= budget for e in error[c].values())
    ]
    if not cands:
        return Selection([], 0.0, "empty", 0.0)
    outputs = sorted({o for c in cands for o in error[c]})
    h = quiet_highs()
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_feasibility_tolerance", 1e-9)
    h.setOptionValue("primal_feasibility_tolerance", 1e-9)
    n = len(cands)
    inf = highspy.kHighsInf
    h.addVars(n, np.zeros(n), np.ones(n))
    h.changeColsIntegrality(
        n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger)
    )
    h.changeColsCost(n, np.arange(n, dtype=np.int32), -np.array([saving[c] for c in cands]))
    for o in outputs:
        idx = np.array([i for i, c in enumerate(cands) if error[c].get(o, 0.0) > 0], np.int32)
        if len(idx):
            # normalized: (e / budget)² <= 1, so HiGHS's absolute tolerances are relative
            vals = np.array([(error[cands[i]][o] / budget) ** 2 for i in idx], np.float64)
            h.addRow(-inf, 1.0, len(idx), idx, vals)
    ops: dict[Hashable, list[int]] = {}
    for i, c in enumerate(cands):
        ops.setdefault(_op(c), []).append(i)
    for members in ops.values():
        if len(members) > 1:
            h.addRow(-inf, 1.0, len(members), np.array(members, np.int32), np.ones(len(members)))
    _add_boundaries(h, n, ops, boundaries)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    sol = h.getSolution()
    if not sol.value_valid:
        return Selection([], 0.0, status, math.inf)
    chosen = [c for c, v in zip(cands, sol.col_value[:n], strict=True) if v > 0.5]
    if len({_op(c) for c in chosen}) < len(chosen):
        return Selection([], 0.0, f"{status}: two forms of one op", math.inf)
    # never trust a status alone: the choice must meet every row; where it does not (solver
    # tolerance), the candidates that save least per error leave until it does
    repaired = False
    while chosen and any(_over(chosen, error, o, budget) for o in outputs):
        worst = min(chosen, key=lambda c: saving[c] / (max(error[c].values()) or 1e-300))
        chosen.remove(worst)
        repaired = True
    if repaired:
        status += " (repaired: the solver's choice exceeded the budget by its tolerance)"
    info = h.getInfo()
    net = sum(saving[c] for c in chosen) - boundary_cost({_op(c) for c in chosen}, boundaries)
    return Selection(chosen, net, status, float(getattr(info, "mip_gap", 0.0)))


def _add_boundaries(
    h: highspy.Highs, n: int, ops: dict[Hashable, list[int]], boundaries: list[Boundary]
) -> None:
    """The q_t / dq_t columns and rows of the module docstring (after the n x columns)."""
    inf = highspy.kHighsInf
    col = n
    for b in boundaries:
        w = ops.get(b.writer, []) if b.writer is not None else []
        lowered = [ops[r] for r in b.readers if r is not None and r in ops]
        floats = len(lowered) < len(b.readers) or b.graph_output
        if lowered:
            h.addVar(0.0, 1.0)
            h.changeColCost(col, b.q_us)
            for r in lowered:  # y_r − y_w − q ≤ 0
                idx = np.array([*r, *w, col], np.int32)
                vals = np.array([1.0] * len(r) + [-1.0] * len(w) + [-1.0])
                h.addRow(-inf, 0.0, len(idx), idx, vals)
            col += 1
        if w and (floats or lowered):
            h.addVar(0.0, 1.0)
            h.changeColCost(col, b.dq_us)
            rows = [[]] if floats else []
            for r in [*rows, *lowered]:  # y_w − y_r − dq ≤ 0
                idx = np.array([*w, *r, col], np.int32)
                vals = np.array([1.0] * len(w) + [-1.0] * len(r) + [-1.0])
                h.addRow(-inf, 0.0, len(idx), idx, vals)
            col += 1


def boundary_cost(lowered: set[Hashable], boundaries: list[Boundary]) -> float:
    """The µs of the QuantizeLinear / DequantizeLinear kernels left where lowered ops meet
    float ones (module docstring), for the ops in `lowered`."""
    total = 0.0
    for b in boundaries:
        w = b.writer is not None and b.writer in lowered
        low = [r is not None and r in lowered for r in b.readers]
        if any(low) and not w:
            total += b.q_us
        if w and (b.graph_output or not all(low)):
            total += b.dq_us
    return total


def _over(
    chosen: list[Hashable], error: dict[Hashable, dict[str, float]], o: str, b: float
) -> bool:
    return sum(error[c].get(o, 0.0) ** 2 for c in chosen) > b**2 * (1 + 1e-9)
