"""The float check: what an exact-in-reals rule does in the IEEE arithmetic ORT runs.

`float_check(cases, bits=...)` takes the smallest proved cases of a rule (one per
rewrite and dtype mix, at most `MAX_CASES`) and, for each, the case itself and, when the rule
neither casts nor tests dtypes, its float16 view (float32 -> float16):

- `exact` rules (`bits=False`): Z3 looks for inputs, NaN, ±inf, ±0 and subnormals included,
  where the two sides in IEEE arithmetic are not `close` (`confirm.TOLERANCES`: |left - right|
  <= atol·max(1, |left|) + rtol·|left|, NaN and ±inf at the same places, integers equal).
  That refuses rules whose float error is unbounded relative to the output: cancellation
  ((a+b)-b = a), inf·0 (x·0 = 0), overflow ((A@B)@C = A@(B@C) at 1e30), x/x = 1 at 0.
- `bit-exact` rules (`bits=True`): the float16 views, bit equality (float32 is already proved
  case by case in the IEEE model).

Where a side applies exp, erf or tanh (uninterpreted in Z3: its values would be made up), or
Z3 gives up, the case is run in ORT instead on `GRID` adversarial input sets drawn from
`SPECIAL` values (0, ±0, ±1, ±inf, NaN, subnormals, 1e-3..3e38, ±100 where exp over- and
underflows, 2^24 + 1). Every counterexample is confirmed in ORT (`confirm.reproduces`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._z3 import IEEE, arithmetic, const, is_int
from rewrite.verify.bound import touches_dtype
from rewrite.verify.cases import Case
from rewrite.verify.confirm import TOLERANCES, Sessions, agree, bit_identical, reproduces
from rewrite.verify.evaluate import Evaluator, numpy_backend
from rewrite.verify.semantics import axioms, number, uses_ufs
from rewrite.verify.specials import satisfying

Array = np.ndarray
P = onnx.TensorProto
MAX_CASES = 4
FP_TIMEOUT_MS = 1000
"""Z3's limit on one IEEE query; past it the case is run in ORT on the grid instead."""
GRID = 256
SPECIAL = (
    0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -3.0, 1e-3, -1e-3, 1e-40, -1e-40, 10.0, 30.0,
    90.0, -90.0, 100.0, -100.0, 1e4, -1e4, 1e8, 16777217.0, 1e20, -1e20, 1e30, -1e30,
    3e38, -3e38, float("inf"), float("-inf"), float("nan"),
)  # fmt: skip
INT_SPECIAL = (0, 1, -1, 2, -2, 3, 7, -7, 2**24 + 1, 2**31 - 1, -(2**31), 2**62, -(2**63))


def float_check(cases: list[Case], *, bits: bool) -> Any:
    """None when every checked case holds; a `Counterexample`; or why it is unknown."""
    from rewrite.verify.sides import retype

    chosen = sorted(cases, key=lambda c: sum(_numel(t.shape) for t in c.tensors.values()))
    views: list[Case] = []
    for case in chosen[:MAX_CASES]:
        floats = any(t.dtype == P.FLOAT for t in case.tensors.values())
        if not bits and (floats or touches_dtype(case.rewrite)):
            views.append(case)
        if floats and not touches_dtype(case.rewrite):
            views.append(retype(case, {P.FLOAT: P.FLOAT16}))
    for case in views:
        outcome = _check(case, bits)
        if outcome is not None:
            return outcome
    return None


def _numel(shape: Any) -> int:
    return int(np.prod(shape or ()))


