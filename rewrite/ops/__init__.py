"""One module per ONNX op (or tight family); importing this package registers them all.

`lookup(op_type, domain)` returns the op's `OpSpec` or None (the op is then opaque: carried
through the e-graph unchanged and written back as it was).
"""

# Importing an op module registers its specs.
from rewrite.ops import (  # noqa: F401  (import order: the registry must exist first)
    _gru,
    _lstm,
    activation,
    attention,
    bitshift,
    concat,
    constant,
    contrib,
    contrib_conv,
    contrib_norm,
    conv,
    conv_transpose,
    cumsum,
    depth_space,
    dynamic,
    einsum,
    elementwise,
    gather,
    global_pool,
    group_norm,
    hardmax,
    instance_norm,
    logic,
    matmul,
    norm,
    pad,
    pool,
    quant_matmul,
    reduce,
    reshape,
    resize,
    reverse_sequence,
    rnn,
    scatter,
    shape,
    slice,
    split,
    topk,
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
