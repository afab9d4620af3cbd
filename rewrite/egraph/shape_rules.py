"""Shape and dtype rules of the typed ops beyond the elementwise, broadcast and MatMul families
(`schema.shape_rules` keeps those): one builder per op family, each emitting egglog rules of
the `shapes` ruleset that set `(shape e)` / `(dtype e)` of a term from its arguments. The
window and axis ops' builders are in `window_rules`, the snippet language in `shape_dsl`;
`SHAPES` and `DTYPES` below say which builder and dtype each op has.

Contract: a rule sets a shape only where it is the op's output shape: the Python `infer`'s
(where `infer` takes a static dim from one input that another holds as symbolic, a rule may keep
the symbolic one). A dim at or above SYM_BASE is symbolic: rules copy it but never compute with
it (every dim that enters arithmetic, and every computed or attribute-given dim, is guarded
`(< d SYM_BASE)`), and a case they cannot express exactly (a symbolic spatial dim, auto_pad
other than NOTSET, more axes than the builder handles) gets no rule: the snapshot then types
the class with `infer`. Axes are normalised by the rank in the query:
`norm(a, r) = a - r * (a >> 63)` is `a + r` for negative `a`, else `a`.
"""

from __future__ import annotations

from collections.abc import Callable

from rewrite.egraph.shape_dsl import (
    INT64,
    MAX_RANK,
    MS,
    SYM_BASE,
    Builder,
    Emitter,
    gets,
    in_range,
    norm,
    prelude,
    static,
    vec,
)
from rewrite.egraph.window_rules import (
    Window,
    arg_extreme,
    depth_space,
    global_pool,
    pad,
    reduce,
    slice_rule,
    tile,
    window_op,
)
from rewrite.ops.base import OpSpec

__all__ = ["MAX_RANK", "SYM_BASE", "family_rules", "prelude"]


def _same0(em: Emitter) -> None:
    em.shape_of(0)


def _parts(indices: tuple[int, ...], index_var: str) -> Builder:
    """A part whose outputs `indices` (the `index` attribute) have input 0's shape."""

    def build(em: Emitter) -> None:
        for k in indices:
            em.rule(f"(= {index_var} {k}) (= s (shape x0))", "(set (shape e) s)", f"s{k}")

    return build


def _trans(*attrs: str) -> str:
    """Query atoms: each attribute is 0 or 1."""
    return " ".join(f"(= 0 (* {a} (- {a} 1)))" for a in attrs)


def _gemm(em: Emitter) -> None:
    """(M, N): A (M, K) or (K, M) by transA (a2), B (K, N) or (N, K) by transB (a3)."""
    q = f"{_trans('a2', 'a3')} (= s0 (shape x0)) (= s1 (shape x1)) "
    q += "(= (vec-length s0) 2) (= (vec-length s1) 2)"
    em.rule(q, "(set (shape e) (vec-of (vec-get s0 a2) (vec-get s1 (- 1 a3))))", "s")


def _fused_matmul(em: Emitter) -> None:
    """MatMul of A, B with their last two axes swapped by transA (a1) / transB (a2): M =
    A[r - 2 + transA]; with a 2-D B, N = B[1 - transB]; with a B of A's rank r, N = B[r - 1 -
    transB] and the batch dims broadcast."""
    q = f"{_trans('a1', 'a2')} (= s0 (shape x0)) (= s1 (shape x1)) (= r (vec-length s0)) "
    q += "(>= r 2) (= m (vec-get s0 (+ (- r 2) a1)))"
    out = "(vec-set (vec-set s0 (- r 2) m) (- r 1) (vec-get s1 (- 1 a2)))"
    em.rule(f"{q} (= (vec-length s1) 2)", f"(set (shape e) {out})", "w")
    for r in range(3, MAX_RANK + 1):
        batch = [f"(max (vec-get s0 {i}) (vec-get s1 {i}))" for i in range(r - 2)]
        out = vec([*batch, "m", f"(vec-get s1 (- {r - 1} a2))"])
        em.rule(f"{q} (= r {r}) (= (vec-length s1) {r})", f"(set (shape e) {out})", f"b{r}")


def _last_dim(n: str, query: str = "") -> Builder:
    """A's shape with its last dim set to `n` (a 2-D weight's N)."""

    def build(em: Emitter) -> None:
        q = f"(= s0 (shape x0)) (= r (vec-length s0)) (>= r 1) (= n {n}) {static('n')} {query}"
        em.rule(q, "(set (shape e) (vec-set s0 (- r 1) n))", "s")

    return build


