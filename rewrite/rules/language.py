"""The rule language: patterns over op constructors, attribute expressions, guards.

A rule's left and right sides are `Term`s: pattern variables (`Tensor` parameters of the
rule function) and op applications (`op.MatMul(a, b)`, `a @ b`, `op.Transpose(x, perm=p)`).
Attribute values are `Ints` / `Int` / `Float` parameters (pattern variables that bind an
attribute), literals, or expressions over them (`p.compose(q)`). Guards are boolean
expressions over shapes, dtypes, attributes and constant facts (`b.shape == c.shape`,
`x.rank == 4`, `c.is_one()`, `p.is_identity()`). Everything is a value: the compiler turns it
into an egglog rule, the evaluator runs it on concrete arrays, the prover on Z3 terms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from rewrite.rules.elements import Cond, Elem, condition
from rewrite.rules.expr import (  # noqa: F401  (re-exported: the rule language's one import)
    FLOAT_TYPES,
    INT_TYPES,
    And,
    AttrVar,
    BinOp,
    Call,
    Cmp,
    Expr,
    Float,
    Int,
    Ints,
    Lit,
    dtype_number,
    lift,
)

# --------------------------------------------------------------------------------------------
# tensor terms


class Term:
    """A tensor-valued pattern or template: a variable or an op application. A Python number
    where a term is expected (`x * 0.5`, `op.Pow(x, 3.0)`) is a `Const`."""

    def __add__(self, other: Term | float) -> App:
        return App("Add", (), (self, term(other)))

    def __radd__(self, other: float) -> App:
        return App("Add", (), (term(other), self))

    def __sub__(self, other: Term | float) -> App:
        return App("Sub", (), (self, term(other)))

    def __rsub__(self, other: float) -> App:
        return App("Sub", (), (term(other), self))

    def __mul__(self, other: Term | float) -> App:
        return App("Mul", (), (self, term(other)))

    def __rmul__(self, other: float) -> App:
        return App("Mul", (), (term(other), self))

    def __truediv__(self, other: Term | float) -> App:
        return App("Div", (), (self, term(other)))

    def __rtruediv__(self, other: float) -> App:
        return App("Div", (), (term(other), self))

    def __matmul__(self, other: Term) -> App:
        return App("MatMul", (), (self, other))

    def __neg__(self) -> App:
        return App("Neg", (), (self,))

    @property
    def shape(self) -> Call:
        return Call("shape", (self,), "shape")

    @property
    def dtype(self) -> Call:
        return Call("dtype", (self,), "dtype")

    @property
    def rank(self) -> Call:
        return Call("rank", (self,), "int")

    def dim(self, i: int) -> Call:
        """The size of axis i (negative counts from the end); static dims only in arithmetic."""
        return Call("dim", (self, i), "int")

    def is_one(self) -> Call:
        """A constant whose every element is 1."""
        return Call("is_one", (self,), "bool")

    def is_zero(self) -> Call:
        """A constant whose every element is 0."""
        return Call("is_zero", (self,), "bool")

    def is_const(self) -> Call:
        """A constant (initializer or folded value)."""
        return Call("is_const", (self,), "bool")

    def is_scalar(self) -> Call:
        """A constant with exactly one element (any rank)."""
        return Call("is_scalar", (self,), "bool")

    def precedes(self, other: Term) -> Call:
        """self's value comes before other's in the input graph: a symmetry-breaking order for
        pairwise rules (only values of the input graph are ordered)."""
        return Call("precedes", (self, other), "bool")

    def value(self) -> Call:
        """The value of a one-element constant (a float expression); `c.value() == 0.1`
        compares in the constant's dtype (0.1 matches float32(0.1) in a float32 model)."""
        return Call("value", (self,), "float")

    def approx(self, v: float, rtol: float = 1e-6, atol: float = 0.0) -> Call:
        """A one-element constant within atol + rtol·|v| of v (for printed, rounded values:
        `c.approx(0.7978845608)`)."""
        return Call("approx", (self, float(v), float(rtol), float(atol)), "bool")

    def all(self, fn: Callable[[Elem], Cond]) -> Call:
        """A constant every element of which satisfies `fn(e)`: comparisons of `e` or `abs(e)`
        with numbers, `e.is_finite()`, `e.is_nan()`, `e.is_inf()`, joined with `&`, `|`, `~`
        (`w.all(lambda e: e.is_finite() & (abs(e) <= 1e4))`; IEEE comparisons)."""
        return Call("all_elems", (self, condition(fn)), "bool")

    def is_float(self) -> Call:
        """The dtype is a floating-point type (float16/32/64, bfloat16)."""
        return Call("dtype_in", (self, FLOAT_TYPES), "bool")

    def is_int(self) -> Call:
        """The dtype is a signed or unsigned integer type."""
        return Call("dtype_in", (self, INT_TYPES), "bool")


