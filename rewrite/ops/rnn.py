"""LSTM, GRU and RNN: the ONNX recurrent ops, one typed term per output.

Contract (ONNX, opset 14+ attributes): X (seq, batch, input) (layout=1: (batch, seq, input)),
W (D, G·H, input), R (D, G·H, H), optional B (D, 2·G·H), sequence_lens (batch) int32,
initial_h (D, batch, H), for LSTM initial_c (D, batch, H) and P (D, 3·H); G = 4 (LSTM gates
i, o, f, c), 3 (GRU z, r, h), 1 (RNN); D = 2 for direction=bidirectional, else 1; H the
`hidden_size` attribute. Outputs Y (seq, D, batch, H) (layout=1: (batch, seq, D, H)), Y_h and
(LSTM) Y_c (D, batch, H) (layout=1: (batch, D, H)), X's dtype. A batch row b runs its first
sequence_lens[b] steps (forward: 0 up, reverse: down from sequence_lens[b] - 1); Y is 0 at
the steps it does not run, Y_h / Y_c hold the state after its last step run.

Order of the float operations, as ORT 1.32's CPU kernels (deep_cpu_lstm, deep_cpu_gru,
rnn.cc) compute them, per step and direction (`_lstm.py`, `_gru.py`, `step_rnn` here):
gates = X_t·Wᵀ (one GEMM over all steps) + h·Rᵀ (the recurrent GEMM accumulated onto it,
beta = 1), each dot product a sum of products in index order (as `matmul.py` models MLAS);
the biases added after the products, `clip` as min/max (LSTM, GRU: clip = FLT_MAX when the
attribute is absent, so NaN becomes FLT_MAX where a bias is added); activations as ORT's
Sigmoid (MlasComputeLogistic) and Tanh (MlasComputeTanh) ops: `unary.z3_sigmoid` and the
`TANH` uninterpreted function, Relu exact; GRU's reset and output gates use deep_cpu's
rational approximations instead, replayed exactly (`_gru.py`). The numpy reference computes
the same formulas in X's dtype (its dot products in BLAS order: it agrees with ORT within
float rounding). ORT 1.32 refuses layout=1 on CPU; the reference and semantics move the axes.

Typed form (as `split.SplitPart` / `topk.TopKPart`): output `index` of an LSTM is
`(LSTMPart direction hidden_size layout clip activations input_forget index X W R B
sequence_lens initial_h initial_c P)` (GRUPart: linear_before_reset in input_forget's place,
no initial_c / P; RNNPart: neither), absent inputs `(Absent)`; encode makes one term per
output the node names (`_Encoder.rnn`), decode writes every chosen part of one (op,
attributes, inputs) as one node (`_Decoder.emit_rnn`), outputs no class chose left out (all
are optional).
`activations` is the comma-joined list ("" = the defaults), `clip` -1.0 when absent. A node
with activation_alpha/beta, an activation other than Sigmoid/Tanh/Relu, or an unknown
hidden_size stays opaque. Z3 semantics need sequence_lens as numerals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto as P

from rewrite.ops._z3 import const, vmap
from rewrite.ops._z3 import relu as z3_relu
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, TensorType, bytes_moved, fail
from rewrite.ops.parts import PARTS
from rewrite.ops.registry import register
from rewrite.ops.unary import TANH, z3_sigmoid

Array = np.ndarray
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
N_OUTPUTS = {"LSTM": 3, "GRU": 2, "RNN": 2}
DEFAULT_ACTS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "RNN": ("Tanh",)}
ACTIVATIONS = ("sigmoid", "tanh", "relu")
NO_CLIP = -1.0
FLT_MAX = float(np.finfo(np.float32).max)
PART = {name: p.op for (name, _), p in PARTS.items() if p.op in GATES}
"""Typed part -> the ONNX op it is an output of (`ops.parts.PARTS`'s LSTM, GRU and RNN)."""


def egg_attrs(op: str) -> tuple[tuple[str, str, Any], ...]:
    """The typed form's attributes (module docstring), `index` last."""
    extra = {"LSTM": (("input_forget", "i64", 0),), "GRU": (("linear_before_reset", "i64", 0),)}
    return (
        ("direction", "String", "forward"),
        ("hidden_size", "i64", None),
        ("layout", "i64", 0),
        ("clip", "f64", NO_CLIP),
        ("activations", "String", ""),
        *extra.get(op, ()),
        ("index", "i64", 0),
    )


def to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """ONNX attributes -> the typed form's; None when the node has no typed form."""
    if "activation_alpha" in attrs or "activation_beta" in attrs:
        return None
    acts = [a.decode() if isinstance(a, bytes) else str(a) for a in attrs.get("activations", [])]
    if any(a.lower() not in ACTIVATIONS or "," in a for a in acts):
        return None
    out = dict(attrs)
    if "activations" in out:
        out["activations"] = ",".join(acts)
    if "clip" in out:
        out["clip"] = float(np.float32(out["clip"]))
    return out


def from_egg(attrs: dict[str, Any]) -> dict[str, Any]:
    """The typed form's attributes -> ONNX attributes (index dropped)."""
    out = {k: v for k, v in attrs.items() if k != "index"}
    if out.get("activations"):
        out["activations"] = out["activations"].split(",")
    else:
        out.pop("activations", None)
    if out.get("clip") == NO_CLIP:
        out.pop("clip")
    return out


# -- shapes -------------------------------------------------------------------------------------
def n_dirs(call: OpCall) -> int:
    direction = str(call.attr("direction", "forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        raise fail(call, f"direction {direction!r}")
    return 2 if direction == "bidirectional" else 1


def op_of(call: OpCall) -> str:
    return PART.get(call.op_type, call.op_type)


def infer_part(call: OpCall) -> list[TensorType]:
    """Output `index`'s type (module docstring)."""
    x, index = call.input(0), int(call.attr("index", 0))
    if not 0 <= index < N_OUTPUTS[op_of(call)]:
        raise fail(call, f"index {index}")
    return [output_types(call)[index] if x.shape is not None else TensorType(x.dtype, None)]


def output_types(call: OpCall) -> list[TensorType]:
    """Y, Y_h (and Y_c) of the call."""
    x, d = call.input(0), n_dirs(call)
    h: Dim = call.attr("hidden_size")
    w = call.input(1).shape
    if h is None and w is not None:
        h = w[1] // GATES[op_of(call)] if isinstance(w[1], int) else None
    if x.shape is None or len(x.shape) != 3:
        raise fail(call, "X must be 3-D")
    layout = int(call.attr("layout", 0))
    seq, batch = (x.shape[1], x.shape[0]) if layout else (x.shape[0], x.shape[1])
    y = (batch, seq, d, h) if layout else (seq, d, batch, h)
    state = (batch, d, h) if layout else (d, batch, h)
    return [TensorType(x.dtype, y)] + [TensorType(x.dtype, state)] * (N_OUTPUTS[op_of(call)] - 1)


def part_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """The op's FLOPs shared equally by its outputs: per step and direction 2·batch·G·H·
    (input + H) for the two GEMMs plus `ELEMENTWISE[op]`·batch·H for biases, activations and
    the state update."""
    x, op = call.input(0), op_of(call)
    if not x.is_static or x.shape is None:
        return 0.0
    h = int(call.attr("hidden_size", 0) or 0)
    seq, batch, size = (int(v) for v in x.shape)  # type: ignore[arg-type]  # static
    steps = seq * batch * n_dirs(call)  # layout moves seq/batch; their product is the same
    total = steps * (2.0 * GATES[op] * h * (size + h) + ELEMENTWISE[op] * h)
    return total / N_OUTPUTS[op]


ELEMENTWISE = {"LSTM": 18.0, "GRU": 14.0, "RNN": 3.0}
"""Elementwise operations per hidden unit and step: LSTM 4 bias adds, 4 activations, 3 peephole
terms, 2 clips, the cell update (3), tanh of it and the product (2); GRU 3 bias adds, 3
activations, the reset product, the update (4) and 2 for linear_before_reset's bias; RNN bias
(2) and the activation."""


def part_bytes(call: OpCall, outputs: list[TensorType]) -> float:
    """The inputs read shared equally by the op's outputs, plus this output written."""
    read = bytes_moved(call, []) / N_OUTPUTS[op_of(call)]
    return read + sum((t.numel or 0) * t.itemsize for t in outputs)


# -- arithmetic over numbers or Z3 terms ----------------------------------------------------------
def act(name: str, x: Array) -> Array:
    """Activation `name` elementwise (module docstring)."""
    name = name.lower()
    if x.dtype == object:
        fn: Callable[[Any], Any] = {"sigmoid": z3_sigmoid, "tanh": TANH, "relu": z3_relu}[name]
        return vmap(fn, x)
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            return (1 / (1 + np.exp(-x))).astype(x.dtype)
        if name == "tanh":
            return np.tanh(x)
        return np.where(x < 0, np.zeros_like(x), x)


def less(a: Array, b: Array) -> Array:
    """a < b elementwise (IEEE: false where either is NaN)."""
    if a.dtype == object or b.dtype == object:
        return np.vectorize(lambda s, t: s < t, otypes=[object])(a, b)
    return a < b


def where(c: Array, a: Array, b: Array) -> Array:
    if c.dtype == object:
        return np.vectorize(lambda k, s, t: z3.If(k, s, t), otypes=[object])(c, a, b)
    return np.where(c, a, b)


def scalar(v: float, like: Array) -> Array:
    """`v` in the dtype (or Z3 sort) of `like`'s elements, broadcast to its shape."""
    if like.dtype == object:
        return vmap(lambda t: const(v, t), like)
    return np.full(like.shape, v, dtype=like.dtype)


def clip_bias(x: Array, bias: Array | None, b: float) -> Array:
    """ORT's clip_add_bias (min(b, x + bias) then max(-b, ·): NaN becomes b) or, without a
    bias, clip_ignore_bias (b where x > b, -b where x < -b, else x)."""
    lim, neg = scalar(b, x), scalar(-b, x)
    if bias is not None:
        x = x + bias
        x = where(less(x, lim), x, lim)
        return where(less(neg, x), x, neg)
    return where(less(lim, x), lim, where(less(x, neg), neg, x))


def ones(like: Array) -> Array:
    return scalar(1.0, like)


# -- the recurrence -------------------------------------------------------------------------
Step = Callable[[OpCall, int, Array, list[Array], dict[str, Array | None]], list[Array]]
"""One cell step of direction d: (call, d, gates X_t·Wᵀ for the batch, states, weights) ->
new states (h first)."""


def acts_of(call: OpCall, d: int) -> list[str]:
    """The activations of direction d (the defaults, or the attribute's d-th group)."""
    op, given = op_of(call), call.attr("activations", "") or ""
    k = len(DEFAULT_ACTS[op])
    listed = given.split(",") if isinstance(given, str) else [str(a) for a in given]
    names = listed if listed and listed[0] else list(DEFAULT_ACTS[op]) * 2
    return names[d * k : d * k + k] if len(names) >= (d + 1) * k else names[:k]


def seq_lens(arr: Array | None, batch: int, seq: int) -> list[int]:
    if arr is None:
        return [seq] * batch
    out = []
    for v in np.asarray(arr).reshape(-1):
        if z3.is_expr(v):
            v = z3.simplify(v)
            if not z3.is_bv_value(v):
                raise ValueError("recurrent op: Z3 semantics need sequence_lens as numerals")
            v = v.as_signed_long()
        out.append(int(v))
    return out


def run(call: OpCall, arrays: list[Array | None], step: Step, n_states: int) -> list[Array]:
    """Y, Y_h (and Y_c) over numbers or terms (module docstring)."""
    x, w, r = arrays[0], arrays[1], arrays[2]
    assert x is not None and w is not None and r is not None
    if int(call.attr("layout", 0)):  # batch first: X (batch, seq, ·), states (batch, D, H)
        x = np.swapaxes(x, 0, 1)
        arrays = [
            a if a is None or i not in (5, 6) else np.swapaxes(a, 0, 1)
            for i, a in enumerate(arrays)
        ]
    seq, batch, _ = x.shape
    hidden, dirs = r.shape[2], n_dirs(call)
    lens = seq_lens(arrays[4] if len(arrays) > 4 else None, batch, seq)
    y = np.stack([_zeros(x, batch, hidden)] * seq * dirs).reshape(seq, dirs, batch, hidden)
    finals: list[list[Array]] = [[] for _ in range(n_states)]
    for d in range(dirs):
        reverse = d == 1 or call.attr("direction", "forward") == "reverse"
        weights = {"W": w[d], "R": r[d]}
        for i, key in ((3, "B"), (7, "P")):
            arr = arrays[i] if len(arrays) > i else None
            weights[key] = None if arr is None else arr[d]
        states = []
        for i in range(n_states):
            init = arrays[5 + i] if len(arrays) > 5 + i else None
            states.append(init[d].copy() if init is not None else _zeros(x, batch, hidden))
        xw = np.matmul(x, w[d].T)  # (seq, batch, G·H): the input GEMM over all steps
        for b in range(batch):
            row = [s[b : b + 1] for s in states]
            order = range(lens[b] - 1, -1, -1) if reverse else range(lens[b])
            for t in order:
                row = step(call, d, xw[t, b : b + 1], row, weights)
                y[t, d, b] = row[0][0]
            for i in range(n_states):
                states[i][b] = row[i][0]
        for i in range(n_states):
            finals[i].append(states[i])
    outs = [y] + [np.stack(f) for f in finals]
    if int(call.attr("layout", 0)):
        outs = [np.transpose(outs[0], (2, 0, 1, 3))] + [np.swapaxes(o, 0, 1) for o in outs[1:]]
    return outs


def _zeros(x: Array, batch: int, hidden: int) -> Array:
    like = np.empty((batch, hidden), dtype=x.dtype)
    if x.dtype == object:
        first = x.flat[0]
        like[...] = const(0, first) if z3.is_expr(first) else 0.0
        return like
    return np.zeros((batch, hidden), dtype=x.dtype)


def step_rnn(call: OpCall, d: int, xw: Array, states: list[Array], wts: dict) -> list[Array]:
    """H' = f(clip(H·Rᵀ + (X_t·Wᵀ + (Wb + Rb)))) (rnn.cc: the input GEMM accumulated onto the
    summed bias rows, the recurrent GEMM's output plus that; clip, when the attribute is
    given, as max(min(x, clip), -clip): NaN kept)."""
    (h,) = states
    hidden = wts["R"].shape[1]
    if wts["B"] is not None:
        xw = xw + (wts["B"][:hidden] + wts["B"][hidden:])
    g = np.matmul(h, wts["R"].T) + xw
    clip = float(call.attr("clip", NO_CLIP))
    if clip != NO_CLIP:
        g = clip_bias(g, None, clip)
    return [act(acts_of(call, d)[0], g)]


def attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Proof/self-test values: forward and reverse, no clip, the default activations, H from
    R's last dim, every output."""
    r = inputs[2].shape if len(inputs) > 2 else None
    fixed: dict[str, list[Any]] = {
        "direction": ["forward", "reverse"],
        "clip": [NO_CLIP],
        "activations": [""],
        "layout": [0],
        "input_forget": [0],
        "linear_before_reset": [0, 1],
        "index": [0, 1],
    }
    if name == "hidden_size" and r is not None and isinstance(r[-1], int):
        return [r[-1]]
    return fixed.get(name)


def part_spec(op: str, step: Step, n_states: int) -> OpSpec:
    """The OpSpec of `<op>Part` (module docstring); `step` computes one cell step."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        out = run(call, arrays, step, n_states)[int(call.attr("index", 0))]
        return [np.asarray(out, dtype=x.dtype)]

    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        objs = [None if a is None else np.asarray(a, dtype=object) for a in arrays]
        return [run(call, objs, step, n_states)[int(call.attr("index", 0))]]

    return OpSpec(
        name=f"{op}Part",
        infer=infer_part,
        reference=reference,
        flops=part_flops,
        bytes=part_bytes,
        egg=EggSig(
            attrs=egg_attrs(op),
            n_inputs={"LSTM": 8, "GRU": 6, "RNN": 6}[op],
            optional={"LSTM": 5, "GRU": 3, "RNN": 3}[op],
            to_egg=to_egg,
            from_egg=from_egg,
        ),
        z3=semantics,
        input_dtypes=(None, None, None, None, (P.INT32,)),
        attr_values=attr_values,
        onnx_op=op,
        doc=f"{op}Part(...): output `index` of an ONNX {op} (`rewrite.ops.rnn`).",
    )


RNN_PART = register(part_spec("RNN", step_rnn, 1))


def _weights(op: str, dirs: int, size: int, hidden: int, seed: int) -> list[Array | None]:
    """W, R, B (and for LSTM no sequence_lens, initial_h, initial_c, P) of a listed case."""
    rng = np.random.default_rng(seed)
    g = GATES[op]

    def f(*shape: int) -> Array:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    out: list[Array | None] = [f(dirs, g * hidden, size), f(dirs, g * hidden, hidden)]
    out += [f(dirs, 2 * g * hidden), np.asarray([2, 1], np.int32), f(dirs, 2, hidden)]
    if op == "LSTM":
        out += [f(dirs, 2, hidden), f(dirs, 3 * hidden)]
    return out


SELF_TEST_VALUES: dict[str, list[tuple[dict[str, Any], tuple[int, ...] | None, list[Any]]]] = {
    f"{op}Part": [
        ({"hidden_size": 2}, (2, 2, 3), _weights(op, 1, 3, 2, 0)),
        (
            {"hidden_size": 2, "direction": "reverse", "clip": 1.5},
            (2, 2, 3),
            _weights(op, 1, 3, 2, 1),
        ),
        ({"hidden_size": 2, "direction": "bidirectional"}, (2, 2, 3), _weights(op, 2, 3, 2, 2)),
        ({"hidden_size": 2}, (2, 2, 3), _weights(op, 1, 3, 2, 3)[:2]),
    ]
    for op in GATES
}
"""Listed self-test cases (`verify.selftest_values`): X drawn (special values included), Y
compared; the weights, sequence_lens [2, 1] and initial states fixed (the sampling bound's
independent shapes never fit W, R and X together)."""
