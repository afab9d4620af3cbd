"""Adversarial values for sampling: each dtype's special values, and input sets built from them.

`special_values(dtype)` is the pool of values that break rules which hold in the reals: for
floating dtypes ±0, ±inf, NaN, subnormals (the smallest, and 1e-40), the smallest normal,
large magnitudes (1e30, 3e38, the dtype's max), values near 1 (1 ± one ulp), rounding
boundaries (0.5, 2.5, 2^24 + 1, 65504 / 65520 for float16, 2^31, 2^53), exp's overflow and
underflow points (±89, ±100), cancellation partners (1e-3 with 1e4, 1e-8); for integer
dtypes 0, ±1, ±2, small odd numbers, 2^24 + 1, 2^31 - 1, 2^31, 2^32, 2^53 + 1, 2^62, the
dtype's min, min + 1, max - 1 and max; for bool, both values. Every value is cast to the dtype
(a value the dtype cannot hold becomes what the cast gives: 1e30 in float16 is inf) and
repeated values (by their bits) are dropped.

`draw_rounds(tensors, fixed, rng, rounds)` gives the input sets of one case, each a dict
variable -> array: `normal` (N(0, 1) floats, integers in [-5, 5] without 0), `latin` (element
i of the j-th variable is pool[(i + r·(j + 1)) mod p]: over p rounds every pair of pool values
meets in the first two variables, elementwise), `specials` (every element drawn from the pool)
and `mixed` (each element from the pool with probability 0.3, else normal). `satisfying` then
redraws the elements that a rule's per-element condition (`w.all(...)`) excludes.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import numpy as np
from onnx import TensorProto, helper

from rewrite.ops.base import TensorType
from rewrite.rules.elements import Cond, holds_np

Array = np.ndarray

_FLOAT_SPECIALS = (
    0.0, -0.0, float("inf"), float("-inf"), float("nan"),
    1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 2.5, -2.5, 0.1, 3.0,
    1.0 - 2.0**-24, 1.0 + 2.0**-23, -(1.0 + 2.0**-23),
    1e-3, 1e4, -1e4, 1e-8, 1e-30, -1e-30,
    1e30, -1e30, 3e38, -3e38, 1e-40, -1e-45,
    20.0, -20.0, 89.0, -89.0, 100.0, -100.0,
    65504.0, 65520.0, 2.0**24 + 1, 2.0**31, -(2.0**31), 2.0**53,
)  # fmt: skip
_INT_SPECIALS = (
    0, 1, -1, 2, -2, 3, -3, 7, -7, 255, 256, -129, 65536,
    2**24 + 1, -(2**24 + 1), 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32,
    2**53 + 1, 2**62, -(2**62),
)  # fmt: skip


def np_dtype(dtype: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(dtype))


@cache
def special_values(dtype: int) -> Array:
    """The special values of an ONNX element type (see the module docstring), in that dtype."""
    dt = np_dtype(dtype)
    if dtype == TensorProto.BOOL:
        return np.array([False, True])
    if dt.kind == "f":
        fi = np.finfo(dt)
        extra = (float(fi.max), -float(fi.max), float(fi.tiny), float(fi.smallest_subnormal))
        with np.errstate(all="ignore"):
            vals = np.array(_FLOAT_SPECIALS + extra, dtype=np.float64).astype(dt)
    else:
        ii = np.iinfo(dt)
        ints = [*_INT_SPECIALS, ii.min, ii.min + 1, ii.max - 1, ii.max]
        vals = np.array([v for v in ints if ii.min <= v <= ii.max], dtype=object).astype(dt)
    seen: set[bytes] = set()
    keep = []
    for v in vals:
        b = v.tobytes()
        if b not in seen:
            seen.add(b)
            keep.append(v)
    return np.array(keep, dtype=dt)


def one(dtype: int) -> Array:
    """The value 1 (True) of a dtype: what shrinking puts where a value does not matter."""
    return np.ones((), dtype=np_dtype(dtype))


def normal(t: TensorType, rng: np.random.Generator) -> Array:
    """Benign random values: N(0, 1) floats (rounded to float32), integers in ±[1, 5]."""
    shape = _shape(t)
    dt = np_dtype(t.dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind in "iu":
        mag = rng.integers(1, 6, size=shape)
        signs = rng.choice([-1, 1], size=shape) if dt.kind == "i" else 1
        return np.asarray(mag * signs).astype(dt)
    return rng.normal(0.0, 1.0, size=shape).astype(np.float32).astype(dt)


def _shape(t: TensorType) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape or ())  # type: ignore[arg-type]


def _latin(t: TensorType, j: int, r: int) -> Array:
    pool = special_values(t.dtype)
    n = int(np.prod(_shape(t), dtype=np.int64))
    idx = (np.arange(n) + r * (j + 1)) % len(pool)
    return pool[idx].reshape(_shape(t))


def _specials(t: TensorType, rng: np.random.Generator, p: float) -> Array:
    pool = special_values(t.dtype)
    base = normal(t, rng)
    picks = pool[rng.integers(0, len(pool), size=base.shape)]
    return np.where(rng.random(base.shape) < p, picks, base).astype(base.dtype)


def satisfying(
    values: dict[str, Array],
    conds: dict[str, list[Cond]],
    rng: np.random.Generator,
) -> dict[str, Array]:
    """`values` with every element that breaks a per-element condition of its variable
    (`w.all(...)`, `conds`) replaced by one drawn from the values of its dtype that satisfy
    them all (special values first, then normal ones); left as it is when none does."""
    out = dict(values)
    for v, cs in conds.items():
        if v not in out:
            continue
        a = np.asarray(out[v])
        bad = np.zeros(a.shape, dtype=bool)
        for c in cs:
            bad |= ~holds_np(c, a)
        if not bad.any():
            continue
        flat = a.reshape(-1)
        pool = np.concatenate(
            [special_values(helper.np_dtype_to_tensor_dtype(a.dtype)), flat, _wide(a.dtype, rng)]
        )
        ok = np.ones(pool.shape, dtype=bool)
        for c in cs:
            ok &= holds_np(c, pool)
        if not ok.any():
            continue
        good = pool[ok].astype(a.dtype)
        fixed = np.where(bad, good[rng.integers(0, len(good), size=a.shape)], a)
        out[v] = fixed.astype(a.dtype, copy=False)
    return out


def _wide(dtype: np.dtype, rng: np.random.Generator) -> Array:
    """Values of `dtype` over many magnitudes (for conditions that exclude the usual ones)."""
    if dtype.kind == "f":
        with np.errstate(all="ignore"):
            mags = 10.0 ** rng.uniform(-30, 30, size=64)
            return (mags * rng.choice([-1.0, 1.0], size=64)).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -(2**40)), min(info.max, 2**40), size=64).astype(dtype)
    return np.asarray([False, True], dtype=dtype)


def draw_rounds(
    tensors: dict[str, TensorType],
    fixed: dict[str, Array],
    rng: np.random.Generator,
    rounds: int,
) -> Iterator[tuple[str, dict[str, Array]]]:
    """`rounds` input sets (kind, values) for one case; `fixed` variables keep their value.
    The first two are `normal`, then `latin`, `specials` and `mixed` in turn."""
    names = list(tensors)
    pool_size = max((len(special_values(t.dtype)) for t in tensors.values()), default=1)
    for k in range(rounds):
        kind = "normal" if k < 2 else ("latin", "specials", "mixed")[(k - 2) % 3]
        out: dict[str, Array] = {}
        for j, v in enumerate(names):
            t = tensors[v]
            if v in fixed:
                out[v] = fixed[v]
            elif kind == "normal":
                out[v] = normal(t, rng)
            elif kind == "latin":
                out[v] = _latin(t, j, int(rng.integers(0, pool_size)))
            else:
                out[v] = _specials(t, rng, 1.0 if kind == "specials" else 0.3)
        yield kind, out
