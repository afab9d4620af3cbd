"""The bound of a proof: the finite set of shapes, dtypes and attribute values it covers.

"Proved" means: for every case in the bound that the rule's left side matches and whose
guards hold, both sides have the same type and are equal in the op semantics (`ops._z3`).
The default bound (`DEFAULT_BOUND`):

- shapes (every tensor variable independently): ranks 1-4 with dims 1-3, chosen so that they
  broadcast against each other in every direction and multiply as matrices:
  (1,) (3,) | (1,3) (2,1) (2,3) (3,2) | (2,1,3) (1,3,2) (2,3,2) | (1,2,1,3) (2,1,3,1) (2,3,1,2);
- dtypes: float32 (real semantics) for every variable, on all those shapes; int64 (integer
  semantics) for every variable, on the shapes (1,) (3,) (2,3) (2,1,3) (2,3,1,2); when the
  rule casts or tests dtypes, every mix of float32, int64, int32, float16, float64 and bool
  on those five shapes;
- attributes, per op: Transpose perm every permutation of the rank; Reshape shape every
  pool shape (and the flat shape) with the input's element count, each also with a -1 first
  and with a 0 (copy) where it keeps the input's dim; Expand shape every pool shape that
  broadcasts with the input; Cast to float32 / int64 / float64 / int32 / float16 / bool /
  uint8; `axis` every axis of the rank;
  Slice starts (0 | 1 | -2), ends (2 | -1 | end), axes (0 | -1), steps (1 | -1); other int
  attributes 0, 1 and the default; float attributes 1.0, 0.5, 1.702 and the default.

`sample.LARGE` is the bound of random testing (larger shapes).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from math import prod
from typing import Any

from onnx import TensorProto

from rewrite.errors import RuleError
from rewrite.ops.base import OpSpec, TensorType, broadcast

FLOAT, INT64, DOUBLE = TensorProto.FLOAT, TensorProto.INT64, TensorProto.DOUBLE
INT32, FLOAT16, BOOL, UINT8 = (
    TensorProto.INT32,
    TensorProto.FLOAT16,
    TensorProto.BOOL,
    TensorProto.UINT8,
)
Shape = tuple[int, ...]
END = 2**63 - 1

SHAPES: tuple[Shape, ...] = (
    (1,), (3,),
    (1, 3), (2, 1), (2, 3), (3, 2),
    (2, 1, 3), (1, 3, 2), (2, 3, 2),
    (1, 2, 1, 3), (2, 1, 3, 1), (2, 3, 1, 2),
)  # fmt: skip
FEW: tuple[Shape, ...] = ((1,), (3,), (2, 3), (2, 1, 3), (2, 3, 1, 2))


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
    max_seconds: float = 120.0
    """A rule whose proof takes longer than this is `unknown`."""

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


def domain(
    spec: OpSpec, name: str, sort: str, default: Any, inputs: list[TensorType], bound: Bound
) -> list[Any]:
    """The values an attribute (or constant vector input) ranges over in `bound`."""
    shape: Shape = tuple(inputs[0].shape or ()) if inputs else ()  # type: ignore[arg-type]
    r = len(shape)
    key = (spec.domain, spec.name, name)
    if key == ("", "Transpose", "perm"):
        return list(permutations(range(r)))
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
