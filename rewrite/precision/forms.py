"""Low-precision forms: approximate rewrites, where each applies, and its error model.

Every form below applies to MatMul(A, W) and Gemm(A, W, b) with W a constant float32 matrix
(Gemm with alpha = beta = 1, transA = 0, b absent or of shape (N,)); `candidates` lists each
(op, form) pair, and the pass picks at most one form per op.

`int8_dynamic`:

    MatMul(A, W)            ≈ DynamicQuantizeMatMul(A, q(W), s(W))
    Gemm(A, W, b)           ≈ DynamicQuantizeMatMul(A, q(Wᵀ if transB else W), s(·), ·, b)

with W a constant float32 matrix (K, N): per output column j, s_j = max_i |W_ij| / 127 and
q(W)_ij = clip(round(W_ij / s_j), -127, 127) as int8 (symmetric, zero point 0); ORT quantizes
A per tensor to uint8 at run time. Error model: the weight error is at most s_j / 2 per
element and A's at most (max A - min A) / 510, so
|ΔY_ij| ≤ Σ_k (|A_ik| s_j / 2 + |W_kj| (max A - min A) / 510): an estimate the pass does not
trust; each candidate's error is measured (`sensitivity.py`).

`int8_block`:

    MatMul(A, W)            ≈ MatMulNBits(A, q₈(W), s(W); bits=8, block_size=32,
                                          accuracy_level=4)

W quantized per column in blocks of `BLOCK` rows (scale max |W| / 127, zero point 128);
accuracy level 4 quantizes A to int8 per block of 32 at run time, so an outlier channel of A
costs one block, not the whole tensor: more accurate than `int8_dynamic`, and ORT's kernel
for it is fast at a few rows (decoding one token), slow at many (`kernels.py` prices both).

`int4_block`: the same with 4 bits (scale max |W| / 7, zero point 8, two values per byte, low
nibble first): weight-only int4 as decoders ship it; a quarter of float32's weight traffic,
about ten times `int8_block`'s error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewrite.precision import static

MS = "com.microsoft"
FORMS = ("int8_dynamic", "int8_block", "int4_block", "int8_static")
MATMUL_FORMS = ("int8_dynamic", "int8_block", "int4_block")
"""The forms of MatMul and Gemm; `int8_static` is Conv's, Add's and MaxPool's (`static.py`)."""
STANDARD_FORMS = ("int8_static",)
"""The forms written with standard ONNX ops only (QuantizeLinear / DequantizeLinear): the
ones `--target portable` may choose; the MatMul forms are ONNX Runtime's contrib ops."""
BITS = {"int8_block": 8, "int4_block": 4}
"""The MatMulNBits forms and their bits."""
BLOCK = 32
Fresh = Callable[[str], str]
"""Makes a value name unused in the graph from a hint."""


@dataclass(frozen=True)
class Candidate:
    """One op that has a low-precision form: the node (by name), its form and its sizes."""

    index: int
    """Position in the main graph's node list."""
    node: str
    """The node's name (`#index` when it has none)."""
    op: str
    form: str
    activation: str
    """The value name of A."""
    weight: str
    """The initializer holding W."""
    k: int
    n: int
    transposed: bool
    """Gemm with transB = 1: W is stored (N, K)."""
    attrs: str = ""
    """A Conv's attributes (`static.attrs_key`): with `wshape`, what its kernel time depends on."""
    wshape: tuple[int, ...] = ()
    """A Conv's weight shape (C_out, C_in / group, kernel...); () for MatMul and Gemm."""
    output: str = ""
    """The value name of the op's output (`int8_static`: of the Relu its output quantization
    takes in, `static.relu_readers`, where it has one)."""
    relu: int = -1
    """`int8_static`: the index of that Relu node (dropped when the Conv is lowered), else -1."""
    operand: str = ""
    """An Add's second operand (the first is `activation`); "" for the other ops."""

    @property
    def key(self) -> tuple[int, str]:
        return (self.index, self.form)

    def to_json(self) -> dict[str, object]:
        """The report's entry: node, op and form; the weight and its K x N where the op has
        one; a folded Relu's output where the form took one in."""
        out: dict[str, object] = {"node": self.node, "op": self.op, "form": self.form}
        if self.weight:
            out |= {"weight": self.weight, "k": self.k, "n": self.n}
        if self.relu >= 0:
            out["relu_folded"] = self.output
        return out


