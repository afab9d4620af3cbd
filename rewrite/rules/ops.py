"""`op`: constructors of the typed ops that rules can match and build.

`op.Transpose(x, perm=p)`, `op.Reshape(x, shape=s)`, `op.Cast(x, to=t)`, `op.MatMul(a, b)`,
`op.ms.QuickGelu(x, alpha=1.0)` (com.microsoft). An op with typed parts (`ops.parts.PARTS`)
takes `outputs=n`: `y, mean, inv = op.LayerNormalization(x, s, b, outputs=3)` gives its first
n outputs, one `<Op>Part(..., index=i)` term each (None for an output the part cannot stand
for: SkipLayerNormalization's 1 and 2); without `outputs` it is the single-output op.
Keyword arguments are the op's attributes and its constant vector inputs (Reshape's
`shape`); an attribute left out matches any value on a left side and takes its default on a
right side. The available ops are the registered ops
with a typed e-graph form (`rewrite.ops`, `OpSpec.egg`); `rewrite rules ops` lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from difflib import get_close_matches
from typing import Any

import onnx

from rewrite.errors import RuleError
from rewrite.ops.base import OpSpec
from rewrite.ops.parts import PART_OF, PARTS
from rewrite.ops.registry import all_specs, lookup
from rewrite.rules.language import ABSENT, Absent, App, AttrVar, Expr, Lit, Term, lift, term


def const_input_names(spec: OpSpec) -> list[str]:
    """ONNX names of the inputs the typed form folds into vector arguments (Reshape: shape)."""
    if spec.egg is None or not spec.egg.const_inputs:
        return []
    try:
        schema = onnx.defs.get_schema(spec.op_type, domain=spec.domain)
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
    least = n_inputs - spec.egg.optional
    sorts = {a[0]: a[1] for a in spec.egg.attrs}

    def build(*given: Term | None, **attrs: Any) -> App:
        bad = [i for i in given if not (i is None or isinstance(i, Term) or _number(i))]
        if bad:
            raise RuleError(
                f"{spec.name}'s inputs are tensors (rule parameters typed Tensor, op results or "
                f"numbers); got {bad[0]!r}"
            )
        inputs = tuple(ABSENT if i is None else term(i) for i in given)
        variadic = len(inputs) in spec.egg.arities  # type: ignore[union-attr]
        if not (least <= len(inputs) <= n_inputs or variadic):
            takes = f"{least} to {n_inputs}" if least < n_inputs else str(n_inputs)
            if spec.egg.arities:  # type: ignore[union-attr]
                counts = sorted({n_inputs, *spec.egg.arities})  # type: ignore[union-attr]
                takes = f"{counts[0]} to {counts[-1]}"
            raise RuleError(f"{spec.name} takes {takes} tensor input(s), got {len(given)}")
        if any(isinstance(i, Absent) for i in inputs[:least]):
            raise RuleError(f"{spec.name}: only its last {spec.egg.optional} input(s) may be None")
        inputs += (ABSENT,) * max(0, n_inputs - len(inputs))
        unknown = set(attrs) - set(params)
        if unknown:
            near = [m for u in sorted(unknown) for m in get_close_matches(u, params, n=1)]
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise RuleError(
                f"{spec.name} has no attribute {', '.join(sorted(unknown))}{hint}; it has: "
                f"{', '.join(params) or 'none'}"
            )
        values: list[tuple[str, Expr | None]] = [
            (p, None if attrs.get(p) is None else _attr_value(attrs[p], sorts.get(p)))
            for p in params
        ]
        return App(spec.name, tuple(values), tuple(inputs), spec.domain)

    build.__name__ = spec.name
    build.__doc__ = spec.doc
    return build


def describe_ops() -> str:
    """`rewrite rules ops`: every typed op as a rule writes it, with its inputs (optional ones
    in brackets), its attributes and constant vector inputs (keyword arguments, defaults)."""
    lines = []
    for domain, prefix in (("", "op."), ("com.microsoft", "op.ms.")):
        for name, spec in sorted(typed_ops(domain).items()):
            assert spec.egg is not None
            n, opt = spec.egg.n_inputs, spec.egg.optional
            names = _input_names(spec)
            ins = [names[i] if i < len(names) else f"x{i}" for i in range(n)]
            ins = [f"[{x}]" if i >= n - opt else x for i, x in enumerate(ins)]
            kws = [f"{a}={d!r}" if d is not None else f"{a}=..." for a, _, d in spec.egg.attrs]
            kws += [f"{c}=[ints]" for c in const_input_names(spec)]
            lines.append(f"{prefix}{name}({', '.join(ins + kws)}) -> 1 output")
            if spec.doc:
                lines.append(f"    {spec.doc.strip().splitlines()[0]}")
        lines += _multi_output_lines(domain, prefix)
    return "\n".join(lines)


def _multi_output_lines(domain: str, prefix: str) -> list[str]:
    """The multi-output forms of `rewrite rules ops`: `op.Split`, and each op with parts."""
    lines = []
    if not domain:
        lines.append(f"{prefix}Split(x, axis=a, sizes=[n0, n1, ...]) -> len(sizes) outputs")
        lines.append("    q, k, v = op.Split(x, axis=2, sizes=[64, 64, 64]): one SplitPart each")
    for (part, dom), p in sorted(PARTS.items()):
        if dom != domain:
            continue
        which = ", ".join(map(str, p.indices)) if p.indices else f"0 to {p.n_outputs - 1}"
        lines.append(f"{prefix}{p.op}(..., outputs=n) -> its first n outputs (n <= {p.n_outputs})")
        lines.append(f"    one {part}(..., index=i) each; outputs a part stands for: {which}")
    return lines


def _input_names(spec: OpSpec) -> list[str]:
    """ONNX names of the tensor inputs of the typed form (constant vector inputs left out)."""
    try:
        schema = onnx.defs.get_schema(spec.op_type, domain=spec.domain)
        names = [i.name for i in schema.inputs]
    except onnx.defs.SchemaError:
        return []
    const = set(spec.egg.const_inputs if spec.egg else ())
    return [x for i, x in enumerate(names) if i not in const]


def _attr_value(v: Any, sort: str | None) -> Expr:
    """An attribute's value in a rule: a string attribute (Pad's mode, Conv's auto_pad) takes
    the string as it is; elsewhere a string names a dtype (`to="float32"`)."""
    if sort == "String" and isinstance(v, str):
        return Lit(v, "str")
    return lift(v)


def _number(v: object) -> bool:
    """A number, or a `Float` attribute variable (a scalar constant on a right side)."""
    return type(v) in (int, float) or (isinstance(v, AttrVar) and v.kind == "float")


def split(x: Term, *, sizes: Sequence[int | Expr], axis: int | None = None) -> tuple[App, ...]:
    """`q, k, v = op.Split(x, axis=2, sizes=[768, 768, 768])`: a Split's outputs, one
    `SplitPart(x, axis, sizes, index)` term each (a multi-output op is one term per output).
    `sizes` is a list (it fixes the number of outputs) of ints or, on a right side, int
    expressions (`w.dim(1)`); `axis` is non-negative, as encode writes it (left out: any axis
    on a left side)."""
    if not isinstance(sizes, list | tuple) or not all(map(_int_or_expr, sizes)):
        raise RuleError(f"Split's sizes must be a list of ints (the outputs' count); got {sizes!r}")
    if axis is not None and (not isinstance(axis, int) or axis < 0):
        raise RuleError(
            f"Split's axis must be a non-negative int (encode normalizes it); got {axis!r}"
        )
    part = _constructor(lookup("SplitPart"))  # type: ignore[arg-type]
    return tuple(part(x, axis=axis, sizes=list(sizes), index=i) for i in range(len(sizes)))


def _with_outputs(name: str, domain: str, single: Callable[..., App] | None) -> Callable[..., Any]:
    """`name`'s constructor taking `outputs=n` (module docstring); `single` (the single-output
    op's, None when it has none) without it."""
    part_name = PART_OF[(name, domain)]
    p = PARTS[(part_name, domain)]
    part = _constructor(lookup(part_name, domain))  # type: ignore[arg-type]

    def build(*given: Term | None, outputs: int | None = None, **attrs: Any) -> Any:
        if outputs is None and single is not None:
            return single(*given, **attrs)
        if not isinstance(outputs, int) or not 1 <= outputs <= p.n_outputs:
            raise RuleError(f"{name} takes outputs=1 to {p.n_outputs}; got {outputs!r}")
        if "index" in attrs:
            raise RuleError(f"{name}: `outputs=n` gives the outputs; index is not an attribute")
        return tuple(
            part(*given, **attrs, index=i) if p.accepts(i) else None for i in range(outputs)
        )

    build.__name__ = name
    build.__doc__ = part.__doc__
    return build


