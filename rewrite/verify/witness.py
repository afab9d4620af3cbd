"""Counterexamples that need exp/erf/tanh/sqrt: confirmed with the real functions.

A counterexample Z3 finds with uninterpreted functions may rest on values the real functions
never take: `float64_sides` evaluates both sides at its inputs with the real functions
(float64), and `random_search` tries `TRIALS` seeded random inputs (all at once) for the one
where they differ most (`gap`): a witness of an `exact` claim should differ beyond the float
tolerance in ORT, not only in float64's last bits, so the prover keeps the wider of the two.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rewrite.ops._z3 import is_int
from rewrite.verify.cases import Case
from rewrite.verify.semantics import close, environment, interpret, interpret_array

Array = np.ndarray


def _unwrap(xs: list[Any]) -> Any:
    return xs[0] if len(xs) == 1 else xs


def float64_sides(
    inputs: dict[str, Array], values: dict[str, Any], lefts: list[Array], rights: list[Array]
) -> tuple[Any, Any]:
    env = environment(inputs, {v: np.asarray(x, dtype=np.float64) for v, x in values.items()})
    ls = [interpret_array(a, env).tolist() for a in lefts]
    rs = [interpret_array(a, env).tolist() for a in rights]
    return _unwrap(ls), _unwrap(rs)


def gap(a: Any, b: Any) -> float:
    """The largest |a - b| (0 where both are NaN or equal infinities)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        d = np.where((x == y) | (np.isnan(x) & np.isnan(y)), 0.0, np.abs(x - y))
    d = np.where(np.isnan(d), np.inf, d)
    return float(d.max()) if d.size else 0.0


def agree_in_float64(a: Any, b: Any) -> bool:
    return bool(np.all(close(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))))


TRIALS = 30


def random_search(
    case: Case,
    inputs: dict[str, Array],
    lefts: list[Array],
    rights: list[Array],
    facts: list[Any],
) -> tuple[dict[str, Any], Any, Any] | None:
    """Of `TRIALS` seeded random inputs (all at once) that respect the facts, the one where the
    sides differ most in float64 (None when they agree on all)."""
    rng = np.random.default_rng(0)
    batch: dict[str, Array] = {}
    for v, t in case.tensors.items():
        shape = (*tuple(int(d) for d in t.shape or ()), TRIALS)  # type: ignore[arg-type]
        if v in case.facts:
            batch[v] = np.full(shape, float(case.facts[v]))
        elif is_int(t.dtype):
            batch[v] = rng.integers(-3, 4, size=shape).astype(np.float64)
        else:
            batch[v] = np.round(rng.normal(0.0, 2.0, size=shape), 3)
    env = environment(inputs, batch)
    ok = np.ones(TRIALS, dtype=bool)
    for f in facts:
        ok &= np.broadcast_to(np.asarray(interpret(f, env), dtype=bool), (TRIALS,))
    differ = np.zeros(TRIALS, dtype=bool)
    width = np.zeros(TRIALS)
    for left, right in zip(lefts, rights, strict=True):
        lv, rv = interpret_array(left, env), interpret_array(right, env)
        differ |= ~close(lv, rv).reshape(-1, TRIALS).all(axis=0)
        trial_gaps = [gap(lv[..., k], rv[..., k]) for k in range(TRIALS)]
        width = np.maximum(width, trial_gaps)
    hits = np.flatnonzero(ok & differ)
    if not len(hits):
        return None
    k = int(hits[np.argmax(width[hits])])
    values = {v: _typed(case, v, b[..., k]) for v, b in batch.items()}
    l64, r64 = float64_sides(inputs, values, lefts, rights)
    return values, l64, r64


def _typed(case: Case, v: str, x: Array) -> Any:
    return x.astype(np.int64).tolist() if is_int(case.tensors[v].dtype) else x.tolist()
