"""The fuzzer's cases: broken models made from the seed models, each labelled by what broke it.

One generator, shared by `tests/robustness/test_fuzz.py` (the contract) and
`bench/robustness.py --only fuzz` (the outcome table in BENCHMARKS.md). A case starts from one
of the seed models (tests/robustness/models.py) and applies mutations of one *kind*, one to
three times, or (kind "mixed") two or three steps of any kinds:

- structure (`structure_cases`): the ModelProto is edited, then serialized;
- bytes (`byte_cases`): the serialized seed is edited byte by byte.

Every mutation returns what it did (a variant, e.g. "initializer 2147483648") or None when it
found nothing to change (a node with no inputs, a model with no float initializer); a case's
`steps` are `"kind: variant"`. `Case.kind` is the row a case counts in: the one kind of its
steps, MIXED when they were of several kinds, and NO_CHANGE when the bytes are the seed's own
(nothing applied, or it was undone).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import numpy_helper

from tests.robustness.models import SEEDS

Draw = Callable[[st.SearchStrategy[Any]], Any]
Mutation = Callable[[onnx.ModelProto, Draw], str | None]
ByteMutation = Callable[[bytearray, Draw], str | None]

MIXED = "mixed"
NO_CHANGE = "no change (the seed itself)"
SEED_BYTES = {name: build().SerializeToString() for name, build in SEEDS.items()}
DTYPES = [T.FLOAT16, T.DOUBLE, T.INT32, T.INT64, T.BOOL, T.UINT8, T.STRING, 0, 999]
OPS = ["Add", "Relu", "MatMul", "Concat", "Identity", "Reshape", "Softmax", "NoSuchOp", "If"]
WEIRD_INTS = [-(2**63), -(2**31), -5, -1, 0, 1, 2, 3, 7, 99, 2**31, 2**40, 2**62]
WEIRD_FLOATS = [float("nan"), float("inf"), float("-inf"), 3.4e38, -0.0, 1e-45]


@dataclass(frozen=True)
class Case:
    """One fuzz case: the bytes `rewrite optimize` gets, and how they were made.

    `raw` is None when protobuf refused to serialize the mutant (not a file anyone can write).
    """

    family: str
    """"structure" or "bytes"."""
    kind: str
    """The row this case counts in (see the module docstring)."""
    seed: str
    steps: tuple[str, ...]
    """`kind: variant` of every mutation that changed something, in order."""
    raw: bytes | None


# -- structural mutations --------------------------------------------------------------------


def _pick(items: Any, draw: Draw) -> Any:
    return items[draw(st.integers(0, len(items) - 1))] if len(items) else None


def _io(m: onnx.ModelProto, draw: Draw) -> onnx.ValueInfoProto | None:
    return _pick([*m.graph.input, *m.graph.output], draw)


def dangling_input(m: onnx.ModelProto, draw: Draw) -> str | None:
    n = _pick(m.graph.node, draw)
    if n is None or not n.input:
        return None
    name = draw(st.sampled_from(["ghost", "", "x ", "y"]))
    n.input[draw(st.integers(0, len(n.input) - 1))] = name
    return repr(name)


def duplicate_name(m: onnx.ModelProto, draw: Draw) -> str | None:
    kind = draw(st.sampled_from(["output", "initializer", "input", "node_name"]))
    g = m.graph
    if kind == "output" and len(g.node) >= 2:
        a, b = draw(st.lists(st.integers(0, len(g.node) - 1), min_size=2, max_size=2))
        g.node[a].output[0] = g.node[b].output[0]
    elif kind == "initializer" and g.initializer:
        g.initializer.append(g.initializer[0])
    elif kind == "input" and g.input:
        g.input.append(g.input[0])
    elif kind == "node_name" and g.node:
        for n in g.node:
            n.name = "same"
    else:
        return None
    return kind


def wrong_dtype(m: onnx.ModelProto, draw: Draw) -> str | None:
    dtype = draw(st.sampled_from(DTYPES))
    if draw(st.booleans()) and m.graph.initializer:
        _pick(m.graph.initializer, draw).data_type = dtype
        return f"initializer {dtype}"
    vi = _io(m, draw)
    if vi is None:
        return None
    vi.type.tensor_type.elem_type = dtype
    return f"graph input or output {dtype}"


def mismatched_shape(m: onnx.ModelProto, draw: Draw) -> str | None:
    if draw(st.booleans()) and m.graph.initializer:
        t = _pick(m.graph.initializer, draw)
        arr = numpy_helper.to_array(t)
        if arr.size > 1 and draw(st.booleans()):  # same elements, another shape
            t.CopyFrom(numpy_helper.from_array(arr.reshape(-1)[::-1].copy(), t.name))
            return "initializer flattened"
        t.dims[:] = draw(st.lists(st.integers(0, 9), max_size=4))
        return "initializer dims"
    vi = _io(m, draw)
    if vi is None:
        return None
    dims = draw(st.lists(st.one_of(st.integers(0, 9), st.just("d")), max_size=4))
    shape = vi.type.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        if isinstance(d, int):
            shape.dim.add().dim_value = d
        else:
            shape.dim.add().dim_param = d
    return "graph input or output"


def cycle(m: onnx.ModelProto, draw: Draw) -> str | None:
    g = m.graph
    if not g.node:
        return None
    a = draw(st.integers(0, len(g.node) - 1))
    b = draw(st.integers(a, len(g.node) - 1))
    if not (g.node[a].input and g.node[b].output):
        return None
    g.node[a].input[0] = g.node[b].output[0]
    return "self loop" if a == b else "back edge"


def empty_graph(m: onnx.ModelProto, draw: Draw) -> str | None:
    what = draw(st.sampled_from(["nodes", "outputs", "inputs", "all"]))
    if what in ("nodes", "all"):
        m.graph.ClearField("node")
    if what in ("outputs", "all"):
        m.graph.ClearField("output")
    if what in ("inputs", "all"):
        m.graph.ClearField("input")
    return f"no {what}"


def opset(m: onnx.ModelProto, draw: Draw) -> str | None:
    what = draw(st.sampled_from(["none", "version", "ir", "domain"]))
    if what == "none":
        m.ClearField("opset_import")
        return "no opset import"
    if what == "version" and m.opset_import:
        v = draw(st.sampled_from([0, 1, 6, 9, 12, 13, 21, 25, 1000]))
        m.opset_import[0].version = v
        return f"opset {v}"
    if what == "ir":
        m.ir_version = draw(st.sampled_from([0, 1, 3, 4, 7, 12, 99]))
        return f"IR {m.ir_version}"
    if what == "domain":
        m.opset_import.add(domain=draw(st.sampled_from(["com.microsoft", "x.y", ""])))
        return "extra domain"
    return None


def huge_dims(m: onnx.ModelProto, draw: Draw) -> str | None:
    big = draw(st.sampled_from([2**31, 2**40, 2**62, -5, -1]))
    if draw(st.booleans()) and m.graph.initializer:
        t = _pick(m.graph.initializer, draw)
        t.dims[:] = [big, *t.dims[1:]]
        return f"initializer {big}"
    vi = _io(m, draw)
    dims = vi.type.tensor_type.shape.dim if vi is not None else []
    if not dims:
        return None
    dims[draw(st.integers(0, len(dims) - 1))].dim_value = big
    return f"graph input or output {big}"


def huge_symbolic_dims(m: onnx.ModelProto, draw: Draw) -> str | None:
    """Every symbolic dim (a batch) of the graph's inputs, outputs and value infos set to one
    huge size: still a consistent model, but its inputs are too big to generate, so the
    differential check cannot run and the input graph is written (exit 3)."""
    big = draw(st.sampled_from([2**28, 2**31]))
    values = [*m.graph.input, *m.graph.output, *m.graph.value_info]
    dims = [d for v in values for d in v.type.tensor_type.shape.dim if d.HasField("dim_param")]
    for d in dims:
        d.dim_value = big  # (clears dim_param: one of the two)
    return f"{len(dims)} dims {big}" if dims else None


def nan_inf(m: onnx.ModelProto, draw: Draw) -> str | None:
    floats = [t for t in m.graph.initializer if t.data_type == T.FLOAT]
    if not floats:
        return None
    t = _pick(floats, draw)
    arr = numpy_helper.to_array(t).copy()
    value = draw(st.sampled_from(WEIRD_FLOATS))
    if draw(st.booleans()):
        arr[...] = value
    elif arr.size:
        arr.reshape(-1)[draw(st.integers(0, arr.size - 1))] = value
    t.CopyFrom(numpy_helper.from_array(arr.astype(np.float32), t.name))
    return repr(value)


def attributes(m: onnx.ModelProto, draw: Draw) -> str | None:
    n = _pick(m.graph.node, draw)
    if n is None:
        return None
    what = draw(st.sampled_from(["drop", "ints", "int", "bogus"]))
    if what == "drop":
        if not n.attribute:
            return None
        del n.attribute[draw(st.integers(0, len(n.attribute) - 1))]
    elif what == "ints":
        values = draw(st.lists(st.sampled_from(WEIRD_INTS), max_size=4))
        name = draw(st.sampled_from(["perm", "axes", "pads", "kernel_shape"]))
        n.ClearField("attribute")
        n.attribute.append(onnx.helper.make_attribute(name, values, attr_type=7))
    elif what == "int":
        name = draw(st.sampled_from(["axis", "to", "keepdims", "group"]))
        n.attribute.append(onnx.helper.make_attribute(name, draw(st.sampled_from(WEIRD_INTS))))
    else:
        n.attribute.append(onnx.helper.make_attribute("bogus", 1.5))
    return what


def op_type(m: onnx.ModelProto, draw: Draw) -> str | None:
    n = _pick(m.graph.node, draw)
    if n is None:
        return None
    if draw(st.booleans()):
        n.op_type = draw(st.sampled_from(OPS))
        return f"op {n.op_type}"
    n.domain = draw(st.sampled_from(["custom.domain", "com.microsoft", "ai.onnx"]))
    return f"domain {n.domain}"


def drop_or_rewire(m: onnx.ModelProto, draw: Draw) -> str | None:
    g = m.graph
    what = draw(st.sampled_from(["drop_node", "swap_inputs", "extra_output", "rename_input"]))
    if what == "drop_node" and g.node:
        del g.node[draw(st.integers(0, len(g.node) - 1))]
    elif what == "swap_inputs":
        n = _pick(g.node, draw)
        if n is None or len(n.input) < 2:
            return None
        n.input[0], n.input[1] = n.input[1], n.input[0]
    elif what == "extra_output":
        names = ["nowhere", *(n.output[0] for n in g.node[:1]), *(i.name for i in g.input[:1])]
        g.output.append(onnx.helper.make_empty_tensor_value_info(draw(st.sampled_from(names))))
    elif what == "rename_input" and g.input:
        g.input[0].name = draw(st.sampled_from(["renamed", "", *(o.name for o in g.output[:1])]))
    else:
        return None
    return what


STRUCTURE: dict[str, Mutation] = {
    "dangling input": dangling_input,
    "duplicate name": duplicate_name,
    "wrong dtype": wrong_dtype,
    "mismatched shape": mismatched_shape,
    "cycle": cycle,
    "empty graph": empty_graph,
    "opset / IR version": opset,
    "huge or negative dims": huge_dims,
    "symbolic dims made huge": huge_symbolic_dims,
    "NaN/Inf/huge constant": nan_inf,
    "broken attribute": attributes,
    "wrong op type or domain": op_type,
    "dropped or rewired node": drop_or_rewire,
}
"""Structural mutation kinds (row labels) -> the mutation."""


# -- byte mutations -------------------------------------------------------------------------


def truncate(buf: bytearray, draw: Draw) -> str | None:
    del buf[draw(st.integers(0, max(0, len(buf) - 1))) :]
    return ""


def flip(buf: bytearray, draw: Draw) -> str | None:
    if not buf:
        return None
    n = draw(st.integers(1, 8))
    for _ in range(n):
        buf[draw(st.integers(0, len(buf) - 1))] ^= draw(st.integers(1, 255))
    return f"{n} flips"


def insert(buf: bytearray, draw: Draw) -> str | None:
    pos = draw(st.integers(0, max(0, len(buf) - 1)))
    buf[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    return ""


def delete(buf: bytearray, draw: Draw) -> str | None:
    if not buf:
        return None
    pos = draw(st.integers(0, len(buf) - 1))
    del buf[pos : pos + draw(st.integers(1, 16))]
    return ""


def garbage(buf: bytearray, draw: Draw) -> str | None:
    buf[:] = draw(st.binary(max_size=64))
    return f"{'empty' if not buf else 'up to 64'}"


BYTES: dict[str, ByteMutation] = {
    "truncation": truncate,
    "flipped bytes": flip,
    "inserted bytes": insert,
    "deleted bytes": delete,
    "random bytes (whole file)": garbage,
}
"""Byte mutation kinds (row labels) -> the mutation."""


# -- cases ----------------------------------------------------------------------------------


@contextlib.contextmanager
def generator_only() -> Iterator[None]:
    """Derandomized cases that depend on this generator alone: Hypothesis also draws values
    from literals in the project's loaded modules (rewrite/, bench/), so other loaded modules
    (the bench, the whole suite) or any edit of them would change the cases; inside this it
    finds none. (Hypothesis internals: where they differ, this does nothing.)"""
    from hypothesis.internal.conjecture import providers

    real = getattr(providers, "_get_local_constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    empty = getattr(providers, "Constants", None)
    if real is None or empty is None or not hasattr(cache, "clear"):
        yield
        return
    providers._get_local_constants = empty  # a Constants() with nothing in it
    cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = real
        cache.clear()


def _plan(draw: Draw, kinds: list[str]) -> list[str]:
    """The kinds of a case's steps: one kind 1-3 times, or 2-3 steps of any kinds (MIXED)."""
    kind = draw(st.sampled_from([*kinds, MIXED]))
    if kind == MIXED:
        return [draw(st.sampled_from(kinds)) for _ in range(draw(st.integers(2, 3)))]
    return [kind] * draw(st.integers(1, 3))


