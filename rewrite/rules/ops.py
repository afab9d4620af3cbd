"""`op`: constructors of the typed ops that rules can match and build.

`op.Transpose(x, perm=p)`, `op.Reshape(x, shape=s)`, `op.Cast(x, to=t)`, `op.MatMul(a, b)`,
`op.ms.QuickGelu(x, alpha=1.0)` (com.microsoft). Keyword arguments are the op's attributes
and its constant vector inputs (Reshape's `shape`); an attribute left out matches any value on
a left side and takes its default on a right side. The available ops are the registered ops
with a typed e-graph form (`rewrite.ops`, `OpSpec.egg`); `rewrite rules ops` lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx

from rewrite.errors import RuleError
from rewrite.ops.base import OpSpec
from rewrite.ops.registry import all_specs, lookup
from rewrite.rules.language import App, Expr, Term, lift


def const_input_names(spec: OpSpec) -> list[str]:
    """ONNX names of the inputs the typed form folds into vector arguments (Reshape: shape)."""
    if spec.egg is None or not spec.egg.const_inputs:
        return []
    try:
        schema = onnx.defs.get_schema(spec.name, domain=spec.domain)
        names = [i.name for i in schema.inputs]
    except onnx.defs.SchemaError:
        names = []
    return [names[i] if i < len(names) else f"input{i}" for i in spec.egg.const_inputs]


def typed_ops(domain: str = "") -> dict[str, OpSpec]:
    return {s.name: s for s in all_specs() if s.egg is not None and s.domain == domain}


def _constructor(spec: OpSpec) -> Callable[..., App]:
    assert spec.egg is not None
    params = [a[0] for a in spec.egg.attrs] + const_input_names(spec)
    n_inputs = spec.egg.n_inputs

    def build(*inputs: Term, **attrs: Any) -> App:
        if len(inputs) != n_inputs or not all(isinstance(i, Term) for i in inputs):
            raise RuleError(f"{spec.name} takes {n_inputs} tensor input(s), got {len(inputs)}")
        unknown = set(attrs) - set(params)
        if unknown:
            raise RuleError(
                f"{spec.name} has no attribute {', '.join(sorted(unknown))}; it has: "
                f"{', '.join(params) or 'none'}"
            )
        values: list[tuple[str, Expr | None]] = [
            (p, None if attrs.get(p) is None else lift(attrs[p])) for p in params
        ]
        return App(spec.name, tuple(values), tuple(inputs), spec.domain)

    build.__name__ = spec.name
    build.__doc__ = spec.doc
    return build


class _Namespace:
    def __init__(self, domain: str, label: str) -> None:
        self._domain = domain
        self._label = label

    def __getattr__(self, name: str) -> Callable[..., App]:
        if name.startswith("_"):
            raise AttributeError(name)
        spec = lookup(name, self._domain)
        if spec is None or spec.egg is None:
            known = ", ".join(sorted(typed_ops(self._domain)))
            why = "is not an op" if spec is None else "has no typed e-graph form yet"
            raise RuleError(f"unknown op {self._label}{name}: {name} {why}; rules can use: {known}")
        return _constructor(spec)

    def __dir__(self) -> list[str]:
        return sorted(typed_ops(self._domain))


class _Ops(_Namespace):
    def __init__(self) -> None:
        super().__init__("", "op.")
        self.ms = _Namespace("com.microsoft", "op.ms.")


op = _Ops()
