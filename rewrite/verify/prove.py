"""Prove a rule in Z3 for every case of a bound, or refute it with a counterexample.

How a rule is proved depends on its class (`Rule.exactness`):
- `bit-exact`: every case in the IEEE model (`ops._z3.IEEE`: float32 as `z3.Float32`,
  integers as bit-vectors), the sides equal as SMT terms (NaN = NaN, -0 != +0); the smallest
  cases again with float16 (and int32) in place of float32 (int64) when the rule neither casts
  nor tests dtypes.
- `exact` (and `approximate`, which the gate then samples): every case in the real model
  (reals for floats, bit-vectors for integers; real division only where the divisor is
  nonzero), then the float check (`verify.floatcheck`) on the smallest cases: in IEEE float32
  and float16 the sides agree within the differential check's tolerance of the output, inf and
  NaN at the same places, for every input (cancellation, inf·0, overflow and over/underflow
  of exp refute an exact claim). Integer cases are checked at int64 and int32.

Every value counterexample is re-run in ORT (`verify.confirm`) before the rule is called
refuted; one that does not reproduce makes the rule `unknown`, saying so.

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
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._z3 import IEEE, REAL, arithmetic
from rewrite.ops.base import TensorType
from rewrite.rules.language import show
from rewrite.rules.rule import Rule
from rewrite.verify.bound import DEFAULT_BOUND, Bound, dtype_name, touches_dtype
from rewrite.verify.cases import Case, cases
from rewrite.verify.confirm import reproduces, typed_inputs
from rewrite.verify.result import (
    PROVED,
    REFUTED,
    UNKNOWN,
    Counterexample,
    ProofResult,
    fmt,
    unwrap,
)
from rewrite.verify.semantics import (
    number,
    uses_ufs,
)
from rewrite.verify.sides import RhsUndefinedError, build_sides, diffs, retype
from rewrite.verify.solve import solve
from rewrite.verify.witness import agree_in_float64, float64_sides, gap, random_search

Array = np.ndarray
INT64, INT32 = TensorProto.INT64, TensorProto.INT32
BITS = "bits"
"""`check_case` mode of `bit-exact` rules (IEEE model, bit equality); `REAL` otherwise."""


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
    mode = BITS if rule.exactness == "bit-exact" else REAL
    smallest: dict[Any, Case] = {}
    memo: dict[str, bool] = {}
    for case in cases(rule, bound):
        n += 1
        stop = _over_budget(n, bound, t0)
        if stop:
            return ProofResult(
                UNKNOWN, bound.describe(), n - 1, time.perf_counter() - t0, reason=stop
            )
        outcome = _check_with_views(case, syms, bound, mode, memo)
        if outcome is SKIP:
            n -= 1
            continue
        if isinstance(outcome, Counterexample):
            return ProofResult(REFUTED, bound.describe(), n, time.perf_counter() - t0, outcome)
        if isinstance(outcome, str) and not unknown:
            unknown = outcome
        key = tuple(t.dtype for t in case.tensors.values()), case.index
        if key not in smallest or _numel(case) < _numel(smallest[key]):
            smallest[key] = case
    dt = time.perf_counter() - t0
    if n == 0:
        return ProofResult(
            UNKNOWN,
            bound.describe(),
            0,
            dt,
            reason="no case in the bound matches the left side and its guards",
        )
    from rewrite.verify.floatcheck import float_check

    checked = float_check(list(smallest.values()), bits=mode == BITS)
    dt = time.perf_counter() - t0
    if isinstance(checked, Counterexample):
        return ProofResult(REFUTED, bound.describe(), n, dt, checked)
    if unknown:
        return ProofResult(UNKNOWN, bound.describe(), n, dt, reason=unknown)
    if isinstance(checked, str):
        return ProofResult(UNKNOWN, bound.describe(), n, dt, reason=checked)
    return ProofResult(PROVED, bound.describe(), n, dt)


def _over_budget(n: int, bound: Bound, t0: float) -> str:
    if n > bound.max_cases:
        return f"more than {bound.max_cases} cases in the bound"
    if time.perf_counter() - t0 > bound.max_seconds:
        return f"the proof took more than {bound.max_seconds:g} s"
    return ""


def _numel(case: Case) -> int:
    return sum(int(np.prod(t.shape or ())) for t in case.tensors.values())


def _check_with_views(
    case: Case,
    syms: dict[tuple[Any, ...], Array],
    bound: Bound,
    mode: str,
    memo: dict[str, bool],
) -> Counterexample | str | _Skip | None:
    """The case, and first (integer cases of rules that neither cast nor test dtypes) the same
    case at int32: integer arithmetic wraps at each width, and 32-bit queries are cheaper."""
    if not touches_dtype(case.rewrite) and any(t.dtype == INT64 for t in case.tensors.values()):
        view = retype(case, {INT64: INT32})
        outcome = confirmed(view, check_case(view, syms, bound, mode, memo))
        if isinstance(outcome, Counterexample | _Skip):
            return outcome
        main = confirmed(case, check_case(case, syms, bound, mode, memo))
        return main if main is not None else outcome
    return confirmed(case, check_case(case, syms, bound, mode, memo))


def confirmed(
    case: Case, outcome: Counterexample | str | _Skip | None
) -> Counterexample | str | _Skip | None:
    """A value counterexample stands only if ORT shows it (see the module docstring)."""
    if not isinstance(outcome, Counterexample) or not outcome.inputs:
        return outcome
    if outcome.why.startswith("the right side is undefined"):
        return outcome  # ORT would fail (or die of SIGFPE) on the right side: not run
    shown, runs = reproduces(case, outcome.inputs, "bits")
    if shown:
        # what ORT ran: the inputs in their dtypes (reals rounded), and its outputs
        outcome.inputs = {v: a.tolist() for v, a in typed_inputs(case, outcome.inputs).items()}
        outcome.lhs_ort = outcome.lhs = unwrap([lo for lo, _ in runs])
        outcome.rhs_ort = outcome.rhs = unwrap([ro for _, ro in runs])
        return outcome
    if shown is None:
        return f"{outcome.line()}; but ORT cannot run the left side on these inputs"
    return (
        f"{outcome.line()}; but it does not reproduce in ORT (both sides give "
        f"{fmt(unwrap([lo for lo, _ in runs]))}): the semantics differ from ORT's here"
    )


class _Skip:
    """The semantics reject the left side's inputs (e.g. Exp of int64): not a case."""


