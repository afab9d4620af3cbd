"""One entry point for extraction: greedy, then the ILP warm-started from it, validated.

`extract(snapshot, costs)` returns the `Choice` to decode; `run_extraction` returns the same
choice with everything a report needs (`Extraction.to_json()`). The ILP's answer is used only
when it passes `check_choice` and costs no more than greedy's; otherwise greedy's choice is
returned and its `notes` say why (the ILP failed, hit its time limit without improving, gave
answers whose claims did not match its solutions, was rejected by the validator, or cost more).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from rewrite.errors import ExtractionError
from rewrite.extract.check import check_choice
from rewrite.extract.greedy import greedy
from rewrite.extract.ilp import Acyclic, ILPStats, ilp
from rewrite.extract.problem import Pick
from rewrite.extract.snapshot import Choice, Snapshot

METHODS = ("ilp", "greedy")
TOLERANCE = 1e-9
"""Relative slack when comparing the ILP's cost with greedy's (float sums in another order)."""


@dataclass
class Extraction:
    """The chosen extraction and how it was reached."""

    choice: Choice
    greedy_cost: float
    greedy_seconds: float
    ilp: ILPStats | None = None
    fallback: str | None = None
    """Why greedy's choice was used although the ILP ran (None: the ILP's was used)."""

    def to_json(self) -> dict[str, object]:
        return {
            "extractor": self.choice.extractor,
            "cost_us": self.choice.cost,
            "greedy_cost_us": self.greedy_cost,
            "greedy_seconds": round(self.greedy_seconds, 4),
            "ilp": None if self.ilp is None else self.ilp.to_json(),
            "fallback": self.fallback,
        }


def extract(
    snapshot: Snapshot,
    costs: Mapping[Pick, float],
    *,
    method: str = "ilp",
    time_limit: float = 10.0,
) -> Choice:
    """The best valid choice `method` finds ("ilp": greedy + ILP, "greedy": greedy only).

    Always passes `check_choice`. Raises ExtractionError when no valid choice exists or the
    method is unknown.
    """
    return run_extraction(snapshot, costs, method=method, time_limit=time_limit).choice


def run_extraction(
    snapshot: Snapshot,
    costs: Mapping[Pick, float],
    *,
    method: str = "ilp",
    time_limit: float = 10.0,
    acyclic: Acyclic = "order",
) -> Extraction:
    """`extract`, with the greedy baseline, the ILP's stats and the fallback reason."""
    if method not in METHODS:
        raise ExtractionError(f"unknown extraction method {method!r}; known: {', '.join(METHODS)}")
    t = time.perf_counter()
    base = greedy(snapshot, costs)
    out = Extraction(base, base.cost, time.perf_counter() - t)
    base.notes.append(f"greedy: cost {base.cost:.6g} in {out.greedy_seconds:.2f} s")
    if method == "greedy":
        return out
    try:
        choice, stats = ilp(snapshot, costs, warm=base, time_limit=time_limit, acyclic=acyclic)
    except ExtractionError as e:
        return _fall_back(out, f"the ILP failed ({e})")
    except Exception as e:  # a HiGHS or ILP bug must not cost the user an extraction
        return _fall_back(out, f"the ILP raised {type(e).__name__}: {e}")
    out.ilp = stats
    try:
        check_choice(snapshot, choice)
    except ExtractionError as e:
        return _fall_back(out, f"the ILP's choice was rejected by the validator ({e})")
    if not math.isfinite(choice.cost) or choice.cost > base.cost * (1 + TOLERANCE) + TOLERANCE:
        return _fall_back(out, f"the ILP's cost {choice.cost:.6g} exceeds greedy's {base.cost:.6g}")
    improved = choice.cost < base.cost * (1 - TOLERANCE) - TOLERANCE
    if stats.status == "unverified" and not improved:
        return _fall_back(
            out,
            "HiGHS's claims did not match the solutions it returned, even re-solved without "
            "the warm start and without presolve: " + "; ".join(stats.checks[-2:]),
        )
    if stats.status == "time limit" and not improved:
        return _fall_back(
            out,
            f"the ILP hit its time limit ({time_limit:g} s) without improving on greedy "
            f"(bound {stats.bound:.6g}, gap {stats.gap:.2%})",
        )
    choice.notes[:0] = base.notes
    out.choice = choice
    return out


def _fall_back(out: Extraction, why: str) -> Extraction:
    out.fallback = why
    out.choice.notes.append(f"greedy's choice used: {why}")
    if out.ilp is not None:
        out.choice.notes.append(out.ilp.summary())
    return out
