"""Evaluating the terms of a case with a backend: Z3 semantics or numpy references.

`Evaluator(case, inputs, backend)` computes the value of any term of a case (`Bindings`: what
this module reads of a `cases.Case`, which `cases` builds with this module) for the given
tensor-variable values: `z3_backend` (the ops' Z3 semantics over object arrays of Z3 terms) or
`numpy_backend` (the float64 references). A right-side term equal to a left-side
term is that term's value, as in the compiled egglog rule. Attribute expressions and guards
evaluate too (`compose`, `is_identity`, `shape`, `value()` ...); `TypeLevel` evaluates them
without values (a guard that needs values raises `NeedsValuesError`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import numpy as np
from onnx import TensorProto

from rewrite.errors import RuleError, ShapeError
from rewrite.ops.base import OpCall, OpSpec, TensorType
from rewrite.ops.registry import lookup
from rewrite.rules.elements import Cond, all_hold, holds_z3
from rewrite.rules.language import (
    Absent,
    And,
    App,
    AttrVar,
    BinOp,
    Call,
    Cmp,
    Lit,
    Term,
    Var,
    show,
)
from rewrite.rules.literals import in_dtype, value_literal
from rewrite.rules.ops import const_input_names

Array = np.ndarray
Backend = Callable[[OpSpec, OpCall, list[Any]], Any]
INT64 = TensorProto.INT64


class Bindings(Protocol):
    """What evaluation reads of a case (`cases.Case` has these): attribute variables' values,
    the open attributes of left-side terms, and the types of left- and right-side terms."""

    attrs: dict[str, Any]
    open: dict[tuple[Term, str], Any]
    types: dict[Term, TensorType]
    rhs_types: dict[Term, TensorType]


class NeedsValuesError(Exception):
    """A guard needs tensor values: it is checked by the backend, not at the type level."""


@dataclass(frozen=True)
class Param:
    """A non-tensor argument of a typed op: an attribute, or a constant vector input."""

    name: str
    sort: str
    default: Any
    const_index: int | None = None


@cache
def params(spec: OpSpec) -> tuple[Param, ...]:
    """The typed constructor's non-tensor arguments, in the rule compiler's order."""
    assert spec.egg is not None
    out = [Param(n, s, d) for n, s, d in spec.egg.attrs]
    names = const_input_names(spec)
    out += [Param(n, "VecI", None, i) for n, i in zip(names, spec.egg.const_inputs, strict=True)]
    return tuple(out)


def spec_of(app: App) -> OpSpec:
    spec = lookup(app.op, app.domain)
    if spec is None or spec.egg is None:
        raise RuleError(f"op {app.op} has no typed form")
    return spec


def make_call(
    spec: OpSpec, in_types: list[TensorType], values: dict[str, Any]
) -> tuple[OpCall, dict[int, Array]]:
    """The `OpCall` of a typed op with these tensor input types and argument values, and its
    constant vector inputs (ONNX input index -> int64 array)."""
    consts: dict[int, Array] = {}
    attrs: dict[str, Any] = {}
    for p in params(spec):
        val = values.get(p.name)
        if p.const_index is not None:
            assert val is not None, f"{spec.name}: no value for {p.name}"
            consts[p.const_index] = np.asarray(list(val), dtype=np.int64)
        elif val is not None:
            attrs[p.name] = list(val) if isinstance(val, tuple) else val
    n = len(in_types) + len(consts)
    inputs: list[TensorType | None] = []
    const_list: list[Array | None] = []
    it = iter(in_types)
    for j in range(n):
        if j in consts:
            inputs.append(TensorType(INT64, (len(consts[j]),)))
            const_list.append(consts[j])
        else:
            inputs.append(next(it))
            const_list.append(None)
    return OpCall(spec.name, inputs, const_list, attrs), consts


def infer(spec: OpSpec, app: App, in_types: list[TensorType], values: dict[str, Any]) -> TensorType:
    """The output type of `app` (ShapeError when the op rejects these inputs)."""
    call, _ = make_call(spec, in_types, values)
    out = spec.infer(call)[0]
    if out.shape is None or not all(isinstance(d, int) for d in out.shape):
        raise ShapeError(f"{app.op}: output shape not static")
    return out


class _Values:
    """Attribute and guard expressions of a case; subclasses say what `value()` means."""

    def __init__(self, case: Bindings) -> None:
        self.case = case

    def type_of(self, t: Term) -> TensorType | None:
        if isinstance(t, Absent):
            return None
        if t in self.case.types:
            return self.case.types[t]
        if t in self.case.rhs_types:
            return self.case.rhs_types[t]
        raise RuleError(f"{show(t)} is not part of the rule")

    def value_of(self, t: Term) -> Any:
        raise NeedsValuesError

    def app_values(self, app: App) -> dict[str, Any]:
        """Argument values of a typed op: given, bound, open (left side) or default."""
        given = dict(app.attrs)
        out: dict[str, Any] = {}
        for p in params(spec_of(app)):
            v = given.get(p.name)
            if v is None:
                out[p.name] = self.case.open.get((app, p.name), p.default)
            else:
                out[p.name] = self.expr(v)
        return out

    def expr(self, e: Any) -> Any:
        if isinstance(e, Lit):
            return e.value
        if isinstance(e, AttrVar):
            return self.case.attrs[e.name]
        if isinstance(e, And):
            return self.all([self.expr(p) for p in e.parts])
        if isinstance(e, Cmp):
            found = value_literal(e)
            if found is not None:  # c.value() == v: v as c's dtype holds it
                call, v = found
                t = self.type_of(call.args[0])
                held = in_dtype(v, t.dtype) if t is not None else v
                if held is None:
                    return False
                return _compare(e.op, self.expr(call), held)
            return _compare(e.op, self.expr(e.left), self.expr(e.right))
        if isinstance(e, BinOp):
            return _arith(e.op, self.expr(e.left), self.expr(e.right))
        if isinstance(e, Call):
            return self.call(e)
        raise RuleError(f"cannot evaluate {show(e)}")

    def all(self, parts: list[Any]) -> Any:
        return all(parts)

    def call(self, c: Call) -> Any:
        fn, args = c.fn, c.args
        if fn in ("shape", "dtype", "rank", "dim", "is_scalar", "is_const"):
            t = self.type_of(args[0])
            shape = tuple(t.shape or ())
            if fn == "shape":
                return shape
            if fn == "dtype":
                return t.dtype
            if fn == "rank":
                return len(shape)
            if fn == "dim":
                return shape[int(args[1])]
            if fn == "is_scalar":
                return int(np.prod(np.asarray(shape, dtype=np.int64))) == 1
            return True  # is_const: constness does not change what the graph computes
        if fn == "value":
            return self.value_of(args[0])
        if fn == "dtype_in":
            t = self.type_of(args[0])
            return t is not None and t.dtype in set(args[1])
        if fn == "approx":
            x = self.value_of(args[0])
            v, rtol, atol = (float(a) for a in args[1:])
            tol = atol + rtol * abs(v)
            return self.all([_compare("<=", x - v, tol), _compare("<=", v - x, tol)])
        if fn == "precedes":  # a symmetry-breaking order: checking both orders is stronger
            return True
        if fn == "vec":
            return tuple(self.expr(a) for a in args)
        if fn == "all_elems":
            return self.elements(args[0], args[1])
        vals = [self.expr(a) for a in args[:1]]
        if fn == "length":
            return len(vals[0])
        if fn == "index":
            return vals[0][int(args[1])]
        if fn == "is_identity":
            return tuple(vals[0]) == tuple(range(len(vals[0])))
        if fn == "all_nonzero":
            return all(v != 0 for v in vals[0])
        if fn == "compose":
            q = self.expr(args[1])
            return tuple(vals[0][i] for i in q)
        if fn in ("is_one", "is_zero"):
            return self.fact(args[0], 1 if fn == "is_one" else 0)
        raise RuleError(f"unknown condition {show(c)}")

    def fact(self, t: Term, value: int) -> Any:
        raise NeedsValuesError

    def elements(self, t: Term, cond: Cond) -> Any:
        """Does every element of `t`'s value satisfy `cond`?"""
        raise NeedsValuesError


