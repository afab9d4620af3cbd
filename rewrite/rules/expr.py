"""Attribute-level expressions of the rule language: literals, attribute variables (`Ints`,
`Int`, `Float`), arithmetic, comparisons and calls (`p.compose(q)`, `x.rank`), and the dtype
names a condition may use (`x.dtype == "float32"`). They compile to egglog primitives (i64,
f64, VecI); `rules.language` builds terms and rewrites over them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

# --------------------------------------------------------------------------------------------
# attribute-level expressions (compile to egglog primitives: i64, f64, VecI)


class Expr:
    """An integer/float/vector/boolean expression over attributes, shapes and dtypes."""

    kind: str = "int"  # "int", "float", "ints", "bool", "shape", "dtype"

    def _bin(self, op: str, other: Any, kind: str | None = None) -> BinOp:
        return BinOp(op, self, lift(other), kind or self.kind)

    def __eq__(self, other: object) -> Cmp:  # type: ignore[override]
        return Cmp("==", self, lift(other))

    def __ne__(self, other: object) -> Cmp:  # type: ignore[override]
        return Cmp("!=", self, lift(other))

    def __lt__(self, other: Any) -> Cmp:
        return Cmp("<", self, lift(other))

    def __le__(self, other: Any) -> Cmp:
        return Cmp("<=", self, lift(other))

    def __gt__(self, other: Any) -> Cmp:
        return Cmp(">", self, lift(other))

    def __ge__(self, other: Any) -> Cmp:
        return Cmp(">=", self, lift(other))

    def __add__(self, other: Any) -> BinOp:
        return self._bin("+", other)

    def __sub__(self, other: Any) -> BinOp:
        return self._bin("-", other)

    def __mul__(self, other: Any) -> BinOp:
        return self._bin("*", other)

    def __mod__(self, other: Any) -> BinOp:
        return self._bin("%", other)

    def __floordiv__(self, other: Any) -> BinOp:
        return self._bin("/", other)

    def __hash__(self) -> int:
        return id(self)


@dataclass(eq=False)
class Lit(Expr):
    value: Any
    kind: str = "int"


@dataclass(eq=False)
class AttrVar(Expr):
    """A pattern variable that binds an attribute value (an `Ints`, `Int` or `Float`)."""

    name: str
    kind: str = "int"

    def __hash__(self) -> int:
        return hash(("attr", self.name))


def origin() -> str:
    """`file:line` of the first caller outside the rule language: where a rule wrote the
    expression being built (errors point there, not at the rule's decorator)."""
    here = os.path.dirname(os.path.abspath(__file__))
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        path = os.path.abspath(name)
        if not name.startswith("<") and os.path.dirname(path) != here:
            return f"{os.path.basename(path)}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return ""


@dataclass(eq=False)
class BinOp(Expr):
    op: str
    left: Expr
    right: Expr
    kind: str = "int"
    origin: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        self.origin = self.origin or origin()


@dataclass(eq=False)
class Cmp(Expr):
    op: str
    left: Expr
    right: Expr
    kind: str = "bool"
    origin: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        self.origin = self.origin or origin()

    def __and__(self, other: Expr) -> And:
        return And((self, other))

    def __bool__(self) -> bool:
        raise TypeError(
            "a rule condition cannot be used as a Python bool: pass it to .to(rhs, cond, ...)"
        )


@dataclass(eq=False)
class And(Expr):
    parts: tuple[Expr, ...]
    kind: str = "bool"


@dataclass(eq=False)
class Call(Expr):
    """A named operation on expressions: compose, is_identity, len, index, facts, ..."""

    fn: str
    args: tuple[Any, ...]
    kind: str = "int"

    def __getitem__(self, i: int) -> Call:
        return Call("index", (self, i), "int")

    def _ints(self, what: str) -> None:
        if self.kind != "ints":
            raise TypeError(f"{what} applies to an Ints value; {self.fn}(...) is {self.kind}")

    def compose(self, other: Expr) -> Call:
        """As `Ints.compose`, on a computed Ints (`p.compose(q).compose(r)`)."""
        self._ints("compose")
        return Call("compose", (self, other), "ints")

    def is_identity(self) -> Call:
        """As `Ints.is_identity`, on a computed Ints (`p.compose(q).is_identity()`)."""
        self._ints("is_identity")
        return Call("is_identity", (self,), "bool")

    def all_nonzero(self) -> Call:
        self._ints("all_nonzero")
        return Call("all_nonzero", (self,), "bool")

    def length(self) -> Call:
        self._ints("length")
        return Call("length", (self,), "int")


class Ints(AttrVar):
    """A pattern variable binding an integer-list attribute (perm, axes, a shape vector)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, "ints")

    def compose(self, other: Expr) -> Call:
        """(self ∘ other)[i] = self[other[i]]: the perm of Transpose(Transpose(x, self), other)."""
        return Call("compose", (self, other), "ints")

    def is_identity(self) -> Call:
        """self == (0, 1, ..., len-1)."""
        return Call("is_identity", (self,), "bool")

    def all_nonzero(self) -> Call:
        return Call("all_nonzero", (self,), "bool")

    def __len__(self) -> int:
        raise TypeError("use p.length() inside rules")

    def length(self) -> Call:
        return Call("length", (self,), "int")

    def __getitem__(self, i: int) -> Call:
        return Call("index", (self, i), "int")


class Int(AttrVar):
    """A pattern variable binding an integer attribute (axis, to, ...)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, "int")


class Float(AttrVar):
    """A pattern variable binding a float attribute (epsilon, alpha, ...)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, "float")


FLOAT_TYPES = (1, 10, 11, 16)
"""ONNX float, float16, double, bfloat16."""
INT_TYPES = (2, 3, 4, 5, 6, 7, 12, 13)
"""ONNX uint8, int8, uint16, int16, int32, int64, uint32, uint64."""


_DTYPE_NAMES = {
    "float32": 1, "float": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6,
    "int64": 7, "bool": 9, "float16": 10, "half": 10, "float64": 11, "double": 11,
    "uint32": 12, "uint64": 13, "bfloat16": 16,
}  # fmt: skip


def dtype_number(v: Any) -> int | None:
    """The ONNX element type a dtype name (`"float32"`) or numpy dtype/type stands for."""
    if isinstance(v, str):
        if v not in _DTYPE_NAMES:
            raise TypeError(f"unknown dtype {v!r}; known: {', '.join(sorted(_DTYPE_NAMES))}")
        return _DTYPE_NAMES[v]
    if isinstance(v, type) or type(v).__module__.startswith("numpy"):
        import numpy as np

        try:
            return _DTYPE_NAMES.get(np.dtype(v).name)
        except TypeError:
            return None
    return None


def lift(v: Any) -> Expr:
    if isinstance(v, Expr):
        return v
    dtype = dtype_number(v)
    if dtype is not None:
        return Lit(dtype, "int")
    if isinstance(v, bool):
        return Lit(int(v), "int")
    if isinstance(v, int):
        return Lit(v, "int")
    if isinstance(v, float):
        return Lit(v, "float")
    if isinstance(v, list | tuple):
        if any(isinstance(x, Expr) for x in v):
            return Call("vec", tuple(lift(x) for x in v), "ints")
        return Lit(tuple(int(x) for x in v), "ints")
    if type(v).__name__ in ("Var", "App", "Const", "Absent"):
        raise TypeError(
            f"cannot use the tensor {v!r} as an attribute value: give the rule a parameter "
            "typed Ints (an int list: perm, axes), Int or Float instead of Tensor"
        )
    raise TypeError(f"cannot use {v!r} in a rule expression")
