"""Which candidates to lower: a 0/1 MIP solved by HiGHS.

    maximize   Σ_c saving_c · x_c
    subject to Σ_c error_{c,o}² · x_c ≤ budget²   for every output o
               Σ_{c of op p} x_c ≤ 1               for every op p (one form per op)
               x_c ∈ {0, 1}

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


def _op(key: Hashable) -> Hashable:
    return key[0] if isinstance(key, tuple) else key


def select(
    saving: dict[Hashable, float],
    error: dict[Hashable, dict[str, float]],
    budget: float,
    *,
    time_limit: float = 10.0,
) -> Selection:
    """The candidates to lower (module docstring); `error[c][o]` is c's error on output o."""
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
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    sol = h.getSolution()
    if not sol.value_valid:
        return Selection([], 0.0, status, math.inf)
    chosen = [c for c, v in zip(cands, sol.col_value, strict=True) if v > 0.5]
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
    return Selection(
        chosen, sum(saving[c] for c in chosen), status, float(getattr(info, "mip_gap", 0.0))
    )


def _over(
    chosen: list[Hashable], error: dict[Hashable, dict[str, float]], o: str, b: float
) -> bool:
    return sum(error[c].get(o, 0.0) ** 2 for c in chosen) > b**2 * (1 + 1e-9)
