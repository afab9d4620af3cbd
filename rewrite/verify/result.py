"""What a proof attempt returns: its status, and for a refuted rule the counterexample (the
case, the inputs, both sides' outputs, and what ORT computed on them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

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
        out = f"left={fmt(self.lhs)} right={fmt(self.rhs)}"
        if self.lhs_float64 is not None:
            out += f" (float64: left={fmt(self.lhs_float64)} right={fmt(self.rhs_float64)})"
        if self.lhs_ort is not None:
            out += f" (ORT: left={fmt(self.lhs_ort)} right={fmt(self.rhs_ort)})"
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


def fmt(x: Any) -> str:
    if isinstance(x, dict):
        return ", ".join(f"{k}={fmt(v)}" for k, v in x.items())
    if isinstance(x, list | tuple):
        return "[" + ", ".join(fmt(v) for v in x) + "]"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def unwrap(xs: list[Any]) -> Any:
    return xs[0] if len(xs) == 1 else xs
