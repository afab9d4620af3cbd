"""Opaque nodes: ops the e-graph carries without looking inside.

An opaque node is the term `(Op domain op_type key inputs)` (`(OpN ...)` with `(Out n i)` per
output when it has several). `key` names its `OpaqueEntry`, everything needed to write it back
exactly as it was. Deterministic nodes with equal op, domain, attributes and arity share a key,
so equal opaque computations on equal inputs share one e-class; a non-deterministic node's key
also holds its name and outputs, so two such nodes never merge.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import onnx

from rewrite.onnx_io.graph import Node
from rewrite.ops.registry import NONDETERMINISTIC


@dataclass
class OpaqueEntry:
    """An opaque node's identity: everything needed to write it back unchanged."""

    op_type: str
    domain: str
    attributes: list[onnx.AttributeProto]
    n_inputs: int
    n_outputs: int
    name: str
    doc_string: str
    output_names: list[str]
    implicit_names: list[str] = field(default_factory=list)
    """Outer-scope names its subgraphs read: they must keep exactly these names."""


def opaque_key(n: Node) -> str:
    """The key of `n`'s entry (module docstring: which nodes share one)."""
    deterministic = n.domain in ("", "ai.onnx") and n.op_type not in NONDETERMINISTIC
    attr_bytes = b"".join(a.SerializeToString() for a in sorted(n.attributes, key=lambda a: a.name))
    ident = n.op_type.encode() + n.domain.encode() + attr_bytes
    ident += f"|{len(n.inputs)}|{len(n.implicit_inputs)}|{len(n.outputs)}".encode()
    if not deterministic:
        ident += b"\0node:" + n.name.encode() + "\0".join(n.outputs).encode()
    return hashlib.sha1(ident).hexdigest()[:16]


def opaque_entry(n: Node) -> OpaqueEntry:
    return OpaqueEntry(
        n.op_type,
        n.domain,
        list(n.attributes),
        len(n.inputs),
        len(n.outputs),
        n.name,
        n.doc_string,
        list(n.outputs),
        list(n.implicit_inputs),
    )
