"""The op contract: what one ONNX op module tells the rest of `rewrite`.

An op module builds one `OpSpec` per op and registers it (`rewrite.ops.registry`). The spec
is the only place that knows the op: its shape/dtype function, numpy reference, FLOPs and
bytes moved, and (for ops that rules touch) its typed e-graph constructor.

Types: a `Dim` is an `int` (static), a `str` (symbolic, by name) or `None` (unknown). A
`TensorType` is an ONNX element type (`onnx.TensorProto.FLOAT` = 1, ...; 0 = unknown) and a
shape (`None` = unknown rank).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np
import onnx

from rewrite.errors import ShapeError

Dim = int | str | None
Shape = tuple[Dim, ...]
Attrs = Mapping[str, Any]


@dataclass(frozen=True)
class TensorType:
    """Element type (ONNX enum, 0 = unknown) and shape (None = unknown rank)."""

    dtype: int
    shape: Shape | None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def numel(self) -> int | None:
        """Element count when the shape is static, else None."""
        if self.shape is None or not all(isinstance(d, int) for d in self.shape):
            return None
        return prod(self.shape)  # type: ignore[arg-type]

    @property
    def itemsize(self) -> int:
        return itemsize(self.dtype)


UNKNOWN = TensorType(0, None)


def itemsize(dtype: int) -> int:
    """Bytes per element of an ONNX element type (1 for unknown/bool/sub-byte types)."""
    if dtype == 0:
        return 4
    try:
        return max(1, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype)).itemsize)
    except (KeyError, TypeError, ValueError):
        return 1


def np_dtype(dtype: int) -> np.dtype:
    """numpy dtype of an ONNX element type."""
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype))


def onnx_dtype(arr: np.ndarray) -> int:
    """ONNX element type of a numpy array."""
    return int(onnx.helper.np_dtype_to_tensor_dtype(arr.dtype))


@dataclass(frozen=True)
class OpCall:
    """What an op's functions see of one node: input types, constant inputs, attributes.

    `inputs[i]` is None for an omitted optional input; `consts[i]` is the input's value when it
    is a known constant (initializer or folded), else None. `attrs` holds attribute values as
    `onnx.helper.get_attribute_value` returns them (bytes decoded to str), defaults not filled.
    `n_outputs` is the number of outputs the node declares.
    """

    op_type: str
    inputs: Sequence[TensorType | None]
    consts: Sequence[np.ndarray | None]
    attrs: Attrs
    n_outputs: int = 1
    opset: int = 17

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def input(self, i: int) -> TensorType:
        """Type of input i (UNKNOWN when omitted or out of range)."""
        if i < len(self.inputs) and self.inputs[i] is not None:
            return self.inputs[i]  # type: ignore[return-value]
        return UNKNOWN

    def const(self, i: int) -> np.ndarray | None:
        return self.consts[i] if i < len(self.consts) else None

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None


InferFn = Callable[[OpCall], list[TensorType]]
ReferenceFn = Callable[[OpCall, list[np.ndarray | None]], list[np.ndarray]]
Z3Fn = Callable[[OpCall, list[np.ndarray | None]], list[np.ndarray]]
"""Z3 semantics: a reference over numpy object arrays of Z3 terms (see `rewrite.ops._z3`)."""
FlopsFn = Callable[[OpCall, list[TensorType]], float]
AttrValuesFn = Callable[[str, list["TensorType"]], "list[Any] | None"]


def elementwise_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """One operation per output element."""
    return float(sum(t.numel or 0 for t in outputs))


def same_type(call: OpCall) -> list[TensorType]:
    """Output 0 has input 0's dtype and shape (unary elementwise ops)."""
    return [call.input(0)]


def per_element(k: float) -> FlopsFn:
    """FLOPs = k per output element (k > 1 for transcendental or multi-step ops)."""

    def flops(call: OpCall, outputs: list[TensorType]) -> float:
        return k * elementwise_flops(call, outputs)

    flops.__doc__ = f"{k:g} FLOPs per output element."
    return flops


def no_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """Data movement only (reshape, transpose, gather, ...)."""
    return 0.0


def bytes_moved(call: OpCall, outputs: list[TensorType]) -> float:
    """Bytes read (non-omitted inputs) plus bytes written (outputs); unknown sizes count 0."""
    total = 0
    for t in [*call.inputs, *outputs]:
        if t is not None and t.numel is not None:
            total += t.numel * t.itemsize
    return float(total)


