"""The MIP of one extraction block as HiGHS arrays (`ilp.py` states the formulation).

`BlockModel(problem, block, with_order=...)` builds the columns (x per node, y per class of
several nodes or none, a level per class of a cyclic SCC when `with_order`) and rows; `solve`
runs HiGHS from a valid selection and returns the best selection found, the dual bound and the
status; `cut` adds one cycle cut for the `"cuts"` mode. `solve` reports what HiGHS *claims*
(status, objective, bound) beside the selection it hands back: `ilp.solve_block` compares the
two and never trusts a status alone (HiGHS 1.16 with a warm start and presolve returned the
warm start labelled `optimal` with a better objective).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

import highspy
import numpy as np
from highspy.highs import HighsCallbackEvent

from rewrite.extract.problem import Problem
from rewrite.extract.solution import Block, cyclic_sccs


@dataclass
class Solved:
    """One HiGHS run: the selection it returned (None: no feasible solution) and its claims."""

    sel: dict[int, int] | None
    bound: float
    """The dual bound HiGHS reports (0 when it has none)."""
    status: str
    objective: float
    """The objective HiGHS reports for its incumbent (inf when none)."""


def quiet_highs() -> highspy.Highs:
    """A `Highs` with its console output off.

    HiGHS >= 1.16 prints its banner to C's stdout inside the constructor, before any option can
    be set; stdout (fd 1) points at /dev/null while it is built, and C's buffer is flushed
    before fd 1 is restored, so a program that pipes our stdout never sees it.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
            _flush_c_stdout()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _set(h, "output_flag", False)
    return h


def _set(h: highspy.Highs, option: str, value: bool | float | str) -> None:
    """Set a HiGHS option, raising where HiGHS refuses it (it only returns an error status, and
    a refused option would leave its default silently: a gap of 1e-4, no time limit)."""
    if h.setOptionValue(option, value) != highspy.HighsStatus.kOk:
        raise RuntimeError(f"HiGHS refused option {option} = {value!r}")


def configured_highs(
    seconds: float, rel_gap: float, abs_gap: float, *, presolve: bool = True
) -> highspy.Highs:
    """A quiet `Highs` that stops after `seconds` (at least 1 ms) or within `rel_gap` /
    `abs_gap` (at least 1e-9) of its bound, with presolve on or off, and no feasibility jump:
    that heuristic looks for a first solution, the warm start is one, and on large blocks it
    ran for seconds before the root LP, deaf to interrupts. (HiGHS before 1.11 has no such
    option, nor the heuristic: that one setting is not checked.)"""
    h = quiet_highs()
    _set(h, "time_limit", max(seconds, 1e-3))
    if not presolve:
        _set(h, "presolve", "off")
    _set(h, "mip_rel_gap", rel_gap)
    _set(h, "mip_abs_gap", max(abs_gap, 1e-9))
    h.setOptionValue("mip_heuristic_run_feasibility_jump", False)
    return h


_STATUS_NAMES = {
    highspy.HighsModelStatus.kOptimal: "optimal",
    highspy.HighsModelStatus.kTimeLimit: "time limit",
    highspy.HighsModelStatus.kInterrupt: "time limit",  # our callback's time limit
    highspy.HighsModelStatus.kInfeasible: "infeasible",
}


def status_name(h: highspy.Highs, status: highspy.HighsModelStatus) -> str:
    """The report's name of a model status: HiGHS's own time limit and our interrupt are both
    "time limit"; statuses we do not name keep HiGHS's text."""
    return _STATUS_NAMES.get(status, h.modelStatusToString(status))


def _flush_c_stdout() -> None:
    with contextlib.suppress(OSError, AttributeError):  # no C library (not CPython/POSIX)
        ctypes.CDLL(None).fflush(None)


