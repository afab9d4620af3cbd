"""Sequence-model families built in code the way their exporters write them, for tests.

Each builder returns a small, checked model (`onnx.checker.check_model(full_check=True)`) with
seeded random weights; every node is named the way torch names it (`_Builder`, shared with
`tests/families.py`). Written by `torch.onnx.export` (TorchScript) at opset 17 unless stated:

- `whisper_encoder`: two Conv1d + erf-GELU, a sinusoidal position table added, pre-LN blocks
  whose attention is MatMul/Reshape/Transpose/Softmax with Reshape targets built from Shape.
- `gpt2_block`: token + position embeddings, `Conv1D` projections as Reshape/Gemm/Reshape, a
  causal mask sliced from a bool buffer and applied with Where, GELU in the tanh form with
  `Pow(x, 3)`.
- `rnn_unrolled` / `lstm_unrolled`: an RNN / LSTM cell unrolled over 8 steps with shared
  weights (`x_t W + h U + b`; the LSTM splits its gates with `Split`).
- `dynamo_decoder`: as the TorchDynamo exporter writes a decoder at opset 18: ReduceMean with
  an axes input, Split with `num_outputs`, a Trilu causal mask, CumSum position ids, Einsum
  attention; at opset 20 the MLP uses the standard `Gelu` op (erf form below 20).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from tests.families import _Builder

F32_MIN = float(np.finfo(np.float32).min)


def finish(
    b: _Builder,
    inputs: list[onnx.ValueInfoProto],
    outputs: dict[str, tuple[str, int, list[int | str]]],
) -> onnx.ModelProto:
    """The checked model of `b`'s nodes; `outputs`: graph name -> (value, dtype, shape)."""
    for name, (value, _, _) in outputs.items():
        b.nodes.append(h.make_node("Identity", [value], [name], name=f"/{name}/Identity"))
    outs = [h.make_tensor_value_info(n, dt, shape) for n, (_, dt, shape) in outputs.items()]
    graph = h.make_graph(b.nodes, "main_graph", inputs, outs, initializer=b.inits)
    ir = 9 if b.opset >= 19 else 8
    opsets = [h.make_opsetid("", b.opset)]
    m = h.make_model(graph, opset_imports=opsets, ir_version=ir, producer_name="pytorch")
    onnx.checker.check_model(m, full_check=True)
    return m


def op_n(b: _Builder, op_type: str, inputs: list[str], n_out: int, **attrs: object) -> list[str]:
    """Add one node with `n_out` outputs; returns their names."""
    b.op(op_type, inputs, n_out, **attrs)
    return list(b.nodes[-1].output)


def linear(b: _Builder, x: str, n_in: int, n_out: int, pre: str, bias: bool = True) -> str:
    """`nn.Linear`: MatMul with the transposed weight, then Add(bias, ...)."""
    y = b.op("MatMul", [x, b.weight(f"{pre}.weight", (n_in, n_out))])
    return b.op("Add", [b.weight(f"{pre}.bias", (n_out,), 0.05), y]) if bias else y


def layer_norm(b: _Builder, x: str, d: int, pre: str) -> str:
    """`nn.LayerNorm` over the last axis: one LayerNormalization node (opset 17+)."""
    w = numpy_helper.from_array(np.ones(d, np.float32) * 1.1, f"{pre}.weight")
    b.inits.append(w)
    return b.op("LayerNormalization", [x, w.name, b.weight(f"{pre}.bias", (d,), 0.05)], axis=-1)


def gelu_erf(b: _Builder, x: str) -> str:
    """x * 0.5 * (1 + erf(x / sqrt(2))), as torch writes `F.gelu`."""
    erf = b.op("Erf", [b.op("Div", [x, b.const(1.4142135381698608)])])
    return b.op("Mul", [b.op("Mul", [x, b.op("Add", [erf, b.const(1.0)])]), b.const(0.5)])


