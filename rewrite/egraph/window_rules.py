"""Shape rules of the window and axis ops: Conv / FusedConv / pools over static spatial dims
(auto_pad NOTSET), the global pools, Reduce* and ArgMax/ArgMin, Pad and Tile (per dim), Slice
with steps >= 1, DepthToSpace / SpaceToDepth. Same contract as `shape_rules`: a rule sets a
shape only where it is the op's output shape, never computing with a symbolic dim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rewrite.egraph.shape_dsl import (
    MAX_RANK,
    Builder,
    Emitter,
    gets,
    in_range,
    norm,
    static,
    vec,
)


@dataclass(frozen=True)
class Window:
    """Where a sliding-window op keeps its attributes (pattern variables; "" = absent)."""

    kernel: str
    pads: str
    strides: str
    dilations: str = ""
    ceil: str = ""
    kernel_from_w: bool = False


def default(v: str, n: int, fill: int) -> str:
    """v (length n) or, when v is empty, n copies of fill: `(vec-append v fill...)`."""
    return f"(vec-append {v} {vec([str(fill)] * n)})"


def either(v: str, n: int) -> str:
    """Query atom: v's length is 0 or n."""
    return f"(= 0 (* (vec-length {v}) (- (vec-length {v}) {n})))"


def window_query(w: Window, n: int, ceil: int) -> tuple[str, list[str]]:
    """The query atoms and the n output spatial dims of a window over static X dims."""
    kernel = f"(vec-append {w.kernel} {vec(gets('s1', range(2, n + 2)))})"
    q = [f"(= s0 (shape x0)) (= (vec-length s0) {n + 2})"]
    q.append(f"(= K {kernel if w.kernel_from_w else w.kernel})")
    if w.kernel_from_w:
        q.append(f"(= s1 (shape x1)) (= (vec-length s1) {n + 2}) {either(w.kernel, n)}")
    else:
        q.append(f"(= (vec-length K) {n})")
    q.append(f"{either(w.pads, 2 * n)} {either(w.strides, n)}")
    q.append(f"(= P {default(w.pads, 2 * n, 0)}) (= S {default(w.strides, n, 1)})")
    if w.dilations:
        q.append(f"{either(w.dilations, n)} (= D {default(w.dilations, n, 1)})")
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


def window_op(w: Window, auto_pad: str, lead: list[str]) -> Builder:
    """Conv / pool output (lead dims, spatial dims) for auto_pad NOTSET and static X dims."""

    def build(em: Emitter) -> None:
        for n in range(1, 4):
            for ceil in (0, 1) if w.ceil else (0,):
                q, outs = window_query(w, n, ceil)
                if w.ceil:
                    q += f" (= {w.ceil} {ceil})"
                out = vec([*lead, *outs])
                em.rule(f'(= {auto_pad} "NOTSET") {q}', f"(set (shape e) {out})", f"n{n}c{ceil}")

    return build


def global_pool(em: Emitter) -> None:
    """(N, C, 1, ...)."""
    q = "(= s0 (shape x0)) (= r (vec-length s0)) (>= r 3) (= o (ones (- r 2)))"
    em.rule(q, "(set (shape e) (vec-append (vec-of (vec-get s0 0) (vec-get s0 1)) o))", "s")


def reduce(axes: str, keep: str, noop: str = "") -> Builder:
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
            pre += " ".join(axis_atoms(axes, i) for i in range(m))
            kept = "s0"
            for i in range(m):
                kept = f"(vec-set {kept} k{i} 1)"
            em.rule(f"{pre} (= {keep} 1)", f"(set (shape e) {kept})", f"k1m{m}")
        one = f"{s} (= (vec-length {axes}) 1) {axis_atoms(axes, 0)} (= {keep} 0)"
        em.rule(one, "(set (shape e) (vec-remove s0 k0))", "k0m1")
        two = f"{s} (= (vec-length {axes}) 2) {axis_atoms(axes, 0)} {axis_atoms(axes, 1)}"
        out = "(vec-remove (vec-remove s0 (max k0 k1)) (min k0 k1))"
        em.rule(f"{two} (= {keep} 0)", f"(set (shape e) {out})", "k0m2")

    return build


def axis_atoms(axes: str, i: int) -> str:
    """Query atoms binding k{i}, axis i of `axes` normalised by r, distinct from k0..k{i-1}."""
    a = f"ax{i}"
    out = f"(= {a} (vec-get {axes} {i})) {in_range(a, 'r')} (= k{i} {norm(a, 'r')})"
    return out + "".join(f" (!= k{i} k{j})" for j in range(i))


def arg_extreme(em: Emitter) -> None:
    """ArgMax/ArgMin: the axis (a0) set to 1 (keepdims a1 = 1) or dropped."""
    s = f"(= s0 (shape x0)) (= r (vec-length s0)) {in_range('a0', 'r')} (= k {norm('a0', 'r')})"
    em.rule(f"{s} (= a1 1)", "(set (shape e) (vec-set s0 k 1))", "k1")
    em.rule(f"{s} (= a1 0)", "(set (shape e) (vec-remove s0 k))", "k0")


DimFn = Callable[[int, int], str]
"""(axis i, rank r) -> the output dim's expression over the static input dim `d{i}`."""


def per_dim(dim: DimFn, query: Callable[[int], str], tag: str) -> Builder:
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


pad = per_dim(
    lambda i, r: f"(+ d{i} (+ (vec-get a1 {i}) (vec-get a1 {i + r})))",
    lambda r: f"(= (vec-length a1) {2 * r})",
    "r",
)
"""Pad (mode a0, pads a1): d + begin + end per axis."""
tile = per_dim(lambda i, r: f"(* d{i} (vec-get a0 {i}))", lambda r: f"(= (vec-length a0) {r})", "r")
"""Tile (repeats a0): d * repeats per axis."""


def slice_rule(em: Emitter) -> None:
    """Slice (starts a0, ends a1, axes a2, steps a3) of 1 to 3 axes, every step >= 1: per
    axis, start and end (negative: from the end) clamped to [0, d], length ceil((end -
    start) / step) or 0. (A negative step has no rule: ORT reads end 2^31 - 1 specially.)"""
    for m in range(1, 4):
        q = ["(= s0 (shape x0)) (= r (vec-length s0))"]
        q += [f"(= (vec-length a{i}) {m})" for i in range(4)]
        out = "s0"
        for j in range(m):
            q.append(axis_atoms("a2", j).replace("ax", "sx"))
            q.append(f"(= d{j} (vec-get s0 k{j})) {static(f'd{j}')}")
            q.append(f"(= t{j} (vec-get a3 {j})) (>= t{j} 1)")
            for v, src in (("b", "a0"), ("c", "a1")):
                raw = f"(vec-get {src} {j})"
                q.append(f"(= {v}{j} (min (max {norm(raw, f'd{j}')} 0) d{j}))")
            q.append(f"(= n{j} (max 0 (/ (+ (- c{j} b{j}) (- t{j} 1)) t{j})))")
            out = f"(vec-set {out} k{j} n{j})"
        em.rule(" ".join(q), f"(set (shape e) {out})", f"m{m}")


def depth_space(to_space: bool) -> Builder:
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
