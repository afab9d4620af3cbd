"""Write a `Graph` back to ONNX: exact header, used initializers only, atomic, checked.

The destination is only ever replaced by a complete file that `onnx.checker` (full check,
with ORT's ONNX-domain ops known: `onnx_io.check.run_checker`) accepted: the model (and its
external data, for large models) is written to temporary files in the destination folder,
checked there, then renamed into place.

Memory: `save` never builds a ModelProto holding the weights. The model is written from a
*skeleton* (header, nodes, graph inputs and outputs: no initializers) and the graph's own
initializer protos, one tensor at a time: external data is written from each tensor's bytes
(its inline part gets a stub), and a single file is the skeleton's serialization with every
initializer's spliced in where protobuf puts them, so the bytes are exactly those of
`to_model(graph).SerializeToString()`. The most held at once beyond the graph is one tensor's
serialization.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import Message  # type: ignore[import-untyped]
from onnx import numpy_helper

from rewrite.errors import ModelError
from rewrite.files import make_temp
from rewrite.onnx_io.check import CHECKS, CheckerError, run_checker
from rewrite.onnx_io.graph import Graph, Node
from rewrite.onnx_io.shapes import add_light, copy_fields, first_line

EXTERNAL_THRESHOLD = int(1.8e9)
"""Models whose serialized size exceeds this are written with external data."""
EXTERNAL_MIN_BYTES = 1024
"""In external-data files, tensors smaller than this stay inside the model file."""
PROTO_MAX = 2**31 - 1
"""protobuf's limit on one serialized message (a model written as a single file)."""
_ALIGN = 4096
_MS_DOMAIN = "com.microsoft"
_MODEL_GRAPH = onnx.ModelProto.DESCRIPTOR.fields_by_name["graph"].number
_GRAPH_INITIALIZER = onnx.GraphProto.DESCRIPTOR.fields_by_name["initializer"].number
_RAW_DATA = onnx.TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number
_DATA_FIELDS = {
    "raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data",
    "uint64_data", "external_data", "data_location",
}  # fmt: skip


def to_model(graph: Graph) -> onnx.ModelProto:
    """The ModelProto of `graph`: header + nodes + the initializers something still reads.

    Graph inputs/outputs follow `graph.inputs`/`graph.outputs`, with the header's
    ValueInfoProtos (names, order, types) where the header has them and ones made from
    `graph.types` for new names. Initializers that are graph inputs are always kept. The
    original opset imports are kept; `com.microsoft` (version 1) is added when a node uses it
    and dropped when nothing does. Stale value_info is not written. The initializers are
    copied into the result: `save` writes big models without this copy.
    """
    m = _skeleton(graph)
    m.graph.initializer.extend(_used_initializers(graph))
    return m


def light_model(graph: Graph) -> onnx.ModelProto:
    """`to_model(graph)` with initializers of STUB_BYTES or more as stubs (for shape inference)."""
    m = _skeleton(graph)
    add_light(_used_initializers(graph), m.graph)
    return m


def _skeleton(graph: Graph) -> onnx.ModelProto:
    """`to_model(graph)` without the initializers."""
    m = onnx.ModelProto()
    m.CopyFrom(graph.header)
    g = m.graph
    for name in ("node", "initializer", "value_info", "sparse_initializer", "input", "output"):
        g.ClearField(name)
    g.input.extend(_value_infos(graph, graph.header.graph.input, graph.inputs))
    g.output.extend(_value_infos(graph, graph.header.graph.output, graph.outputs))
    g.node.extend(_node_proto(n) for n in graph.nodes)
    _fix_opsets(m)
    return m


def _used_initializers(graph: Graph) -> list[onnx.TensorProto]:
    """The graph's initializers that a node, a graph output or a graph input names, in order."""
    used = {i for n in graph.nodes for i in [*n.inputs, *n.implicit_inputs] if i}
    used.update(graph.outputs, graph.inputs)
    return [t for name, t in graph.initializers.items() if name in used]