def _check(case: Case, bits: bool) -> Any:
    from rewrite.verify.result import Counterexample
    from rewrite.verify.sides import RhsUndefinedError, build_sides

    rw = case.rewrite
    pairs = [(lhs, rhs) for lhs, rhs in zip(rw.lhs, rw.rhs, strict=True) if lhs != rhs]
    try:
        with arithmetic(IEEE):
            built = build_sides(case, {}, pairs, IEEE)
    except RhsUndefinedError:
        return None  # the real proof checked definedness
    if built is None:
        return None
    inputs, lefts, rights, facts, rhs_defined = built
    terms = [e for arr in (*lefts, *rights) for e in arr.reshape(-1) if z3.is_expr(e)]
    guard = _Definedness(inputs, facts, rhs_defined)
    if uses_ufs(terms):
        return _grid(case, bits, guard)
    conds = []
    for (lhs, _), left, right in zip(pairs, lefts, rights, strict=True):
        dtype = case.types[lhs].dtype
        for a, b in zip(left.reshape(-1), right.reshape(-1), strict=True):
            c = _equal(a, b) if bits else close(a, b, dtype)
            if z3.is_expr(c):
                c = z3.simplify(c)
            if not (z3.is_true(c) or c is True):
                conds.append(c)
    if not conds and not rhs_defined:
        return None
    if not bits and not rhs_defined and _bit_identical(pairs, lefts, rights, facts):
        return None  # bit-identical sides are close
    solver = z3.Solver()
    solver.set("timeout", FP_TIMEOUT_MS)
    solver.add(*facts, *axioms([*conds, *facts]))
    solver.add(z3.Or([z3.Not(c) for c in conds] + [z3.Not(c) for c in rhs_defined]))
    res = solver.check()
    if res == z3.unsat:
        return None
    if res == z3.unknown:
        return _grid(case, bits, guard)
    m = solver.model()
    values = {v: _values(m, a, case.tensors[v].dtype) for v, a in inputs.items()}
    shown, runs = reproduces(case, values, "bits" if bits else "tolerance")
    where = _dtype_names(case)
    if not shown:
        return (
            f"the float check found {values} in {where} where the sides differ, but ORT "
            f"{'cannot run the left side' if shown is None else 'agrees'} there"
        )
    lo = [_values(m, a, case.types[lhs].dtype) for (lhs, _), a in zip(pairs, lefts, strict=True)]
    ro = [_values(m, a, case.types[lhs].dtype) for (lhs, _), a in zip(pairs, rights, strict=True)]
    cx = Counterexample(repr(rw), _why(bits, where), case.describe(), values, _one(lo), _one(ro))
    cx.lhs_ort, cx.rhs_ort = _one([x for x, _ in runs]), _one([y for _, y in runs])
    return cx


def _bit_identical(
    pairs: list[Any], lefts: list[Array], rights: list[Array], facts: list[Any]
) -> bool:
    """Are the sides bit-identical (a cheaper query than closeness)? False when unsure."""
    eqs = []
    for left, right in zip(lefts, rights, strict=True):
        for a, b in zip(left.reshape(-1), right.reshape(-1), strict=True):
            e = _equal(a, b)
            if z3.is_expr(e):
                e = z3.simplify(e)
            if not (z3.is_true(e) or e is True):
                eqs.append(e)
    if not eqs:
        return True
    solver = z3.Solver()
    solver.set("timeout", FP_TIMEOUT_MS)
    solver.add(*facts, *axioms([*eqs, *facts]))
    solver.add(z3.Or([z3.Not(e) for e in eqs]))
    return bool(solver.check() == z3.unsat)


def _why(bits: bool, where: str) -> str:
    if bits:
        return f"the sides are not bit-identical in {where}"
    return (
        f"in {where} the sides differ beyond the tolerance of the output (float error "
        "unbounded: the rule is exact in reals only)"
    )


def _dtype_names(case: Case) -> str:
    from rewrite.verify.bound import dtype_name

    return "/".join(sorted({dtype_name(t.dtype) for t in case.tensors.values()}))


def _one(xs: list[Any]) -> Any:
    return xs[0] if len(xs) == 1 else xs


def _values(m: Any, arr: Array, dtype: int) -> Any:
    out = np.empty(arr.shape, dtype=object)
    for idx in np.ndindex(*arr.shape):
        e = arr[idx]
        out[idx] = number(m.eval(e, model_completion=True), dtype) if z3.is_expr(e) else e
    return out.tolist()


def _equal(a: Any, b: Any) -> Any:
    if not z3.is_expr(a) and not z3.is_expr(b):
        return a == b
    a, b = (const(a, b), b) if not z3.is_expr(a) else (a, b)
    b = const(b, a) if not z3.is_expr(b) else b
    return a == b


def close(a: Any, b: Any, dtype: int) -> Any:
    """Z3: `b` is within the tolerance of `a` (see the module docstring); equal for integers."""
    if not z3.is_fp(a) and not z3.is_fp(b):
        return _equal(a, b)
    a = a if z3.is_expr(a) else const(a, b)
    b = b if z3.is_expr(b) else const(b, a)
    rtol, atol = TOLERANCES.get(dtype, TOLERANCES[P.FLOAT])
    ra, rb = z3.fpToReal(a), z3.fpToReal(b)
    diff = z3.If(ra >= rb, ra - rb, rb - ra)
    mag = z3.If(ra >= 0, ra, -ra)
    near = diff <= z3.RealVal(atol) * z3.If(mag > 1, mag, z3.RealVal(1)) + z3.RealVal(rtol) * mag
    finite = z3.And(*(z3.Not(z3.Or(z3.fpIsNaN(x), z3.fpIsInf(x))) for x in (a, b)))
    return z3.Or(
        z3.And(z3.fpIsNaN(a), z3.fpIsNaN(b)),
        z3.And(z3.fpIsInf(a), a == b),
        z3.And(finite, near),
    )