def _attrs(node: onnx.NodeProto) -> dict[str, object]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def candidates(model: onnx.ModelProto, forms: tuple[str, ...] = FORMS) -> list[Candidate]:
    """Every (node, form) of the main graph's nodes the forms apply to (module docstring and
    `static.py`; Conv forms need opset `static.MIN_OPSET`)."""
    inits = {t.name: t for t in model.graph.initializer}
    out: list[Candidate] = []
    matmul_forms = tuple(f for f in forms if f in MATMUL_FORMS)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    convs = static.FORM in forms and opset >= static.MIN_OPSET
    relus = static.relu_readers(model.graph) if convs else {}
    types = static.value_types(model) if convs else {}
    for index, node in enumerate(model.graph.node):
        name = node.name or f"#{index}"
        if convs and static.add_fits(node, inits, types):
            relu, y = relus.get(node.output[0], (-1, node.output[0]))
            out.append(
                Candidate(
                    index, name, "Add", static.FORM, node.input[0], "", 0, 0, False,
                    output=y, relu=relu, operand=node.input[1],
                )
            )  # fmt: skip
        elif convs and static.maxpool_fits(node, types):
            out.append(
                Candidate(
                    index, name, "MaxPool", static.FORM, node.input[0], "", 0, 0, False,
                    static.attrs_key(node), output=node.output[0],
                )
            )  # fmt: skip
        elif convs and static.conv_fits(node, inits):
            dims = tuple(inits[node.input[1]].dims)
            relu, y = relus.get(node.output[0], (-1, node.output[0]))
            out.append(
                Candidate(
                    index, name, "Conv", static.FORM, node.input[0], node.input[1],
                    int(np.prod(dims[1:])), dims[0], False, static.attrs_key(node), dims,
                    y, relu,
                )
            )  # fmt: skip
        elif matmul_forms:
            out += _matmul_candidates(index, name, node, inits, matmul_forms)
    return out


def _matmul_candidates(
    index: int,
    name: str,
    node: onnx.NodeProto,
    inits: dict[str, onnx.TensorProto],
    forms: tuple[str, ...],
) -> list[Candidate]:
    """The (node, form) candidates of one MatMul or Gemm node (module docstring)."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in ("MatMul", "Gemm"):
        return []
    if len(node.input) < 2 or node.input[1] not in inits:
        return []
    w = inits[node.input[1]]
    if w.data_type != onnx.TensorProto.FLOAT or len(w.dims) != 2:
        return []
    transposed = False
    if node.op_type == "Gemm":
        a = _attrs(node)
        if a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0 or a.get("transA", 0):
            return []
        transposed = bool(a.get("transB", 0))
        n = w.dims[0] if transposed else w.dims[1]
        if len(node.input) > 2 and node.input[2]:
            b = inits.get(node.input[2])
            if b is None or list(b.dims) != [n] or b.data_type != onnx.TensorProto.FLOAT:
                return []
    k, n = (w.dims[1], w.dims[0]) if transposed else (w.dims[0], w.dims[1])
    return [
        Candidate(
            index, name, node.op_type, form, node.input[0], w.name, k, n, transposed,
            output=node.output[0],
        )
        for form in forms
    ]  # fmt: skip


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(q, s): int8 (K, N) and float32 (N,) with w ≈ q · s per column (module docstring)."""
    w = np.asarray(w, np.float32)
    scale = np.max(np.abs(w), axis=0) / np.float32(127.0)
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, scale


