"""Model families built in code the way their exporters write them, for tests to share.

`llama_decoder` is a Llama-family decoder as `torch.onnx.export` (TorchScript, opset 17/18)
writes it: RMSNorm as Cast/Pow/ReduceMean/Add/Sqrt/Div/Mul, rotary embeddings with cos/sin
computed from position ids and the `rotate_half` Slice/Neg/Concat whose split point is
`Shape // 2` (a computed Slice bound, an INT64_MAX end), a causal mask from Range/Less/Where,
grouped-query attention with the Unsqueeze/Expand/Reshape of K/V, a SwiGLU MLP (SiLU as
Sigmoid * x), and every Reshape target assembled from Shape/Gather/Unsqueeze/Concat. Small
constants are `Constant` nodes (as torch writes them), weights are seeded random initializers.
Inputs: `input_ids` int64 (batch, seq); output: `logits` float (batch, seq, vocab).

Two export variants torch also writes: `static=(batch, seq)` (no dynamic axes: every shape is
static, so constant folding turns the shape arithmetic into constants) and
`folded_split=True` (rotate_half's split point already a `Constant`, as torch writes it when
head_dim is static: `Slice(x, [d/2], [INT64_MAX], [-1], [1])`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes of the decoder; `heads` must be a multiple of `kv_heads`."""

    vocab: int = 64
    hidden: int = 32
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 64
    layers: int = 2
    eps: float = 1e-6
    theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass
class _Builder:
    """Appends nodes named as torch names them (`/scope/Op_k`, output `..._output_0`)."""

    opset: int
    rng: np.random.Generator
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    scope: str = ""
    split: int | None = None
    """rotate_half's split point as a constant (None: computed from Shape // 2)."""

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: object) -> str:
        """Add one node; returns its first output's name."""
        base = f"{self.scope}/{op_type}"
        k = self.counts.get(base, 0)
        self.counts[base] = k + 1
        name = base if k == 0 else f"{base}_{k}"
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(h.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0]

    def const(self, value: np.ndarray | int | float) -> str:
        """A `Constant` node (int -> int64, float -> float32 scalars)."""
        if isinstance(value, int):
            value = np.array(value, dtype=np.int64)
        elif isinstance(value, float):
            value = np.array(value, dtype=np.float32)
        return self.op("Constant", [], value=numpy_helper.from_array(np.asarray(value)))

    def ints(self, *values: int) -> str:
        return self.const(np.array(values, dtype=np.int64))

    def weight(self, name: str, shape: tuple[int, ...], scale: float = 0.2) -> str:
        arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def dim(self, x: str, i: int) -> str:
        """`x.shape[i]` as a 1-element int64 vector (Shape -> Gather -> Unsqueeze)."""
        return self.unsqueeze(self.op("Gather", [self.op("Shape", [x]), self.const(i)], axis=0), 0)

    def unsqueeze(self, x: str, axis: int) -> str:
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.ints(axis)])
        return self.op("Unsqueeze", [x], axes=[axis])  # pragma: no cover

    def reduce_mean(self, x: str, axis: int) -> str:
        """ReduceMean over one axis, keepdims: axes attribute before opset 18, input from 18."""
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.ints(axis)], keepdims=1)
        return self.op("ReduceMean", [x], axes=[axis], keepdims=1)


def _rms_norm(b: _Builder, x: str, weight: str, eps: float) -> str:
    x = b.op("Cast", [x], to=T.FLOAT)
    var = b.reduce_mean(b.op("Pow", [x, b.const(2.0)]), -1)
    inv = b.op("Div", [b.const(1.0), b.op("Sqrt", [b.op("Add", [var, b.const(eps)])])])
    return b.op("Mul", [weight, b.op("Cast", [b.op("Mul", [x, inv])], to=T.FLOAT)])


def _rotate_half(b: _Builder, x: str) -> str:
    """cat(-x[..., d//2:], x[..., :d//2]): the split point computed from Shape, or `b.split`."""
    if b.split is not None:
        x1 = b.op("Slice", [x, b.ints(0), b.ints(b.split), b.ints(-1), b.ints(1)])
        x2 = b.op("Slice", [x, b.ints(b.split), b.ints(INT64_MAX), b.ints(-1), b.ints(1)])
        return b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
    half = b.unsqueeze(
        b.op("Div", [b.op("Gather", [b.op("Shape", [x]), b.const(3)]), b.const(2)]), 0
    )
    x1 = b.op("Slice", [x, b.ints(0), half, b.ints(3), b.ints(1)])
    x2 = b.op("Slice", [x, half, b.ints(INT64_MAX), b.ints(3), b.ints(1)])
    return b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)


