"""Read an ONNX file into a `Graph`: checked, typed, topologically ordered, opset-upgraded.

Everything that can be wrong with the file raises a one-line `ModelError` starting with the
path as given and naming the tensor, node or value at fault.
"""

from __future__ import annotations

import os
import sys
from math import prod
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from onnx import external_data_helper, numpy_helper, version_converter

from rewrite.errors import ModelError
from rewrite.onnx_io.graph import Graph, Node
from rewrite.onnx_io.resize10 import keep_resize_meaning
from rewrite.onnx_io.scan8 import keep_scan_batch
from rewrite.onnx_io.shapes import (
    PROTO_LIMIT,
    check_size,
    copy_fields,
    first_line,
    infer_types,
    initializer_type,
    light_copy,
    restore_stubs,
)
from rewrite.onnx_io.structure import check_and_sort, implicit_inputs
from rewrite.onnx_io.tensor_sizes import all_tensors, check_data_size, check_inline_sizes
from rewrite.ops.base import UNKNOWN, TensorType

MAP_MIN_BYTES = 1 << 20
"""Externally stored initializers this large get mapped arrays (see `load`)."""
_HEADER_SKIP = {"node", "initializer", "value_info", "sparse_initializer"}


def load(path: str | Path, *, min_opset: int = 13, target_opset: int = 17) -> Graph:
    """Load the ONNX model at `path` (external data resolved next to it) as a checked `Graph`.

    Models whose ai.onnx opset is below `min_opset` are converted to `target_opset` (and their
    IR version raised to what that opset needs). In models of IR version < 4, which had to list
    every initializer as a graph input, those initializers become constants (as ONNX Runtime
    treats them); in later models an initializer that is also an input stays an input.
    `Graph.notes` says what was changed. Shape inference failures only warn.

    Initializers of MAP_MIN_BYTES or more stored in external data get their `Graph.array`
    value as a read-only map of the data file (`_map_arrays`), not a second copy in memory:
    the file must not change while the graph is in use.
    """
    where = str(path)
    p = Path(path)
    model = _read(p, where)
    _check_header(model, where)
    _check_declared_dims(model.graph, where)
    check_inline_sizes(model, where)
    external = _load_external_data(model, Path(os.path.abspath(p)).parent, where)
    notes: list[str] = []
    upgraded = _upgrade(model, where, min_opset, target_opset, notes)
    types = infer_types(upgraded, where, notes)
    graph = _to_graph(upgraded, p, types, where, notes)
    if upgraded is model:  # the converter rewrites tensors: then its values, not the file's
        graph._arrays.update(_map_arrays(graph, external))
    return graph


def _read(p: Path, where: str) -> onnx.ModelProto:
    """Parse the file (without external data)."""
    if not p.exists():
        raise ModelError(f"{where}: no such file")
    if p.is_dir():
        raise ModelError(f"{where}: is a directory, not an ONNX model file")
    if p.stat().st_size >= 2**31:
        raise ModelError(
            f"{where}: over 2 GB in one file, which protobuf cannot parse; a model this large "
            "must keep its weights in external data"
        )
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ModelError(f"{where}: cannot read the file: {e.strerror or e}") from e
    if not data:
        raise ModelError(f"{where}: the file is empty, not an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        # A ModelProto almost always starts with ir_version (field 1, varint: tag 0x08).
        what = (
            "is a truncated or corrupt ONNX file"
            if data[:1] == b"\x08"
            else "is not an ONNX model (protobuf parse failed)"
        )
        raise ModelError(f"{where}: {what}: {first_line(e)}") from e
    if model.ir_version == 0 or not model.HasField("graph"):
        raise ModelError(f"{where}: is not an ONNX model (no IR version or no graph)")
    return model


def _check_header(model: onnx.ModelProto, where: str) -> None:
    """IR version and opsets readable by the installed onnx; a non-empty graph with outputs."""
    if model.ir_version > onnx.IR_VERSION:
        raise ModelError(
            f"{where}: IR version {model.ir_version} is newer than the installed onnx "
            f"{onnx.__version__} supports (up to {onnx.IR_VERSION}); upgrade onnx"
        )
    opset = _default_opset(model)
    newest = onnx.defs.onnx_opset_version()
    if opset is not None and opset > newest:
        raise ModelError(
            f"{where}: opset {opset} is newer than the installed onnx {onnx.__version__} "
            f"supports (up to {newest}); upgrade onnx"
        )
    if opset is None and any(n.domain in ("", "ai.onnx") for n in model.graph.node):
        raise ModelError(f"{where}: the model uses ai.onnx ops but imports no ai.onnx opset")
    if not model.graph.output:
        raise ModelError(f"{where}: the graph has no outputs")
    if not model.graph.node:
        raise ModelError(f"{where}: the graph is empty (no nodes)")


def _check_declared_dims(graph: onnx.GraphProto, where: str) -> None:
    """Refuse a negative dim declared for a graph input, output or value (subgraphs too).

    No tensor has one, and ONNX's C++ shape inference aborts the whole process on some (its
    Slice inference clamps to [0, dim] with a libstdc++ assertion).
    """
    for kind, infos in (("graph input", graph.input), ("graph output", graph.output),
                        ("value", graph.value_info)):  # fmt: skip
        for vi in infos:
            if vi.type.WhichOneof("value") != "tensor_type":
                continue
            dims = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                    for d in vi.type.tensor_type.shape.dim]  # fmt: skip
            if any(isinstance(d, int) and d < 0 for d in dims):
                raise ModelError(
                    f"{where}: {kind} '{vi.name}' declares a negative dim (shape {dims})"
                )
    for n in graph.node:
        for a in n.attribute:
            for sub in [a.g] if a.HasField("g") else a.graphs:
                _check_declared_dims(sub, where)


