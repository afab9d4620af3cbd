"""What a proof attempt returns: its status, and for a refuted rule the counterexample (the
case, the inputs, both sides' outputs, and what ORT computed on them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"


@dataclass
class Counterexample:
    """A case where the two sides differ: what, where, and both sides' outputs."""

    rewrite: str
    why: str
    case: dict[str, Any]
    inputs: dict[str, Any] = field(default_factory=dict)
    lhs: Any = None
    rhs: Any = None
    lhs_float64: Any = None
    rhs_float64: Any = None
    lhs_ort: Any = None
    rhs_ort: Any = None
    """Both sides as ORT computes them on `inputs` (the re-run that confirmed it)."""

    def line(self) -> str:
        """One line: the case, the inputs, both outputs."""
        types = ", ".join(
            f"{v}: {self.case['dtypes'][v]}{list(s)}" for v, s in self.case["shapes"].items()
        )
        attrs = self.case.get("attributes")
        where = types + (f"; {fmt(attrs)}" if attrs else "")
        if self.lhs is None:
            return f"{self.why} for {where}"
        ins = " ".join(f"{v}={fmt(x)}" for v, x in self.inputs.items())
        out = pair(self.lhs, self.rhs)
        if self.lhs_float64 is not None:
            out += f" (float64: {pair(self.lhs_float64, self.rhs_float64)})"
        if self.lhs_ort is not None:
            out += f" (ORT: {pair(self.lhs_ort, self.rhs_ort)})"
        return f"{self.why} for {where}: {ins} -> {out}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProofResult:
    status: str
    bound: str
    cases: int
    seconds: float
    counterexample: Counterexample | None = None
    reason: str = ""


def fmt(x: Any, exact: bool = False) -> str:
    """Short text for a value (a number, a nested list, a dict of them): each float as `num`
    gives it, or with `exact` as its shortest float64 repr."""
    if isinstance(x, dict):
        return ", ".join(f"{k}={fmt(v, exact)}" for k, v in x.items())
    if isinstance(x, list | tuple):
        return "[" + ", ".join(fmt(v, exact) for v in x) + "]"
    if isinstance(x, float):
        return repr(x) if exact else num(x)
    return str(x)


_NARROW = ((np.float16, 5), (np.float32, 9))
"""Float types a value may be held exactly in, narrowest first, with the significant digits
that round-trip each (float64: 17)."""


def num(x: float) -> str:
    """`x` with 6 significant digits when they give it back in the narrowest of float16,
    float32, float64 that holds it exactly, else with as many digits as that takes (at most
    5, 9, 17): two different float32 values never print alike."""
    if not np.isfinite(x):
        return f"{x:g}"
    with np.errstate(over="ignore"):  # 1e30 is no float16: the cast gives inf
        kind, most = next(((t, d) for t, d in _NARROW if float(t(x)) == x), (np.float64, 17))
    for digits in range(6, most + 1):
        text = f"{x:.{digits}g}"
        if kind(float(text)) == x:
            return text
    return f"{x:.{most}g}"


def pair(left: Any, right: Any) -> str:
    """`left=... right=...`; when the two print alike but differ (a float32 value and a
    float64 one that shorten to the same digits), both in full float64 digits."""
    a, b = fmt(left), fmt(right)
    if a == b and fmt(left, exact=True) != fmt(right, exact=True):
        a, b = fmt(left, exact=True), fmt(right, exact=True)
    return f"left={a} right={b}"


def unwrap(xs: list[Any]) -> Any:
    return xs[0] if len(xs) == 1 else xs
