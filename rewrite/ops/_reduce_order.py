"""The order in which ORT 1.32's CPU kernels add the elements of ReduceSum, ReduceMean and
ReduceSumSquare (not an op module; `reduce.py` registers the ops, `_reduce_sum_z3` builds
their semantics from these orders).

Contract: `float_trees(op, shape, axes, dtype)` gives, for every output element (row-major,
keepdims layout), the tree of additions ORT evaluates: a leaf is the flat (row-major) index of
an input element, `ZERO` is the accumulator's initial +0, a pair `(a, b)` is one IEEE
addition a + b. `int_rows(shape, axes)` gives each output element's reduced input indices in
the order the integer kernels visit them, `int_kahan(op, shape, axes)` whether those kernels
accumulate with Kahan compensation. All of it is for a session with one intra-op thread (as
the verifier runs ORT; see "Threads" below) and buffers aligned to 16 bytes (ORT's allocator;
numpy's arrays fed as inputs, as malloc returns them).

How ORT reduces (reduction_ops.cc/.h, checked against ORT 1.32 on every shape of the proof
and sampling bounds, every axes subset, ±0, mixed magnitudes; tests/ops/test_typed_reduce_sum):
the input shape is merged into runs of reduced (R) and kept (K) dims, then
- rank 0: the accumulator, +0 + x;
- all dims reduced (no axes, or every axis): Eigen's `sum()` of the whole buffer;
- KR (reduce the trailing dims): per row d of N elements, Eigen's `sum()` of the row;
- RK (the leading dims): elementwise row0 + row1 + ... when R > 16 and max(R, N) > 256,
  else the generic loop;
- KRK (a middle run, K0 >= 2): a MatMul of a ones vector by each (R, N) block: float32 in
  MLAS's order (`mlas_tree`: blocks of 4 added in turn, then a pair, then a single, from +0),
  double in sequence from +0; with K0 = 1 the generic loop;
- RKR (K >= 2): per kept element, +0 + sum(chunk 0) + sum(chunk 1) + ..., each chunk of R2
  contiguous elements summed by Eigen; with K = 1 the generic loop;
- otherwise (4 or more runs) the generic loop: +0 + x0 + x1 + ... in row-major order.
Eigen's `sum()` of n contiguous elements (`eigen_tree`) uses packets of 4 floats or 2
doubles (SSE2), starting at the first 16-byte aligned element: lanes accumulate packet by
packet (two packet accumulators when there are at least two packets), are reduced as
(l0 + l2) + (l1 + l3), and the unaligned head and the tail are then added one by one; below
one packet it is x0 + x1 + ... So the order of a row depends on its offset modulo 4 (float) or
2 (double) elements. ReduceSumSquare has no fast kernel: all reduced is Eigen's
`squaredNorm()` (the same packets over x², from element 0), everything else the generic loop
over x². ReduceMean is ReduceSum's tree divided by the count. float16 is converted to a
float32 buffer, reduced as float32 (same trees), and rounded once.

Integers are accumulated in float64 and saturated to the dtype's range (see `_reduce_sum_z3`);
all kernels visit the reduced elements in row-major order (`int_rows`). int64 uses Kahan
compensation in the generic loop and `aggall` (all reduced, KR for ReduceSum) and plain
float64 sums in the fast KRK, RKR and RK kernels (and KR for ReduceMean); int32 sums are
exact in float64 either way.

Threads: with T intra-op threads the KRK kernel runs only when K0 >= max(2, T), RKR only when
K >= max(2, T), RK only when R > 16·T and max(R, N) > 256·T (others fall back to the generic
loop), so the float result of those forms can differ on a machine with more threads.
"""

from __future__ import annotations

from math import prod

from onnx import TensorProto

Tree = int | None | tuple  # a leaf index, ZERO, or (left, right)
ZERO = None
"""The accumulator's initial value, +0."""

_LANES: dict[int, int] = {TensorProto.FLOAT: 4, TensorProto.FLOAT16: 4, TensorProto.DOUBLE: 2}


def lanes(dtype: int) -> int:
    """Elements per SSE2 packet of the buffer ORT reduces (float16 is reduced as float32)."""
    return _LANES.get(dtype, 4)


def chain(idx: list[int], zero: bool) -> Tree:
    """((x0 + x1) + x2) + ..., from +0 when `zero`."""
    t: Tree = ZERO if zero else idx[0]
    for i in idx if zero else idx[1:]:
        t = (t, i)
    return t


