"""The egglog schema: sorts, constructors and the shape/dtype analysis, as program text.

Every tensor e-class is a `T`; multi-output op nodes are `N`s read through `(Out n i)`.
Leaves: `(Input name)`, `(Init name)` (a constant whose array stays in Python), `(Absent)`.
Ops that a registered `OpSpec.egg` describes get a typed constructor
`(OpType attr... vec... T...)`; every other node is `(Op domain op_type key inputs)` or
`(OpN ...)`, opaque, with `key` naming its attributes in a Python-side table.

Shape analysis: `(shape t)` is a `VecI` of dims, `(dtype t)` the ONNX element type. Static
dims are themselves; a symbolic or unknown dim is `SYM_BASE + id` (so equal ids mean equal
dims, and `max(1, d) = d` makes broadcasting a per-dim `max`). Encode seeds every original
value; the rules below (elementwise, broadcast, MatMul, ...) and `shape_rules.family_rules`
(every other typed op) give shapes and dtypes to terms that rewrites create. A dim of 0 broadcast
against 1 is priced as 1 (`max`); empty tensors never reach rewritten terms in practice.
"""

from __future__ import annotations

from collections.abc import Callable

from rewrite.egraph.shape_rules import MAX_RANK, SYM_BASE, family_rules, prelude
from rewrite.ops import all_specs
from rewrite.ops.base import OpSpec


def writable(vector: tuple[int, ...] | list[int]) -> bool:
    """True when a `VecI` argument can be read back as literal ints (every entry < SYM_BASE).

    Entries at or above SYM_BASE are read as symbolic dims (or values rules derived from them),
    which no ONNX constant can hold. The snapshot drops e-nodes whose vectors are not writable,
    so encode never builds a typed term with one (an INT64_MAX Slice end stays opaque).
    """
    return all(d < SYM_BASE for d in vector)


_SAME_SHAPE = [
    "Identity",
    "Neg",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Erf",
    "Sqrt",
    "Exp",
    "Reciprocal",
    "Dropout",
    "Softmax",
    "LayerNormalization",
    "SimplifiedLayerNormalization",
    "Abs",
    "Log",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
    "Not",
    "Clip",
    "Softplus",
    "Softsign",
    "LeakyRelu",
    "Elu",
    "Celu",
    "Selu",
    "ThresholdedRelu",
    "HardSigmoid",
    "HardSwish",
    "Mish",
    "Gelu",  # ONNX's (opset 20) and com.microsoft's
    "PRelu",  # the slope broadcasts to X: X's shape
]
_BROADCAST = (
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Sum", "Mean", "Max", "Min", "And", "Or", "Xor",
)  # fmt: skip
_TESTS = ("IsNaN", "IsInf")
"""Same shape as the input, bool."""
_DATA_DTYPE = ("ReshapeDyn", "ExpandDyn", "SliceDyn", "Range")
"""X's dtype; the shape depends on input values (encode seeds it from shape inference)."""
_COMPARISONS = ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual")
"""Broadcast shape, bool."""
BOOL = 9

PRELUDE = """
(sort VecI (Vec i64))
(datatype T)
(datatype N)
(datatype TL (TNil) (TCons T TL))
(constructor Input (String) T)
(constructor Init (String) T)
(constructor Absent () T)
(constructor Op (String String String TL) T)
(constructor OpN (String String String TL) N)
(constructor Out (N i64) T)
(function shape (T) VecI :merge old)
(function dtype (T) i64 :merge old)
(function bcast (VecI VecI) VecI :merge old)
(relation bcast-req (VecI VecI))
(relation IsOne (T))
(relation IsZero (T))
(relation IsConst (T))
(relation IsScalar (T))
(relation AllElems (String T))
(function scalar-value (T) f64 :merge old)
(function ord (T) i64 :merge (min old new))
(ruleset shapes)
"""


DOMAIN_PREFIX = {"": "", "com.microsoft": "ms_"}
"""egglog constructor prefix per op domain (ops of other domains are never typed)."""


def typed_specs() -> list[OpSpec]:
    """Registered ops with a typed constructor, in a stable order."""
    return [s for s in all_specs() if s.egg is not None and s.domain in DOMAIN_PREFIX]


def egg_name(spec: OpSpec, n_inputs: int | None = None) -> str:
    """The egglog constructor of a typed op: its name, prefixed for non-default domains; a
    variadic op's form with `n_inputs` other than the base count is `<name>_<n>`."""
    base = DOMAIN_PREFIX[spec.domain] + spec.name
    if n_inputs is None or spec.egg is None or n_inputs == spec.egg.n_inputs:
        return base
    if n_inputs not in spec.egg.arities:
        raise ValueError(f"{spec.name} has no typed form with {n_inputs} inputs")
    return f"{base}_{n_inputs}"


