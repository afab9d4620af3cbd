"""Write a `Graph` back to ONNX: exact header, used initializers only, atomic, checked.

The destination is only ever replaced by a complete file that `onnx.checker` (full check)
accepted: the model (and its external data, for large models) is written to temporary files
in the destination folder, checked there, then renamed into place.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import onnx
from onnx import external_data_helper, numpy_helper

from rewrite.errors import ModelError
from rewrite.onnx_io.graph import Graph, Node
from rewrite.onnx_io.shapes import first_line

EXTERNAL_THRESHOLD = int(1.8e9)
"""Models whose serialized size exceeds this are written with external data."""
EXTERNAL_MIN_BYTES = 1024
"""In external-data files, tensors smaller than this stay inside the model file."""
_ALIGN = 4096
_MS_DOMAIN = "com.microsoft"


def to_model(graph: Graph) -> onnx.ModelProto:
    """The ModelProto of `graph`: header + nodes + the initializers something still reads.

    Graph inputs/outputs follow `graph.inputs`/`graph.outputs`, with the header's
    ValueInfoProtos (names, order, types) where the header has them and ones made from
    `graph.types` for new names. Initializers that are graph inputs are always kept. The
    original opset imports are kept; `com.microsoft` (version 1) is added when a node uses it
    and dropped when nothing does. Stale value_info is not written.
    """
    m = onnx.ModelProto()
    m.CopyFrom(graph.header)
    g = m.graph
    for name in ("node", "initializer", "value_info", "sparse_initializer", "input", "output"):
        g.ClearField(name)
    g.input.extend(_value_infos(graph, graph.header.graph.input, graph.inputs))
    g.output.extend(_value_infos(graph, graph.header.graph.output, graph.outputs))
    g.node.extend(_node_proto(n) for n in graph.nodes)
    used = {i for n in graph.nodes for i in [*n.inputs, *n.implicit_inputs] if i}
    used.update(graph.outputs, graph.inputs)
    g.initializer.extend(t for name, t in graph.initializers.items() if name in used)
    _fix_opsets(m)
    return m


def save(
    graph: Graph,
    path: str | Path,
    *,
    source: str | Path | None = None,
    external: bool | None = None,
) -> None:
    """Write `graph` to `path` atomically and check it with `onnx.checker` (full check).

    Refuses (ModelError) to write over `source` or over the file `graph` was loaded from,
    into a folder that does not exist or is not writable, or onto a directory. Models over
    EXTERNAL_THRESHOLD bytes (or any, with `external=True`) are written with their weights in
    `NAME.data` next to `path`. If the checker rejects the model nothing is left behind and
    ModelError carries the checker's first line; on any exception (KeyboardInterrupt included)
    the temporary files are removed and the destination is untouched.
    """
    out = Path(os.path.abspath(path))
    where = str(path)
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
    model = to_model(graph)
    if external is None:
        try:
            external = model.ByteSize() > EXTERNAL_THRESHOLD
        except Exception:  # protobuf (upb) refuses to size a message over 2 GB at all
            external = True
    temps: list[Path] = []
    try:
        if external:
            _write_external(model, out, data_path, where, temps)
        else:
            _write_single(model, out, where, temps)
    finally:
        for t in temps:
            with contextlib.suppress(FileNotFoundError):
                t.unlink()


def _write_single(model: onnx.ModelProto, out: Path, where: str, temps: list[Path]) -> None:
    tmp = _temp(out, ".tmp", where, temps)
    try:
        data = model.SerializeToString()
    except Exception as e:  # protobuf refuses messages over 2 GB (error type varies by backend)
        raise ModelError(f"{where}: model too large for one file ({first_line(e)})") from e
    _write_bytes(tmp, [data])
    _check(tmp, where)
    os.replace(tmp, out)


def _write_external(
    model: onnx.ModelProto, out: Path, data_path: Path, where: str, temps: list[Path]
) -> None:
    """Weights to a temp data file, model to a temp file; check both; rename both."""
    tmp_data = _temp(out, ".data.tmp", where, temps)
    tensors = [t for t in model.graph.initializer if _externalizable(t)]
    with open(tmp_data, "wb") as f:
        for t in tensors:
            if not t.HasField("raw_data"):
                t.CopyFrom(_as_raw(t))
            pad = -f.tell() % _ALIGN
            f.write(b"\0" * pad)
            offset = f.tell()
            f.write(t.raw_data)
            external_data_helper.set_external_data(t, tmp_data.name, offset, len(t.raw_data))
            t.ClearField("raw_data")
        f.flush()
        os.fsync(f.fileno())
    tmp = _temp(out, ".tmp", where, temps)
    _write_bytes(tmp, [model.SerializeToString()])
    _check(tmp, where)
    for t in tensors:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = data_path.name
    _write_bytes(tmp, [model.SerializeToString()])
    os.replace(tmp_data, data_path)
    os.replace(tmp, out)


def _externalizable(t: onnx.TensorProto) -> bool:
    return t.data_type != onnx.TensorProto.STRING and t.ByteSize() >= EXTERNAL_MIN_BYTES


def _as_raw(t: onnx.TensorProto) -> onnx.TensorProto:
    """The same tensor with its values in raw_data (from float_data, int32_data, ...)."""
    raw = numpy_helper.from_array(numpy_helper.to_array(t), t.name)
    raw.doc_string = t.doc_string
    return raw


def _temp(out: Path, suffix: str, where: str, temps: list[Path]) -> Path:
    """A new empty file in out's folder, registered for removal; mode as for a new file."""
    try:
        fd, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=suffix)
    except OSError as e:
        raise ModelError(f"{where}: cannot write in '{out.parent}': {e.strerror or e}") from e
    os.close(fd)
    tmp = Path(name)
    temps.append(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return tmp


def _write_bytes(path: Path, chunks: Iterable[bytes]) -> None:
    with open(path, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


def _check(path: Path, where: str) -> None:
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as e:  # ValidationError, InferenceError, or C++ errors
        raise ModelError(f"{where}: onnx.checker rejects the model: {first_line(e)}") from e


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
