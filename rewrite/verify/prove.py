"""Prove a rule in Z3 for every case of a bound, or refute it with a counterexample.

For each case (`evaluate.cases`: shapes, dtypes and attribute values within `bound.Bound`
that the left side matches and whose type-level guards hold) the prover checks, in order:
1. the right side is defined (the ops accept its inputs and attributes);
2. both sides have the same shape and dtype;
3. both sides are equal element by element in the ops' Z3 semantics, assuming the value-level
   guards and the axioms of every uninterpreted function applied: each element pair is first
   compared structurally and by `z3.simplify`, and only what is left goes to the solver.

Statuses: `proved` (every case holds), `refuted` (a case fails: `Counterexample` gives the
shapes, dtypes, attributes, input values and both sides' outputs, Alive2-style), `unknown`
(Z3 gave up on a case within `bound.timeout_ms`, the bound has more than `bound.max_cases`
cases or took more than `bound.max_seconds`, no case exists, the verifier cannot handle the
rule, or a counterexample needs uninterpreted-function values the real functions do not take).
A counterexample whose formula involves uninterpreted functions (exp, erf, tanh, sqrt) is
confirmed in float64 with the real functions before the rule is called refuted; if Z3's inputs
do not confirm it, 30 seeded random inputs are tried.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.errors import ShapeError
from rewrite.ops._z3 import is_int
from rewrite.ops.base import TensorType
from rewrite.rules.language import show
from rewrite.rules.rule import Rule
from rewrite.verify.bound import DEFAULT_BOUND, Bound, dtype_name
from rewrite.verify.cases import Case, cases
from rewrite.verify.evaluate import Evaluator, z3_backend
from rewrite.verify.semantics import (
    axioms,
    close,
    environment,
    interpret,
    interpret_array,
    number,
    symbols,
    uses_ufs,
)

Array = np.ndarray
PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"


@dataclass
class Counterexample:
    """A case where the two sides differ: what, where, and both sides' outputs."""

    rewrite: str
    why: str
    case: dict[str, Any]
    inputs: dict[str, Any] = field(default_factory=dict)
    lhs: Any = None
    rhs: Any = None
    lhs_float64: Any = None
    rhs_float64: Any = None

    def line(self) -> str:
        """One line: the case, the inputs, both outputs."""
        types = ", ".join(
            f"{v}: {self.case['dtypes'][v]}{list(s)}" for v, s in self.case["shapes"].items()
        )
        attrs = self.case.get("attributes")
        where = types + (f"; {_fmt(attrs)}" if attrs else "")
        if self.lhs is None:
            return f"{self.why} for {where}"
        ins = " ".join(f"{v}={_fmt(x)}" for v, x in self.inputs.items())
        out = f"left={_fmt(self.lhs)} right={_fmt(self.rhs)}"
        if self.lhs_float64 is not None:
            out += f" (float64: left={_fmt(self.lhs_float64)} right={_fmt(self.rhs_float64)})"
        return f"{self.why} for {where}: {ins} -> {out}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProofResult:
    status: str
    bound: str
    cases: int
    seconds: float
    counterexample: Counterexample | None = None
    reason: str = ""


def _fmt(x: Any) -> str:
    if isinstance(x, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in x.items())
    if isinstance(x, list | tuple):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def prove(rule: Rule, bound: Bound = DEFAULT_BOUND) -> ProofResult:
    """Prove `rule` for every case in `bound` (see the module docstring). Never raises for a
    rule the verifier cannot handle (an attribute without a bound, an op without semantics,
    a bug of ours): that rule is `unknown`, with the reason."""
    t0 = time.perf_counter()
    try:
        return _prove(rule, bound, t0)
    except Exception as e:  # an unverifiable rule is refused, never a crash of the caller
        why = f"the verifier cannot check this rule ({type(e).__name__}: {e})"
        return ProofResult(UNKNOWN, bound.describe(), 0, time.perf_counter() - t0, reason=why)