@dataclass(frozen=True)
class EggSig:
    """How an op is encoded as a typed egglog constructor `Op(attr..., input...)`.

    `attrs` are (attribute name, egglog sort, default) with sorts `i64`, `f64`, `String`,
    `VecI` (ints); `const_inputs` maps an input index to the `VecI` argument that replaces
    it when the input is a constant int vector (Reshape's shape); `n_inputs` is the fixed
    number of tensor inputs after those. An op node whose attributes or inputs do not fit the
    signature is encoded as an opaque node instead (always correct, never rewritten).
    """

    attrs: tuple[tuple[str, str, Any], ...] = ()
    n_inputs: int = 1
    const_inputs: tuple[int, ...] = ()
    arities: tuple[int, ...] = ()
    """Other tensor-input counts of a variadic op (Concat, Sum, Max, Min, Mean), each its own
    egglog constructor `<name>_<k>`; `n_inputs` is the base form's count."""
    to_egg: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
    """ONNX attributes -> the typed form's (None: the node does not fit and stays opaque), for
    an attribute no egglog sort holds as it is (ConstantOfShape's one-element `value` tensor
    as a float and a dtype)."""
    from_egg: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """The typed form's attributes -> ONNX attributes, to write a node back."""
    optional: int = 0
    """How many of the last tensor inputs may be omitted: an omitted one is `(Absent)` in the
    term (Clip without min/max, Conv without bias), and written back as an empty name."""
    omittable: tuple[int, ...] = ()
    """Trailing `const_inputs` that may be omitted: an omitted one is the empty vector, and
    an empty vector is written back as an omitted input (ReduceSum's axes)."""
    attr_inputs: tuple[tuple[str, int, int], ...] = ()
    """`VecI` attributes that a later opset takes as an input instead: (attribute, input
    index, opset). In a model of that opset or newer the input, a constant int vector (or
    omitted: the attribute's default), is read into the attribute (a computed one keeps the
    node opaque), and the attribute is written back as that input (omitted at its default):
    ReduceMean's axes, an input since opset 18."""
    scalar_inputs: tuple[int, ...] = ()
    """`const_inputs` that ONNX gives as 0-D scalars (Trilu's k, CumSum's axis): a 0-D
    constant reads as a one-element vector; it is written back 1-D, which ORT accepts."""


@dataclass(frozen=True)
class OpSpec:
    """Everything `rewrite` knows about one op (domain "" is ai.onnx)."""

    name: str
    infer: InferFn
    reference: ReferenceFn | None = None
    flops: FlopsFn = no_flops
    bytes: FlopsFn = bytes_moved
    domain: str = ""
    deterministic: bool = True
    egg: EggSig | None = None
    doc: str = field(default="", compare=False)
    z3: Z3Fn | None = None
    """Z3 semantics (typed ops): the formula the prover reasons with; None = not provable."""
    input_dtypes: tuple[tuple[int, ...] | None, ...] = ()
    """Per input, the dtypes it takes when they are not the op's data type (Where's condition:
    (BOOL,); Gather's indices: (INT64, INT32)); None or absent: the data type. The prover and
    the self-test give a rule variable read there these dtypes."""
    attr_values: AttrValuesFn | None = None
    """The values an attribute ranges over in proofs and the self-test, given the input
    types (`verify.bound.domain` asks the op first; None from it: the bound's default)."""
    onnx_op: str = ""
    """The ONNX op_type this spec's typed form is written as, when `name` is a second typed
    form of another op (`ReshapeDyn`: Reshape with a computed shape); empty: `name`."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.domain, self.name)

    @property
    def op_type(self) -> str:
        """The ONNX op_type of this spec's nodes (`onnx_op`, else `name`)."""
        return self.onnx_op or self.name


def fail(call: OpCall, why: str) -> ShapeError:
    """A ShapeError naming the op and the input types (raise the result)."""
    types = ", ".join("-" if t is None else f"{t.shape}:{t.dtype}" for t in call.inputs)
    return ShapeError(f"{call.op_type}: {why} (inputs {types})")


def broadcast(*shapes: Shape) -> Shape:
    """numpy multidirectional broadcasting over static, symbolic and unknown dims."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        known = [d for d in dims if d != 1]
        if not known:
            out.append(1)
            continue
        first = known[0]
        if all(d == first for d in known):
            out.append(first)
        elif any(isinstance(d, int) for d in known):
            ints = {d for d in known if isinstance(d, int)}
            if len(ints) > 1:
                raise ShapeError(f"cannot broadcast shapes {list(shapes)}")
            out.append(ints.pop())
        else:
            out.append(None)
    return tuple(out)
