"""The cases adversarial sampling runs: the sampling bound `LARGE` and `choose_cases`.

`LARGE`: ranks 0-6 (one-element shapes at every rank), dims up to 6, float32, int64, int32,
float16 and float64 variables (ORT refuses what its kernels lack: no case), every Cast target
among them plus bool, int8 and uint8. `choose_cases(rule, n, rng)` adds dims on both sides of
every small integer constant in the rule (`ends=3`: 2, 3, 4, 6; `dim(-1) % 8`: 7, 8, 9, 16),
enumerates the rule's cases (all shape combinations when there are few, random subsets of
shapes otherwise), and picks `n`: dtype combinations in turn, a random shape combination of
each, a random case of it (attribute values); smallest first.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import islice
from typing import Any

import numpy as np
from onnx import TensorProto

from rewrite.rules.language import App, Lit, Term, Var, subterms
from rewrite.rules.rule import Rule
from rewrite.verify.bound import Bound
from rewrite.verify.cases import Case, Fallback, cases

ATTEMPTS = 3_000_000
"""Typings `choose_cases` tries per rule (`cases`' attempts, shared by its bounds and
rewrites): about 30 s of enumeration. A rule that needs more (Conv's open attributes times
BatchNormalization's four vectors) gets the cases found within it; `sample` notes the
rewrites left without one."""
LARGE_SHAPES: tuple[tuple[int, ...], ...] = (
    (), (1,), (6,),
    (1, 1), (1, 6), (4, 1), (4, 6), (6, 4),
    (1, 1, 1), (4, 1, 6), (1, 6, 4), (4, 6, 4),
    (1, 4, 1, 6), (4, 1, 6, 1), (4, 6, 1, 4),
    (1, 1, 1, 1, 1), (2, 1, 3, 1, 2),
    (1, 1, 1, 1, 1, 1), (1, 2, 1, 2, 1, 3),
)  # fmt: skip
_P = TensorProto
LARGE = Bound(
    shapes=LARGE_SHAPES,
    few=((), (1,), (6,), (4, 6), (4, 1, 6), (2, 1, 3, 1, 2)),
    dtypes=(_P.FLOAT, _P.INT64, _P.INT32, _P.FLOAT16, _P.DOUBLE),
    cast_to=(_P.FLOAT, _P.INT64, _P.DOUBLE, _P.INT32, _P.FLOAT16, _P.BOOL, _P.INT8, _P.UINT8),
)
"""The sampling bound (see the module docstring)."""


def _constants(rule: Rule) -> list[int]:
    """Small positive integer constants of the rule (attribute literals, guard literals)."""
    found: set[int] = set()

    def walk(x: Any) -> None:
        if isinstance(x, Lit):
            vals = x.value if isinstance(x.value, tuple | list) else (x.value,)
            found.update(int(v) for v in vals if isinstance(v, int) and 2 <= abs(v) <= 64)
        elif isinstance(x, Term):
            for s in subterms(x):
                if isinstance(s, App):
                    for _, v in s.attrs:
                        walk(v)
        for name in ("left", "right", "parts", "args"):
            sub = getattr(x, name, None)
            for y in sub if isinstance(sub, tuple | list) else (sub,) if sub is not None else ():
                walk(y)

    for rw in rule.rewrites:
        for t in (*rw.lhs, *rw.rhs, *rw.guards):
            walk(t)
    return sorted({abs(v) for v in found})


def constant_shapes(rule: Rule) -> list[tuple[int, ...]]:
    """Shapes with dims on both sides of each integer constant k of the rule."""
    extra: list[tuple[int, ...]] = []
    for k in _constants(rule):
        extra += [(k - 1,), (k,), (k + 1,), (2 * k,), (2, k + 1)]
    return extra


def choose_cases(rule: Rule, n: int, rng: np.random.Generator) -> list[Case]:
    """Up to `n` cases of `rule`, spread over shape combinations, smallest first, and one more
    for each rewrite they leave out (where one was found)."""
    extra = constant_shapes(rule)
    shapes = tuple(dict.fromkeys((*LARGE_SHAPES, *(s for s in extra if min(s) >= 1))))
    bounds = [replace(LARGE, shapes=shapes, few=LARGE.few + tuple(extra[:4]))]
    n_vars = max(len({s.name for t in rw.lhs for s in subterms(t) if isinstance(s, Var)})
                 for rw in rule.rewrites)  # fmt: skip
    fallback = None
    if len(shapes) ** n_vars > 1500:  # too many combinations to enumerate: random subsets
        m = max(3, int(300 ** (1 / n_vars)))
        bounds = []
        for _ in range(12):
            pick = rng.choice(len(shapes), size=min(m, len(shapes)), replace=False)
            sub = tuple(shapes[int(i)] for i in sorted(pick))
            bounds.append(replace(LARGE, shapes=sub, few=sub))
        fallback = _of_rank(shapes, m, n_vars)  # its own generator: rng draws as before
    groups: dict[Any, dict[Any, list[Case]]] = {}
    by_rewrite: dict[int, list[Case]] = {}
    n_rw = len(rule.rewrites)  # every rewrite its share of each bound
    tries, cap = ATTEMPTS // (len(bounds) * n_rw), max(1, 3000 // (len(bounds) * n_rw))
    for b in bounds:
        found = (c for k in range(n_rw) for c in islice(cases(rule, b, tries, k, fallback), cap))
        for c in found:
            dts = tuple(t.dtype for t in c.tensors.values())
            shapes_ = tuple(t.shape for t in c.tensors.values())
            groups.setdefault(dts, {}).setdefault(shapes_, []).append(c)
            by_rewrite.setdefault(c.index, []).append(c)
    chosen = _spread(groups, n, rng)
    have = {c.index for c in chosen}
    for k, found_k in sorted(by_rewrite.items()):  # every rewrite found gets one case at least
        if k not in have:
            chosen.append(found_k[int(rng.integers(0, len(found_k)))])
    return sorted(chosen, key=_size)


def _of_rank(shapes: tuple[tuple[int, ...], ...], m: int, seed: int) -> Fallback:
    """A `cases` fallback: m random shapes of the rank asked for (seeded; the same ones for a
    variable and rank whatever the bound)."""
    rng = np.random.default_rng(seed)
    picked: dict[tuple[str, int], tuple[tuple[int, ...], ...]] = {}

    def fallback(v: str, r: int) -> tuple[tuple[int, ...], ...]:
        if (v, r) not in picked:
            pool = [s for s in shapes if len(s) == r]
            idx = rng.choice(len(pool), size=min(m, len(pool)), replace=False) if pool else []
            picked[(v, r)] = tuple(pool[int(i)] for i in sorted(idx))
        return picked[(v, r)]

    return fallback


def _spread(
    groups: dict[Any, dict[Any, list[Case]]], n: int, rng: np.random.Generator
) -> list[Case]:
    """`n` cases: dtype combinations in turn, a random shape combination of each, a random
    case of it (attribute values)."""
    chosen: list[Case] = []
    by_dtype = [list(g.values()) for g in groups.values()]
    while len(chosen) < n and any(any(g) for g in by_dtype):
        for shape_groups in by_dtype:
            live = [g for g in shape_groups if g]
            if live and len(chosen) < n:
                g = live[int(rng.integers(0, len(live)))]
                chosen.append(g.pop(int(rng.integers(0, len(g)))))
    return chosen


def _size(c: Case) -> int:
    return sum(t.numel or 0 for t in c.tensors.values())
