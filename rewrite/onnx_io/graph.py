"""The graph IR: a small, exact view of one ONNX main graph.

`Graph` keeps what optimizing needs as plain Python values (nodes, value types, initializers)
and the rest of the model as the original protobuf `header` (ir_version, opset imports,
metadata, doc strings, graph name, the ValueInfoProtos of graph inputs and outputs), so that
saving writes back everything we did not change. Nodes keep their attribute protos verbatim:
subgraph-bearing ops (If/Loop/Scan) and unknown ops are written back byte for byte.

Invariants: value names are unique (SSA); `inputs` lists every graph input in order; an
initializer that is also a graph input is an input (its value is a default the caller may
override), never a constant.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from rewrite.errors import ModelError
from rewrite.ops.base import TensorType


@dataclass
class Node:
    """One ONNX node. `inputs[i] == ""` is an omitted optional input."""

    op_type: str
    inputs: list[str]
    outputs: list[str]
    name: str = ""
    domain: str = ""
    attributes: list[onnx.AttributeProto] = field(default_factory=list)
    doc_string: str = ""
    implicit_inputs: list[str] = field(default_factory=list)
    """Outer-scope values its subgraphs read (If/Loop/Scan bodies); empty for most ops."""

    @property
    def attrs(self) -> dict[str, Any]:
        """Attribute values as Python values (bytes decoded to str; graphs stay protos)."""
        out: dict[str, Any] = {}
        for a in self.attributes:
            v = onnx.helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode("utf-8", errors="replace")
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [x.decode("utf-8", errors="replace") for x in v]
            out[a.name] = v
        return out

    @property
    def has_subgraph(self) -> bool:
        return any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
            for a in self.attributes
        )

    def label(self) -> str:
        """How errors name this node: `node 'MatMul_12' (MatMul)`."""
        shown = self.name or (self.outputs[0] if self.outputs else "?")
        return f"node '{shown}' ({self.op_type})"


@dataclass
class Graph:
    """A loaded model: main-graph nodes in topological order plus everything else."""

    header: onnx.ModelProto
    """The model with graph.node, graph.initializer and graph.value_info emptied."""
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]
    initializers: dict[str, onnx.TensorProto]
    types: dict[str, TensorType]
    path: Path | None = None
    _arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    notes: list[str] = field(default_factory=list)
    """What loading changed or could not do (opset converted, shape inference failed)."""

    @property
    def opsets(self) -> dict[str, int]:
        """Opset version per domain ("" is ai.onnx)."""
        out = {}
        for o in self.header.opset_import:
            out["" if o.domain == "ai.onnx" else o.domain] = int(o.version)
        return out

    @property
    def opset(self) -> int:
        return self.opsets.get("", 1)

    def array(self, name: str) -> np.ndarray:
        """The numpy value of initializer `name` (cached; read-only).

        Big initializers that `load` read from external data come as read-only maps of the
        data file (see `release_pages`), all others as arrays in memory.
        """
        if name not in self._arrays:
            self._arrays[name] = numpy_helper.to_array(self.initializers[name])
        return self._arrays[name]

    def is_constant(self, name: str) -> bool:
        """True for an initializer that is not also a graph input."""
        return name in self.initializers and name not in self.input_set

    @property
    def input_set(self) -> set[str]:
        return set(self.inputs)

    def producers(self) -> dict[str, Node]:
        """value name -> node producing it."""
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> dict[str, list[Node]]:
        """value name -> nodes reading it (implicit subgraph reads included)."""
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in [*n.inputs, *n.implicit_inputs]:
                if i:
                    out.setdefault(i, []).append(n)
        return out

    def op_counts(self) -> dict[str, int]:
        """Node count per op type (domain-qualified for non-ai.onnx ops)."""
        out: dict[str, int] = {}
        for n in self.nodes:
            key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items()))

    def iter_values(self) -> Iterator[str]:
        yield from self.inputs
        yield from self.initializers
        for n in self.nodes:
            yield from (o for o in n.outputs if o)

    def name(self) -> str:
        return str(self.path) if self.path else (self.header.graph.name or "<model>")

    def require_data(self) -> None:
        """Raise ModelError naming the first initializer whose dims declare elements but which
        holds no values (a hollow model, or weights stripped from the file): folding, encoding
        and saving read every initializer. `load` accepts such models; their graph is whole."""
        for name, t in self.initializers.items():
            if name in self._arrays or has_data(t) or not all(t.dims):
                continue
            raise ModelError(
                f"{self.name()}: tensor '{name}' declares dims {list(t.dims)} but holds no "
                "data: the model's weights are missing (a hollow file, or external data "
                "that was not kept)"
            )


def has_data(t: onnx.TensorProto) -> bool:
    """Whether `t` holds values inline (raw or typed fields; external data once loaded).

    protobuf copies `raw_data` on every read, so a set `raw_data` is read (to see that it is
    not empty) only for tensors of at most 4096 elements; `load` refuses a bigger tensor whose
    data is too short for its dims.
    """
    if t.HasField("raw_data"):
        return prod(t.dims) > 4096 or len(t.raw_data) > 0
    return any(
        len(getattr(t, f))
        for f in ("float_data", "int32_data", "string_data", "int64_data", "double_data",
                  "uint64_data")
    )  # fmt: skip


def release_pages(*arrays: np.ndarray) -> None:
    """Unmap from this process the pages that reading file-mapped `arrays` mapped in.

    They stay in the page cache and map in again when read, so values never change; only the
    process's resident set (and its peak, which `--max-memory` and the report measure) does
    not keep them. A no-op for arrays in memory.
    """
    for arr in arrays:
        base: object = arr
        while isinstance(base, np.ndarray):
            base = base.base
        if isinstance(base, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):  # not on Windows
            base.madvise(mmap.MADV_DONTNEED)