class TypeLevel(_Values):
    """Types only: a value-level argument (`alpha=c.value()`) types as the op's default."""

    def app_values(self, app: App) -> dict[str, Any]:
        given = dict(app.attrs)
        out: dict[str, Any] = {}
        for p in params(spec_of(app)):
            v = given.get(p.name)
            try:
                out[p.name] = (
                    self.case.open.get((app, p.name), p.default) if v is None else self.expr(v)
                )
            except NeedsValuesError:
                out[p.name] = p.default
        return out


def _compare(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, tuple) or isinstance(b, tuple):
        a, b = tuple(a), tuple(b)
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _arith(op: str, a: Any, b: Any) -> Any:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "%":
        return a % b
    if op == "/":  # egglog's i64 division truncates toward zero
        if isinstance(a, int) and isinstance(b, int):
            return abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return a / b
    raise RuleError(f"unknown operator {op}")


class Evaluator(_Values):
    """Values of the terms of a case, for tensor-variable values `inputs`, with `backend`."""

    def __init__(
        self,
        case: Bindings,
        inputs: dict[str, Any],
        backend: Backend,
        all_of: Callable[[list[Any]], Any] = all,
    ) -> None:
        super().__init__(case)
        self.inputs = inputs
        self.backend = backend
        self._all = all_of
        self.memo: dict[Term, Any] = {}

    def all(self, parts: list[Any]) -> Any:
        return self._all(parts)

    def term(self, t: Term) -> Any:
        """The value of `t` (a right-side term equal to a left-side one is that term)."""
        if t in self.memo:
            return self.memo[t]
        if isinstance(t, Absent):
            return None
        if isinstance(t, Var):
            value = self.inputs[t.name]
        else:
            assert isinstance(t, App)
            spec = spec_of(t)
            kids = [self.term(c) for c in t.inputs]
            call, consts = make_call(spec, [self.type_of(c) for c in t.inputs], self.app_values(t))
            arrays: list[Any] = []
            it = iter(kids)
            for j in range(len(call.inputs)):
                arrays.append(consts[j] if j in consts else next(it))
            value = self.backend(spec, call, arrays)
        self.memo[t] = value
        return value

    def value_of(self, t: Term) -> Any:
        arr = np.asarray(self.term(t), dtype=object)
        if arr.size != 1:
            raise ShapeError(f"{show(t)}.value() of a tensor with {arr.size} elements")
        return arr.reshape(-1)[0]

    def fact(self, t: Term, value: int) -> Any:
        arr = np.asarray(self.term(t), dtype=object).reshape(-1)
        return self._all([x == value for x in arr])

    def elements(self, t: Term, cond: Cond) -> Any:
        value = np.asarray(self.term(t))
        if value.dtype != object:
            return all_hold(cond, value)
        return self._all([holds_z3(cond, x) for x in value.reshape(-1)])


def z3_backend(spec: OpSpec, call: OpCall, arrays: list[Any]) -> Any:
    """The op's Z3 semantics (ShapeError when it has none or rejects the inputs)."""
    if spec.z3 is None:
        raise ShapeError(f"{spec.name} has no Z3 semantics")
    out = spec.z3(call, arrays)[0]
    return out if isinstance(out, np.ndarray) else np.asarray(out, dtype=object)  # 0-d results


def numpy_backend(spec: OpSpec, call: OpCall, arrays: list[Any]) -> Any:
    """The op's numpy reference (float inputs are float64 here)."""
    if spec.reference is None:
        raise ShapeError(f"{spec.name} has no numpy reference")
    with np.errstate(all="ignore"):
        return np.asarray(spec.reference(call, arrays)[0])