SKIP = _Skip()


def check_case(
    case: Case,
    syms: dict[tuple[Any, ...], Array],
    bound: Bound,
    mode: str = REAL,
    memo: dict[str, bool] | None = None,
) -> Counterexample | str | _Skip | None:
    """None when the case holds, a `Counterexample`, why it is unknown, or `SKIP`. `mode`:
    `REAL` (real model, equality) or `BITS` (IEEE model, bit equality)."""
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
    model = IEEE if mode == BITS else REAL
    try:
        with arithmetic(model):
            built = build_sides(case, syms, pairs, model)
    except RhsUndefinedError as e:
        return Counterexample(repr(rw), f"the right side is not defined ({e})", case.describe())
    if built is None:
        return SKIP
    inputs, lefts, rights, facts, rhs_defined = built
    open_eqs = diffs(lefts, rights)
    if not open_eqs and not rhs_defined:
        return None
    m, why = solve(open_eqs, facts, rhs_defined, bound.timeout_ms, memo, bound.second_try)
    if why:
        return f"Z3 gave up ({why}) on {_where(case)}"
    if m is None:
        return None
    if rhs_defined and not z3.is_true(m.eval(z3.And(*rhs_defined), model_completion=True)):
        values = {v: _eval_array(m, a, case.tensors[v].dtype) for v, a in inputs.items()}
        why = "the right side is undefined where the left side is not (ORT fails: integer "
        why += "division by zero or INT_MIN / -1)"
        return Counterexample(repr(rw), why, case.describe(), values)
    return _counterexample(case, m, inputs, lefts, rights, facts, repr(rw))


def _type(t: TensorType) -> str:
    return f"{dtype_name(t.dtype)}{list(t.shape or ())}"


def _where(case: Case) -> str:
    d = case.describe()
    return ", ".join(f"{v}: {d['dtypes'][v]}{s}" for v, s in d["shapes"].items())


def _eval_array(model: z3.ModelRef, arr: Array, dtype: int | None = None) -> list[Any]:
    out = np.empty(arr.shape, dtype=object)
    for idx in np.ndindex(*arr.shape):
        e = arr[idx]
        out[idx] = number(model.eval(e, model_completion=True), dtype) if z3.is_expr(e) else e
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
    values = {v: _eval_array(model, a, case.tensors[v].dtype) for v, a in inputs.items()}
    terms = [e for arr in (*lefts, *rights) for e in arr.reshape(-1) if z3.is_expr(e)]
    ufs = uses_ufs(terms)
    l64 = r64 = None
    if ufs:
        l64, r64 = float64_sides(inputs, values, lefts, rights)
    if ufs:  # Z3's inputs or the widest of 30 random ones: the one that differs most
        found = random_search(case, inputs, lefts, rights, facts)
        if agree_in_float64(l64, r64) and found is None:
            return (
                f"a counterexample needs values of exp/erf/tanh/sqrt that the real "
                f"functions do not take, and 30 random inputs agree, on {_where(case)}"
            )
        if found is not None and (agree_in_float64(l64, r64) or gap(*found[1:]) > gap(l64, r64)):
            values, l64, r64 = found
    why = "the sides differ" if not ufs else "the sides differ (confirmed in float64)"
    if ufs:  # the Z3 outputs are in terms of made-up function values: show float64 ones
        return Counterexample(text, why, case.describe(), values, l64, r64)
    return Counterexample(
        text,
        why,
        case.describe(),
        values,
        unwrap([_eval_array(model, a) for a in lefts]),
        unwrap([_eval_array(model, a) for a in rights]),
        l64,
        r64,
    )


__all__ = ["PROVED", "REFUTED", "UNKNOWN", "Counterexample", "ProofResult", "prove", "show"]
