"""Error metrics of a low-precision output against the exact reference (smaller is better).

- `maxrel`: max |out - ref| / max |ref| (0 when both are 0); the default.
- `cosine`: 1 - cosine similarity of the flattened outputs.
- `top1`: the fraction of rows (last axis) whose argmax changed.

Each reads one output of one feed set; an output's error over several sets is the largest.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

METRICS = ("maxrel", "cosine", "top1")


def maxrel(ref: np.ndarray, out: np.ndarray) -> float:
    r, o = np.asarray(ref, np.float64), np.asarray(out, np.float64)
    if r.size == 0:
        return 0.0
    diff = float(np.max(np.abs(r - o)))
    scale = float(np.max(np.abs(r)))
    if not np.isfinite(diff):
        return float("inf")
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


def cosine(ref: np.ndarray, out: np.ndarray) -> float:
    r = np.asarray(ref, np.float64).ravel()
    o = np.asarray(out, np.float64).ravel()
    nr, no = float(np.linalg.norm(r)), float(np.linalg.norm(o))
    if nr == 0 and no == 0:
        return 0.0
    if nr == 0 or no == 0 or not np.isfinite(nr * no):
        return 1.0
    return max(0.0, 1.0 - float(np.dot(r, o)) / (nr * no))


def top1(ref: np.ndarray, out: np.ndarray) -> float:
    r, o = np.asarray(ref), np.asarray(out)
    if r.ndim == 0 or r.size == 0:
        return 0.0
    return float(np.mean(np.argmax(r, axis=-1) != np.argmax(o, axis=-1)))


def metric(name: str) -> Callable[[np.ndarray, np.ndarray], float]:
    """The metric called `name` (one of `METRICS`)."""
    return {"maxrel": maxrel, "cosine": cosine, "top1": top1}[name]


def errors(
    name: str, refs: list[dict[str, np.ndarray]], outs: list[dict[str, np.ndarray]]
) -> dict[str, float]:
    """Per output, the largest error over the feed sets (non-float outputs must be equal)."""
    fn = metric(name)
    got: dict[str, float] = {}
    for ref, out in zip(refs, outs, strict=True):
        for k, r in ref.items():
            o = out[k]
            if not np.issubdtype(np.asarray(r).dtype, np.floating):
                e = 0.0 if np.array_equal(r, o) else float("inf")
            else:
                e = fn(r, o)
            got[k] = max(got.get(k, 0.0), e)
    return got