class _Definedness:
    """Where both sides are defined (ORT neither fails nor dies: integer division by zero and
    INT_MIN / -1 raise SIGFPE in-process), so that the grid never runs ORT elsewhere."""

    def __init__(self, inputs: dict[str, Array], facts: list[Any], rhs: list[Any]) -> None:
        self.inputs = inputs
        self.conds = [c for c in [*facts, *rhs] if _has_bv(c)]

    def holds(self, values: dict[str, Array]) -> bool:
        if not self.conds:
            return True
        pairs = []
        for v, syms in self.inputs.items():
            for idx in np.ndindex(*syms.shape):
                s = syms[idx]
                if z3.is_bv(s) and z3.is_const(s) and not z3.is_bv_value(s):
                    pairs.append((s, z3.BitVecVal(int(values[v][idx]), s.size())))
        return all(z3.is_true(z3.simplify(z3.substitute(c, *pairs))) for c in self.conds)


def _has_bv(c: Any) -> bool:
    return "bv" in c.sexpr() or "#x" in c.sexpr()


def _grid(case: Case, bits: bool, guard: _Definedness) -> Any:
    """ORT on `GRID` adversarial input sets: a `Counterexample`, or None."""
    from rewrite.verify.result import Counterexample

    rng = np.random.default_rng(0)
    conds = case.element_conds()
    sets = [satisfying(_draw(case, rng), conds, rng) for _ in range(GRID)]
    sets = [s for s in sets if _guards_hold(case, s) and guard.holds(s)]
    if not sets:
        return None
    try:
        sessions = Sessions(case, sets[0])
    except Exception as e:  # an op ORT cannot build: the sampling gate reports it
        return f"the float check cannot run {_dtype_names(case)} in ORT ({e})"
    out_dtype = [case.types[lhs].dtype for lhs in case.rewrite.lhs]
    for values in sets:
        runs = sessions.run(values)
        if runs is None:
            continue
        for (lo, ro), dt in zip(runs, out_dtype, strict=False):
            bad = isinstance(ro, str) or (
                not bit_identical(lo, ro) if bits else not bool(np.all(agree(lo, ro, dt)))
            )
            if bad:
                inputs = {v: a.tolist() for v, a in values.items()}
                rr = ro if isinstance(ro, str) else ro.tolist()
                cx = Counterexample(
                    repr(case.rewrite),
                    _why(bits, _dtype_names(case)) + " (found in ORT)",
                    case.describe(),
                    inputs,
                    lo.tolist(),
                    rr,
                )
                cx.lhs_ort, cx.rhs_ort = lo.tolist(), rr
                return cx
    return None


def _draw(case: Case, rng: np.random.Generator) -> dict[str, Array]:
    out = {}
    for v, t in case.tensors.items():
        shape = tuple(int(d) for d in t.shape or ())  # type: ignore[arg-type]
        dt = onnx.helper.tensor_dtype_to_np_dtype(t.dtype)
        if v in case.facts:
            out[v] = np.full(shape, case.facts[v], dtype=dt)
        elif t.dtype == P.BOOL:
            out[v] = rng.integers(0, 2, size=shape).astype(bool)
        elif is_int(t.dtype):
            info = np.iinfo(dt)
            raw = rng.choice(np.array(INT_SPECIAL, dtype=object), size=shape)
            out[v] = np.asarray([int(x) for x in np.ravel(raw)], dtype=object).reshape(shape)
            out[v] = np.asarray(np.clip(out[v], info.min, info.max)).astype(dt)  # 0-d: an int
        else:
            with np.errstate(all="ignore"):
                out[v] = rng.choice(np.array(SPECIAL), size=shape).astype(dt)
    return out


def _guards_hold(case: Case, values: dict[str, Array]) -> bool:
    if not case.value_guards:
        return True
    ev = Evaluator(case, {v: a.astype(np.float64) for v, a in values.items()}, numpy_backend)
    try:
        with np.errstate(all="ignore"):
            return all(bool(np.all(ev.expr(g))) for g in case.value_guards)
    except Exception:
        return False