def _concat(em: Emitter) -> None:
    """Every arity: input 0's shape with the axis dim the sum of the inputs' (all static)."""
    egg = em.spec.egg
    assert egg is not None
    for n in (egg.n_inputs, *egg.arities):
        q = [f"(= s{i} (shape x{i}))" for i in range(n)]
        q += ["(= r (vec-length s0))", in_range("a0", "r"), f"(= k {norm('a0', 'r')})"]
        q += [f"(= (vec-length s{i}) r) (= d{i} (vec-get s{i} k))" for i in range(1, n)]
        q += ["(= d0 (vec-get s0 k))", static(*[f"d{i}" for i in range(n)])]
        total = "d0"
        for i in range(1, n):
            total = f"(+ {total} d{i})"
        q += [f"(= t {total})", static("t")]
        em.rule(" ".join(q), "(set (shape e) (vec-set s0 k t))", "s", n)


def _product(dims: list[str]) -> str:
    out = "1"
    for d in dims:
        out = f"(* {out} {d})"
    return out


def _flatten(em: Emitter) -> None:
    """(prod(d[:k]), prod(d[k:])) for axis k in [-r, r], every dim static."""
    for r in range(1, MAX_RANK + 1):
        dims = gets("s0", range(r))
        for k in range(r + 1):
            q = f"(= s0 (shape x0)) (= (vec-length s0) {r}) (>= a0 -{r}) (<= a0 {r}) "
            q += f"(= {k} {norm('a0', str(r))}) {static(*dims)} "
            q += f"(= f0 {_product(dims[:k])}) (= f1 {_product(dims[k:])}) {static('f0', 'f1')}"
            em.rule(q, "(set (shape e) (vec-of f0 f1))", f"r{r}k{k}")


def _squeeze(em: Emitter) -> None:
    """One or two axes (a0), each a dim of 1, dropped (an empty axes vector: no rule)."""
    q = "(= s0 (shape x0)) (= r (vec-length s0)) (= (vec-length a0) 1) (= a (vec-get a0 0)) "
    q += f"{in_range('a', 'r')} (= k {norm('a', 'r')}) (= (vec-get s0 k) 1)"
    em.rule(q, "(set (shape e) (vec-remove s0 k))", "m1")
    q = "(= s0 (shape x0)) (= r (vec-length s0)) (= (vec-length a0) 2) "
    q += "(= a (vec-get a0 0)) (= b (vec-get a0 1)) "
    q += f"{in_range('a', 'r')} {in_range('b', 'r')} (= k {norm('a', 'r')}) "
    q += f"(= j {norm('b', 'r')}) (!= k j) (= (vec-get s0 k) 1) (= (vec-get s0 j) 1)"
    em.rule(q, "(set (shape e) (vec-remove (vec-remove s0 (max k j)) (min k j)))", "m2")


def _unsqueeze(em: Emitter) -> None:
    """One or two axes (a0, normalised by the output rank) inserted as dims of 1."""
    for r in range(MAX_RANK):
        out_r = r + 1
        for k in range(out_r):
            q = f"(= s0 (shape x0)) (= (vec-length s0) {r}) (= (vec-length a0) 1) "
            q += f"(= a (vec-get a0 0)) {in_range('a', str(out_r))} (= {k} {norm('a', str(out_r))})"
            dims = [*gets("s0", range(k)), "1", *gets("s0", range(k, r))]
            em.rule(q, f"(set (shape e) {vec(dims)})", f"r{r}k{k}")
    for r in range(MAX_RANK - 1):
        out_r = r + 2
        for k in range(out_r):
            for j in range(k + 1, out_r):
                q = f"(= s0 (shape x0)) (= (vec-length s0) {r}) (= (vec-length a0) 2) "
                q += "(= a (vec-get a0 0)) (= b (vec-get a0 1)) "
                q += f"{in_range('a', str(out_r))} {in_range('b', str(out_r))} "
                q += f"(= p {norm('a', str(out_r))}) (= q {norm('b', str(out_r))}) "
                q += f"(= {k} (min p q)) (= {j} (max p q))"
                rest = iter(gets("s0", range(r)))
                dims = ["1" if i in (k, j) else next(rest) for i in range(out_r)]
                em.rule(q, f"(set (shape e) {vec(dims)})", f"r{r}k{k}j{j}")


