"""Shape and dtype rules of the typed ops beyond the elementwise, broadcast and MatMul families
(`schema.shape_rules` keeps those): one builder per op family, each emitting egglog rules of
the `shapes` ruleset that set `(shape e)` / `(dtype e)` of a term from its arguments.

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
from dataclasses import dataclass, field

from rewrite.ops.base import OpSpec

SYM_BASE = 1 << 40
MAX_RANK = 6
INT64 = 7
MS = "com.microsoft"


def vec(items: list[str]) -> str:
    """egglog vector literal of `items` (`vec-empty` when there are none)."""
    return f"(vec-of {' '.join(items)})" if items else "(vec-empty)"


def gets(v: str, idxs: range | list[int]) -> list[str]:
    """`(vec-get v i)` for each i."""
    return [f"(vec-get {v} {i})" for i in idxs]


def norm(a: str, r: str) -> str:
    """Axis `a` in [-r, r) as an index in [0, r) (see the module docstring)."""
    return f"(- {a} (* {r} (>> {a} 63)))"


def in_range(a: str, r: str) -> str:
    """Query atoms: -r <= a < r."""
    return f"(>= {a} (- 0 {r})) (< {a} {r})"


def static(*exprs: str) -> str:
    """Query atoms: every expr is a static dim."""
    return " ".join(f"(< {x} {SYM_BASE})" for x in exprs)


@dataclass
class Emitter:
    """Collects the rules of one typed op; `names(n)` is its constructor with n tensor inputs."""

    spec: OpSpec
    names: Callable[[int], str]
    rules: list[str] = field(default_factory=list)

    def pattern(self, n: int | None = None) -> str:
        egg = self.spec.egg
        assert egg is not None
        n = egg.n_inputs if n is None else n
        args = [f"a{i}" for i in range(len(egg.attrs) + len(egg.const_inputs))]
        return f"(= e ({self.names(n)} {' '.join(args + [f'x{i}' for i in range(n)])}))"

    def rule(self, query: str, action: str, tag: str, n: int | None = None) -> None:
        name = self.names(self.spec.egg.n_inputs if n is None else n)  # type: ignore[union-attr]
        self.rules.append(
            f"(rule ({self.pattern(n)} {query}) ({action}) "
            f':ruleset shapes :name "shape-{name}-{tag}")'
        )

    def shape_of(self, i: int, query: str = "") -> None:
        """Output shape = input i's shape (under `query`)."""
        self.rule(f"(= s (shape x{i})) {query}", "(set (shape e) s)", f"s{i}")

    def dtype(
        self, source: int | str, query: str = "", tag: str = "d", n: int | None = None
    ) -> None:
        """Output dtype = input `source`'s (an int), or the literal/attribute `source`."""
        if isinstance(source, int):
            self.rule(f"(= d (dtype x{source})) {query}", "(set (dtype e) d)", tag, n)
        else:
            self.rule(query, f"(set (dtype e) {source})", tag, n)


Builder = Callable[[Emitter], None]


def prelude() -> list[str]:
    """Helper tables the rules read: `(ones r)`, the vector of r ones, for r <= MAX_RANK."""
    out = ["(function ones (i64) VecI :merge old)"]
    out += [f"(set (ones {r}) {vec(['1'] * r)})" for r in range(MAX_RANK + 1)]
    return out


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


@dataclass(frozen=True)
class Window:
    """Where a sliding-window op keeps its attributes (pattern variables; "" = absent)."""

    kernel: str
    pads: str
    strides: str
    dilations: str = ""
    ceil: str = ""
    kernel_from_w: bool = False


def _default(v: str, n: int, fill: int) -> str:
    """v (length n) or, when v is empty, n copies of fill: `(vec-append v fill...)`."""
    return f"(vec-append {v} {vec([str(fill)] * n)})"


def _either(v: str, n: int) -> str:
    """Query atom: v's length is 0 or n."""
    return f"(= 0 (* (vec-length {v}) (- (vec-length {v}) {n})))"