class BlockModel:
    """The MIP of one block as HiGHS arrays (module doc: variables and rows)."""

    def __init__(self, problem: Problem, block: Block, *, with_order: bool) -> None:
        self.problem = problem
        self.block = block
        nodes = [n for c in block.classes for n in problem.classes[c]]
        self.x_of_node = x = {n: i for i, n in enumerate(nodes)}
        # y_c is a column of its own unless the class has one node (then it is x_n); a class
        # with none (every e-node forbidden) gets one, held at 0 by its row below.
        self.y: dict[int, int] = {}
        self.t0 = len(nodes)
        for c in block.classes:
            own = problem.classes[c]
            if len(own) == 1:
                self.y[c] = x[own[0]]
            else:
                self.y[c] = self.t0
                self.t0 += 1
        self.level: dict[int, int] = {}  # class of a cyclic SCC -> its t column
        self.scc: dict[int, tuple[int, int]] = {}  # class -> (SCC number, SCC size)
        for i, scc in enumerate(cyclic_sccs(problem, block.classes)):
            for c in scc:
                self.scc[c] = (i, len(scc))
                if with_order:
                    self.level[c] = self.t0 + len(self.level)
        self.cols = self.t0 + len(self.level)
        self.row_lo: list[float] = []
        self.row_hi: list[float] = []
        self.starts: list[int] = [0]
        self.index: list[int] = []
        self.value: list[float] = []
        y = self.y
        # (c, d) -> x of c's nodes that need d. One row per pair: at most one of them is
        # chosen, so Σ x ≤ y_d is valid, and stronger and fewer than a row per node.
        self.pointing: dict[tuple[int, int], list[int]] = {}
        for c in block.classes:
            own = problem.classes[c]
            if len(own) != 1:
                cols = [x[n] for n in own]
                self._row([*cols, y[c]], [1.0] * len(cols) + [-1.0], 0.0, 0.0)
            for n in own:
                for d in problem.kids[n]:
                    self.pointing.setdefault((c, d), []).append(x[n])
        for (c, d), cols in self.pointing.items():
            if c == d:  # self loops: their nodes are fixed to 0 below
                continue
            self._row([*cols, y[d]], [1.0] * len(cols) + [-1.0], -math.inf, 0.0)
            scc = self.scc.get(c)
            if scc is None or self.scc.get(d) != scc:
                continue
            back = self.pointing.get((d, c))
            if back is not None and c < d:
                # Two classes cannot point at each other: valid, and it closes most of the
                # gap between big-M's LP bound and the optimum on short cycles (module doc).
                self._row(cols + back, [1.0] * (len(cols) + len(back)), -math.inf, 1.0)
            if with_order:
                m = float(scc[1])
                for col in cols:
                    self._row(
                        [self.level[c], self.level[d], col], [1.0, -1.0, -m], 1.0 - m, math.inf
                    )
        self.cost = np.zeros(self.cols)
        self.cost[: len(nodes)] = [problem.cost[n] for n in nodes]
        self.lower = np.zeros(self.cols)
        self.upper = np.ones(self.cols)
        for c in block.roots:
            self.lower[y[c]] = 1.0
        for n in nodes:  # a node that needs its own class (shrink drops these first)
            if problem.owner[n] in problem.kids[n]:
                self.upper[x[n]] = 0.0
        for c, col in self.level.items():
            self.upper[col] = self.scc[c][1] - 1.0
        self.integrality = np.ones(self.cols, dtype=np.int32)
        self.integrality[self.t0 :] = 0

    @property
    def rows(self) -> int:
        return len(self.row_lo)

    def _row(self, cols: list[int], vals: list[float], lo: float, hi: float) -> None:
        self.index += cols
        self.value += vals
        self.starts.append(len(self.index))
        self.row_lo.append(lo)
        self.row_hi.append(hi)

    def cut(self, cycle: list[int]) -> None:
        """Forbid the classes of `cycle` from all pointing along it (module doc)."""
        cols: list[int] = []
        for i, c in enumerate(cycle):
            cols += self.pointing.get((c, cycle[(i + 1) % len(cycle)]), [])
        self._row(cols, [1.0] * len(cols), -math.inf, len(cycle) - 1.0)

    def solve(
        self,
        warm: dict[int, int] | None,
        seconds: float,
        rel_gap: float,
        abs_gap: float,
        *,
        presolve: bool = True,
    ) -> Solved:
        """One HiGHS run, started from the valid selection `warm` (None: no start given)."""
        h = configured_highs(seconds, rel_gap, abs_gap, presolve=presolve)
        inf = h.getInfinity()
        h.passModel(
            self.cols,
            self.rows,
            len(self.index),
            2,  # row-wise
            1,  # minimize
            0.0,
            self.cost,
            self.lower,
            self.upper,
            np.clip(np.asarray(self.row_lo), -inf, inf),
            np.clip(np.asarray(self.row_hi), -inf, inf),
            np.asarray(self.starts[:-1], dtype=np.int32),
            np.asarray(self.index, dtype=np.int32),
            np.asarray(self.value),
            self.integrality,
        )
        if warm is not None:
            start = self._values(warm)
            h.setSolution(len(start), np.arange(len(start), dtype=np.int32), start)
        stop_at = time.perf_counter() + seconds

        def stop_when_late(event: HighsCallbackEvent) -> None:
            # HiGHS's own time limit was overshot by 5 s on a large block; its MIP interrupt
            # callback comes more often (module doc: the phase neither reaches).
            if time.perf_counter() > stop_at:
                event.interrupt()

        h.cbMipInterrupt.subscribe(stop_when_late)
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        name = status_name(h, status)
        bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else 0.0
        if name == "optimal":
            bound = max(bound, 0.0)
        objective = float(info.objective_function_value)
        if info.primal_solution_status != 2:  # no feasible solution
            return Solved(None, bound, name, math.inf)
        col = h.getSolution().col_value
        sel: dict[int, int] = {}
        for c in self.block.classes:
            if not self.problem.classes[c]:
                continue
            best = max(self.problem.classes[c], key=lambda n: col[self.x_of_node[n]])
            if col[self.x_of_node[best]] > 0.5:
                sel[c] = best
        return Solved(sel, bound, name, objective)

    def _values(self, sel: dict[int, int]) -> np.ndarray:
        v = np.zeros(self.cols)
        for c, n in sel.items():
            v[self.x_of_node[n]] = 1.0
            v[self.y[c]] = 1.0
        if self.level:
            for c, lvl in levels(self.problem, sel, self.scc).items():
                v[self.level[c]] = lvl
        return v


def levels(
    problem: Problem, sel: dict[int, int], scc: Mapping[int, tuple[int, int]]
) -> dict[int, int]:
    """Height of each selected class of a cyclic SCC over selected edges inside its SCC (an
    acyclic selection's heights satisfy every order row, and stay below the SCC's size)."""
    memo: dict[int, int] = {}
    for root in sel:
        if root not in scc or root in memo:
            continue
        stack = [root]
        while stack:
            top = stack[-1]
            kids = [d for d in problem.kids[sel[top]] if d in sel and scc.get(d) == scc[top]]
            todo = [d for d in kids if d not in memo]
            if todo:
                stack += todo
                continue
            stack.pop()
            memo[top] = 1 + max((memo[d] for d in kids), default=-1)
    return memo