def constructors() -> dict[str, OpSpec]:
    """egglog constructor name -> spec, for every typed op and arity."""
    out = {}
    for s in typed_specs():
        assert s.egg is not None
        for n in (s.egg.n_inputs, *s.egg.arities):
            out[egg_name(s, n)] = s
    return out


def constructor(spec: OpSpec) -> str:
    """The constructor declarations of a typed op (one per arity)."""
    assert spec.egg is not None
    sorts = [sort for _, sort, _ in spec.egg.attrs]
    sorts += ["VecI"] * len(spec.egg.const_inputs)
    return "\n".join(
        f"(constructor {egg_name(spec, n)} ({' '.join(sorts + ['T'] * n)}) T)"
        for n in (spec.egg.n_inputs, *spec.egg.arities)
    )


def _vars(spec: OpSpec) -> tuple[list[str], list[str]]:
    """Pattern variables for a typed constructor: (attr+vec vars, tensor vars)."""
    assert spec.egg is not None
    n_args = len(spec.egg.attrs) + len(spec.egg.const_inputs)
    return [f"a{i}" for i in range(n_args)], [f"x{i}" for i in range(spec.egg.n_inputs)]


def _pattern(spec: OpSpec) -> str:
    args, xs = _vars(spec)
    return f"(= e ({egg_name(spec)} {' '.join(args + xs)}))"


def shape_rules(spec: OpSpec) -> list[str]:
    """egglog rules giving (shape e) and (dtype e) for a typed op from its arguments."""
    pat = _pattern(spec)
    name, egg = spec.name, egg_name(spec)  # egg: unique across domains (Gelu, ms_Gelu)
    rules: list[str] = []

    def rule(query: str, action: str, tag: str) -> None:
        rules.append(f'(rule ({pat} {query}) ({action}) :ruleset shapes :name "shape-{egg}-{tag}")')

    if name in _SAME_SHAPE and spec.domain in ("", "com.microsoft"):
        rule("(= s (shape x0))", "(set (shape e) s)", "s")
        rule("(= d (dtype x0))", "(set (dtype e) d)", "d")
    elif name == "Cast":
        rule("(= s (shape x0))", "(set (shape e) s)", "s")
        rule("", "(set (dtype e) a0)", "d")
    elif name == "CastLike":
        rule("(= s (shape x0))", "(set (shape e) s)", "s")
        rule("(= d (dtype x1))", "(set (dtype e) d)", "d")
    elif name in _BROADCAST:
        rule("(= s0 (shape x0)) (= s1 (shape x1))", "(bcast-req s0 s1)", "req")
        rule("(= s0 (shape x0)) (= s1 (shape x1)) (= s (bcast s0 s1))", "(set (shape e) s)", "s")
        rule("(= d (dtype x0))", "(set (dtype e) d)", "d")
    elif name in _DATA_DTYPE and spec.domain == "":
        rule("(= d (dtype x0))", "(set (dtype e) d)", "d")
    elif name in _TESTS and spec.domain == "":
        rule("(= s (shape x0))", "(set (shape e) s)", "s")
        rule("", f"(set (dtype e) {BOOL})", "d")
    elif name in _COMPARISONS and spec.domain == "":
        rule("(= s0 (shape x0)) (= s1 (shape x1))", "(bcast-req s0 s1)", "req")
        rule("(= s0 (shape x0)) (= s1 (shape x1)) (= s (bcast s0 s1))", "(set (shape e) s)", "s")
        rule("", f"(set (dtype e) {BOOL})", "d")
    elif name == "Where" and spec.domain == "":
        rule("(= s1 (shape x1)) (= s2 (shape x2))", "(bcast-req s1 s2)", "req12")
        rule(
            "(= s0 (shape x0)) (= s1 (shape x1)) (= s2 (shape x2)) (= b (bcast s1 s2))",
            "(bcast-req s0 b)",
            "req",
        )
        rule(
            "(= s0 (shape x0)) (= s1 (shape x1)) (= s2 (shape x2)) (= b (bcast s1 s2)) "
            "(= s (bcast s0 b))",
            "(set (shape e) s)",
            "s",
        )
        rule("(= d (dtype x1))", "(set (dtype e) d)", "d")
    elif name == "Expand":
        rule("(= s0 (shape x0))", "(bcast-req s0 a0)", "req")
        rule("(= s0 (shape x0)) (= s (bcast s0 a0))", "(set (shape e) s)", "s")
        rule("(= d (dtype x0))", "(set (dtype e) d)", "d")
    elif name == "Transpose":
        for r in range(1, MAX_RANK + 1):
            dims = " ".join(f"(vec-get s0 (vec-get a0 {i}))" for i in range(r))
            rule(
                f"(= s0 (shape x0)) (= (vec-length a0) {r})",
                f"(set (shape e) (vec-of {dims}))",
                f"r{r}",
            )
        rule("(= d (dtype x0))", "(set (dtype e) d)", "d")
    elif name == "Reshape":
        # Only explicit targets (every entry > 0); encode resolves 0 and -1 where it can.
        for r in range(0, MAX_RANK + 1):
            pos = " ".join(f"(> (vec-get a1 {i}) 0)" for i in range(r))
            rule(f"(= (vec-length a1) {r}) {pos}", "(set (shape e) a1)", f"r{r}")
        rule("(= d (dtype x0))", "(set (dtype e) d)", "d")
    elif name == "MatMul":
        for r in range(2, MAX_RANK + 1):
            lead = " ".join(f"(vec-get s0 {i})" for i in range(r - 1))
            rule(
                f"(= s0 (shape x0)) (= s1 (shape x1)) (= (vec-length s0) {r}) "
                "(= (vec-length s1) 2)",
                f"(set (shape e) (vec-of {lead} (vec-get s1 1)))",
                f"w{r}",
            )
        for r in range(3, MAX_RANK + 1):
            batch = " ".join(f"(max (vec-get s0 {i}) (vec-get s1 {i}))" for i in range(r - 2))
            rule(
                f"(= s0 (shape x0)) (= s1 (shape x1)) (= (vec-length s0) {r}) "
                f"(= (vec-length s1) {r})",
                f"(set (shape e) (vec-of {batch} (vec-get s0 {r - 2}) (vec-get s1 {r - 1})))",
                f"b{r}",
            )
        rule("(= d (dtype x0))", "(set (dtype e) d)", "d")
    elif name == "ConstantOfShape" and spec.domain == "":
        _constant_rules(rule)
    else:
        rules += family_rules(spec, lambda n: egg_name(spec, n))
    return rules