def _window_query(w: Window, n: int, ceil: int) -> tuple[str, list[str]]:
    """The query atoms and the n output spatial dims of a window over static X dims."""
    kernel = f"(vec-append {w.kernel} {vec(gets('s1', range(2, n + 2)))})"
    q = [f"(= s0 (shape x0)) (= (vec-length s0) {n + 2})"]
    q.append(f"(= K {kernel if w.kernel_from_w else w.kernel})")
    if w.kernel_from_w:
        q.append(f"(= s1 (shape x1)) (= (vec-length s1) {n + 2}) {_either(w.kernel, n)}")
    else:
        q.append(f"(= (vec-length K) {n})")
    q.append(f"{_either(w.pads, 2 * n)} {_either(w.strides, n)}")
    q.append(f"(= P {_default(w.pads, 2 * n, 0)}) (= S {_default(w.strides, n, 1)})")
    if w.dilations:
        q.append(f"{_either(w.dilations, n)} (= D {_default(w.dilations, n, 1)})")
    outs = []
    for i in range(n):
        dil = f"(vec-get D {i})" if w.dilations else "1"
        q.append(
            f"(= d{i} (vec-get s0 {i + 2})) (= k{i} (vec-get K {i})) {static(f'd{i}', f'k{i}')} "
            f"(= b{i} (vec-get P {i})) (= t{i} (vec-get S {i})) (>= t{i} 1) (>= {dil} 1) "
            f"(= e{i} (vec-get P {i + n})) (= w{i} (+ (* {dil} (- k{i} 1)) 1)) "
            f"(= p{i} (- (+ d{i} (+ b{i} e{i})) w{i})) (>= p{i} 0)"
        )
        if w.ceil:  # pools: pads smaller than the kernel (`infer` refuses others)
            q.append(f"(< b{i} k{i}) (< e{i} k{i})")
        if ceil:
            # ceil, less one where the last window would start past X and its begin padding
            up = f"(+ (/ (+ p{i} (- t{i} 1)) t{i}) 1)"
            q.append(f"(>= d{i} 1) (= o{i} (min {up} (+ (/ (- (+ d{i} b{i}) 1) t{i}) 1)))")
        else:
            q.append(f"(= o{i} (+ (/ p{i} t{i}) 1))")
        q.append(static(f"o{i}"))
        outs.append(f"o{i}")
    return " ".join(q), outs


def _window_op(w: Window, auto_pad: str, lead: list[str]) -> Builder:
    """Conv / pool output (lead dims, spatial dims) for auto_pad NOTSET and static X dims."""

    def build(em: Emitter) -> None:
        for n in range(1, 4):
            for ceil in (0, 1) if w.ceil else (0,):
                q, outs = _window_query(w, n, ceil)
                if w.ceil:
                    q += f" (= {w.ceil} {ceil})"
                out = vec([*lead, *outs])
                em.rule(f'(= {auto_pad} "NOTSET") {q}', f"(set (shape e) {out})", f"n{n}c{ceil}")

    return build


def _global_pool(em: Emitter) -> None:
    """(N, C, 1, ...)."""
    q = "(= s0 (shape x0)) (= r (vec-length s0)) (>= r 3) (= o (ones (- r 2)))"
    em.rule(q, "(set (shape e) (vec-append (vec-of (vec-get s0 0) (vec-get s0 1)) o))", "s")


def _reduce(axes: str, keep: str, noop: str = "") -> Builder:
    """Reduce* over up to three axes (`axes` empty: every axis, or none with `noop` = 1):
    the axes set to 1 (keep = 1) or dropped (keep = 0, at most two axes)."""

    def build(em: Emitter) -> None:
        s = "(= s0 (shape x0)) (= r (vec-length s0))"
        if noop:
            em.rule(f"(= (vec-length {axes}) 0) (= {noop} 1) {s}", "(set (shape e) s0)", "noop")
        every = f"(= (vec-length {axes}) 0) {f'(= {noop} 0) ' if noop else ''}{s}"
        em.rule(f"{every} (= {keep} 0)", "(set (shape e) (vec-empty))", "all0")
        em.rule(f"{every} (= {keep} 1) (= o (ones r))", "(set (shape e) o)", "all1")
        for m in range(1, 4):
            pre = f"{s} (= (vec-length {axes}) {m}) "
            pre += " ".join(_axis_atoms(axes, i) for i in range(m))
            kept = "s0"
            for i in range(m):
                kept = f"(vec-set {kept} k{i} 1)"
            em.rule(f"{pre} (= {keep} 1)", f"(set (shape e) {kept})", f"k1m{m}")
        one = f"{s} (= (vec-length {axes}) 1) {_axis_atoms(axes, 0)} (= {keep} 0)"
        em.rule(one, "(set (shape e) (vec-remove s0 k0))", "k0m1")
        two = f"{s} (= (vec-length {axes}) 2) {_axis_atoms(axes, 0)} {_axis_atoms(axes, 1)}"
        out = "(vec-remove (vec-remove s0 (max k0 k1)) (min k0 k1))"
        em.rule(f"{two} (= {keep} 0)", f"(set (shape e) {out})", "k0m2")

    return build


def _axis_atoms(axes: str, i: int) -> str:
    """Query atoms binding k{i}, axis i of `axes` normalised by r, distinct from k0..k{i-1}."""
    a = f"ax{i}"
    out = f"(= {a} (vec-get {axes} {i})) {in_range(a, 'r')} (= k{i} {norm(a, 'r')})"
    return out + "".join(f" (!= k{i} k{j})" for j in range(i))


def _arg(em: Emitter) -> None:
    """ArgMax/ArgMin: the axis (a0) set to 1 (keepdims a1 = 1) or dropped."""
    s = f"(= s0 (shape x0)) (= r (vec-length s0)) {in_range('a0', 'r')} (= k {norm('a0', 'r')})"
    em.rule(f"{s} (= a1 1)", "(set (shape e) (vec-set s0 k 1))", "k1")
    em.rule(f"{s} (= a1 0)", "(set (shape e) (vec-remove s0 k))", "k0")


DimFn = Callable[[int, int], str]
"""(axis i, rank r) -> the output dim's expression over the static input dim `d{i}`."""