@dataclass(frozen=True, eq=True)
class Var(Term):
    name: str

    def __repr__(self) -> str:
        return self.name


Tensor = Var


@dataclass(frozen=True, eq=True)
class Const(Term):
    """A literal in a pattern (`x * 0.5`): a one-element constant whose value is `value` in
    its own dtype. `rewrite(...).to(...)` turns each into a variable with that condition on
    the left side, and into a new scalar constant on the right side (`rules.literals`), where
    `number` may also be a `Float` attribute variable (`var + eps`)."""

    number: float | Float
    uid: int

    def __repr__(self) -> str:
        return self.number.name if isinstance(self.number, AttrVar) else repr(self.number)


_CONSTS = [0]


def term(v: Term | float | int | Float) -> Term:
    """`v` as a term: a number, or a `Float` attribute variable, becomes a fresh `Const`."""
    if isinstance(v, Term):
        return v
    if isinstance(v, AttrVar) and v.kind == "float":
        _CONSTS[0] += 1
        return Const(v, _CONSTS[0])  # type: ignore[arg-type]
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"cannot use {v!r} as a tensor in a rule")
    _CONSTS[0] += 1
    return Const(float(v), _CONSTS[0])


@dataclass(frozen=True, eq=True)
class Absent(Term):
    """An omitted optional input (`op.Clip(x)`, `op.Conv(x, w, None)`): `(Absent)` in egglog,
    an empty input name in ONNX, no value in the semantics."""

    def __repr__(self) -> str:
        return "None"


ABSENT = Absent()


@dataclass(frozen=True, eq=True)
class App(Term):
    """`op(inputs...)` with attributes `attrs` ((name, Expr) pairs, in signature order)."""

    op: str
    attrs: tuple[tuple[str, Any], ...]
    inputs: tuple[Term, ...]
    domain: str = ""

    def __hash__(self) -> int:
        return hash((self.op, self.domain, self.inputs, tuple(n for n, _ in self.attrs)))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, App)
            and (self.op, self.domain, self.inputs) == (other.op, other.domain, other.inputs)
            and len(self.attrs) == len(other.attrs)
            and all(
                n1 == n2 and same_expr(v1, v2)
                for (n1, v1), (n2, v2) in zip(self.attrs, other.attrs, strict=True)
            )
        )

    def __repr__(self) -> str:
        given = dict(self.attrs)
        dtype = given.get("dtype")
        if self.op == "ConstantOfShape" and isinstance(dtype, Call) and dtype.fn == "dtype":
            return show(given.get("value"))  # a right side's new constant (`rules.scalars`)
        args = [repr(i) for i in self.inputs]
        args += [f"{n}={show(v)}" for n, v in self.attrs if v is not None]
        return f"{self.op}({', '.join(args)})"


def same_expr(a: Any, b: Any) -> bool:
    """Structural equality of attribute expressions (Expr.__eq__ builds a condition)."""
    if isinstance(a, AttrVar) and isinstance(b, AttrVar):
        return a.name == b.name
    if isinstance(a, Lit) and isinstance(b, Lit):
        return bool(a.value == b.value)
    return a is b


def show(e: Any) -> str:
    """A readable form of an expression or term, for errors and `rules list`."""
    if isinstance(e, Term):
        return repr(e)
    if isinstance(e, AttrVar):
        return e.name
    if isinstance(e, Lit):
        return repr(list(e.value)) if isinstance(e.value, tuple) else repr(e.value)
    if isinstance(e, BinOp | Cmp):
        return f"{show(e.left)} {e.op} {show(e.right)}"
    if isinstance(e, And):
        return " and ".join(show(p) for p in e.parts)
    if isinstance(e, Call):
        if e.fn in ("shape", "dtype", "rank"):
            return f"{show(e.args[0])}.{e.fn}"
        if e.fn == "index":
            return f"{show(e.args[0])}[{e.args[1]}]"
        if e.fn == "vec":
            return "[" + ", ".join(show(a) for a in e.args) + "]"
        if e.fn == "compose":
            return f"{show(e.args[0])}∘{show(e.args[1])}"
        if e.fn == "all_elems":
            return f"{show(e.args[0])}.all(lambda e: {e.args[1]!r})"
        return f"{show(e.args[0])}.{e.fn}({', '.join(show(a) for a in e.args[1:])})"
    return repr(e)