def eigen_tree(idx: list[int], n_lanes: int, start: int) -> Tree:
    """Eigen's vectorized `sum()` of contiguous elements `idx` whose first aligned element is
    `start` (see the module docstring)."""
    n = len(idx)
    start = min(start, n)
    size1 = (n - start) // n_lanes * n_lanes
    size2 = (n - start) // (2 * n_lanes) * (2 * n_lanes)
    if not size1:
        return chain(idx, False)
    end1, end2 = start + size1, start + size2
    acc0: list[Tree] = list(idx[start : start + n_lanes])
    if size1 > n_lanes:
        acc1: list[Tree] = list(idx[start + n_lanes : start + 2 * n_lanes])
        for i in range(start + 2 * n_lanes, end2, 2 * n_lanes):
            acc0 = [(a, b) for a, b in zip(acc0, idx[i : i + n_lanes], strict=True)]
            nxt = idx[i + n_lanes : i + 2 * n_lanes]
            acc1 = [(a, b) for a, b in zip(acc1, nxt, strict=True)]
        acc0 = [(a, b) for a, b in zip(acc0, acc1, strict=True)]
        if end1 > end2:
            acc0 = [(a, b) for a, b in zip(acc0, idx[end2 : end2 + n_lanes], strict=True)]
    t: Tree = ((acc0[0], acc0[2]), (acc0[1], acc0[3])) if n_lanes == 4 else (acc0[0], acc0[1])
    for i in [*idx[:start], *idx[end1:]]:
        t = (t, i)
    return t


def mlas_tree(idx: list[int]) -> Tree:
    """MLAS's float32 GEMV order along K: blocks of 4 (each in sequence) added in turn, then
    a pair, then a single element, from +0."""
    acc: Tree = ZERO
    n4 = len(idx) // 4 * 4
    for b in range(0, n4, 4):
        acc = (acc, chain(idx[b : b + 4], False))
    rest = idx[n4:]
    if len(rest) >= 2:
        acc, rest = (acc, (rest[0], rest[1])), rest[2:]
    if rest:
        acc = (acc, rest[0])
    return acc


def runs(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[list[int], bool]:
    """ORT's merged shape (adjacent dims both reduced or both kept multiplied) and whether
    its first run is reduced."""
    red = [i in axes for i in range(len(shape))]
    merged = [shape[0]]
    for i in range(1, len(shape)):
        if red[i] == red[i - 1]:
            merged[-1] *= shape[i]
        else:
            merged.append(shape[i])
    return merged, red[0]


def int_rows(shape: tuple[int, ...], axes: tuple[int, ...]) -> list[list[int]]:
    """Per output element (row-major), its reduced input indices in row-major order."""
    n = prod(shape)
    keep = [i for i in range(len(shape)) if i not in axes]
    size = prod(shape[i] for i in axes)
    order = [*keep, *axes]
    strides = [prod(shape[i + 1 :]) for i in range(len(shape))]
    moved = [shape[i] for i in order]
    rows: list[list[int]] = [[] for _ in range(n // size if size else 0)]
    for k in range(n):
        rem, flat = k, 0
        for ax, d in zip(reversed(order), reversed(moved), strict=True):
            rem, j = divmod(rem, d)
            flat += j * strides[ax]
        rows[k // size].append(flat)
    return rows


def _path(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[str, list[int]]:
    """The kernel ORT picks with one thread (module docstring) and the merged shape."""
    merged, first = runs(shape, axes)
    if len(merged) == 1:
        return "R", merged
    if len(merged) == 2:
        big = merged[0] > 16 and max(merged) > 256
        return ("RK" if big else "generic", merged) if first else ("KR", merged)
    if len(merged) == 3 and not first:
        return ("KRK" if merged[0] >= 2 else "generic"), merged
    if len(merged) == 3:
        return ("RKR" if merged[1] >= 2 else "generic"), merged
    return "generic", merged


def float_trees(op: str, shape: tuple[int, ...], axes: tuple[int, ...], dtype: int) -> list[Tree]:
    """The addition tree of every output element (module docstring); ReduceSumSquare's
    leaves stand for x², ReduceMean's trees are then divided by the count."""
    if not shape:
        return [(ZERO, 0)]
    p = lanes(dtype)
    path, m = _path(shape, axes)
    if op == "ReduceSumSquare" and path != "R":
        path = "generic"
    if path == "R":
        return [eigen_tree(list(range(prod(shape))), p, 0)]
    if path == "KR":
        n = m[1]
        return [eigen_tree(list(range(d * n, d * n + n)), p, -d * n % p) for d in range(m[0])]
    if path == "RK":
        return [chain([r * m[1] + j for r in range(m[0])], False) for j in range(m[1])]
    if path == "KRK":
        k0, r, n = m
        order = mlas_tree if dtype != TensorProto.DOUBLE else (lambda ix: chain(ix, True))
        return [order([(d * r + i) * n + j for i in range(r)]) for d in range(k0) for j in range(n)]
    if path == "RKR":
        r1, k, r2 = m
        out: list[Tree] = []
        for j in range(k):
            t: Tree = ZERO
            for i in range(r1):
                base = (i * k + j) * r2
                t = (t, eigen_tree(list(range(base, base + r2)), p, -base % p))
            out.append(t)
        return out
    return [chain(row, True) for row in int_rows(shape, axes)]


def int_kahan(op: str, shape: tuple[int, ...], axes: tuple[int, ...]) -> bool:
    """Whether ORT's int64 kernel for this form uses Kahan compensation (module docstring)."""
    if not shape or op == "ReduceSumSquare":
        return True
    path, _ = _path(shape, axes)
    if path in ("KRK", "RKR", "RK"):
        return False
    return not (path == "KR" and op == "ReduceMean")
