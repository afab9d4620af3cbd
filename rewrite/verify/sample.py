"""Adversarial sampling of a rule: ORT float32 (as ORT runs it) and numpy float64.

Cases: up to `cases_` instantiations from the sampling bound (`verify.sample_cases`: ranks
0-6, 1-element shapes at every rank, five dtypes, and dims on both sides of every integer
constant in the rule: a rule with `ends=3` or `dim(-1) % 8` is also tried at dims 2, 3, 4, 6
or 7, 8, 9, 16), spread over dtype and shape combinations, smallest first. Input sets per
case (`verify.specials`): normal values, then special values (±0, ±inf, NaN, subnormals,
1e30, 3e38, values near 1, 2^24 + 1, 2^31, 2^53, each integer dtype's min and max, ...) in
`rounds` sets; `is_one` / `is_zero` / `c.value() == k` fix a variable, and a set whose value
guards fail is not a sample. An integer `Div` of the dtype's min by -1 traps in ORT
(SIGFPE): such a set is not run.

Each sample runs both sides (a) with the ops' numpy references in float64 and (b) in ORT,
one session per side and case, graph optimizations off. The first sample that breaks the
rule's claimed class (`verify.refute`: `bit-exact`, `exact`, `approximate` within
`tolerance`), or whose right side ORT refuses where it runs the left (`ort-rejects-rhs`),
refutes the rule: the input set is shrunk (elements not needed set to 1) and kept as the
counterexample, with both sides' ORT outputs, so it reproduces in ORT by construction. A
case whose right side our shape functions reject, or whose sides differ in type, refutes too.

The result also gives the rule's numeric class on the normal sets: `bit-exact` (ORT
bit-identical), `exact-in-reals` (float64 scaled error <= 1e-9), `approximate` (above it),
`ort-rejects-rhs`, or `not-sampled` (no sample); `max_error` is the largest scaled error
(`refute.scaled_error`) of the float64 and the ORT outputs over all samples.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rewrite.errors import RuleError, ShapeError
from rewrite.rules.language import App, Call, Cmp, Lit, Var, subterms
from rewrite.rules.rule import Rule
from rewrite.verify.cases import Case
from rewrite.verify.evaluate import Evaluator, numpy_backend
from rewrite.verify.ort_sides import LeftRejectedError, Sides, run_ort, side_model
from rewrite.verify.refute import (
    APPROX_TOLERANCE,
    APPROXIMATE_CLAIM,
    claim_of,
    counterexample,
    excuse_overflow,
    scaled_error,
    shrink,
    violation,
)
from rewrite.verify.sample_cases import LARGE, choose_cases
from rewrite.verify.specials import draw_rounds, np_dtype, satisfying
from rewrite.verify.terms import term_scale

Array = np.ndarray
BIT_EXACT, EXACT_IN_REALS, APPROXIMATE = "bit-exact", "exact-in-reals", "approximate"
ORT_REJECTS = "ort-rejects-rhs"
NOT_SAMPLED = "not-sampled"
REALS_EXACT = 1e-9
TERM_RELATIVE = "term-relative"
"""The tag of an approximate rule whose error is relative to its terms (`verify.terms`)."""
SCALED = "scaled error"


@dataclass
class SampleResult:
    numeric: str
    cases: int
    samples: int
    max_error: float
    max_error_f32: float
    seconds: float
    notes: list[str] = field(default_factory=list)
    claim: str = "exact"
    counterexample: dict[str, Any] | None = None
    counterexample_line: str = ""
    crashed: int = 0
    """Cases the sampler itself failed on (a bug of rewrite's, named in `notes`): an
    approximate rule is not accepted on a sample with such gaps."""
    unsampled: list[int] = field(default_factory=list)
    """Rewrites (indices) of an approximate rule no chosen case instantiates (none found
    within `sample_cases.ATTEMPTS`): such a rule is not accepted as approximate."""

    @property
    def refuted(self) -> bool:
        """A sample broke the rule's claimed class (`counterexample` says how)."""
        return self.counterexample is not None

    def within(self, tolerance: float) -> bool:
        return (
            self.samples > 0
            and not self.refuted
            and not self.crashed
            and not self.unsampled
            and self.max_error <= tolerance
        )


def sample(
    rule: Rule,
    *,
    cases_: int = 16,
    rounds: int = 14,
    seed: int = 0,
    tolerance: float = APPROX_TOLERANCE,
) -> SampleResult:
    """Sample `rule` adversarially (see the module docstring); never raises for a rule the
    sampler cannot run (the reason is a note)."""
    t0 = time.perf_counter()
    run = _Run(claim_of(rule.tags), tolerance, TERM_RELATIVE in rule.tags)
    rng = np.random.default_rng(seed)
    chosen = choose_cases(rule, cases_, rng)
    missed = sorted(set(range(len(rule.rewrites))) - {c.index for c in chosen})
    if missed and not rule.exact:
        run.unsampled = missed
    for case in chosen:
        try:
            run.case(case, rng, rounds)
        except (RuleError, ShapeError, ValueError) as e:
            run.notes.append(f"not sampled: {e}")
        except Exception as e:  # a bug of ours in one case must not stop the gate
            run.notes.append(f"not sampled ({type(e).__name__}): {e}")
            run.crashed += 1
        if run.cx is not None:
            break
    return run.result(len(chosen), time.perf_counter() - t0)


class _Run:
    """The state of one `sample` call: errors so far, and the first counterexample."""

    def __init__(self, claim: str, tolerance: float, term_relative: bool = False) -> None:
        self.claim, self.tol = claim, tolerance
        self.terms = term_relative and claim == APPROXIMATE_CLAIM
        self.n = 0
        self.err64 = self.err32 = self.normal64 = 0.0
        self.bit, self.rejected = True, False
        self.notes: list[str] = []
        self.cx: dict[str, Any] | None = None
        self.line = ""
        self.crashed = 0
        self.unsampled: list[int] = []

    def result(self, n_cases: int, seconds: float) -> SampleResult:
        if self.n == 0:
            numeric = NOT_SAMPLED
        elif self.rejected:
            numeric = ORT_REJECTS
        elif self.normal64 > REALS_EXACT:
            numeric = APPROXIMATE
        else:
            numeric = BIT_EXACT if self.bit else EXACT_IN_REALS
        if self.n == 0 and self.cx is None:
            self.notes.append("no sample satisfied the rule's guards")
        err = max(self.err64, self.err32)
        notes = sorted(set(self.notes))
        return SampleResult(
            numeric, n_cases, self.n, err, self.err32, seconds, notes,
            self.claim, self.cx, self.line, self.crashed, self.unsampled,
        )  # fmt: skip

    def refute(self, case: Case, why: str, values: dict[str, Array], outs: Any) -> None:
        left, right = outs if outs else (None, None)
        cx, self.line = counterexample(case, why, values, left, right)
        self.cx = cx.to_json()

    def case(self, case: Case, rng: np.random.Generator, rounds: int) -> None:
        fixed = fixed_values(case)
        if case.rhs_error:
            return self.undefined_rhs(case, fixed, rng)
        sides: dict[Any, Sides] = {}
        conds = case.element_conds()
        for kind, drawn in draw_rounds(case.tensors, fixed, rng, rounds):
            values = satisfying(drawn, conds, rng)
            try:
                got = self.check(case, values, sides, kind == "normal")
            except LeftRejectedError:
                if not sides:
                    return None  # ORT does not run the left side of this case: not a case
                continue
            if got is None or not got[0]:
                continue
            self.rejected = self.rejected or got[0].startswith("ORT cannot")
            return self.shrunk(case, values, set(fixed), sides, got)
        return None

    def shrunk(
        self,
        case: Case,
        values: dict[str, Array],
        fixed: set[str],
        sides: dict[Any, Sides],
        got: tuple[str, Any],
    ) -> None:
        """Refute with the failing `values` made small (`refute.shrink`)."""

        def fails(v: dict[str, Array]) -> bool:
            try:
                again = self.check(case, v, sides, False, count=False)
            except LeftRejectedError:
                return False
            return again is not None and bool(again[0])

        small = shrink(values, fixed, fails)
        again = self.check(case, small, sides, False, count=False)
        if again is not None and again[0]:
            got, values = again, small
        self.refute(case, got[0], values, got[1])

    def undefined_rhs(self, case: Case, fixed: dict[str, Array], rng: np.random.Generator) -> None:
        """A case whose right side our shape functions reject: a counterexample if ORT runs
        the left side (else it is no case)."""
        _, drawn = next(draw_rounds(case.tensors, fixed, rng, 1))
        values = satisfying(drawn, case.element_conds(), rng)
        ev = Evaluator(case, as64(values), numpy_backend)
        try:
            left = run_ort(side_model(case, case.rewrite.lhs[0], ev, values), values)
        except Exception:  # ORT's errors are plain exceptions: the left side is no model
            return
        why = f"the right side is not defined ({case.rhs_error})"
        self.refute(case, why, values, (left, None))

    def check(
        self,
        case: Case,
        values: dict[str, Array],
        sides: dict[Any, Sides],
        normal: bool,
        count: bool = True,
    ) -> tuple[str, Any] | None:
        """(why the sample breaks the claim or "", the ORT outputs), or None when the set is
        not a sample (a value guard fails, or it would trap ORT)."""
        ev = Evaluator(case, as64(values), numpy_backend)
        for g in case.value_guards:
            if not bool(np.all(ev.expr(g))):
                return None
        rw = case.rewrite
        pairs64 = [(np.asarray(ev.term(lhs)), np.asarray(ev.term(rhs))) for lhs, rhs in
                   zip(rw.lhs, rw.rhs, strict=True)]  # fmt: skip
        if _traps(case, ev):
            return None
        key = _attr_key(case, ev)
        if key not in sides:
            sides[key] = Sides(case, ev, values)
        outcome = sides[key].run(values)
        scales = _TermScales(case, as64(values), rw.lhs) if self.terms else None
        if count:
            self.n += 1
            e64 = max(self.error(a, b, scales, k) for k, (a, b) in enumerate(pairs64))
            self.err64 = max(self.err64, e64)
            if normal:
                self.normal64 = max(self.normal64, e64)
        if outcome.right_error:
            return outcome.right_error, None
        why = ""
        tol = self.tol if self.claim == APPROXIMATE_CLAIM else None
        for k, ((left, right), (exact, _)) in enumerate(zip(outcome.pairs, pairs64, strict=True)):
            excused = excuse_overflow(left, right, exact, tol)
            err32 = scaled_error(excused[1], excused[0])
            why_k = violation(self.claim, left, right, self.tol, exact, excused)
            if scales is not None and (why_k or err32 > self.tol):
                err32, why_k = self.relative_to_terms(left, right, exact, scales.of(k))
            if count:
                self.err32 = max(self.err32, err32)
                if normal:
                    self.bit = (
                        self.bit
                        and left.dtype == right.dtype
                        and (left.tobytes() == right.tobytes())
                    )
            why = why or why_k
            if why:
                return why, (left, right)
        return why, outcome.pairs[0] if outcome.pairs else None

    def error(self, a: Array, b: Array, scales: _TermScales | None, k: int) -> float:
        """`scaled_error(a, b)`; for a `term-relative` rule, where that exceeds the
        tolerance, the smaller error relative to output k's terms (`verify.terms`)."""
        err = scaled_error(a, b)
        if scales is None or err <= self.tol:
            return err
        return min(err, scaled_error(a, b, scales.of(k)))

    def relative_to_terms(
        self, left: Array, right: Array, exact: Array, scale: Array
    ) -> tuple[float, str]:
        """(error, why the pair breaks the claim) of a `term-relative` rule: elements whose
        terms' magnitude overflows the dtype are outside the claim (any order of the sum may
        overflow there); elsewhere the error is relative to the terms (`verify.terms`)."""
        out = ~(scale <= float(np.finfo(left.dtype).max))
        left, right = np.where(out, np.nan, left), np.where(out, np.nan, right)
        excused = excuse_overflow(left, right, exact, self.tol, scale)
        err = scaled_error(excused[1], excused[0], scale)
        why = violation(self.claim, left, right, self.tol, exact, excused)
        return err, "" if why.startswith(SCALED) and err <= self.tol else why


class _TermScales:
    """`terms.term_scale` of each left-side root at one input set, computed when asked."""

    def __init__(self, case: Case, values64: dict[str, Array], lhs: Any) -> None:
        self.case, self.values, self.lhs = case, values64, lhs
        self.memo: dict[int, Array] = {}

    def of(self, k: int) -> Array:
        if k not in self.memo:
            root = self.lhs[k]

            def f(vals: dict[str, Array]) -> Array:
                return np.asarray(Evaluator(self.case, vals, numpy_backend).term(root))

            self.memo[k] = term_scale(f, self.values)
        return self.memo[k]


def as64(values: dict[str, Array]) -> dict[str, Array]:
    return {v: a.astype(np.float64) if a.dtype.kind == "f" else a for v, a in values.items()}


def _attr_key(case: Case, ev: Evaluator) -> Any:
    """The attribute values of every op of the case (value-level ones can change per sample)."""
    rw = case.rewrite
    apps = [t for r in (*rw.lhs, *rw.rhs) for t in subterms(r) if isinstance(t, App)]
    return tuple(repr(sorted(ev.app_values(a).items(), key=lambda kv: kv[0])) for a in apps)


def _traps(case: Case, ev: Evaluator) -> bool:
    """Does an integer Div of the case divide its dtype's min by -1 (SIGFPE in ORT)?"""
    rw = case.rewrite
    for root in (*rw.lhs, *rw.rhs):
        for t in subterms(root):
            if not (isinstance(t, App) and t.op == "Div" and t.domain == ""):
                continue
            a, b = (np.asarray(ev.memo.get(c, 0)) for c in t.inputs)
            if a.dtype.kind == "i":
                lo = np.iinfo(a.dtype).min
                if bool(np.any((a == lo) & (b == -1))):
                    return True
    return False


def fixed_values(case: Case) -> dict[str, Array]:
    """Variables that `is_one`/`is_zero` or a value guard `v.value() == k` pins to k, as
    arrays of their type."""
    pinned = {v: float(k) for v, k in case.facts.items()}
    for g in case.value_guards:
        if isinstance(g, Call) and g.fn == "approx" and isinstance(g.args[0], Var):
            pinned[g.args[0].name] = float(g.args[1])  # within any tolerance
        if isinstance(g, Cmp) and g.op == "==":
            for a, b in ((g.left, g.right), (g.right, g.left)):
                if (
                    isinstance(a, Call)
                    and a.fn == "value"
                    and isinstance(a.args[0], Var)
                    and isinstance(b, Lit)
                ):
                    pinned[a.args[0].name] = float(b.value)
    out = {}
    for v, k in pinned.items():
        t = case.tensors[v]
        out[v] = np.full(tuple(int(d) for d in t.shape or ()), k).astype(np_dtype(t.dtype))  # type: ignore[arg-type]
    return out


__all__ = [
    "APPROXIMATE",
    "APPROXIMATE_CLAIM",
    "APPROX_TOLERANCE",
    "BIT_EXACT",
    "EXACT_IN_REALS",
    "LARGE",
    "ORT_REJECTS",
    "SampleResult",
    "as64",
    "choose_cases",
    "fixed_values",
    "run_ort",
    "sample",
    "scaled_error",
    "side_model",
]
