"""The op registry: (domain, op_type) -> OpSpec. Op modules call `register` at import."""

from __future__ import annotations

from rewrite.ops.base import OpSpec

_SPECS: dict[tuple[str, str], OpSpec] = {}

NONDETERMINISTIC = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)
"""ai.onnx ops whose equal calls must not be merged or folded (every call is a fresh draw)."""


def foldable_op(op_type: str, domain: str = "") -> bool:
    """Whether a node of this op whose inputs are all constant is itself a constant: a
    deterministic ai.onnx op we have a spec for (its value is what ORT computes once)."""
    return (
        domain in ("", "ai.onnx")
        and op_type not in NONDETERMINISTIC
        and lookup(op_type, domain) is not None
    )


def register(spec: OpSpec) -> OpSpec:
    """Add `spec`; registering the same (domain, name) twice is a bug."""
    if spec.key in _SPECS:
        raise ValueError(f"op {spec.domain or 'ai.onnx'}::{spec.name} registered twice")
    _SPECS[spec.key] = spec
    return spec


def lookup(op_type: str, domain: str = "") -> OpSpec | None:
    """The spec of an op, or None for an op we treat as opaque."""
    if domain == "ai.onnx":
        domain = ""
    return _SPECS.get((domain, op_type))


def all_specs() -> list[OpSpec]:
    return sorted(_SPECS.values(), key=lambda s: (s.domain, s.name))