def _prove(rule: Rule, bound: Bound, t0: float) -> ProofResult:
    syms: dict[tuple[Any, ...], Array] = {}
    n = 0
    unknown = ""
    for case in cases(rule, bound):
        n += 1
        if n > bound.max_cases:
            return ProofResult(
                UNKNOWN,
                bound.describe(),
                n - 1,
                time.perf_counter() - t0,
                reason=f"more than {bound.max_cases} cases in the bound",
            )
        if time.perf_counter() - t0 > bound.max_seconds:
            return ProofResult(
                UNKNOWN,
                bound.describe(),
                n - 1,
                time.perf_counter() - t0,
                reason=f"the proof took more than {bound.max_seconds:g} s",
            )
        outcome = check_case(case, syms, bound)
        if outcome is SKIP:
            n -= 1
            continue
        if isinstance(outcome, Counterexample):
            return ProofResult(REFUTED, bound.describe(), n, time.perf_counter() - t0, outcome)
        if isinstance(outcome, str) and not unknown:
            unknown = outcome
    dt = time.perf_counter() - t0
    if n == 0:
        return ProofResult(
            UNKNOWN,
            bound.describe(),
            0,
            dt,
            reason="no case in the bound matches the left side and its guards",
        )
    if unknown:
        return ProofResult(UNKNOWN, bound.describe(), n, dt, reason=unknown)
    return ProofResult(PROVED, bound.describe(), n, dt)


def _inputs(case: Case, syms: dict[tuple[Any, ...], Array]) -> dict[str, Array]:
    out = {}
    for v, t in case.tensors.items():
        key = (v, t.shape, t.dtype, case.facts.get(v))
        if key not in syms:
            syms[key] = symbols(v, t, case.facts.get(v))
        out[v] = syms[key]
    return out


def _all(parts: list[Any]) -> Any:
    if any(z3.is_expr(p) for p in parts):
        return z3.And(*parts)
    return all(parts)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if z3.is_expr(a) and z3.is_expr(b):
        return bool(a.eq(b))
    return not z3.is_expr(a) and not z3.is_expr(b) and a == b


class _Skip:
    """The semantics reject the left side's inputs (e.g. Exp of int64): not a case."""


SKIP = _Skip()


def check_case(
    case: Case, syms: dict[tuple[Any, ...], Array], bound: Bound
) -> Counterexample | str | _Skip | None:
    """None when the case holds, a `Counterexample`, why it is unknown, or `SKIP`."""
    rw = case.rewrite
    if case.rhs_error:
        return Counterexample(
            repr(rw), f"the right side is not defined ({case.rhs_error})", case.describe()
        )
    # a root whose right side is its left side (a multi-pattern rule's context) holds trivially
    pairs = [(lhs, rhs) for lhs, rhs in zip(rw.lhs, rw.rhs, strict=True) if lhs != rhs]
    for lhs, rhs in pairs:
        lt, rt = case.types[lhs], case.types.get(rhs) or case.rhs_types[rhs]
        if (lt.dtype, lt.shape) != (rt.dtype, rt.shape):
            return Counterexample(
                repr(rw),
                f"the sides differ in type: left {_type(lt)}, right {_type(rt)}",
                case.describe(),
            )
    inputs = _inputs(case, syms)
    ev = Evaluator(case, inputs, z3_backend, all_of=_all)
    try:
        lefts = [np.asarray(ev.term(t), dtype=object) for t, _ in pairs]
        assume = [ev.expr(g) for g in case.value_guards]
    except ShapeError:
        return SKIP  # the semantics reject the left side's inputs: no graph has this case
    if any(a is False for a in assume):
        return SKIP
    try:
        rights = [np.asarray(ev.term(t), dtype=object) for _, t in pairs]
    except ShapeError as e:
        return Counterexample(repr(rw), f"the right side is not defined ({e})", case.describe())
    diffs = []
    for left, right in zip(lefts, rights, strict=True):
        for a, b in zip(left.reshape(-1), right.reshape(-1), strict=True):
            if _same(a, b):
                continue
            eq = a == b
            eq = z3.simplify(eq) if z3.is_expr(eq) else z3.BoolVal(bool(eq))
            if not z3.is_true(eq):
                diffs.append(eq)
    if not diffs:
        return None
    facts = [a for a in assume if z3.is_expr(a)]
    solver = z3.Solver()
    solver.set("timeout", bound.timeout_ms)
    solver.add(*facts, *axioms([*diffs, *facts]))
    solver.add(z3.Or([z3.Not(d) for d in diffs]))
    res = solver.check()
    if res == z3.unsat:
        return None
    if res == z3.unknown:
        return f"Z3 gave up ({solver.reason_unknown()}) on {_where(case)}"
    return _counterexample(case, solver.model(), inputs, lefts, rights, facts, repr(rw))