def _default_opset(model: onnx.ModelProto) -> int | None:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return None


def _load_external_data(
    model: onnx.ModelProto, base: Path, where: str
) -> dict[str, tuple[Path, int, int, int]]:
    """Read every externally stored tensor (initializers, attributes, subgraphs) into memory.

    Returns where each main-graph initializer's data came from: name -> (file, offset,
    length, data_type).
    """
    out: dict[str, tuple[Path, int, int, int]] = {}
    n_main = len(model.graph.initializer)
    for i, t in enumerate(all_tensors(model.graph)):
        if not external_data_helper.uses_external_data(t):
            continue
        try:
            info = external_data_helper.ExternalDataInfo(t)
        except ValueError as e:
            raise ModelError(f"{where}: tensor '{t.name}': bad external data: {e}") from e
        file = base / info.location
        if not info.location or not file.is_file():
            raise ModelError(
                f"{where}: tensor '{t.name}' keeps its data in '{info.location}', which does "
                f"not exist (looked in {base})"
            )
        size = file.stat().st_size
        end = (info.offset or 0) + (info.length or 0)
        if (info.offset or 0) > size or end > size:
            raise ModelError(
                f"{where}: tensor '{t.name}': external data file '{info.location}' is too "
                f"short ({size} bytes; the tensor needs bytes {info.offset or 0}..{end})"
            )
        try:
            external_data_helper.load_external_data_for_tensor(t, str(base))
        except Exception as e:  # the C++ opener refuses unsafe or unreadable locations
            raise ModelError(
                f"{where}: tensor '{t.name}': cannot read external data "
                f"'{info.location}': {first_line(e)}"
            ) from e
        length = info.length or size - (info.offset or 0)  # what was read: bounds checked above
        check_data_size(t, length, where)
        if i < n_main:
            out[t.name] = (file, info.offset or 0, length, t.data_type)
    return out


def _map_arrays(
    graph: Graph, external: dict[str, tuple[Path, int, int, int]]
) -> dict[str, np.ndarray]:
    """Read-only numpy maps of the data files for the big externally stored initializers.

    Only where the bytes are numpy's own layout (a little-endian machine, a plain numeric or
    bool dtype) and the dims hold exactly the bytes read: then the map equals
    `numpy_helper.to_array` of the tensor.
    """
    out: dict[str, np.ndarray] = {}
    if sys.byteorder != "little":
        return out
    for name, (file, offset, length, dtype_id) in external.items():
        t = graph.initializers.get(name)
        if length < MAP_MIN_BYTES or t is None or t.data_type != dtype_id:
            continue
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype_id))
        except (KeyError, TypeError, ValueError):
            continue
        shape = tuple(int(d) for d in t.dims)
        if dtype.kind not in "fiubc" or dtype.type.__module__ != "numpy":
            continue
        if prod(shape) * dtype.itemsize != length:
            continue
        mapped = np.memmap(file, dtype=dtype, mode="r", offset=offset, shape=shape)
        out[name] = mapped.view(np.ndarray)
    return out


