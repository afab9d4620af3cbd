"""One module per ONNX op (or tight family); importing this package registers them all.

`lookup(op_type, domain)` returns the op's `OpSpec` or None (the op is then opaque: carried
through the e-graph unchanged and written back as it was).
"""

# Importing an op module registers its specs.
from rewrite.ops import (  # noqa: F401  (import order: the registry must exist first)
    activation,
    concat,
    constant,
    contrib,
    conv,
    cumsum,
    dynamic,
    einsum,
    elementwise,
    gather,
    global_pool,
    group_norm,
    instance_norm,
    logic,
    matmul,
    norm,
    pad,
    pool,
    reduce,
    reshape,
    scatter,
    shape,
    slice,
    split,
    transpose,
    trig,
    trilu,
    unary,
)
from rewrite.ops.base import (
    UNKNOWN,
    EggSig,
    OpCall,
    OpSpec,
    Shape,
    TensorType,
    broadcast,
)
from rewrite.ops.registry import all_specs, lookup, register

__all__ = [
    "UNKNOWN",
    "EggSig",
    "OpCall",
    "OpSpec",
    "Shape",
    "TensorType",
    "all_specs",
    "broadcast",
    "lookup",
    "register",
]