def _type(t: TensorType) -> str:
    return f"{dtype_name(t.dtype)}{list(t.shape or ())}"


def _where(case: Case) -> str:
    d = case.describe()
    return ", ".join(f"{v}: {d['dtypes'][v]}{s}" for v, s in d["shapes"].items())


def _eval_array(model: z3.ModelRef, arr: Array) -> list[Any]:
    out = np.empty(arr.shape, dtype=object)
    for idx in np.ndindex(*arr.shape):
        e = arr[idx]
        out[idx] = number(model.eval(e, model_completion=True)) if z3.is_expr(e) else e
    return out.tolist()


def _counterexample(
    case: Case,
    model: z3.ModelRef,
    inputs: dict[str, Array],
    lefts: list[Array],
    rights: list[Array],
    facts: list[Any],
    text: str,
) -> Counterexample | str:
    values = {v: _eval_array(model, a) for v, a in inputs.items()}
    terms = [e for arr in (*lefts, *rights) for e in arr.reshape(-1) if z3.is_expr(e)]
    ufs = uses_ufs(terms)
    l64, r64 = _float64(inputs, values, lefts, rights)
    if ufs and _agree(l64, r64):
        found = _random_search(case, inputs, lefts, rights, facts)
        if found is None:
            return (
                f"a counterexample needs values of exp/erf/tanh/sqrt that the real "
                f"functions do not take, and 30 random inputs agree, on {_where(case)}"
            )
        values, l64, r64 = found
    why = "the sides differ" if not ufs else "the sides differ (confirmed in float64)"
    if ufs:  # the Z3 outputs are in terms of made-up function values: show float64 ones
        return Counterexample(text, why, case.describe(), values, l64, r64)
    return Counterexample(
        text,
        why,
        case.describe(),
        values,
        _unwrap([_eval_array(model, a) for a in lefts]),
        _unwrap([_eval_array(model, a) for a in rights]),
        l64,
        r64,
    )


def _unwrap(xs: list[Any]) -> Any:
    return xs[0] if len(xs) == 1 else xs


def _float64(
    inputs: dict[str, Array], values: dict[str, Any], lefts: list[Array], rights: list[Array]
) -> tuple[Any, Any]:
    env = environment(inputs, {v: np.asarray(x, dtype=np.float64) for v, x in values.items()})
    ls = [interpret_array(a, env).tolist() for a in lefts]
    rs = [interpret_array(a, env).tolist() for a in rights]
    return _unwrap(ls), _unwrap(rs)


def _agree(a: Any, b: Any) -> bool:
    return bool(np.all(close(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))))


TRIALS = 30


def _random_search(
    case: Case,
    inputs: dict[str, Array],
    lefts: list[Array],
    rights: list[Array],
    facts: list[Any],
) -> tuple[dict[str, Any], Any, Any] | None:
    """Seeded random inputs (all `TRIALS` at once) until the sides differ in float64."""
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
    for left, right in zip(lefts, rights, strict=True):
        same = close(interpret_array(left, env), interpret_array(right, env))
        differ |= ~same.reshape(-1, TRIALS).all(axis=0)
    hits = np.flatnonzero(ok & differ)
    if not len(hits):
        return None
    k = int(hits[0])
    values = {v: _typed(case, v, b[..., k]) for v, b in batch.items()}
    l64, r64 = _float64(inputs, values, lefts, rights)
    return values, l64, r64


def _typed(case: Case, v: str, x: Array) -> Any:
    return x.astype(np.int64).tolist() if is_int(case.tensors[v].dtype) else x.tolist()


__all__ = ["PROVED", "REFUTED", "UNKNOWN", "Counterexample", "ProofResult", "prove", "show"]
