"""Graph -> e-graph: generated egglog text, one `let` per value, run in one call.

Contract: every value of the graph becomes the e-class bound to `$v<i>`; constants
(initializers that are not inputs, Constant nodes) become `(Init name)` leaves whose arrays stay
in `Encoded.consts` (equal constants share one leaf, so equal computations on them share one
class); an op with a typed constructor whose node fits its signature is typed, every other node
(unknown, custom-domain, subgraph-bearing, non-fitting attributes, and any argument the typed
form cannot hold: a non-finite float, a vector entry >= SYM_BASE such as an INT64_MAX Slice end)
is opaque and written back exactly as it was: a node is never dropped. A com.microsoft node
is typed when the model imports that domain and the op is registered there with a signature.
`take_snapshot` checks that every bound value's class has an e-node. Every value's shape and
dtype seed the shape analysis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from egglog import bindings
from onnx import numpy_helper

from rewrite.egraph.encode_parts import encode_parts
from rewrite.egraph.literals import literal, q, vec
from rewrite.egraph.opaque import OpaqueEntry, opaque_entry, opaque_key
from rewrite.egraph.schema import DOMAIN_PREFIX, SYM_BASE, egg_name, program, writable
from rewrite.errors import ShapeError
from rewrite.onnx_io.graph import Graph, Node, release_pages
from rewrite.ops.base import UNKNOWN, EggSig, OpCall, OpSpec, TensorType, onnx_dtype
from rewrite.ops.parts import DROPPABLE
from rewrite.ops.registry import lookup, second_forms

_SMALL_CONST = 4096  # constants up to this many elements are checked for all-0 / all-1


@dataclass
class Encoded:
    """The e-graph and the Python-side tables its terms refer to."""

    egraph: bindings.EGraph
    graph: Graph
    value_vars: dict[str, str]
    """value name -> egglog global holding its class."""
    node_vars: dict[str, str]
    """multi-output node name -> egglog global of its `N` class."""
    opaque: dict[str, OpaqueEntry]
    consts: dict[str, np.ndarray]
    const_protos: dict[str, onnx.TensorProto]
    """Original initializer protos (written back verbatim when chosen)."""
    symbols: dict[int, str | None]
    """SYM_BASE-offset id -> dim name (None for an unknown dim)."""
    text: str = field(repr=False, default="")
    typed: int = 0
    opaque_nodes: int = 0


class _Encoder:
    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.lines: list[str] = []
        self.vars: dict[str, str] = {}
        self.node_vars: dict[str, str] = {}
        self.opaque: dict[str, OpaqueEntry] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.const_protos: dict[str, onnx.TensorProto] = {}
        self.by_content: dict[tuple[object, ...], list[str]] = {}
        self.canon: dict[str, str] = {}
        self.implied: dict[str, np.ndarray] = {}
        """Constants of inputs a node omits that its typed form spells out (`implied_const`)."""
        self.sym_ids: dict[str, int] = {}
        self.symbols: dict[int, str | None] = {}
        self.typed = 0
        self.n_opaque = 0

    # -- values -------------------------------------------------------------------------
    def bind(self, value: str, term: str) -> str:
        var = f"$v{len(self.vars)}"
        self.vars[value] = var
        self.lines.append(f"(let {var} {term})")
        self.lines.append(f"(set (ord {var}) {len(self.vars)})")
        return var

    def dim(self, d: int | str | None) -> int:
        if isinstance(d, int) and d >= 0:
            return d
        if isinstance(d, str):
            if d not in self.sym_ids:
                self.sym_ids[d] = len(self.symbols)
                self.symbols[len(self.symbols)] = d
            return SYM_BASE + self.sym_ids[d]
        self.symbols[len(self.symbols)] = None
        return SYM_BASE + len(self.symbols) - 1

    def seed_type(self, var: str, t: TensorType | None) -> None:
        if t is None:
            return
        if t.shape is not None:
            self.lines.append(f"(set (shape {var}) {vec([self.dim(d) for d in t.shape])})")
        if t.dtype:
            self.lines.append(f"(set (dtype {var}) {t.dtype})")

    def add_const(self, name: str, arr: np.ndarray, proto: onnx.TensorProto | None) -> str:
        """Bind constant `name`; equal constants (dtype, shape, bytes) share the first name."""
        arr = np.asarray(arr)
        bucket = self.by_content.setdefault(self.const_bucket(arr), [])
        canon = next((o for o in bucket if np.array_equal(self.consts[o], arr)), name)
        release_pages(arr, *(self.consts[o] for o in bucket))  # what hashing read of mapped data
        if canon == name:
            bucket.append(name)
        self.canon[name] = canon
        if canon == name:
            self.consts[name] = arr
            if proto is not None:
                self.const_protos[name] = proto
        var = self.bind(name, f"(Init {q(canon)})")
        self.seed_type(var, TensorType(onnx_dtype(arr), arr.shape))
        if canon == name:
            self.lines.append(f"(IsConst {var})")
        if canon == name and arr.size == 1 and arr.dtype.kind in "fiub":
            self.lines.append(f"(IsScalar {var})")
            value = float(arr.reshape(-1)[0])
            if math.isfinite(value):
                self.lines.append(f"(set (scalar-value {var}) {literal(value, 'f64')})")
        if canon == name and arr.size <= _SMALL_CONST and arr.dtype != object:
            if arr.size and np.all(arr == 1):
                self.lines.append(f"(IsOne {var})")
            elif arr.size and np.all(arr == 0):
                self.lines.append(f"(IsZero {var})")
        return var

    @staticmethod
    def const_bucket(arr: np.ndarray) -> tuple[object, ...]:
        """dtype, shape and a strided sample of at most 64 elements: equal constants agree here.

        Only constants in the same bucket are compared in full (hashing every weight costs more).
        """
        flat = arr.reshape(-1)
        sample = flat[:: max(1, flat.size // 64)]
        return (
            str(arr.dtype),
            arr.shape,
            repr(sample) if arr.dtype == object else sample.tobytes(),
        )

    def ref(self, value: str) -> str:
        return "(Absent)" if not value else self.vars[value]

    # -- nodes --------------------------------------------------------------------------
    def node(self, n: Node) -> None:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and self.constant(n):
            return
        if encode_parts(self, n):  # Split, TopK, `ops.parts.PARTS`: one term per output
            return
        term = self.typed_term(n)
        for spec in second_forms(n.op_type, n.domain) if term is None else []:
            term = term or self.typed_term(n, spec)  # ReshapeDyn: a computed shape
        if term is not None:
            self.typed += 1
            var = self.bind(n.outputs[0], term)
            self.seed_type(var, self.g.types.get(n.outputs[0]))
            return
        self.opaque_node(n)

    def constant(self, n: Node) -> bool:
        attrs = n.attrs
        if "value" not in attrs and not any(k.startswith("value_") for k in attrs):
            return False
        if "value_string" in attrs or "value_strings" in attrs or "sparse_value" in attrs:
            return False
        if "value" in attrs:
            arr = numpy_helper.to_array(attrs["value"])
        elif "value_float" in attrs:
            arr = np.array(attrs["value_float"], dtype=np.float32)
        elif "value_floats" in attrs:
            arr = np.array(attrs["value_floats"], dtype=np.float32)
        elif "value_int" in attrs:
            arr = np.array(attrs["value_int"], dtype=np.int64)
        else:
            arr = np.array(attrs["value_ints"], dtype=np.int64)
        self.add_const(n.outputs[0], arr, None)
        return True

    def typed_term(self, n: Node, form: OpSpec | None = None) -> str | None:
        """The typed constructor term for `n` (in `form`, a second typed form of its op, when
        given), or None when it does not fit the signature."""
        domain = "" if n.domain == "ai.onnx" else n.domain
        if n.has_subgraph or (domain and domain not in self.g.opsets):
            return None  # a contrib op is typed where the model imports its domain
        spec = form or lookup(n.op_type, domain)
        if spec is not None and spec.domain not in DOMAIN_PREFIX:
            return None
        if spec is None or spec.egg is None:
            return None
        sig = spec.egg
        inputs = list(n.inputs)
        outputs = n.outputs
        if n.op_type == "Squeeze" and not domain and not any(inputs[1:]):
            axes = self.unit_axes(inputs[0]) if inputs and inputs[0] else None
            if axes is None:
                return None  # which dims are 1 is only known at run time
            inputs = [inputs[0], self.implied_const(n, np.array(axes, np.int64))]
        if n.op_type == "Dropout":
            # Inference semantics: ratio is irrelevant; training_mode must be absent/false.
            if len(inputs) > 2 and inputs[2] and not self.is_false(inputs[2]):
                return None
            inputs = inputs[:1]
        if len(outputs) != 1 and any(outputs[1:]) and not self.drops_extra_outputs(n, domain):
            return None  # extra outputs declared with empty names are not produced: one output
        if domain and not self.in_contract(spec, n):
            return None
        attrs = n.attrs
        if n.op_type == "Dropout":
            attrs.pop("seed", None)  # only affects training-mode draws
        if sig.to_egg is not None:
            attrs = sig.to_egg(dict(attrs))
            if attrs is None:
                return None
        if sig.attr_inputs:
            moved = self.inputs_to_attrs(sig, dict(attrs), inputs)
            if moved is None:
                return None
            attrs, inputs = moved
        names = {a[0] for a in sig.attrs}
        if not set(attrs) <= names:
            return None
        n_tensors = sig.n_inputs
        if len(inputs) - len(sig.const_inputs) in sig.arities:  # a variadic op's other form
            n_tensors = len(inputs) - len(sig.const_inputs)
        n_total = n_tensors + len(sig.const_inputs)
        first_optional = n_total - sig.optional
        while first_optional - 1 in sig.omittable:  # trailing const inputs that may be omitted
            first_optional -= 1
        if not first_optional <= len(inputs) <= n_total:
            return None
        inputs = inputs + [""] * (n_total - len(inputs))  # omitted trailing inputs: (Absent)
        if any(not name for i, name in enumerate(inputs) if i < first_optional):
            return None
        args = self.typed_args(n, sig, attrs, inputs)
        if args is None:
            return None
        tensors = [self.ref(inputs[i]) for i in range(n_total) if i not in sig.const_inputs]
        return f"({egg_name(spec, n_tensors)} {' '.join(args + tensors)})"

    def in_contract(self, spec: OpSpec, n: Node) -> bool:
        """Whether a contrib op's node is inside its typed contract: its `infer` accepts the
        node's types and constants (a GroupQueryAttention with a past and one output, whose
        output ORT computes from memory it never wrote, is not)."""
        types = [self.g.types.get(i, UNKNOWN) if i else None for i in n.inputs]
        consts = [self.const_value(i) if i else None for i in n.inputs]
        call = OpCall(n.op_type, types, consts, n.attrs, 1, self.g.opset)
        try:
            spec.infer(call)
        except (ShapeError, ValueError):
            return False
        return True

    def drops_extra_outputs(self, n: Node, domain: str) -> bool:
        """Whether `n` is typed as its output 0: its op is in `ops.parts.DROPPABLE`, output 0
        is named, and no extra output is used (read by a node or a graph output)."""
        if (n.op_type, domain) not in DROPPABLE or not n.outputs or not n.outputs[0]:
            return False
        return not any(o and self.used(o) for o in n.outputs[1:])

    def typed_args(
        self, n: Node, sig: EggSig, attrs: dict[str, Any], inputs: list[str]
    ) -> list[str] | None:
        """Literals for the attribute and constant-vector arguments, or None when one cannot be
        written: a missing attribute, a non-finite float, a non-constant or non-int vector
        input, or a vector the snapshot could not read back (`schema.writable`)."""
        args: list[str] = []
        for name, sort, default in sig.attrs:
            val = attrs.get(name, default)
            if val is None:
                return None
            try:
                if sort == "VecI" and not writable([int(x) for x in val]):
                    return None
                args.append(literal(val, sort))
            except (ValueError, TypeError, OverflowError):
                return None
        for i in sig.const_inputs:
            if not inputs[i] and i in sig.omittable:
                args.append(vec([]))
                continue
            dims = self.const_ints(inputs[i], scalar=i in sig.scalar_inputs)
            if dims is None:
                return None
            if n.op_type == "Reshape":
                dims = self.resolve_reshape(n, dims, int(attrs.get("allowzero", 0)))
            if not writable(dims):
                return None
            args.append(vec(dims))
        return args

    def inputs_to_attrs(
        self, sig: EggSig, attrs: dict[str, Any], inputs: list[str]
    ) -> tuple[dict[str, Any], list[str]] | None:
        """`sig.attr_inputs` read into the attributes (in a model of their opset or newer):
        the attributes and the remaining inputs, or None when such an input is not a
        constant int vector."""
        cut = len(inputs)
        for name, index, since in sig.attr_inputs:
            if self.g.opset < since or index >= len(inputs):
                continue
            cut = min(cut, index)
            if not inputs[index]:
                continue
            ints = self.const_ints(inputs[index])
            if ints is None:
                return None
            attrs[name] = ints
        return attrs, inputs[:cut]

    def resolve_reshape(self, n: Node, dims: list[int], allowzero: int) -> list[int]:
        """Replace 0 (copy) and -1 (infer) by the real dim where the types know it."""
        src = self.g.types.get(n.inputs[0])
        out = self.g.types.get(n.outputs[0])
        resolved = list(dims)
        for i, d in enumerate(dims):
            if d == 0 and not allowzero and src and src.shape and i < len(src.shape):
                s = src.shape[i]
                if isinstance(s, int):
                    resolved[i] = s
            elif d == -1 and out and out.shape and i < len(out.shape):
                o = out.shape[i]
                if isinstance(o, int):
                    resolved[i] = o
        return resolved

    def opaque_node(self, n: Node) -> None:
        self.n_opaque += 1
        key = opaque_key(n)
        self.opaque.setdefault(key, opaque_entry(n))
        kids = [self.ref(i) for i in [*n.inputs, *n.implicit_inputs]]
        tl = "(TNil)"
        for k in reversed(kids):
            tl = f"(TCons {k} {tl})"
        head = f"{q(n.domain)} {q(n.op_type)} {q(key)} {tl}"
        if len(n.outputs) == 1:
            var = self.bind(n.outputs[0], f"(Op {head})")
            self.seed_type(var, self.g.types.get(n.outputs[0]))
            return
        nvar = f"$n{len(self.node_vars)}"
        self.node_vars[n.name or nvar] = nvar
        self.lines.append(f"(let {nvar} (OpN {head}))")
        for i, o in enumerate(n.outputs):
            if o:
                var = self.bind(o, f"(Out {nvar} {i})")
                self.seed_type(var, self.g.types.get(o))

    # -- helpers ------------------------------------------------------------------------
    def const_value(self, value: str) -> np.ndarray | None:
        if value in self.implied:
            return self.implied[value]
        return self.consts.get(self.canon.get(value, ""))

    def implied_const(self, n: Node, arr: np.ndarray) -> str:
        """A name standing for `arr` as an input of `n` that the model omits (read only by
        `const_value`, never bound in the e-graph)."""
        name = f"\0implied:{n.outputs[0]}:{len(self.implied)}"
        self.implied[name] = arr
        return name

    def unit_axes(self, value: str) -> list[int] | None:
        """The axes of `value`'s size-1 dims: what a Squeeze without axes removes, where every
        dim is static (else None)."""
        t = self.g.types.get(value)
        if t is None or t.shape is None or not all(isinstance(d, int) for d in t.shape):
            return None
        return [i for i, d in enumerate(t.shape) if d == 1]

    def const_ints(self, value: str, scalar: bool = False) -> list[int] | None:
        """`value`'s constant as a list of ints, or None unless it is a 1-D integer tensor
        (or, with `scalar`, a 0-D one: a one-element list)."""
        arr = self.const_value(value)
        if arr is not None and scalar and arr.ndim == 0:
            arr = arr.reshape(1)
        if arr is None or arr.ndim != 1 or arr.dtype.kind not in "iu":
            return None
        return [int(x) for x in arr]

    def is_false(self, value: str) -> bool:
        arr = self.const_value(value)
        return arr is not None and arr.size == 1 and not bool(arr.reshape(-1)[0])

    def used(self, value: str) -> bool:
        return value in self._used

    def run(self) -> None:
        self._used = {i for n in self.g.nodes for i in [*n.inputs, *n.implicit_inputs]}
        self._used |= set(self.g.outputs)
        for name in self.g.inputs:
            var = self.bind(name, f"(Input {q(name)})")
            self.seed_type(var, self.g.types.get(name))
        for name, proto in self.g.initializers.items():
            if name not in self.vars:
                self.add_const(name, self.g.array(name), proto)
        for n in self.g.nodes:
            self.node(n)


def encode(graph: Graph) -> Encoded:
    """Build the e-graph of `graph` (schema + graph facts) in one egglog call."""
    enc = _Encoder(graph)
    enc.run()
    text = "\n".join(enc.lines)
    eg = bindings.EGraph()
    eg.parse_and_run_program(program() + "\n" + text)
    return Encoded(
        eg,
        graph,
        enc.vars,
        enc.node_vars,
        enc.opaque,
        enc.consts,
        enc.const_protos,
        enc.symbols,
        text,
        enc.typed,
        enc.n_opaque,
    )
