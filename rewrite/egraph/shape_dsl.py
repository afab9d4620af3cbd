"""The little language the shape rules are written in: egglog snippets over `VecI` shapes
and an `Emitter` that collects one typed op's rules of the `shapes` ruleset.

A dim at or above SYM_BASE is symbolic: rules copy it but never compute with it (`static`
guards every dim that enters arithmetic). Axes are normalised by the rank in the query:
`norm(a, r) = a - r * (a >> 63)` is `a + r` for negative `a`, else `a`.
"""

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