def _per_dim(dim: DimFn, query: Callable[[int], str], tag: str) -> Builder:
    """Per rank r (under `query(r)`): out[i] = dim(i, r), every input and output dim static,
    each output >= 0."""

    def build(em: Emitter) -> None:
        for r in range(1, MAX_RANK + 1):
            q = [f"(= s0 (shape x0)) (= (vec-length s0) {r}) {query(r)}"]
            for i in range(r):
                q.append(f"(= d{i} (vec-get s0 {i})) {static(f'd{i}')}")
                q.append(f"(= o{i} {dim(i, r)}) (>= o{i} 0) {static(f'o{i}')}")
            outs = vec([f"o{i}" for i in range(r)])
            em.rule(" ".join(q), f"(set (shape e) {outs})", f"{tag}{r}")

    return build


_pad = _per_dim(
    lambda i, r: f"(+ d{i} (+ (vec-get a1 {i}) (vec-get a1 {i + r})))",
    lambda r: f"(= (vec-length a1) {2 * r})",
    "r",
)
"""Pad (mode a0, pads a1): d + begin + end per axis."""
_tile = _per_dim(
    lambda i, r: f"(* d{i} (vec-get a0 {i}))", lambda r: f"(= (vec-length a0) {r})", "r"
)
"""Tile (repeats a0): d * repeats per axis."""


def _slice(em: Emitter) -> None:
    """Slice (starts a0, ends a1, axes a2, steps a3) of 1 to 3 axes, every step >= 1: per
    axis, start and end (negative: from the end) clamped to [0, d], length ceil((end -
    start) / step) or 0. (A negative step has no rule: ORT reads end 2^31 - 1 specially.)"""
    for m in range(1, 4):
        q = ["(= s0 (shape x0)) (= r (vec-length s0))"]
        q += [f"(= (vec-length a{i}) {m})" for i in range(4)]
        out = "s0"
        for j in range(m):
            q.append(_axis_atoms("a2", j).replace("ax", "sx"))
            q.append(f"(= d{j} (vec-get s0 k{j})) {static(f'd{j}')}")
            q.append(f"(= t{j} (vec-get a3 {j})) (>= t{j} 1)")
            for v, src in (("b", "a0"), ("c", "a1")):
                raw = f"(vec-get {src} {j})"
                q.append(f"(= {v}{j} (min (max {norm(raw, f'd{j}')} 0) d{j}))")
            q.append(f"(= n{j} (max 0 (/ (+ (- c{j} b{j}) (- t{j} 1)) t{j})))")
            out = f"(vec-set {out} k{j} n{j})"
        em.rule(" ".join(q), f"(set (shape e) {out})", f"m{m}")


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


def _depth_space(to_space: bool) -> Builder:
    """DepthToSpace (N, C/b², H·b, W·b) / SpaceToDepth (N, C·b², H/b, W/b), b = a0, C, H, W
    static (and divisible)."""

    def build(em: Emitter) -> None:
        q = "(= s0 (shape x0)) (= (vec-length s0) 4) (>= a0 1) (= b2 (* a0 a0)) "
        q += "(= c (vec-get s0 1)) (= h (vec-get s0 2)) (= w (vec-get s0 3)) "
        q += static("c", "h", "w")
        if to_space:
            q += " (= 0 (% c b2)) (= o1 (/ c b2)) (= o2 (* h a0)) (= o3 (* w a0))"
        else:
            q += " (= 0 (% h a0)) (= 0 (% w a0)) (= o1 (* c b2)) (= o2 (/ h a0)) (= o3 (/ w a0))"
        q += f" {static('o1', 'o2', 'o3')}"
        em.rule(q, "(set (shape e) (vec-of (vec-get s0 0) o1 o2 o3))", "s")

    return build


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
    ("Conv", ""): _window_op(_CONV, "a0", _CONV_LEAD),
    ("FusedConv", MS): _window_op(_FUSED_CONV, "a3", _CONV_LEAD),
    ("MaxPool", ""): _window_op(Window("a3", "a4", "a6", "a2", ceil="a1"), "a0", _POOL_LEAD),
    ("AveragePool", ""): _window_op(Window("a3", "a4", "a5", ceil="a1"), "a0", _POOL_LEAD),
    ("GlobalAveragePool", ""): _global_pool,
    ("GlobalMaxPool", ""): _global_pool,
    **{(op, ""): _reduce("a0", "a1") for op in _REDUCE_OPS},
    ("ReduceSum", ""): _reduce("a2", "a0", "a1"),
    ("ArgMax", ""): _arg,
    ("ArgMin", ""): _arg,
    ("Pad", ""): _pad,
    ("Tile", ""): _tile,
    ("Slice", ""): _slice,
    ("SplitPart", ""): _split_part,
    ("TopKPart", ""): _topk_part,
    ("Shape", ""): _shape,
    ("Size", ""): lambda em: em.rule("", "(set (shape e) (vec-empty))", "s"),
    ("DepthToSpace", ""): _depth_space(True),
    ("SpaceToDepth", ""): _depth_space(False),
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
    ("MultiHeadAttentionPart", MS): (0, "(= a3 0)"),
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
