"""ONNX Runtime's ops in the ONNX domain: the schemas ORT registers under domain "" that the
installed onnx does not define (SimplifiedLayerNormalization above all: RMSNorm), read from
the installed onnxruntime at run time (`get_all_operator_schema`), nothing hard-coded.

onnx.checker knows only onnx's schemas, so it rejects any model holding one of these ops
("No Op registered for ..."). `ort_schemas_known` makes it check them against ORT's own
schemas instead (inputs, outputs, attributes and type constraints; ORT's shape inference is
not available from Python, so their outputs' types are left to what the model declares).
A model that uses these ops runs only in ONNX Runtime: it is not portable.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import onnx
import onnx.defs

ONNX_DOMAINS = ("", "ai.onnx")
_LOCK = threading.RLock()


@cache
def _onnx_ops() -> frozenset[str]:
    """Every op the installed onnx defines in the ONNX domain, at any version."""
    return frozenset(s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == "")


@cache
def ort_schemas() -> tuple[onnx.defs.OpSchema, ...]:
    """ORT's schemas (every version) of the ops it registers in the ONNX domain that onnx does
    not define, as onnx OpSchemas, oldest version first; () without onnxruntime."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as ort_c  # type: ignore
    except ImportError:
        return ()
    known = _onnx_ops()
    found = [
        s
        for s in ort_c.get_all_operator_schema()
        if s.domain in ONNX_DOMAINS and s.name not in known
    ]
    return tuple(_to_onnx(s) for s in sorted(found, key=lambda s: (s.since_version, s.name)))


@cache
def ort_only_ops() -> frozenset[str]:
    """Names of the ops ORT registers in the ONNX domain and onnx does not define."""
    return frozenset(s.name for s in ort_schemas())


def is_ort_only(domain: str, op_type: str) -> bool:
    """Whether (domain, op_type) is an op of the ONNX domain that only ORT defines."""
    if domain not in ONNX_DOMAINS or op_type in _onnx_ops():
        return False  # the common case: no onnxruntime import
    return op_type in ort_only_ops()


def ort_only_used(ops: Iterable[tuple[str, str]]) -> list[str]:
    """The ORT-only ONNX-domain ops among (domain, op_type) pairs, sorted, each once."""
    return sorted({op for domain, op in ops if is_ort_only(domain, op)})


def model_ops(graph: onnx.GraphProto) -> Iterator[tuple[str, str]]:
    """(domain, op_type) of every node of `graph` and of its subgraphs."""
    for n in graph.node:
        yield n.domain, n.op_type
        yield from attribute_ops(n.attribute)


def attribute_ops(attributes: Iterable[onnx.AttributeProto]) -> Iterator[tuple[str, str]]:
    """(domain, op_type) of every node of the subgraphs held by `attributes`."""
    for a in attributes:
        if a.HasField("g"):
            yield from model_ops(a.g)
        for sub in a.graphs:
            yield from model_ops(sub)


@contextmanager
def ort_schemas_known() -> Iterator[None]:
    """Within the block, onnx.defs (and so onnx.checker) knows `ort_schemas()`; they are
    removed again on leaving it, so the rest of the process sees onnx's registry unchanged.
    Held under a process-wide lock: one such block at a time (re-entrant)."""
    with _LOCK:
        added: list[onnx.defs.OpSchema] = []
        try:
            for s in ort_schemas():
                if not _registered(s):
                    onnx.defs.register_schema(s)
                    added.append(s)
            yield
        finally:
            for s in reversed(added):
                onnx.defs.deregister_schema(s.name, s.since_version, s.domain)


def _registered(s: onnx.defs.OpSchema) -> bool:
    """Whether onnx's registry has `s`'s op at exactly `s`'s version."""
    try:
        found = onnx.defs.get_schema(s.name, s.since_version, s.domain)
    except onnx.defs.SchemaError:
        return False
    return bool(found.since_version == s.since_version)


def _to_onnx(s: Any) -> onnx.defs.OpSchema:
    """An ORT pybind OpSchema as an onnx OpSchema in domain "" (same name, version,
    parameters, type constraints and attributes)."""
    op = onnx.defs.OpSchema

    def param(p: Any) -> onnx.defs.OpSchema.FormalParameter:
        return op.FormalParameter(
            p.name,
            p.typeStr,
            p.description,
            param_option=getattr(op.FormalParameterOption, p.option.name),
            is_homogeneous=p.isHomogeneous,
        )

    return op(
        s.name,
        "",
        s.since_version,
        s.doc or "",
        inputs=[param(p) for p in s.inputs],
        outputs=[param(p) for p in s.outputs],
        type_constraints=[
            (t.type_param_str, list(t.allowed_type_strs), t.description) for t in s.type_constraints
        ],
        attributes=[
            op.Attribute(
                a.name, getattr(op.AttrType, a.type.name), a.description, required=a.required
            )
            for a in s.attributes.values()
        ],
    )
