"""Counterexamples re-run in ORT: the case a counterexample describes, its inputs as arrays,
and whether ORT shows the rule's claim failing on them (`reproduce`)."""

from __future__ import annotations

from dataclasses import replace
from itertools import islice
from typing import Any

import numpy as np

from rewrite.rules.rule import Rule
from rewrite.verify.cases import Case, cases
from rewrite.verify.evaluate import Evaluator, numpy_backend
from rewrite.verify.ort_sides import LeftRejectedError, Sides
from rewrite.verify.refute import APPROX_TOLERANCE, claim_of, violation
from rewrite.verify.sample import as64, fixed_values
from rewrite.verify.sample_cases import LARGE, LARGE_SHAPES, constant_shapes
from rewrite.verify.specials import draw_rounds, np_dtype, satisfying

Array = np.ndarray


def case_of(rule: Rule, cx: dict[str, Any]) -> Case | None:
    """The case of `rule` a counterexample (`Counterexample.to_json()`) describes, or None."""
    want = cx["case"]
    found = [tuple(s) for s in want["shapes"].values()]
    for a in (want.get("attributes") or {}).values():  # Expand's and Reshape's targets
        if isinstance(a, list) and all(isinstance(d, int) and d >= 1 for d in a):
            found.append(tuple(a))
    if len(want["shapes"]) <= 2:  # targets derived from the bound's shapes (Reshape's -1, 0)
        found += [*LARGE_SHAPES, *constant_shapes(rule)]
    shapes = tuple(dict.fromkeys(found))
    bound = replace(LARGE, shapes=shapes, few=shapes)
    for c in islice(cases(rule, bound), 200_000):
        if c.describe() == want:
            return c
    return None


def typed_values(case: Case, inputs: dict[str, Any]) -> dict[str, Array]:
    """A counterexample's JSON inputs as arrays of each variable's dtype (int64 kept exact)."""
    out = {}
    for v, t in case.tensors.items():
        dt = np_dtype(t.dtype)
        shape = tuple(int(d) for d in t.shape or ())  # type: ignore[arg-type]
        raw = np.asarray(inputs[v], dtype=object)
        with np.errstate(all="ignore"):
            arr = raw.astype(np.float64).astype(dt) if dt.kind == "f" else raw.astype(dt)
        out[v] = arr.reshape(shape)
    return out


def reproduce(
    rule: Rule,
    cx: dict[str, Any],
    tolerance: float = APPROX_TOLERANCE,
    *,
    overflow_agrees: bool = True,
) -> str:
    """Re-run a counterexample of `rule` in ORT: why the rule's claim fails there ("" when it
    does not). A counterexample without inputs (a type mismatch) runs on normal values.
    `overflow_agrees=False` counts NaN against ±inf where the exact value overflows as a
    difference too (see `refute.violation`)."""
    case = case_of(rule, cx)
    if case is None:
        return ""
    if case.rhs_error:
        return f"the right side is not defined ({case.rhs_error})"
    rng = np.random.default_rng(0)
    _, drawn = next(draw_rounds(case.tensors, fixed_values(case), rng, 1))
    normal = satisfying(drawn, case.element_conds(), rng)
    values = typed_values(case, cx["inputs"]) if cx.get("inputs") else normal
    ev = Evaluator(case, as64(values), numpy_backend)
    try:
        outcome = Sides(case, ev, values).run(values)
    except LeftRejectedError:
        return ""
    if outcome.right_error:
        return outcome.right_error
    claim = claim_of(rule.tags)
    for (lo, ro), lhs in zip(outcome.pairs, case.rewrite.lhs, strict=True):
        exact = np.asarray(ev.term(lhs)) if overflow_agrees else None
        why = violation(claim, lo, ro, tolerance, exact)
        if why:
            return why
    return ""
