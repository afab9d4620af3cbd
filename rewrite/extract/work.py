"""The work of one op call: FLOPs and bytes on assumed sizes, as the cost model prices it.

Before a spec's functions see a type, every symbolic dim (`str`) and unknown dim (`None`)
counts as `ASSUMED_DIM` (1) unless `dims` names its size, a tensor of unknown rank counts as
shape `(ASSUMED_DIM,)`, and an unknown dtype as 4 bytes (`cost.py`'s module doc says why 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from rewrite.extract.contrib import contrib_work
from rewrite.ops.base import OpCall, OpSpec, TensorType, itemsize
from rewrite.ops.registry import lookup

Work = tuple[float, float, float]
"""(FLOPs, bytes moved, of which bytes of constant inputs)."""

ASSUMED_DIM = 1
"""Size of a symbolic or unknown dim that `dims` does not name (module doc: why 1)."""

Dims = Mapping[str, int]
"""Sizes of named symbolic dims, e.g. {"batch": 1, "sequence": 128}."""


def assume_type(t: TensorType | None, dims: Dims | None = None) -> TensorType | None:
    """`t` with every symbolic/unknown dim replaced by its assumed size (see module doc)."""
    if t is None or t.is_static:
        return t
    if t.shape is None:
        return TensorType(t.dtype, (ASSUMED_DIM,))
    named = dims or {}
    sizes = tuple(
        d
        if isinstance(d, int)
        else named.get(d, ASSUMED_DIM)
        if isinstance(d, str)
        else ASSUMED_DIM
        for d in t.shape
    )
    return TensorType(t.dtype, sizes)


def type_bytes(t: TensorType | None, dims: Dims | None = None) -> float:
    """Bytes of a tensor under the assumed sizes (0 for an omitted input)."""
    a = assume_type(t, dims)
    if a is None:
        return 0.0
    return float((a.numel or 0) * itemsize(a.dtype))


def call_work(
    op: str,
    domain: str,
    call: OpCall,
    outputs: list[TensorType],
    dims: Dims | None = None,
    const: Sequence[bool] | None = None,
) -> Work | None:
    """(FLOPs, bytes, constant-input bytes) of one op call, from its registered spec, else from
    `contrib`, on the assumed sizes; None when neither knows the op. Raises whatever the spec's
    functions raise. Input i is constant where `const[i]` (default: `call.consts` has it)."""
    spec = lookup(op, domain)
    assumed = replace(call, inputs=[assume_type(t, dims) for t in call.inputs])
    if spec is not None:
        flops, nbytes = _spec_work(spec, assumed, outputs, dims or {})
    elif domain in ("", "ai.onnx"):
        return None
    else:
        # Shape inference does not know contrib ops: an output of unknown type is left for the
        # op's work function to infer, not priced as one element.
        known = all(o.shape is not None and o.dtype != 0 for o in outputs)
        outs = [a for a in (assume_type(o, dims) for o in outputs) if a is not None]
        got = contrib_work(domain, op, assumed, outs if known else [])
        if got is None:
            return None
        flops, nbytes = got
    flags = const if const is not None else [c is not None for c in call.consts]
    consts = sum(type_bytes(t) for t, c in zip(assumed.inputs, flags, strict=False) if c)
    return flops, nbytes, min(consts, nbytes)


def _spec_work(
    spec: OpSpec, call: OpCall, outputs: list[TensorType], dims: Dims
) -> tuple[float, float]:
    """(FLOPs, bytes) from the spec on assumed shapes; outputs of unknown type are inferred."""
    assumed = replace(call, inputs=[assume_type(t, dims) for t in call.inputs])
    if not outputs or any(o.shape is None or o.dtype == 0 for o in outputs):
        try:
            inferred = spec.infer(assumed)
        except Exception:  # keep what the classes say
            inferred = []
        if len(inferred) >= len(outputs):
            outputs = [
                i if o.shape is None or o.dtype == 0 else o
                for o, i in zip([*outputs, *inferred[len(outputs) :]], inferred, strict=True)
            ]
    outs = [a for a in (assume_type(o, dims) for o in outputs) if a is not None]
    flops, nbytes = float(spec.flops(assumed, outs)), float(spec.bytes(assumed, outs))
    if not (0.0 <= flops < math.inf and 0.0 <= nbytes < math.inf):
        raise ValueError(f"flops={flops}, bytes={nbytes} is not a finite work estimate")
    return flops, nbytes