def _upgrade(
    model: onnx.ModelProto, where: str, min_opset: int, target: int, notes: list[str]
) -> onnx.ModelProto:
    """Convert an old opset to `target`; make IR<4 initializer-inputs constants."""
    opset = _default_opset(model)
    changed = False
    if opset is not None and opset < min_opset:
        light = light_copy(model)
        check_size(light, where, f"convert its opset {opset} to {target}")
        try:
            converted = version_converter.convert_version(light, target)
            restore_stubs(converted, model)
            if opset < 9:  # the converter drops Scan-8's batch axis from the interface only
                keep_scan_batch(light, converted, where)
            keep_resize_meaning(model, converted, opset, where)
            if converted.ByteSize() < PROTO_LIMIT:
                onnx.checker.check_model(converted)
        except ModelError:
            raise
        except Exception as e:  # the converter fails with bare C++ assertions
            raise ModelError(
                f"{where}: opset {opset} is older than supported {min_opset} and could not "
                f"be converted to {target}: {first_line(e)}"
            ) from e
        notes.append(
            f"converted from opset {opset} to {target} "
            f"({len(model.graph.node)} -> {len(converted.graph.node)} nodes)"
        )
        model, changed = converted, True
    if model.ir_version < 4:
        inits = {t.name for t in model.graph.initializer}
        kept = [vi for vi in model.graph.input if vi.name not in inits]
        if len(kept) < len(model.graph.input):
            notes.append(
                f"IR version {model.ir_version}: {len(model.graph.input) - len(kept)} "
                "initializers listed as graph inputs are constants"
            )
            del model.graph.input[:]
            model.graph.input.extend(kept)
            changed = True
    if changed:
        need = onnx.helper.find_min_ir_version_for(list(model.opset_import), True)
        model.ir_version = max(model.ir_version, 4, need)
    return model


def _to_graph(
    model: onnx.ModelProto,
    p: Path,
    types: dict[str, TensorType],
    where: str,
    notes: list[str],
) -> Graph:
    """Split the model into header, nodes and initializers; check and order the nodes."""
    header = onnx.ModelProto()
    copy_fields(model, {"graph"}, header)
    copy_fields(model.graph, _HEADER_SKIP, header.graph)
    initializers: dict[str, onnx.TensorProto] = {}
    for t in [*model.graph.initializer, *map(_densify, model.graph.sparse_initializer)]:
        if t.name in initializers:
            raise ModelError(f"{where}: initializer '{t.name}' is declared twice")
        initializers[t.name] = t
    if model.graph.sparse_initializer:
        notes.append(f"{len(model.graph.sparse_initializer)} sparse initializers made dense")
    nodes = [
        Node(
            op_type=n.op_type,
            inputs=list(n.input),
            outputs=list(n.output),
            name=n.name,
            domain=n.domain,
            attributes=list(n.attribute),
            doc_string=n.doc_string,
            implicit_inputs=implicit_inputs(n.attribute),
        )
        for n in model.graph.node
    ]
    inputs = [vi.name for vi in header.graph.input]
    outputs = [vi.name for vi in header.graph.output]
    nodes = check_and_sort(nodes, inputs, initializers, outputs, where)
    for t in initializers.values():
        types[t.name] = initializer_type(t)
    for name in [*inputs, *(o for n in nodes for o in n.outputs if o)]:
        types.setdefault(name, UNKNOWN)
    return Graph(
        header=header,
        nodes=nodes,
        inputs=inputs,
        outputs=outputs,
        initializers=initializers,
        types=types,
        path=p.resolve(),
        notes=notes,
    )


def _densify(sp: onnx.SparseTensorProto) -> onnx.TensorProto:
    """The dense TensorProto of a sparse initializer (indices linear [NNZ] or [NNZ, rank])."""
    values = numpy_helper.to_array(sp.values)
    dims = [int(d) for d in sp.dims]
    dense = np.zeros(prod(dims), dtype=values.dtype)
    if sp.HasField("indices") and values.size:
        idx = numpy_helper.to_array(sp.indices).astype(np.int64)
        flat = idx if idx.ndim == 1 else np.ravel_multi_index(tuple(idx.T), dims)
        dense[flat] = values.reshape(-1)
    return numpy_helper.from_array(dense.reshape(dims), sp.values.name)