def _rotary_tables(b: _Builder, ids: str, cfg: LlamaConfig) -> tuple[str, str]:
    """cos, sin of shape (1, 1, seq, head_dim) from position ids = arange(seq)."""
    b.scope = "/model/rotary_emb"
    seq = b.op("Gather", [b.op("Shape", [ids]), b.const(1)], axis=0)
    pos = b.op("Range", [b.const(0), seq, b.const(1)])
    pos = b.op("Cast", [b.unsqueeze(b.unsqueeze(pos, 0), 1)], to=T.FLOAT)  # (1, 1, seq)
    d = cfg.head_dim
    inv = 1.0 / cfg.theta ** (np.arange(0, d, 2, dtype=np.float32) / d)
    inv_freq = b.const(inv.astype(np.float32).reshape(1, d // 2, 1))
    freqs = b.op("Transpose", [b.op("MatMul", [inv_freq, pos])], perm=[0, 2, 1])
    emb = b.op("Concat", [freqs, freqs], axis=-1)  # (1, seq, d)
    cos = b.unsqueeze(b.op("Cos", [emb]), 1)
    sin = b.unsqueeze(b.op("Sin", [emb]), 1)
    return cos, sin


def _causal_mask(b: _Builder, ids: str) -> str:
    """(1, 1, seq, seq): 0 where key <= query, float32 min above the diagonal."""
    b.scope = "/model"
    seq = b.op("Gather", [b.op("Shape", [ids]), b.const(1)], axis=0)
    r = b.op("Range", [b.const(0), seq, b.const(1)])
    rows = b.op(
        "Reshape",
        [b.op("Add", [r, b.const(1)]), b.op("Concat", [b.unsqueeze(seq, 0), b.ints(1)], axis=0)],
    )
    keep = b.op("Less", [r, rows])  # (seq, seq): key < query + 1
    neg = b.const(np.float32(np.finfo(np.float32).min))
    mask = b.op("Where", [keep, b.const(0.0), neg])
    return b.unsqueeze(b.unsqueeze(mask, 0), 0)


def _heads(b: _Builder, x: str, n: int, d: int) -> str:
    """(B, S, n*d) -> (B, n, S, d) with a Reshape target built from Shape."""
    shape = b.op("Concat", [b.dim(x, 0), b.dim(x, 1), b.ints(n), b.ints(d)], axis=0)
    return b.op("Transpose", [b.op("Reshape", [x, shape])], perm=[0, 2, 1, 3])


def _repeat_kv(b: _Builder, x: str, n_rep: int) -> str:
    """(B, kv, S, d) -> (B, kv*n_rep, S, d): Unsqueeze, Expand, Reshape (repeat_kv)."""
    dims = [b.dim(x, i) for i in range(4)]
    expanded = b.op("Concat", [dims[0], dims[1], b.ints(n_rep), dims[2], dims[3]], axis=0)
    x = b.op("Expand", [b.unsqueeze(x, 2), expanded])
    heads = b.op("Mul", [dims[1], b.ints(n_rep)])
    return b.op("Reshape", [x, b.op("Concat", [dims[0], heads, dims[2], dims[3]], axis=0)])


def _attention(
    b: _Builder, x: str, rope: tuple[str, str], mask: str, cfg: LlamaConfig, i: int
) -> str:
    pre = f"model.layers.{i}.self_attn"
    d, hd = cfg.hidden, cfg.head_dim
    q = b.op("MatMul", [x, b.weight(f"{pre}.q_proj.weight", (d, cfg.heads * hd))])
    k = b.op("MatMul", [x, b.weight(f"{pre}.k_proj.weight", (d, cfg.kv_heads * hd))])
    v = b.op("MatMul", [x, b.weight(f"{pre}.v_proj.weight", (d, cfg.kv_heads * hd))])
    q, k, v = (
        _heads(b, q, cfg.heads, hd),
        _heads(b, k, cfg.kv_heads, hd),
        _heads(b, v, cfg.kv_heads, hd),
    )
    cos, sin = rope
    q = b.op("Add", [b.op("Mul", [q, cos]), b.op("Mul", [_rotate_half(b, q), sin])])
    k = b.op("Add", [b.op("Mul", [k, cos]), b.op("Mul", [_rotate_half(b, k), sin])])
    k, v = _repeat_kv(b, k, cfg.heads // cfg.kv_heads), _repeat_kv(b, v, cfg.heads // cfg.kv_heads)
    scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.op("Add", [b.op("Div", [scores, b.const(float(np.sqrt(hd)))]), mask])
    probs = b.op("Cast", [b.op("Softmax", [scores], axis=-1)], to=T.FLOAT)
    out = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    out = b.op("Reshape", [out, b.op("Concat", [b.dim(x, 0), b.dim(x, 1), b.ints(d)], axis=0)])
    return b.op("MatMul", [out, b.weight(f"{pre}.o_proj.weight", (d, d))])


def _mlp(b: _Builder, x: str, cfg: LlamaConfig, i: int) -> str:
    pre = f"model.layers.{i}.mlp"
    gate = b.op("MatMul", [x, b.weight(f"{pre}.gate_proj.weight", (cfg.hidden, cfg.intermediate))])
    silu = b.op("Mul", [gate, b.op("Sigmoid", [gate])])
    up = b.op("MatMul", [x, b.weight(f"{pre}.up_proj.weight", (cfg.hidden, cfg.intermediate))])
    down = b.weight(f"{pre}.down_proj.weight", (cfg.intermediate, cfg.hidden))
    return b.op("MatMul", [b.op("Mul", [silu, up]), down])


def _layer(b: _Builder, x: str, rope: tuple[str, str], mask: str, cfg: LlamaConfig, i: int) -> str:
    b.scope = f"/model/layers.{i}"
    ones = np.ones(cfg.hidden, dtype=np.float32)
    w_in = f"model.layers.{i}.input_layernorm.weight"
    w_post = f"model.layers.{i}.post_attention_layernorm.weight"
    b.inits += [numpy_helper.from_array(ones, w_in), numpy_helper.from_array(ones * 0.9, w_post)]
    x = b.op("Add", [x, _attention(b, _rms_norm(b, x, w_in, cfg.eps), rope, mask, cfg, i)])
    return b.op("Add", [x, _mlp(b, _rms_norm(b, x, w_post, cfg.eps), cfg, i)])


def llama_decoder(
    opset: int = 17,
    cfg: LlamaConfig | None = None,
    seed: int = 0,
    *,
    static: tuple[int, int] | None = None,
    folded_split: bool = False,
) -> onnx.ModelProto:
    """A checked Llama-family decoder (see the module docstring); weights seeded by `seed`.

    `static`: fixed (batch, seq) instead of symbolic dims; `folded_split`: rotate_half's split
    point written as a constant with an INT64_MAX end instead of computed from Shape.
    """
    cfg = cfg or LlamaConfig()
    b = _Builder(opset, np.random.default_rng(seed))
    b.split = cfg.head_dim // 2 if folded_split else None
    ids = "input_ids"
    b.scope = "/model/embed_tokens"
    embed = b.weight("model.embed_tokens.weight", (cfg.vocab, cfg.hidden), 1.0)
    x = b.op("Gather", [embed, ids], axis=0)
    rope = _rotary_tables(b, ids, cfg)
    mask = _causal_mask(b, ids)
    for i in range(cfg.layers):
        x = _layer(b, x, rope, mask, cfg, i)
    b.scope = "/model/norm"
    norm = numpy_helper.from_array(np.ones(cfg.hidden, dtype=np.float32), "model.norm.weight")
    b.inits.append(norm)
    x = _rms_norm(b, x, norm.name, cfg.eps)
    b.scope = "/lm_head"
    b.op("MatMul", [x, b.weight("lm_head.weight", (cfg.hidden, cfg.vocab))])
    b.nodes[-1].output[0] = "logits"
    batch, seq = static if static is not None else ("batch", "seq")
    graph = h.make_graph(
        b.nodes,
        "main_graph",
        [h.make_tensor_value_info(ids, T.INT64, [batch, seq])],
        [h.make_tensor_value_info("logits", T.FLOAT, [batch, seq, cfg.vocab])],
        initializer=b.inits,
    )
    opsets = [h.make_opsetid("", opset)]
    m = h.make_model(graph, opset_imports=opsets, ir_version=8, producer_name="pytorch")
    onnx.checker.check_model(m, full_check=True)
    return m