def split_heads(b: _Builder, x: str, heads: int, hd: int, static: tuple[int, int] | None) -> str:
    """(B, S, heads*hd) -> (B, heads, S, hd); the Reshape target from Shape unless `static`."""
    if static is None:
        shape = b.op("Concat", [b.dim(x, 0), b.dim(x, 1), b.ints(heads), b.ints(hd)], axis=0)
    else:
        shape = b.ints(*static, heads, hd)
    return b.op("Transpose", [b.op("Reshape", [x, shape])], perm=[0, 2, 1, 3])


def merge_heads(b: _Builder, x: str, ref: str, d: int, static: tuple[int, int] | None) -> str:
    """(B, heads, S, hd) -> (B, S, d), the batch and seq dims read from `ref` unless static."""
    x = b.op("Transpose", [x], perm=[0, 2, 1, 3])
    if static is None:
        shape = b.op("Concat", [b.dim(ref, 0), b.dim(ref, 1), b.ints(d)], axis=0)
    else:
        shape = b.ints(*static, d)
    return b.op("Reshape", [x, shape])


def self_attention(
    b: _Builder, x: str, d: int, heads: int, pre: str, static: tuple[int, int] | None = None
) -> str:
    """Multi-head self-attention as torch writes `nn.MultiheadAttention`-style modules."""
    hd = d // heads
    q = b.op("Mul", [linear(b, x, d, d, f"{pre}.q_proj"), b.const(float(hd**-0.5))])
    k = linear(b, x, d, d, f"{pre}.k_proj", bias=False)
    v = linear(b, x, d, d, f"{pre}.v_proj")
    q, k, v = (split_heads(b, t, heads, hd, static) for t in (q, k, v))
    scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    out = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    return linear(b, merge_heads(b, out, x, d, static), d, d, f"{pre}.out_proj")


def encoder_block(
    b: _Builder, x: str, d: int, heads: int, pre: str, static: tuple[int, int] | None = None
) -> str:
    """Pre-LN transformer block: x + attn(ln1(x)), then + fc2(gelu(fc1(ln2(x))))."""
    b.scope = f"/{pre}"
    x = b.op(
        "Add", [x, self_attention(b, layer_norm(b, x, d, f"{pre}.ln1"), d, heads, pre, static)]
    )
    hidden = gelu_erf(b, linear(b, layer_norm(b, x, d, f"{pre}.ln2"), d, 2 * d, f"{pre}.fc1"))
    return b.op("Add", [x, linear(b, hidden, 2 * d, d, f"{pre}.fc2")])


