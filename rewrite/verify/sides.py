"""The two sides of a rule on one case as arrays of Z3 terms, in the current arithmetic model
(`ops._z3.REAL` or `IEEE`), with what the proof may assume and what the right side needs to be
defined; and the same case retyped (float32 -> float16, int64 -> int32)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.errors import ShapeError
from rewrite.ops._z3 import REAL, collecting
from rewrite.ops.base import TensorType
from rewrite.verify.cases import Case
from rewrite.verify.evaluate import Evaluator, z3_backend
from rewrite.verify.semantics import symbols

Array = np.ndarray


def retype(case: Case, mapping: dict[int, int]) -> Case:
    """The same case with dtypes replaced by `mapping` (float32 -> float16, int64 -> int32)."""

    def re(t: TensorType) -> TensorType:
        return TensorType(mapping.get(t.dtype, t.dtype), t.shape)

    return replace(
        case,
        tensors={v: re(t) for v, t in case.tensors.items()},
        types={k: re(t) for k, t in case.types.items()},
        rhs_types={k: re(t) for k, t in case.rhs_types.items()},
    )


def sym_inputs(
    case: Case, syms: dict[tuple[Any, ...], Array], model: str = REAL
) -> dict[str, Array]:
    out = {}
    for v, t in case.tensors.items():
        key = (v, t.shape, t.dtype, case.facts.get(v), model)
        if key not in syms:
            syms[key] = symbols(v, t, case.facts.get(v))
        out[v] = syms[key]
    return out


def _all(parts: list[Any]) -> Any:
    if any(z3.is_expr(p) for p in parts):
        return z3.And(*parts)
    return all(parts)


def same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if z3.is_expr(a) and z3.is_expr(b):
        return bool(a.eq(b))
    return not z3.is_expr(a) and not z3.is_expr(b) and a == b


def build_sides(
    case: Case, syms: dict[tuple[Any, ...], Array], pairs: list[tuple[Any, Any]], model: str
) -> tuple[dict[str, Array], list[Array], list[Array], list[Any], list[Any]] | None:
    """(inputs, left values, right values, assumptions, right side's definedness), built in the
    current model; None when the semantics reject the left side's inputs (not a case).
    Assumptions: the value guards, the left side defined, and in the real model every real
    division's divisor nonzero (both sides)."""
    inputs = sym_inputs(case, syms, model)
    ev = Evaluator(case, inputs, z3_backend, all_of=_all)
    try:
        with collecting() as (lreq, ldom):
            lefts = [np.asarray(ev.term(t), dtype=object) for t, _ in pairs]
            assume = [ev.expr(g) for g in case.value_guards]
    except ShapeError:
        return None  # the semantics reject the left side's inputs: no graph has this case
    if any(a is False for a in assume):
        return None
    try:
        with collecting() as (rreq, rdom):
            rights = [np.asarray(ev.term(t), dtype=object) for _, t in pairs]
    except ShapeError as e:
        raise RhsUndefinedError(str(e)) from e
    facts = [a for a in [*assume, *lreq] if z3.is_expr(a)]
    if model == REAL:
        facts += [d for d in [*ldom, *rdom] if z3.is_expr(d)]
    return inputs, lefts, rights, facts, [c for c in rreq if z3.is_expr(c)]


class RhsUndefinedError(Exception):
    """The semantics reject the right side's inputs."""


def diffs(lefts: list[Array], rights: list[Array]) -> list[Any]:
    """Element equalities the structure and `z3.simplify` do not settle."""
    diffs = []
    for left, right in zip(lefts, rights, strict=True):
        for a, b in zip(left.reshape(-1), right.reshape(-1), strict=True):
            if same(a, b):
                continue
            eq = a == b
            eq = z3.simplify(eq) if z3.is_expr(eq) else z3.BoolVal(bool(eq))
            if not z3.is_true(eq):
                diffs.append(eq)
    return diffs
