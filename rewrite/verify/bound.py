"""The bound of a proof: the finite set of shapes, dtypes and attribute values it covers.

"Proved" means: for every case in the bound that the rule's left side matches and whose
guards hold, both sides have the same type and are equal in the op semantics (`ops._z3`).
The default bound (`DEFAULT_BOUND`):

- shapes (every tensor variable independently): ranks 0-6 with dims 1-3, chosen so that they
  broadcast against each other in every direction and multiply as matrices:
  (1,) (3,) | () | (1,3) (2,1) (2,3) (3,2) | (2,1,3) (1,3,2) (2,3,2) |
  (1,2,1,3) (2,1,3,1) (2,3,1,2) | (2,1,3,1,2) | (1,2,1,3,1,2), and the 1-element shape of
  every rank 1-6, which broadcasts any tensor up to its rank; plus, per rule, dims on both
  sides of every integer constant `c` the rule holds (c-1, c, c+1, and 2c for a modulus
  `% c`, for 2 <= c <= `MAX_CONST_DIM`) in shapes (d,) (2,d) (d,2);
- dtypes: float32 (real semantics) for every variable, on all those shapes; int64 (integer
  semantics) for every variable, on the shapes (1,) (3,) (2,3) (2,1,3) (2,3,1,2); when the
  rule casts or tests dtypes, every mix of float32, int64, int32, float16, float64 and bool
  on those five shapes;
- attributes, per op: Transpose perm every permutation of the rank (ranks up to
  `PERM_MAX_RANK`: a rule whose left side leaves a perm open is proved, and compiled, for
  tensors of those ranks only); Reshape shape every
  pool shape (and the flat shape) with the input's element count, each also with a -1 first
  and with a 0 (copy) where it keeps the input's dim; Expand shape every pool shape that
  broadcasts with the input; Cast to float32 / int64 / float64 / int32 / float16 / bool /
  uint8; `axis` every axis of the rank;
  Slice starts (0 | 1 | -2), ends (2 | -1 | end), axes (0 | -1), steps (1 | -1); other int
  attributes 0, 1 and the default; float attributes 1.0, 0.5, 1.702 and the default.

`sample.LARGE` is the bound of random testing (larger shapes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from itertools import permutations
from math import prod
from typing import Any

from onnx import TensorProto

from rewrite.errors import RuleError
from rewrite.ops.base import OpSpec, TensorType, broadcast
from rewrite.rules.domain import Domain
from rewrite.rules.language import App, Lit, Rewrite, show, subterms
from rewrite.rules.rule import Rule

FLOAT, INT64, DOUBLE = TensorProto.FLOAT, TensorProto.INT64, TensorProto.DOUBLE
INT32, FLOAT16, BOOL, UINT8 = (
    TensorProto.INT32,
    TensorProto.FLOAT16,
    TensorProto.BOOL,
    TensorProto.UINT8,
)
Shape = tuple[int, ...]
END = 2**63 - 1

MAX_RANK = 6
"""The highest rank the bound covers (the e-graph's shape analysis stops there too)."""
PERM_MAX_RANK = 5
"""Open perms are enumerated up to this rank (720 perms of rank 6, squared for a pair)."""
MOVES_DATA = frozenset(
    {"Identity", "Dropout", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand"}
    | {"Concat", "Slice", "Split"}
)
"""Ops that move elements without reading them: a rule made of these alone and variables,
proved at one dtype, holds at every dtype (the proof never looks at a value)."""
MAX_CONST_DIM = 64
"""Integer constants up to this size get dims on both sides of them in the bound."""
ONES: tuple[Shape, ...] = tuple((1,) * r for r in range(1, MAX_RANK + 1))
SHAPES: tuple[Shape, ...] = (
    (1,), (3,),
    (),
    (1, 3), (2, 1), (2, 3), (3, 2),
    (2, 1, 3), (1, 3, 2), (2, 3, 2),
    (1, 2, 1, 3), (2, 1, 3, 1), (2, 3, 1, 2),
    (2, 1, 3, 1, 2),
    (1, 2, 1, 3, 1, 2),
    *ONES[1:],
)  # fmt: skip
FEW: tuple[Shape, ...] = ((1,), (3,), (), (2, 3), (2, 1, 3), (2, 3, 1, 2), (1, 1, 1, 1, 1, 1))


@dataclass(frozen=True)
class Bound:
    """The cases a proof covers (see the module docstring)."""

    shapes: tuple[Shape, ...] = SHAPES
    few: tuple[Shape, ...] = FEW
    """Shapes for int64 and mixed-dtype cases."""
    dtypes: tuple[int, ...] = (FLOAT, INT64)
    cast_dtypes: tuple[int, ...] = (FLOAT, INT64, INT32, FLOAT16, DOUBLE, BOOL)
    """Variable dtypes of rules that cast or test dtypes (every mix, on the `few` shapes)."""
    cast_to: tuple[int, ...] = (FLOAT, INT64, DOUBLE, INT32, FLOAT16, BOOL, UINT8)
    floats: tuple[float, ...] = (1.0, 0.5, 1.702)
    max_cases: int = 60_000
    """A rule with more cases than this is `unknown` (its bound is too large to check)."""
    timeout_ms: int = 5_000
    """Z3's time limit for one case; a case that hits it makes the rule `unknown`."""
    second_try: bool = True
    """Ask a query the default solver gave up on once more, split on its if-conditions
    (`verify.solve`), within the same time limit."""
    max_seconds: float = 120.0
    """A rule whose proof takes longer than this is `unknown`."""

    def around(self, constants: Iterable[tuple[int, bool]]) -> Bound:
        """This bound with dims on both sides of each integer constant: (c, is_modulus) gives
        c-1, c, c+1 (and 2c for a modulus), in shapes (d,) (2,d) (d,2), for 2 <= c <=
        `MAX_CONST_DIM`."""
        dims: list[int] = []
        for c, modulus in constants:
            c = abs(c)
            if 2 <= c <= MAX_CONST_DIM:
                dims += [c - 1, c, c + 1] + ([2 * c] if modulus else [])
        extra = [s for d in sorted(set(dims)) for s in ((d,), (2, d), (d, 2))]
        shapes = tuple(_dedup([*self.shapes, *extra]))
        return self if shapes == self.shapes else replace(self, shapes=shapes)

    def describe(self) -> str:
        ranks = sorted({len(s) for s in self.shapes})
        dims = sorted({d for s in self.shapes for d in s})
        names = "/".join(dtype_name(d) for d in self.dtypes)
        return (
            f"ranks {ranks[0]}-{ranks[-1]}, dims {dims[0]}-{dims[-1]} "
            f"({len(self.shapes)} shapes), {names}"
        )


DEFAULT_BOUND = Bound()

_DTYPE_NAMES: dict[int, str] = {FLOAT: "float32", INT64: "int64", DOUBLE: "float64"}


def dtype_name(dtype: int) -> str:
    return _DTYPE_NAMES.get(dtype) or TensorProto.DataType.Name(dtype).lower()


def touches_dtype(rw: Rewrite) -> bool:
    """Does the rewrite change or test dtypes (so mixed-dtype cases matter)?"""
    terms = [s for t in (*rw.lhs, *rw.rhs) for s in subterms(t)]
    return any(isinstance(t, App) and t.op in ("Cast", "CastLike") for t in terms) or any(
        "dtype" in show(g) for g in rw.guards
    )


def fixed_dtypes(rw: Rewrite) -> dict[str, tuple[int, ...]]:
    """Left-side tensor variables read directly by an op input with its own dtypes
    (`OpSpec.input_dtypes`: Where's condition, Gather's indices) -> those dtypes."""
    from rewrite.ops.registry import lookup

    out: dict[str, tuple[int, ...]] = {}
    for t in rw.lhs:
        for s in subterms(t):
            if not isinstance(s, App):
                continue
            spec = lookup(s.op, s.domain)
            for i, x in enumerate(s.inputs):
                if spec is None or i >= len(spec.input_dtypes) or spec.input_dtypes[i] is None:
                    continue
                name = getattr(x, "name", None)
                if isinstance(name, str) and not isinstance(x, App):
                    out[name] = spec.input_dtypes[i]  # type: ignore[assignment]
    return out


def rule_domain(rule: Rule, bound: Bound = DEFAULT_BOUND) -> Domain:
    """Where a proof of `rule` in `bound` holds: ranks up to `MAX_RANK` (`PERM_MAX_RANK` when
    a left-side Transpose leaves its perm open); any dtype for a rule of `MOVES_DATA` ops
    alone; else the variables' dtypes of the cases (all
    mixes of `cast_dtypes` for a rule that casts or tests dtypes, else one dtype of
    `dtypes`, with the float check's float16 and int32 views); casts to `cast_to`."""
    rank = MAX_RANK
    for rw in rule.rewrites:
        for t in rw.lhs:
            for s in subterms(t):
                perm = dict(s.attrs).get("perm") if isinstance(s, App) else None
                if isinstance(s, App) and s.op == "Transpose" and not isinstance(perm, Lit):
                    rank = PERM_MAX_RANK
    terms = [s for rw in rule.rewrites for t in (*rw.lhs, *rw.rhs) for s in subterms(t)]
    if {s.op for s in terms if isinstance(s, App)} <= MOVES_DATA:
        return Domain(rank, ())
    fixed = tuple(
        sorted({v: d for rw in rule.rewrites for v, d in fixed_dtypes(rw).items()}.items())
    )
    if any(touches_dtype(rw) for rw in rule.rewrites):
        return Domain(rank, bound.cast_dtypes, False, bound.cast_to, fixed)
    views = {FLOAT: FLOAT16, INT64: INT32}
    dtypes = _dedup([*bound.dtypes, *(views[d] for d in bound.dtypes if d in views)])
    return Domain(rank, tuple(dtypes), cast_to=bound.cast_to, fixed=fixed)


def domain(
    spec: OpSpec, name: str, sort: str, default: Any, inputs: list[TensorType], bound: Bound
) -> list[Any]:
    """The values an attribute (or constant vector input) ranges over in `bound`."""
    if spec.attr_values is not None:
        own = spec.attr_values(name, inputs)
        if own is not None:
            return own
    shape: Shape = tuple(inputs[0].shape or ()) if inputs else ()  # type: ignore[arg-type]
    r = len(shape)
    key = (spec.domain, spec.name, name)
    if key == ("", "Transpose", "perm"):
        return list(permutations(range(r))) if r <= PERM_MAX_RANK else []
    if key == ("", "Reshape", "shape"):
        return reshape_targets(shape, bound)
    if key == ("", "Expand", "shape"):
        return expand_targets(shape, bound)
    if key == ("", "Cast", "to"):
        return list(bound.cast_to)
    if key[:2] == ("", "Slice"):
        return list(_SLICE[name])
    if name == "axis":
        return list(range(-r, r))
    if sort == "i64":
        return _dedup([default, 0, 1])
    if sort == "f64":
        return _dedup([default, *bound.floats])
    raise RuleError(f"the proof bound has no values for {spec.name}'s {name} ({sort})")


_SLICE = {
    "starts": ((0,), (1,), (-2,)),
    "ends": ((2,), (-1,), (END,)),
    "axes": ((0,), (-1,)),
    "steps": ((1,), (-1,)),
}


def _dedup(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v is not None and v not in out:
            out.append(v)
    return out


def reshape_targets(shape: Shape, bound: Bound) -> list[tuple[int, ...]]:
    """Shapes with `shape`'s element count, each also with a -1 first and with a 0 (copy)."""
    n = prod(shape)
    base = _dedup([s for s in (*bound.shapes, (n,), shape) if prod(s) == n])
    out: list[tuple[int, ...]] = []
    for t in base:
        out.append(t)
        out.append((-1, *t[1:]))
        keep = [i for i in range(min(len(t), len(shape))) if t[i] == shape[i]]
        if keep:
            out.append(tuple(0 if i == keep[0] else d for i, d in enumerate(t)))
    return _dedup(out)


def expand_targets(shape: Shape, bound: Bound) -> list[Shape]:
    """Pool shapes (and `shape`) that `shape` broadcasts with."""
    out = []
    for t in _dedup([shape, *bound.shapes]):
        try:
            broadcast(shape, t)
        except Exception:
            continue
        out.append(t)
    return out