def _gather(em: Emitter) -> None:
    """data[:k] ++ indices' shape ++ data[k+1:] for axis k (a0)."""
    for r in range(1, MAX_RANK + 1):
        for k in range(r):
            q = f"(= s0 (shape x0)) (= s1 (shape x1)) (= (vec-length s0) {r}) "
            q += f"{in_range('a0', str(r))} (= {k} {norm('a0', str(r))})"
            out = f"(vec-append {vec(gets('s0', range(k)))} s1 {vec(gets('s0', range(k + 1, r)))})"
            em.rule(q, f"(set (shape e) {out})", f"r{r}k{k}")


def _split_part(em: Emitter) -> None:
    """SplitPart (axis a0, sizes a1, index a2): the axis dim is sizes[index]."""
    q = f"(= s0 (shape x0)) (= r (vec-length s0)) {in_range('a0', 'r')} (= k {norm('a0', 'r')}) "
    q += f"(>= a2 0) (< a2 (vec-length a1)) (= n (vec-get a1 a2)) {static('n')}"
    em.rule(q, "(set (shape e) (vec-set s0 k n))", "s")


def _topk_part(em: Emitter) -> None:
    """TopKPart (axis a0, largest a1, k a2, index a3): the axis dim is k; values in X's
    dtype, indices int64."""
    q = f"(= s0 (shape x0)) (= r (vec-length s0)) {in_range('a0', 'r')} (= k {norm('a0', 'r')})"
    em.rule(f"{q} (>= a2 0) {static('a2')}", "(set (shape e) (vec-set s0 k a2))", "s")
    em.dtype(0, "(= a3 0)", "d0")
    em.dtype(str(INT64), "(= a3 1)", "d1")


def _shape(em: Emitter) -> None:
    """Shape (start a0, end a1): (end - start,), both clamped to [0, rank]."""
    q = "(= s0 (shape x0)) (= r (vec-length s0)) "
    q += f"(= b (min (max {norm('a0', 'r')} 0) r)) (= c (min (max {norm('a1', 'r')} 0) r))"
    em.rule(q, "(set (shape e) (vec-of (max 0 (- c b))))", "s")


_CONV = Window(kernel="a3", pads="a4", strides="a5", dilations="a1", kernel_from_w=True)
_FUSED_CONV = Window(kernel="a6", pads="a7", strides="a8", dilations="a4", kernel_from_w=True)
_CONV_LEAD = ["(vec-get s0 0)", "(vec-get s1 0)"]
_POOL_LEAD = ["(vec-get s0 0)", "(vec-get s0 1)"]
_REDUCE_OPS = (
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
    "ReduceMin", "ReduceProd", "ReduceSumSquare",
)  # fmt: skip

_SAME0 = (
    "LogSoftmax", "Hardmax", "CumSum", "Trilu", "LRN", "InstanceNormalization",
    "GroupNormalization", "BatchNormalization", "ReverseSequence", "ScatterND",
)  # fmt: skip
"""ai.onnx ops whose output has input 0's shape and dtype."""
_SAME0_MS = (
    "BiasGelu", "FastGelu", "QuickGelu", "BiasAdd", "BiasSoftmax", "RotaryEmbedding",
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
)  # fmt: skip
"""com.microsoft ops whose output has input 0's shape and dtype."""
_X_DTYPE = (
    "GatherElements", "Gemm", "Concat", "Flatten", "Squeeze", "Unsqueeze", "Gather", "Conv",
    "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Pad", "Tile", "Slice",
    "SplitPart", "DepthToSpace", "SpaceToDepth", "BitShift", "Compress", "ConvTranspose",
    "Einsum", "GatherND", "Resize", "GRUPart", "LSTMPart", "RNNPart",
)  # fmt: skip
"""Other ai.onnx ops whose output has input 0's dtype (every output, for the RNN parts)."""
_X_DTYPE_MS = (
    "FusedMatMul", "MatMulNBits", "DynamicQuantizeMatMul", "FusedConv", "Attention",
    "MultiHeadAttention", "GroupQueryAttention",
)  # fmt: skip
"""Other com.microsoft ops whose output has input 0's dtype."""