def save(
    graph: Graph,
    path: str | Path,
    *,
    source: str | Path | None = None,
    external: bool | None = None,
    check: str = "full",
    name: str | Path | None = None,
) -> None:
    """Write `graph` to `path` atomically and check it with `onnx.checker` at level `check`
    (CHECKS: the full check by default).

    Refuses (ModelError) to write over `source` or over the file `graph` was loaded from,
    into a folder that does not exist or is not writable, or onto a directory. Models over
    EXTERNAL_THRESHOLD bytes (or any, with `external=True`) are written with their weights in
    `NAME.data` next to `path`. If the checker rejects the model nothing is left behind and
    CheckerError carries the checker's first line; on any exception (KeyboardInterrupt included)
    the temporary files are removed and the destination is untouched. Messages start with
    `name` (the path the user asked for, when `path` is a staging file), else `path`.
    """
    if check not in CHECKS:
        raise ValueError(f"check must be one of {CHECKS}, not {check!r}")
    out = Path(os.path.abspath(path))
    where = str(path if name is None else name)
    data_path = out.with_name(out.name + ".data")
    for src in (source, graph.path):
        if src is not None and (_same(out, Path(src)) or _same(data_path, Path(src))):
            raise ModelError(
                f"{where}: refusing to overwrite the input model '{src}'; choose another "
                "output path"
            )
    folder = out.parent
    if not folder.is_dir():
        raise ModelError(f"{where}: cannot write: folder '{folder}' does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ModelError(f"{where}: cannot write: folder '{folder}' is not writable")
    if out.is_dir():
        raise ModelError(f"{where}: cannot write: it is a directory")
    skeleton, tensors = _skeleton(graph), _used_initializers(graph)
    if external is None:
        external = _estimated_size(skeleton, tensors) > EXTERNAL_THRESHOLD
    temps: list[Path] = []
    try:
        if external:
            _write_external(skeleton, tensors, out, data_path, where, temps, check)
        else:
            _write_single(skeleton, tensors, out, where, temps, check)
    finally:
        for t in temps:
            with contextlib.suppress(FileNotFoundError):
                t.unlink()


def _write_single(
    skeleton: onnx.ModelProto,
    tensors: list[onnx.TensorProto],
    out: Path,
    where: str,
    temps: list[Path],
    check: str,
) -> None:
    """The whole model in one file, written tensor by tensor (see the module docstring)."""
    tmp = _temp(out, ".tmp", where, temps)
    try:
        sizes = [t.ByteSize() for t in tensors]
    except Exception as e:  # protobuf refuses messages over 2 GB (error type varies by backend)
        raise ModelError(f"{where}: model too large for one file ({first_line(e)})") from e
    head, tail = _split(skeleton, _MODEL_GRAPH)
    graph_head, graph_tail = _split(skeleton.graph, _GRAPH_INITIALIZER)
    graph_size = len(graph_head) + len(graph_tail)
    graph_size += sum(_field_size(_GRAPH_INITIALIZER, n) for n in sizes)
    total = len(head) + _field_size(_MODEL_GRAPH, graph_size) + len(tail)
    if total > PROTO_MAX:
        raise ModelError(f"{where}: model too large for one file ({total} bytes)")

    def chunks() -> Iterator[bytes]:
        yield head + _key(_MODEL_GRAPH) + _varint(graph_size) + graph_head
        for t, size in zip(tensors, sizes, strict=True):
            data = t.SerializeToString()
            if len(data) != size:  # the splice would be corrupt: never write it
                raise ModelError(f"{where}: initializer '{t.name}' changed while being written")
            yield _key(_GRAPH_INITIALIZER) + _varint(size)
            yield data
        yield graph_tail + tail

    _write_bytes(tmp, chunks())
    _check(tmp, where, check)
    os.replace(tmp, out)


def _write_external(
    skeleton: onnx.ModelProto,
    tensors: list[onnx.TensorProto],
    out: Path,
    data_path: Path,
    where: str,
    temps: list[Path],
    check: str,
) -> None:
    """Weights to a temp data file tensor by tensor, the model (with stubs) to a temp file;
    check both; rename both."""
    tmp_data = _temp(out, ".data.tmp", where, temps)
    stubs: list[onnx.TensorProto] = []
    with open(tmp_data, "wb") as f:
        for t in tensors:
            if not _externalizable(t):
                skeleton.graph.initializer.append(t)
                continue
            data = t.raw_data if t.HasField("raw_data") else _as_raw(t).raw_data
            f.write(b"\0" * (-f.tell() % _ALIGN))
            stub = skeleton.graph.initializer.add()
            _copy_metadata(t, stub)
            _set_external(stub, tmp_data.name, f.tell(), len(data))
            f.write(data)
            del data
            stubs.append(stub)
        f.flush()
        os.fsync(f.fileno())
    tmp = _temp(out, ".tmp", where, temps)
    _write_bytes(tmp, [skeleton.SerializeToString()])
    _check(tmp, where, check)
    for stub in stubs:
        for entry in stub.external_data:
            if entry.key == "location":
                entry.value = data_path.name
    _write_bytes(tmp, [skeleton.SerializeToString()])
    os.replace(tmp_data, data_path)
    os.replace(tmp, out)


def _estimated_size(skeleton: onnx.ModelProto, tensors: list[onnx.TensorProto]) -> int:
    """The serialized size of the model: exact, except that a raw-data tensor of 4 KB or more
    counts the bytes its dims and dtype need, plus its metadata (sizing it would copy it)."""
    total = skeleton.ByteSize()
    for t in tensors:
        n = _raw_nbytes(t)
        if n is None or n < 4 * EXTERNAL_MIN_BYTES:
            total += _field_size(_GRAPH_INITIALIZER, t.ByteSize())
        else:
            meta = onnx.TensorProto()
            _copy_metadata(t, meta)
            total += _field_size(_GRAPH_INITIALIZER, meta.ByteSize() + _field_size(_RAW_DATA, n))
    return total


def _raw_nbytes(t: onnx.TensorProto) -> int | None:
    """Bytes a raw-data tensor's dims and dtype need; None for other tensors."""
    if not t.HasField("raw_data"):
        return None
    try:
        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except (KeyError, TypeError, ValueError):
        return None
    return math.prod(t.dims) * itemsize


def _externalizable(t: onnx.TensorProto) -> bool:
    """Not a string tensor, and at least EXTERNAL_MIN_BYTES serialized."""
    if t.data_type == onnx.TensorProto.STRING:
        return False
    n = _raw_nbytes(t)
    return (n is not None and n >= 4 * EXTERNAL_MIN_BYTES) or t.ByteSize() >= EXTERNAL_MIN_BYTES


def _as_raw(t: onnx.TensorProto) -> onnx.TensorProto:
    """The same tensor with its values in raw_data (from float_data, int32_data, ...)."""
    raw = numpy_helper.from_array(numpy_helper.to_array(t), t.name)
    raw.doc_string = t.doc_string
    return raw


def _copy_metadata(t: onnx.TensorProto, out: onnx.TensorProto) -> None:
    """Every field of `t` but its data (and where its data is) into `out`."""
    copy_fields(t, _DATA_FIELDS, out)


def _set_external(t: onnx.TensorProto, location: str, offset: int, length: int) -> None:
    del t.external_data[:]
    t.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        t.external_data.add(key=key, value=str(value))


def _split(msg: Message, number: int) -> tuple[bytes, bytes]:
    """`msg` serialized as two parts: its fields numbered below `number`, and those above it
    with its unknown fields (protobuf writes fields in number order, unknown ones last). Field
    `number` itself is in neither."""
    before, after = type(msg)(), type(msg)()
    after.CopyFrom(msg)
    copy_fields(msg, {fd.name for fd, _ in msg.ListFields() if fd.number >= number}, before)
    for fd, _ in msg.ListFields():
        if fd.number <= number:
            after.ClearField(fd.name)
    return before.SerializeToString(), after.SerializeToString()


def _key(number: int) -> bytes:
    """The tag of length-delimited field `number`."""
    return _varint(number << 3 | 2)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field_size(number: int, size: int) -> int:
    """Serialized size of length-delimited field `number` holding `size` bytes."""
    return len(_key(number)) + len(_varint(size)) + size


def _temp(out: Path, suffix: str, where: str, temps: list[Path]) -> Path:
    """A new empty file in out's folder, registered for removal; mode 0666 & ~umask."""
    try:
        tmp = make_temp(out.parent, prefix=f".{out.name}.", suffix=suffix)
    except OSError as e:
        raise ModelError(f"{where}: cannot write in its folder: {e.strerror or e}") from e
    temps.append(tmp)
    return tmp


def _write_bytes(path: Path, chunks: Iterable[bytes]) -> None:
    with open(path, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


def _check(path: Path, where: str, level: str) -> None:
    """`run_checker` at `level`; CheckerError naming `where` when it rejects the model."""
    try:
        run_checker(path, level)
    except Exception as e:  # ValidationError, InferenceError, or C++ errors
        reason = first_line(e)
        raise CheckerError(
            f"{where}: onnx.checker rejects the model ({level} check): {reason}", level, reason
        ) from e


def _same(a: Path, b: Path) -> bool:
    """True when a and b name the same file (after resolving links)."""
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _node_proto(n: Node) -> onnx.NodeProto:
    p = onnx.NodeProto(op_type=n.op_type, input=n.inputs, output=n.outputs)
    # Unset, not empty: a re-saved node is then byte-identical to the original.
    if n.name:
        p.name = n.name
    if n.domain:
        p.domain = n.domain
    if n.doc_string:
        p.doc_string = n.doc_string
    p.attribute.extend(n.attributes)
    return p


def _value_infos(
    graph: Graph, declared: Iterable[onnx.ValueInfoProto], names: list[str]
) -> list[onnx.ValueInfoProto]:
    """ValueInfoProtos for `names`: the declared one when there is one, else from types."""
    by_name = {vi.name: vi for vi in declared}
    out = []
    for name in names:
        if name in by_name:
            out.append(by_name[name])
            continue
        t = graph.types.get(name)
        if t is None or t.dtype == 0:
            out.append(onnx.helper.make_empty_tensor_value_info(name))
        else:
            out.append(onnx.helper.make_tensor_value_info(name, t.dtype, t.shape))
    return out


def _fix_opsets(m: onnx.ModelProto) -> None:
    """Add com.microsoft (v1) when a node uses it; drop it when nothing does."""
    used = set(_domains(m.graph))
    for f in m.functions:
        used.update(n.domain for n in f.node)
    has = any(o.domain == _MS_DOMAIN for o in m.opset_import)
    if _MS_DOMAIN in used and not has:
        m.opset_import.append(onnx.helper.make_opsetid(_MS_DOMAIN, 1))
    elif _MS_DOMAIN not in used and has:
        kept = [o for o in m.opset_import if o.domain != _MS_DOMAIN]
        m.ClearField("opset_import")
        m.opset_import.extend(kept)


def _domains(g: onnx.GraphProto) -> Iterator[str]:
    """Domain of every node in `g` and its subgraphs."""
    for n in g.node:
        yield n.domain
        for a in n.attribute:
            if a.HasField("g"):
                yield from _domains(a.g)
            for sub in a.graphs:
                yield from _domains(sub)