def _sinusoids(length: int, d: int) -> np.ndarray:
    """Whisper's position table: [sin(t * f_k) | cos(t * f_k)], f_k = 10000^(-k/(d/2-1))."""
    inc = np.log(10000.0) / (d // 2 - 1)
    inv = np.exp(-inc * np.arange(d // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


def whisper_encoder(
    seed: int = 0, mels: int = 8, frames: int = 16, d: int = 16, layers: int = 2
) -> onnx.ModelProto:
    """(batch, mels, frames) log-mel features -> (batch, frames/2, d) hidden states."""
    b = _Builder(17, np.random.default_rng(seed))
    b.scope = "/conv1"
    w1, b1 = b.weight("conv1.weight", (d, mels, 3)), b.weight("conv1.bias", (d,), 0.05)
    x = gelu_erf(b, b.op("Conv", ["input_features", w1, b1], kernel_shape=[3], pads=[1, 1]))
    b.scope = "/conv2"
    w2, b2 = b.weight("conv2.weight", (d, d, 3)), b.weight("conv2.bias", (d,), 0.05)
    conv2 = b.op("Conv", [x, w2, b2], kernel_shape=[3], pads=[1, 1], strides=[2])
    x = b.op("Transpose", [gelu_erf(b, conv2)], perm=[0, 2, 1])
    pos = numpy_helper.from_array(_sinusoids(frames // 2, d), "embed_positions.weight")
    b.inits.append(pos)
    x = b.op("Add", [x, pos.name])
    for i in range(layers):
        x = encoder_block(b, x, d, 4, f"layers.{i}")
    b.scope = "/layer_norm"
    x = layer_norm(b, x, d, "layer_norm")
    feats = h.make_tensor_value_info("input_features", T.FLOAT, ["batch", mels, frames])
    return finish(b, [feats], {"last_hidden_state": (x, T.FLOAT, ["batch", frames // 2, d])})


def _conv1d(b: _Builder, x: str, d_in: int, d_out: int, pre: str) -> str:
    """GPT-2's `Conv1D` (addmm): Reshape to 2-D, Gemm, Reshape back."""
    flat = b.op("Reshape", [x, b.ints(-1, d_in)])
    y = b.op(
        "Gemm",
        [flat, b.weight(f"{pre}.weight", (d_in, d_out)), b.weight(f"{pre}.bias", (d_out,), 0.05)],
    )
    shape = b.op("Concat", [b.dim(x, 0), b.dim(x, 1), b.ints(d_out)], axis=0)
    return b.op("Reshape", [y, shape])


def _gelu_tanh(b: _Builder, x: str) -> str:
    """GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    cube = b.op("Mul", [b.const(0.044715), b.op("Pow", [x, b.const(3.0)])])
    inner = b.op("Mul", [b.const(0.7978845608028654), b.op("Add", [x, cube])])
    one_plus = b.op("Add", [b.const(1.0), b.op("Tanh", [inner])])
    return b.op("Mul", [b.op("Mul", [b.const(0.5), x]), one_plus])


def _gpt2_attention(b: _Builder, x: str, d: int, heads: int, max_pos: int) -> str:
    hd = d // heads
    qkv = _conv1d(b, x, d, 3 * d, "h.0.attn.c_attn")
    q, k, v = (
        split_heads(b, t, heads, hd, None)
        for t in op_n(b, "Split", [qkv, b.ints(d, d, d)], 3, axis=2)
    )
    scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.op("Div", [scores, b.const(float(np.sqrt(hd)))])
    seq = b.dim(x, 1)
    causal = numpy_helper.from_array(
        np.tril(np.ones((1, 1, max_pos, max_pos), bool)), "h.0.attn.bias"
    )
    b.inits.append(causal)
    mask = b.op("Slice", [causal.name, b.ints(0), seq, b.ints(2), b.ints(1)])
    mask = b.op("Slice", [mask, b.ints(0), seq, b.ints(3), b.ints(1)])
    scores = b.op("Where", [mask, scores, b.const(F32_MIN)])
    out = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    return _conv1d(b, merge_heads(b, out, x, d, None), d, d, "h.0.attn.c_proj")


def gpt2_block(seed: int = 0, vocab: int = 48, d: int = 16, max_pos: int = 16) -> onnx.ModelProto:
    """input_ids (batch, seq) -> logits (batch, seq, vocab): embeddings, one block, ln_f."""
    b = _Builder(17, np.random.default_rng(seed))
    b.scope = "/transformer"
    seq = b.op("Gather", [b.op("Shape", ["input_ids"]), b.const(1)], axis=0)
    pos = b.unsqueeze(b.op("Range", [b.const(0), seq, b.const(1)]), 0)
    wte, wpe = b.weight("wte.weight", (vocab, d), 1.0), b.weight("wpe.weight", (max_pos, d), 0.5)
    x = b.op("Add", [b.op("Gather", [wte, "input_ids"]), b.op("Gather", [wpe, pos])])
    b.scope = "/transformer/h.0"
    x = b.op("Add", [x, _gpt2_attention(b, layer_norm(b, x, d, "h.0.ln_1"), d, 4, max_pos)])
    hidden = _gelu_tanh(b, _conv1d(b, layer_norm(b, x, d, "h.0.ln_2"), d, 4 * d, "h.0.mlp.c_fc"))
    x = b.op("Add", [x, _conv1d(b, hidden, 4 * d, d, "h.0.mlp.c_proj")])
    b.scope = "/transformer/ln_f"
    x = b.op("MatMul", [layer_norm(b, x, d, "ln_f"), b.weight("lm_head.weight", (d, vocab))])
    ids = h.make_tensor_value_info("input_ids", T.INT64, ["batch", "seq"])
    return finish(b, [ids], {"logits": (x, T.FLOAT, ["batch", "seq", vocab])})


def _unrolled_inputs(b: _Builder, n_in: int, steps: int) -> tuple[list[str], str]:
    """x_t = x[:, t] for each step (Gather of a scalar index), and h0 = zeros(batch, hidden)."""
    xs = [b.op("Gather", ["x", b.const(t)], axis=1) for t in range(steps)]
    return xs, b.dim("x", 0)


def _zeros(b: _Builder, batch: str, hidden: int) -> str:
    shape = b.op("Concat", [batch, b.ints(hidden)], axis=0)
    zero = numpy_helper.from_array(np.zeros(1, np.float32))
    return b.op("ConstantOfShape", [shape], value=zero)


def rnn_unrolled(seed: int = 0, n_in: int = 6, hidden: int = 8, steps: int = 8) -> onnx.ModelProto:
    """x (batch, steps, n_in) -> all h stacked (batch, steps, hidden):
    h_t = tanh(x_t W + h_{t-1} U + b), h_0 = 0, W/U/b shared by every step."""
    b = _Builder(17, np.random.default_rng(seed))
    w, u = b.weight("cell.W", (n_in, hidden), 0.4), b.weight("cell.U", (hidden, hidden), 0.4)
    bias = b.weight("cell.b", (hidden,), 0.1)
    xs, batch = _unrolled_inputs(b, n_in, steps)
    hs, hid = [], _zeros(b, batch, hidden)
    for t, x_t in enumerate(xs):
        b.scope = f"/step.{t}"
        pre = b.op("Add", [b.op("MatMul", [x_t, w]), b.op("MatMul", [hid, u])])
        hid = b.op("Tanh", [b.op("Add", [pre, bias])])
        hs.append(b.unsqueeze(hid, 1))
    b.scope = ""
    out = b.op("Concat", hs, axis=1)
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", steps, n_in])
    return finish(b, [x], {"hidden_states": (out, T.FLOAT, ["batch", steps, hidden])})


def lstm_unrolled(seed: int = 0, n_in: int = 6, hidden: int = 8, steps: int = 8) -> onnx.ModelProto:
    """x (batch, steps, n_in) -> (h_T, c_T): gates = x_t W + h U + b split into i, f, g, o;
    c = sigmoid(f) * c + sigmoid(i) * tanh(g); h = sigmoid(o) * tanh(c)."""
    b = _Builder(17, np.random.default_rng(seed))
    w = b.weight("cell.W", (n_in, 4 * hidden), 0.4)
    u = b.weight("cell.U", (hidden, 4 * hidden), 0.4)
    bias = b.weight("cell.b", (4 * hidden,), 0.1)
    xs, batch = _unrolled_inputs(b, n_in, steps)
    hid = cell = _zeros(b, batch, hidden)
    for t, x_t in enumerate(xs):
        b.scope = f"/step.{t}"
        gates = b.op(
            "Add", [b.op("Add", [b.op("MatMul", [x_t, w]), b.op("MatMul", [hid, u])]), bias]
        )
        i, f, g, o = op_n(b, "Split", [gates, b.ints(*[hidden] * 4)], 4, axis=1)
        keep = b.op("Mul", [b.op("Sigmoid", [f]), cell])
        cell = b.op("Add", [keep, b.op("Mul", [b.op("Sigmoid", [i]), b.op("Tanh", [g])])])
        hid = b.op("Mul", [b.op("Sigmoid", [o]), b.op("Tanh", [cell])])
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", steps, n_in])
    outs = {"h": (hid, T.FLOAT, ["batch", hidden]), "c": (cell, T.FLOAT, ["batch", hidden])}
    return finish(b, [x], outs)


def _dynamo_attention(b: _Builder, x: str, mask: str, d: int, heads: int) -> str:
    """Einsum attention with a boolean causal mask; q, k, v from one Split(num_outputs=3)."""
    hd = d // heads
    qkv = b.op("MatMul", [x, b.weight("attn.qkv.weight", (d, 3 * d))])
    q, k, v = (
        b.op("Transpose", [b.op("Reshape", [t, b.ints(0, 0, heads, hd)])], perm=[0, 2, 1, 3])
        for t in op_n(b, "Split", [qkv], 3, axis=-1, num_outputs=3)
    )
    scores = b.op("Einsum", [q, k], equation="bhqd,bhkd->bhqk")
    scores = b.op(
        "Where", [mask, b.op("Mul", [scores, b.const(float(hd**-0.5))]), b.const(F32_MIN)]
    )
    out = b.op("Einsum", [b.op("Softmax", [scores], axis=-1), v], equation="bhqk,bhkd->bhqd")
    out = b.op("Reshape", [b.op("Transpose", [out], perm=[0, 2, 1, 3]), b.ints(0, 0, d)])
    return b.op("MatMul", [out, b.weight("attn.o.weight", (d, d))])


def _rms_norm(b: _Builder, x: str, d: int, pre: str) -> str:
    var = b.reduce_mean(b.op("Pow", [x, b.const(2.0)]), -1)
    y = b.op("Mul", [x, b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [var, b.const(1e-6)])])])])
    return b.op("Mul", [y, b.weight(f"{pre}.weight", (d,), 0.1)])


def dynamo_decoder(opset: int = 18, seed: int = 0, vocab: int = 48, d: int = 16) -> onnx.ModelProto:
    """input_ids, attention_mask (batch, seq) -> logits: positions = cumsum(mask) - 1, a
    Trilu(ones(seq, seq)) causal mask, one RMSNorm/attention/MLP block, an lm head."""
    b = _Builder(opset, np.random.default_rng(seed))
    pos = b.op("Sub", [b.op("CumSum", ["attention_mask", b.const(1)]), b.const(1)])
    x = b.op(
        "Add",
        [
            b.op("Gather", [b.weight("embed.weight", (vocab, d), 1.0), "input_ids"]),
            b.op("Gather", [b.weight("pos.weight", (64, d), 0.5), pos]),
        ],
    )
    seq = b.dim("input_ids", 1)
    ones = b.op(
        "ConstantOfShape",
        [b.op("Concat", [seq, seq], axis=0)],
        value=numpy_helper.from_array(np.ones(1, np.float32)),
    )
    mask = b.op("Cast", [b.op("Trilu", [ones], upper=0)], to=T.BOOL)
    x = b.op("Add", [x, _dynamo_attention(b, _rms_norm(b, x, d, "ln1"), mask, d, 4)])
    up = b.op("MatMul", [_rms_norm(b, x, d, "ln2"), b.weight("mlp.up.weight", (d, 2 * d))])
    act = b.op("Gelu", [up], approximate="none") if opset >= 20 else gelu_erf(b, up)
    x = b.op("Add", [x, b.op("MatMul", [act, b.weight("mlp.down.weight", (2 * d, d))])])
    logits = b.op("MatMul", [_rms_norm(b, x, d, "norm"), b.weight("lm_head.weight", (d, vocab))])
    ids = [
        h.make_tensor_value_info(n, T.INT64, ["batch", "seq"])
        for n in ("input_ids", "attention_mask")
    ]
    return finish(b, ids, {"logits": (logits, T.FLOAT, ["batch", "seq", vocab])})