def _int_or_expr(v: object) -> bool:
    return isinstance(v, int) or (isinstance(v, Expr) and v.kind == "int")


class _Namespace:
    def __init__(self, domain: str, label: str) -> None:
        self._domain = domain
        self._label = label

    def __getattr__(self, name: str) -> Callable[..., App]:
        if name.startswith("_"):
            raise AttributeError(name)
        spec = lookup(name, self._domain)
        if (name, self._domain) in PART_OF:  # several outputs: `outputs=n`
            single = _constructor(spec) if spec is not None and spec.egg is not None else None
            return _with_outputs(name, self._domain, single)
        if spec is None or spec.egg is None:
            typed = sorted(typed_ops(self._domain))
            why = "is not an op" if spec is None else "has no typed e-graph form yet"
            near = get_close_matches(name, typed, n=3, cutoff=0.6) or get_close_matches(
                name.lower(), [t.lower() for t in typed], n=3, cutoff=0.6
            )
            near = [next(t for t in typed if t.lower() == n.lower()) for n in near]
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            raise RuleError(
                f"unknown op {self._label}{name}: {name} {why}{hint} (rules can use: "
                f"{', '.join(typed)}; `rewrite rules ops` lists them with their inputs)"
            )
        return _constructor(spec)

    def __dir__(self) -> list[str]:
        return sorted(typed_ops(self._domain))


class _Ops(_Namespace):
    Split = staticmethod(split)  # several outputs: one SplitPart term each

    def __init__(self) -> None:
        super().__init__("", "op.")
        self.ms = _Namespace("com.microsoft", "op.ms.")


op = _Ops()