def quantize_blocks(
    w: np.ndarray, block: int = BLOCK, bits: int = 8
) -> tuple[np.ndarray, np.ndarray]:
    """(q, s) for MatMulNBits: q uint8 (N, K/block, block · bits / 8), s float32 (N · K/block,)
    with w[k, n] ≈ (v[n, k // block, k % block] - 2^(bits-1)) · s[n, k // block], v the
    unpacked values (4 bits: two per byte, low nibble first); K padded with zeros."""
    w = np.asarray(w, np.float32)
    k, n = w.shape
    nb = -(-k // block)
    padded = np.zeros((nb * block, n), np.float32)
    padded[:k] = w
    blocks = padded.T.reshape(n, nb, block)
    top = (1 << (bits - 1)) - 1  # 127 or 7
    scale = np.max(np.abs(blocks), axis=-1) / np.float32(top)
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    zero = top + 1
    q = np.clip(np.rint(blocks / scale[..., None]) + zero, zero - top, zero + top).astype(np.uint8)
    if bits == 4:
        q = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    return q, scale.reshape(-1)


def build(
    c: Candidate, a: str, w: np.ndarray, bias: str | None, out: str, name: str, fresh: Fresh
) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    """The node computing `out` in `c.form` from activation `a`, weight `w` (K, N, already
    transposed and smoothed) and `bias`, with the initializers it needs."""
    tail = ["", "", bias] if c.form in BITS and bias else (["", bias] if bias else [])
    if c.form == "int8_dynamic":
        q, s = quantize_weight(w)
        qn, sn = fresh(f"{c.weight}_int8"), fresh(f"{c.weight}_scale")
        node = helper.make_node(
            "DynamicQuantizeMatMul", [a, qn, sn, *tail], [out], name=name, domain=MS
        )
    elif c.form in BITS:
        bits = BITS[c.form]
        q, s = quantize_blocks(w, BLOCK, bits)
        qn = fresh(f"{c.weight}_int{bits}b{BLOCK}")
        sn = fresh(f"{c.weight}_scale{bits}b{BLOCK}")
        node = helper.make_node(
            "MatMulNBits",
            [a, qn, sn, *tail],
            [out],
            name=name,
            domain=MS,
            K=c.k,
            N=c.n,
            bits=bits,
            block_size=BLOCK,
            accuracy_level=4,
        )
    else:
        raise ValueError(f"unknown precision form {c.form!r}")
    return node, [numpy_helper.from_array(q, qn), numpy_helper.from_array(s, sn)]


def smoothing(
    cands: list[Candidate], model: onnx.ModelProto, amax: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Per activation, the factors s (K,) of the exact rescaling A·W = (A·diag(1/s))·(diag(s)·W)
    that move its outlier channels into the weights before both are quantized (SmoothQuant,
    α = 1/2): s_k = sqrt(max|A_k| / max|W_k|), W_k the k-th rows of every candidate weight
    reading A, max|A_k| from the calibration runs (`amax`). 1 where either is 0."""
    inits = {t.name: t for t in model.graph.initializer}
    wmax: dict[str, np.ndarray] = {}
    for c in cands:
        if c.activation not in amax or c.form not in MATMUL_FORMS:
            continue
        w = numpy_helper.to_array(inits[c.weight])
        rows = np.max(np.abs(w), axis=0 if c.transposed else 1)
        prev = wmax.get(c.activation)
        wmax[c.activation] = rows if prev is None else np.maximum(prev, rows)
    out = {}
    for a, wm in wmax.items():
        am = np.asarray(amax[a], np.float64)
        if am.shape != wm.shape:
            continue
        ok = (am > 0) & (wm > 0) & np.isfinite(am)
        f = np.ones_like(am)
        f[ok] = np.sqrt(am[ok] / wm[ok])
        out[a] = np.clip(f, 1e-4, 1e4).astype(np.float32)
    return out


def lower(
    model: onnx.ModelProto,
    chosen: list[Candidate],
    smooth: dict[str, np.ndarray] | None = None,
    ranges: static.Ranges | None = None,
) -> onnx.ModelProto:
    """A copy of `model` with each chosen node in its low-precision form (weights shared by
    several nodes are quantized once; W itself is dropped when nothing else reads it). With
    `smooth` factors for an activation A (`smoothing`), one `Mul(A, 1/s)` feeds every lowered
    MatMul/Gemm reading A and their weights are quantized as diag(s)·W. `int8_static` forms
    take their activation scales from `ranges` (a KeyError where one is missing)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    by_index = {c.index: c for c in chosen}
    if len(by_index) < len(chosen):
        raise ValueError("two forms chosen for one op")
    inits = {t.name: t for t in g.initializer}
    fresh = name_maker(all_names(g))
    made: dict[tuple[str, bool, bool, str], tuple[str, str]] = {}
    scaled: dict[str, str] = {}
    smooth = smooth or {}
    qdq = static.QDQ(ranges or {}, fresh)

    nodes: list[onnx.NodeProto] = []
    folded = {c.relu for c in chosen if c.relu >= 0}
    for index, node in enumerate(g.node):
        c = by_index.get(index)
        if index in folded:
            continue  # a Relu folded into the lowered Conv before it
        if c is None:
            nodes.append(node)
            continue
        if c.form == static.FORM:
            nodes += static.static_nodes(qdq, node, c.output, inits)
            continue
        f = smooth.get(c.activation)
        a = c.activation
        if f is not None:
            if a not in scaled:
                inv, scaled[a] = fresh(f"{a}_smooth_inv"), fresh(f"{a}_smoothed")
                g.initializer.append(numpy_helper.from_array((1 / f).astype(np.float32), inv))
                nodes.append(helper.make_node("Mul", [a, inv], [scaled[a]], name=scaled[a]))
            a = scaled[a]
        bias = node.input[2] if c.op == "Gemm" and len(node.input) > 2 and node.input[2] else None
        key = (c.weight, c.transposed, f is not None, c.form)
        w = numpy_helper.to_array(inits[c.weight])
        w = w.T if c.transposed else w
        new, tensors = build(
            c, a, w * f[:, None] if f is not None else w, bias, node.output[0], node.name, fresh
        )
        if key in made:  # the weight is quantized once: point at the first copy
            new.input[1], new.input[2] = made[key]
        else:
            g.initializer.extend(tensors)
            made[key] = (new.input[1], new.input[2])
        nodes.append(new)
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(qdq.tensors)
    used = static.names_read(g) | {o.name for o in g.output}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    if not any(o.domain == MS for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(MS, 1))
    return out


def name_maker(names: set[str]) -> Fresh:
    """A `Fresh` over `names` (which it extends): the hint itself, else `hint_1`, `hint_2`..."""

    def fresh(hint: str) -> str:
        name, i = hint, 0
        while name in names:
            i += 1
            name = f"{hint}_{i}"
        names.add(name)
        return name

    return fresh


def all_names(g: onnx.GraphProto) -> set[str]:
    """Every value name of `g` and its subgraphs: initializers, inputs, outputs, node ends."""
    out = {t.name for t in g.initializer} | {v.name for v in (*g.input, *g.output)}
    for n in g.node:
        out.update(n.input)
        out.update(n.output)
        for a in n.attribute:
            for sub in (*([a.g] if a.HasField("g") else []), *a.graphs):
                out |= all_names(sub)
    return out
