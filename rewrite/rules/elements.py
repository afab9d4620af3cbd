"""Per-element conditions on constant tensors: `w.all(lambda e: e.is_finite() & (abs(e) <= 1e4))`.

A condition is built by calling the user's function once on the symbolic element `E`; it is a
tree of comparisons of `e` or `abs(e)` with a number, `e.is_finite()` / `e.is_nan()` /
`e.is_inf()`, joined with `&`, `|` and `~`. Comparisons are IEEE's: NaN compares false (so
`e != 0` holds for NaN, as in numpy) and -0 == 0. The same tree is evaluated three ways:

- on numpy arrays (`holds_np`): which elements of a model's constant satisfy it (the fact the
  e-graph gets, `(AllElems key w)`, for every constant whose elements all do: `install_facts`);
- on Z3 terms (`holds_z3`): an assumption on each element of a symbolic tensor in the proof
  (floating-point terms with IEEE predicates; real-valued terms are finite and never NaN);
- `key`: a canonical text that names the condition in egglog.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

if TYPE_CHECKING:
    from rewrite.egraph.encode import Encoded

_OPS = ("<", "<=", ">", ">=", "==", "!=")


class Cond:
    """A per-element condition (combine with `&`, `|`, `~`; Python's and/or/not cannot)."""

    def __and__(self, other: Cond) -> Cond:
        return Join("&", (self, _cond(other)))

    def __or__(self, other: Cond) -> Cond:
        return Join("|", (self, _cond(other)))

    def __invert__(self) -> Cond:
        return Not(self)

    def __bool__(self) -> bool:
        raise TypeError(
            "an element condition cannot be a Python bool: join conditions with & | ~ "
            "(not and/or/not), e.g. `w.all(lambda e: e.is_finite() & (e != 0))`"
        )


@dataclass(frozen=True)
class Elem:
    """The element `e` (abs_=False) or `abs(e)` a condition compares with a number."""

    abs_: bool = False

    def __abs__(self) -> Elem:
        return Elem(True)

    def _cmp(self, op: str, v: Any) -> Cmp:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise TypeError(f"an element can be compared with a number only, not {v!r}")
        return Cmp(op, self, float(v))

    def __lt__(self, v: float) -> Cmp:
        return self._cmp("<", v)

    def __le__(self, v: float) -> Cmp:
        return self._cmp("<=", v)

    def __gt__(self, v: float) -> Cmp:
        return self._cmp(">", v)

    def __ge__(self, v: float) -> Cmp:
        return self._cmp(">=", v)

    def __eq__(self, v: object) -> Cmp:  # type: ignore[override]
        return self._cmp("==", v)

    def __ne__(self, v: object) -> Cmp:  # type: ignore[override]
        return self._cmp("!=", v)

    def __hash__(self) -> int:
        return hash(self.abs_)

    def is_finite(self) -> Test:
        """Neither NaN nor ±inf."""
        return Test("finite", self)

    def is_nan(self) -> Test:
        return Test("nan", self)

    def is_inf(self) -> Test:
        """+inf or -inf."""
        return Test("inf", self)

    def __repr__(self) -> str:
        return "abs(e)" if self.abs_ else "e"


@dataclass(frozen=True, eq=False)
class Cmp(Cond):
    op: str
    elem: Elem
    number: float

    def __repr__(self) -> str:
        return f"({self.elem!r} {self.op} {self.number!r})"


@dataclass(frozen=True, eq=False)
class Test(Cond):
    what: str
    elem: Elem

    def __repr__(self) -> str:
        return f"is_{self.what}({self.elem!r})"


@dataclass(frozen=True, eq=False)
class Join(Cond):
    op: str
    parts: tuple[Cond, ...]

    def __repr__(self) -> str:
        return "(" + f" {self.op} ".join(map(repr, self.parts)) + ")"


@dataclass(frozen=True, eq=False)
class Not(Cond):
    part: Cond

    def __repr__(self) -> str:
        return f"~{self.part!r}"


def _cond(c: Any) -> Cond:
    if not isinstance(c, Cond):
        raise TypeError(f"{c!r} is not an element condition (e.g. `e >= 0`, `e.is_finite()`)")
    return c


def condition(fn: Callable[[Elem], Any]) -> Cond:
    """The condition `fn` states of the element `e` (TypeError, with a hint, when it is not
    one)."""
    if not callable(fn):
        raise TypeError("t.all(...) takes a function of the element: t.all(lambda e: e >= 0)")
    return _cond(fn(Elem()))


def key(c: Cond) -> str:
    """The canonical text naming `c` (equal conditions, equal keys)."""
    return repr(c)


# -- numpy ------------------------------------------------------------------------------------


def holds_np(c: Cond, arr: Any) -> np.ndarray:
    """Per element of `arr`: does `c` hold? (integers and bools compare as numbers)."""
    a = np.asarray(arr)
    x = a.astype(np.float64) if a.dtype.kind in "biuf" else a.astype(object)
    with np.errstate(all="ignore"):
        return np.asarray(_np(c, x), dtype=bool)


def _np(c: Cond, x: np.ndarray) -> Any:
    if isinstance(c, Join):
        parts = [_np(p, x) for p in c.parts]
        out = parts[0]
        for p in parts[1:]:
            out = (out & p) if c.op == "&" else (out | p)
        return out
    if isinstance(c, Not):
        return ~np.asarray(_np(c.part, x), dtype=bool)
    assert isinstance(c, Cmp | Test)
    v = np.abs(x) if c.elem.abs_ else x
    if isinstance(c, Test):
        return {"finite": np.isfinite, "nan": np.isnan, "inf": np.isinf}[c.what](v)
    return {
        "<": np.less,
        "<=": np.less_equal,
        ">": np.greater,
        ">=": np.greater_equal,
        "==": np.equal,
        "!=": np.not_equal,
    }[c.op](v, c.number)


def all_hold(c: Cond, arr: Any) -> bool:
    """Every element of `arr` satisfies `c` (True for an empty tensor)."""
    return bool(np.all(holds_np(c, arr)))


def fact_lines(conds: list[Cond], consts: dict[str, Any], value_vars: dict[str, str]) -> list[str]:
    """`(AllElems "key" var)` for every constant (`consts`: value name -> array; `value_vars`:
    value name -> its egglog variable) whose elements all satisfy a condition of `conds`."""
    by_key = {key(c): c for c in conds}
    lines = []
    for name, arr in consts.items():
        var = value_vars.get(name)
        if var is None or np.asarray(arr).dtype == object:
            continue
        lines += [f'(AllElems "{k}" {var})' for k, c in by_key.items() if all_hold(c, arr)]
    return lines


def install_facts(enc: Encoded, conds: Sequence[Cond]) -> None:
    """Assert `(AllElems key c)` in `enc`'s e-graph for every constant `c` of the model whose
    elements all satisfy a condition of `conds` (the rules' `w.all(...)`)."""
    lines = fact_lines(list(conds), enc.consts, enc.value_vars)
    if lines:
        enc.egraph.parse_and_run_program("\n".join(lines))


# -- Z3 ---------------------------------------------------------------------------------------


def holds_z3(c: Cond, x: Any) -> Any:
    """`c` of one element: a Z3 Bool for a Z3 term, a Python bool for a number."""
    if not z3.is_expr(x):
        return bool(holds_np(c, np.asarray([x]))[0])
    return _z3(c, x)


def _z3(c: Cond, x: Any) -> Any:
    if isinstance(c, Join):
        parts = [_z3(p, x) for p in c.parts]
        return z3.And(*parts) if c.op == "&" else z3.Or(*parts)
    if isinstance(c, Not):
        return z3.Not(_z3(c.part, x))
    assert isinstance(c, Cmp | Test)
    if z3.is_bv(x):  # integer dtypes: compared as the signed integers they hold
        x = z3.BV2Int(x, is_signed=True)
    fp = z3.is_fp(x)
    v = (z3.fpAbs(x) if fp else z3.If(x >= 0, x, -x)) if c.elem.abs_ else x
    if isinstance(c, Test):
        if not fp:
            return z3.BoolVal(c.what == "finite")
        if c.what == "finite":
            return z3.Not(z3.Or(z3.fpIsNaN(v), z3.fpIsInf(v)))
        return z3.fpIsNaN(v) if c.what == "nan" else z3.fpIsInf(v)
    if fp:
        n = z3.FPVal(c.number, v.sort())
        return {
            "<": z3.fpLT,
            "<=": z3.fpLEQ,
            ">": z3.fpGT,
            ">=": z3.fpGEQ,
            "==": z3.fpEQ,
            "!=": z3.fpNEQ,
        }[c.op](v, n)
    n = z3.RealVal(c.number) if z3.is_real(v) else z3.IntVal(int(c.number))
    if z3.is_int(v) and c.number != int(c.number):
        v, n = z3.ToReal(v), z3.RealVal(c.number)
    return {
        "<": v < n,
        "<=": v <= n,
        ">": v > n,
        ">=": v >= n,
        "==": v == n,
        "!=": v != n,
    }[c.op]


__all__ = [
    "Cond",
    "Elem",
    "all_hold",
    "condition",
    "fact_lines",
    "holds_np",
    "holds_z3",
    "install_facts",
    "key",
]