def _row(steps: list[str], raw: bytes | None, seed: str) -> str:
    if raw == SEED_BYTES[seed] or not steps:
        return NO_CHANGE
    kinds = {s.split(": ")[0] for s in steps}
    return kinds.pop() if len(kinds) == 1 else MIXED


def _step(kind: str, variant: str | None) -> list[str]:
    if variant is None:
        return []
    return [f"{kind}: {variant}" if variant else kind]


@st.composite
def structure_cases(draw: Draw) -> Case:
    """A seed model with its structure mutated (see STRUCTURE)."""
    seed = draw(st.sampled_from(sorted(SEED_BYTES)))
    m = onnx.ModelProto()
    m.ParseFromString(SEED_BYTES[seed])
    steps: list[str] = []
    for kind in _plan(draw, list(STRUCTURE)):
        try:
            variant = STRUCTURE[kind](m, draw)
        except (ValueError, IndexError, TypeError, KeyError):  # a mutation of a mutant
            variant = "failed part way"
        steps += _step(kind, variant)
    raw: bytes | None = None
    with contextlib.suppress(Exception):  # e.g. an attribute protobuf refuses to serialize
        raw = m.SerializeToString()
    return Case("structure", _row(steps, raw, seed), seed, tuple(steps), raw)


@st.composite
def byte_cases(draw: Draw) -> Case:
    """A serialized seed model with bytes truncated, flipped, inserted, deleted or replaced."""
    seed = draw(st.sampled_from(sorted(SEED_BYTES)))
    buf = bytearray(SEED_BYTES[seed])
    steps: list[str] = []
    for kind in _plan(draw, list(BYTES)):
        steps += _step(kind, BYTES[kind](buf, draw))
    raw = bytes(buf)
    return Case("bytes", _row(steps, raw, seed), seed, tuple(steps), raw)