def _constant_rules(rule: Callable[[str, str, str], None]) -> None:
    """`(ConstantOfShape value dtype dims)` (rules' new scalar constants, `rules.scalars`, are
    ones of empty dims) has shape dims and dtype dtype, is a constant, and with empty dims a
    scalar of value `value` (the value its dtype holds: the rule compiler rounds it)."""
    rule("", "(set (shape e) a2) (set (dtype e) a1) (IsConst e)", "s")
    rule("(= (vec-length a2) 0)", "(IsScalar e) (set (scalar-value e) a0)", "v")
    rule("(= a0 1.0)", "(IsOne e)", "one")
    rule("(= a0 0.0)", "(IsZero e)", "zero")


def bcast_rules() -> list[str]:
    """`(bcast a b)` for every pair of ranks up to MAX_RANK: per-dim max, right-aligned."""
    out = []
    for ra in range(MAX_RANK + 1):
        for rb in range(MAX_RANK + 1):
            r = max(ra, rb)
            dims = []
            for i in range(r):
                ia, ib = i - (r - ra), i - (r - rb)
                if ia >= 0 and ib >= 0:
                    dims.append(f"(max (vec-get a {ia}) (vec-get b {ib}))")
                elif ia >= 0:
                    dims.append(f"(vec-get a {ia})")
                else:
                    dims.append(f"(vec-get b {ib})")
            vec = f"(vec-of {' '.join(dims)})" if dims else "(vec-empty)"
            out.append(
                f"(rule ((bcast-req a b) (= (vec-length a) {ra}) (= (vec-length b) {rb})) "
                f'((set (bcast a b) {vec})) :ruleset shapes :name "bcast-{ra}-{rb}")'
            )
    return out


def program(shapes: bool = True) -> str:
    """The whole schema: prelude, typed constructors, shape rules (without `shapes`, the
    declarations only: what a rule needs to compile, at a tenth of the parse time)."""
    specs = typed_specs()
    parts = [PRELUDE, *prelude()]
    parts += [constructor(s) for s in specs]
    if shapes:
        parts += bcast_rules()
        for s in specs:
            parts += shape_rules(s)
    return "\n".join(parts)