SHAPES: dict[tuple[str, str], Builder] = {
    **{(op, ""): _same0 for op in _SAME0},
    **{(op, MS): _same0 for op in _SAME0_MS},
    ("LayerNormalizationPart", ""): _parts((0,), "a3"),
    ("SkipLayerNormalizationPart", MS): _parts((0, 3), "a1"),
    ("SkipSimplifiedLayerNormalizationPart", MS): _parts((0, 3), "a1"),
    ("GatherElements", ""): lambda em: em.shape_of(1),
    ("Gemm", ""): _gemm,
    ("FusedMatMul", MS): _fused_matmul,
    ("MatMulNBits", MS): _last_dim("a1"),
    ("DynamicQuantizeMatMul", MS): _last_dim(
        "(vec-get s1 1)", "(= s1 (shape x1)) (= (vec-length s1) 2)"
    ),
    ("Concat", ""): _concat,
    ("Flatten", ""): _flatten,
    ("Squeeze", ""): _squeeze,
    ("Unsqueeze", ""): _unsqueeze,
    ("Gather", ""): _gather,
    ("Conv", ""): window_op(_CONV, "a0", _CONV_LEAD),
    ("FusedConv", MS): window_op(_FUSED_CONV, "a3", _CONV_LEAD),
    ("MaxPool", ""): window_op(Window("a3", "a4", "a6", "a2", ceil="a1"), "a0", _POOL_LEAD),
    ("AveragePool", ""): window_op(Window("a3", "a4", "a5", ceil="a1"), "a0", _POOL_LEAD),
    ("GlobalAveragePool", ""): global_pool,
    ("GlobalMaxPool", ""): global_pool,
    **{(op, ""): reduce("a0", "a1") for op in _REDUCE_OPS},
    ("ReduceSum", ""): reduce("a2", "a0", "a1"),
    ("ArgMax", ""): arg_extreme,
    ("ArgMin", ""): arg_extreme,
    ("Pad", ""): pad,
    ("Tile", ""): tile,
    ("Slice", ""): slice_rule,
    ("SplitPart", ""): _split_part,
    ("TopKPart", ""): _topk_part,
    ("Shape", ""): _shape,
    ("Size", ""): lambda em: em.rule("", "(set (shape e) (vec-empty))", "s"),
    ("DepthToSpace", ""): depth_space(True),
    ("SpaceToDepth", ""): depth_space(False),
}
"""(op, domain) -> the builder of its shape rules (and of its dtype rules where DTYPES has
no entry)."""

DTYPES: dict[tuple[str, str], int | str | tuple[int, str]] = {
    **{(op, ""): 0 for op in (*_REDUCE_OPS, "ReduceSum", *_SAME0, *_X_DTYPE)},
    **{(op, MS): 0 for op in (*_SAME0_MS, *_X_DTYPE_MS)},
    ("ArgMax", ""): str(INT64),
    ("ArgMin", ""): str(INT64),
    ("Shape", ""): str(INT64),
    ("Size", ""): str(INT64),
    ("ConstantOfShapeDyn", ""): "a1",
    ("OneHot", ""): 2,
    ("LayerNormalizationPart", ""): (0, "(= a3 0)"),
    ("SkipLayerNormalizationPart", MS): (0, "(= 0 (* a1 (- a1 3)))"),
    ("SkipSimplifiedLayerNormalizationPart", MS): (0, "(= 0 (* a1 (- a1 3)))"),
    ("AttentionPart", MS): (0, "(= a5 0)"),
    ("MultiHeadAttentionPart", MS): (0, "(= a4 0)"),
    ("GroupQueryAttentionPart", MS): (0, "(= a3 0)"),
}
"""(op, domain) -> the output dtype: input i's (an int), a literal or attribute (a str), or
input i's under a query (a part whose other outputs differ)."""


def family_rules(spec: OpSpec, names: Callable[[int], str]) -> list[str]:
    """The shape and dtype rules of a typed op from SHAPES and DTYPES (none if it has neither)."""
    em = Emitter(spec, names)
    key = (spec.name, spec.domain)
    if key in SHAPES:
        SHAPES[key](em)
    source = DTYPES.get(key)
    assert spec.egg is not None
    for n in (spec.egg.n_inputs, *spec.egg.arities):
        if isinstance(source, tuple):
            em.dtype(source[0], source[1], n=n)
        elif source is not None:
            em.dtype(source, n=n)
    return em.rules