# --------------------------------------------------------------------------------------------
# rewrites


@dataclass(eq=False)
class Rewrite:
    """`rewrite(lhs...).to(rhs..., *guards)`: each lhs root is equal to its rhs (when guards)."""

    lhs: tuple[Term, ...]
    rhs: tuple[Term, ...] = ()
    guards: tuple[Expr, ...] = field(default_factory=tuple)

    def to(self, *args: Term | Expr | bool | float) -> Rewrite:
        """The right sides (terms; a bare number is a constant) and the conditions (numbers
        become variables with conditions when the rule is made: `rules.literals.desugar`)."""
        rhs = tuple(term(a) for a in args if isinstance(a, Term) or type(a) in (int, float))
        guards = tuple(a for a in args if isinstance(a, Expr))
        if len(rhs) != len(self.lhs):
            raise TypeError(
                f"rewrite has {len(self.lhs)} left side(s) but {len(rhs)} right side(s)"
            )
        return Rewrite(self.lhs, rhs, guards)

    def __repr__(self) -> str:
        sides = ", ".join(f"{show(a)} = {show(b)}" for a, b in zip(self.lhs, self.rhs, strict=True))
        when = "  when " + " and ".join(show(g) for g in self.guards) if self.guards else ""
        return sides + when


def rewrite(*lhs: Term) -> Rewrite:
    """Start a rewrite from one left side, or several (a multi-pattern rule)."""
    if not lhs or not all(isinstance(t, Term) for t in lhs):
        raise TypeError("rewrite(...) takes one or more tensor patterns")
    return Rewrite(tuple(lhs))


RuleBody = Union[Rewrite, Sequence[Rewrite]]  # noqa: UP007  (a runtime alias)


def variables(t: Term) -> set[str]:
    """Tensor variables of a term."""
    if isinstance(t, Var):
        return {t.name}
    if isinstance(t, Absent):
        return set()
    assert isinstance(t, App)
    out: set[str] = set()
    for i in t.inputs:
        out |= variables(i)
    return out


def attr_vars(x: Any) -> set[str]:
    """Attribute variables of a term or expression."""
    if isinstance(x, AttrVar):
        return {x.name}
    if isinstance(x, App):
        out: set[str] = set()
        for _, v in x.attrs:
            out |= attr_vars(v)
        for i in x.inputs:
            out |= attr_vars(i)
        return out
    if isinstance(x, BinOp | Cmp):
        return attr_vars(x.left) | attr_vars(x.right)
    if isinstance(x, And):
        return set().union(*(attr_vars(p) for p in x.parts))
    if isinstance(x, Call):
        return set().union(*(attr_vars(a) for a in x.args))
    return set()


def children(x: Any) -> tuple[Any, ...]:
    """The parts of one node of the rule language: a rewrite's sides and guards, an op's
    inputs and attribute values, a constant's number, an expression's operands, a sequence's
    items (none for variables and literals)."""
    if isinstance(x, tuple | list):
        return tuple(x)
    if isinstance(x, Rewrite):
        return (*x.lhs, *x.rhs, *x.guards)
    if isinstance(x, App):
        return (*x.inputs, *(v for _, v in x.attrs))
    if isinstance(x, Const):
        return (x.number,)
    if isinstance(x, Call):
        return tuple(x.args)
    if isinstance(x, Cmp | BinOp):
        return (x.left, x.right)
    if isinstance(x, And):
        return tuple(x.parts)
    return ()


def nodes(items: Any) -> Iterator[Any]:
    """Every node reachable from `items` through `children` (pre-order)."""
    stack = [items]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(children(x)))


def subterms(t: Term) -> list[Term]:
    """t and all its sub-terms, children first."""
    out: list[Term] = []
    if isinstance(t, App):
        for i in t.inputs:
            out += subterms(i)
    out.append(t)
    return out
