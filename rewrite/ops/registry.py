"""The op registry: (domain, op_type) -> OpSpec. Op modules call `register` at import."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

import onnx

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


def second_forms(op_type: str, domain: str = "") -> list[OpSpec]:
    """The other typed forms of an ONNX op (specs whose `onnx_op` is `op_type`: ReshapeDyn
    for Reshape), tried by encode when the op's own typed form does not fit a node."""
    if domain == "ai.onnx":
        domain = ""
    return [s for s in all_specs() if s.onnx_op == op_type and s.domain == domain]


def all_specs() -> list[OpSpec]:
    return sorted(_SPECS.values(), key=lambda s: (s.domain, s.name))


BASE_OPSET = 17
"""The ai.onnx opset the typed ops' forms are written for (a model is upgraded to >= 13 on
load; rules' sides and the self-test's one-op models are built at this opset)."""


@cache
def _first_versions() -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        key = (s.domain, s.name)
        out[key] = min(out.get(key, s.since_version), s.since_version)
    return out


def since_version(op_type: str, domain: str = "") -> int:
    """The first opset of `domain` that has `op_type` (Mish: 18, Gelu: 20); 1 for an op the
    installed onnx does not know (custom domains such as com.microsoft)."""
    return _first_versions().get(("" if domain == "ai.onnx" else domain, op_type), 1)


def opset_for(ops: Iterable[tuple[str, str]]) -> int:
    """The ai.onnx opset of a model made of `ops` ((op_type, domain) pairs): `BASE_OPSET`,
    or the first opset that has every ai.onnx op of them when one is newer."""
    need = [since_version(op, d) for op, d in ops if d in ("", "ai.onnx")]
    return max([BASE_OPSET, *need])
