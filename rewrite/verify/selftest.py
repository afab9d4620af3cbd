"""The semantics of every typed op checked against ONNX Runtime on special values.

For every op with a typed form (`rewrite.ops`, `OpSpec.egg`), `self_test()` takes a few cases
from the sampling bound (`sample.choose_cases` on the one-op rule `op(x...) = op(x...)`:
dtypes, shapes and attribute values) and input sets of normal and special values
(`verify.specials`: ±0, ±inf, NaN, subnormals, 1e30, 3e38, 2^24 + 1, integer min/max, ...),
and compares with what ORT computes (CPU, optimizations off; an input set ORT refuses is not
a case):
- the op's numpy reference (on inputs of their own dtype), and
- its Z3 semantics, evaluated through the prover's API: IEEE arithmetic
  (`ops._z3.arithmetic(IEEE)`, inputs as numerals, `z3.simplify`, `semantics.number`) where
  the result simplifies to a numeral; elsewhere (uninterpreted exp, erf, tanh, sqrt) the real
  model with the functions' concrete meaning (`semantics.interpret_array`).
Both must agree with ORT as an `exact` rule's sides must (`refute.violation`: NaN and ±inf at
the same places, elsewhere within the differential check's tolerance; integers equal).

`rewrite verify --self-test` prints `table(rows)` and exits non-zero on a mismatch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops import _z3
from rewrite.ops.base import OpSpec
from rewrite.ops.registry import all_specs
from rewrite.rules.language import App, Rewrite, Var
from rewrite.rules.ops import op as ops
from rewrite.rules.rule import Rule
from rewrite.verify.cases import Case
from rewrite.verify.evaluate import Evaluator, numpy_backend, z3_backend
from rewrite.verify.ort_sides import LeftRejectedError, run_ort, side_model
from rewrite.verify.refute import EXACT_CLAIM, show_array, violation
from rewrite.verify.sample_cases import choose_cases
from rewrite.verify.selftest_values import check_value_shaped, value_shaped
from rewrite.verify.semantics import environment, interpret_array, number, symbols
from rewrite.verify.specials import draw_rounds, np_dtype

Array = np.ndarray


@dataclass
class OpRow:
    """One op's result: input sets checked, mismatches of the reference and of the Z3
    semantics, and the first few mismatches in words."""

    op: str
    domain: str = ""
    cases: int = 0
    reference_mismatches: int = 0
    z3_mismatches: int = 0
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.cases > 0 and not self.reference_mismatches and not self.z3_mismatches

    @property
    def label(self) -> str:
        """The op as the table names it (`label`)."""
        return label(self.op, self.domain)


def typed_specs() -> list[OpSpec]:
    return [s for s in all_specs() if s.egg is not None]


def label(name: str, domain: str = "") -> str:
    """How the self-test names an op: its name, or `domain.name` for an op of another domain
    whose name a typed ai.onnx op also has (`com.microsoft.Gelu` beside ONNX's `Gelu`)."""
    if domain and any(s.name == name and not s.domain for s in typed_specs()):
        return f"{domain}.{name}"
    return name


_GUARDS: dict[str, Callable[[Var, Var], tuple[Any, ...]]] = {
    # ORT's kernel takes only a 1-D bias of the input's last dim (cases it refuses are none)
    "BiasGelu": lambda a, b: (a.rank >= 1, b.rank == 1, b.dim(0) == a.dim(-1)),
}


def one_op_rule(spec: OpSpec) -> Rule:
    """The rule `op(x0, x1, ...) = op(x0, x1, ...)` with every attribute open."""
    assert spec.egg is not None
    ns = ops.ms if spec.domain == "com.microsoft" else ops
    xs = [Var(f"x{i}") for i in range(spec.egg.n_inputs)]
    app = getattr(ns, spec.name)(*xs)
    guards = _GUARDS[spec.name](*xs) if spec.name in _GUARDS else ()
    return Rule(f"self-test {spec.name}", "", (Rewrite((app,), (app,), guards),))


def self_test(
    names: list[str] | None = None, *, cases: int = 6, rounds: int = 8, seed: int = 0
) -> list[OpRow]:
    """One row per typed op (or per op whose `label` is in `names`); see the module
    docstring."""
    rows = []
    for spec in typed_specs():
        if names and label(spec.name, spec.domain) not in names:
            continue
        rows.append(_test_op(spec, cases, rounds, seed))
    return rows


def _test_op(spec: OpSpec, n_cases: int, rounds: int, seed: int) -> OpRow:
    row = OpRow(spec.name, spec.domain)
    if value_shaped(spec):  # its output shape depends on input values: listed cases
        check_value_shaped(spec, row, rounds, seed)
        return row
    rng = np.random.default_rng(seed)
    rule = one_op_rule(spec)
    for case in choose_cases(rule, n_cases, rng):
        for _, values in draw_rounds(case.tensors, {}, rng, rounds):
            try:
                _check(case, values, row)
            except LeftRejectedError:
                break  # ORT has no kernel for these types: not a case
    return row


def _check(case: Case, values: dict[str, Array], row: OpRow) -> None:
    app = case.rewrite.lhs[0]
    assert isinstance(app, App)
    ev = Evaluator(case, values, numpy_backend)
    try:
        got = run_ort(side_model(case, app, ev, values), values)
    except Exception as e:  # ORT refuses these types or values: not a case
        raise LeftRejectedError(str(e)) from e
    row.cases += 1
    out_dt = np_dtype(case.types[app].dtype)
    where = ", ".join(f"{v}={show_array(a)}" for v, a in values.items())
    attrs = case.describe().get("attributes")
    where += f"; {attrs}" if attrs else ""
    exact = np.asarray(Evaluator(case, _as64(values), numpy_backend).term(app))
    got = _mask_overflow(got, exact)
    try:
        ref = np.asarray(ev.term(app))
        why = _compare(got, ref, out_dt)
    except Exception as e:  # a reference that fails where ORT runs is a mismatch
        why = f"the reference fails: {type(e).__name__}: {e}"
    if why:
        row.reference_mismatches += 1
        _note(row, f"reference vs ORT: {why} for {where}")
    try:
        sem = z3_values(case, app, values)
        why = _compare(got, sem, out_dt)
    except Exception as e:
        why = f"the Z3 semantics cannot be evaluated: {type(e).__name__}: {e}"
    if why:
        row.z3_mismatches += 1
        _note(row, f"Z3 vs ORT: {why} for {where}")


def _as64(values: dict[str, Array]) -> dict[str, Array]:
    return {v: a.astype(np.float64) if a.dtype.kind == "f" else a for v, a in values.items()}


def _mask_overflow(got: Array, exact: Array) -> Array:
    """ORT's output with NaN where the float64 result is finite but ORT's overflows (or the
    float64 result itself exceeds the output dtype): the sign, or NaN, of a sum whose partial
    sums overflow depends on the order it is accumulated in, which no semantics fixes. The
    reference and Z3 values are compared there as NaN too."""
    if got.dtype.kind != "f" or exact.shape != got.shape:
        return got
    e = np.abs(exact.astype(np.float64))
    big = np.isfinite(e) & ((e > float(np.finfo(got.dtype).max)) | ~np.isfinite(got))
    return np.where(big, np.nan, got).astype(got.dtype) if big.any() else got


def _note(row: OpRow, line: str) -> None:
    if len(row.details) < 3:
        row.details.append(line[:400])


def _compare(got: Array, other: Array, out_dt: np.dtype) -> str:
    if other.shape != got.shape:
        return f"shape {list(other.shape)}, ORT {list(got.shape)}"
    with np.errstate(all="ignore"):
        mine = other.astype(out_dt) if other.dtype != out_dt else other
    if got.dtype.kind == "f":  # where `_mask_overflow` blanked ORT's output
        mine = np.where(np.isnan(got), np.nan, mine).astype(out_dt)
    return violation(EXACT_CLAIM, got, mine, 0.0)


def z3_values(case: Case, app: App, values: dict[str, Array]) -> Array:
    """The op's Z3 semantics at `values`: IEEE numerals where they simplify, the real model
    (concrete exp, erf, tanh, sqrt) elsewhere."""
    with _z3.arithmetic(_z3.IEEE):
        filled = {v: _numerals(v, case.tensors[v].dtype, a) for v, a in values.items()}
        out = np.asarray(Evaluator(case, filled, z3_backend).term(app), dtype=object)
    dtype = case.types[app].dtype
    res = np.empty(out.shape, dtype=object)
    todo = []
    for idx in np.ndindex(*out.shape):
        e = out[idx]
        v = z3.simplify(e) if z3.is_expr(e) else e
        try:
            res[idx] = number(v, dtype) if z3.is_expr(v) else v
        except TypeError:
            todo.append(idx)
    if todo:
        real = _real_model(case, app, values)
        for idx in todo:
            res[idx] = real[idx]
    return res.astype(np.float64) if np_dtype(dtype).kind == "f" else res.astype(np_dtype(dtype))


def _numerals(name: str, dtype: int, arr: Array) -> Array:
    out = np.empty(arr.shape, dtype=object)
    for idx in np.ndindex(*arr.shape):
        x = arr[idx]
        val: Any = bool(x) if arr.dtype == np.bool_ else x.item()
        out[idx] = _z3.symbol(f"{name}{list(idx)}", dtype, val)
    return out


def _real_model(case: Case, app: App, values: dict[str, Array]) -> Array:
    with _z3.arithmetic(_z3.REAL):
        syms = {v: symbols(v, t) for v, t in case.tensors.items()}
        out = np.asarray(Evaluator(case, syms, z3_backend).term(app), dtype=object)
    env = environment(syms, {v: np.asarray(a, dtype=np.float64) for v, a in values.items()})
    return interpret_array(out, env)


def table(rows: list[OpRow]) -> str:
    """The rows as an aligned text table, then the first mismatches of each failing op."""
    lines = [("op", "cases", "reference", "z3", "status")]
    for r in rows:
        status = "ok" if r.ok else ("no case" if not r.cases else "MISMATCH")
        lines.append(
            (r.label, str(r.cases), str(r.reference_mismatches), str(r.z3_mismatches), status)
        )
    widths = [max(len(row[i]) for row in lines) for i in range(5)]
    text = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in lines
    ]
    for r in rows:
        text += [f"{r.label}: {d}" for d in r.details]
    return "\n".join(text)
