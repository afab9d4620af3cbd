"""Fuzzing `rewrite optimize` with broken models: it answers, it never crashes or lies.

Hypothesis mutates the seed models (tests/robustness/models.py) two ways: the graph's
structure (dangling inputs, duplicate names, wrong dtypes, mismatched shapes, cycles, an empty
graph, a missing or strange opset import, huge dims, NaN/Inf constants, broken attributes,
unknown ops) and the serialized bytes (truncation, flipped, inserted and deleted bytes). Every
case runs `rewrite.cli.main` in this process and must end in one of three ways:

- exit 1 with exactly one line on stderr (`rewrite: error: ...`) and nothing written;
- exit 0 with an output that passes the full ONNX checker and a report whose differential
  check passed;
- exit 3 with the input graph written (it passes the full checker) and only
  `rewrite: warning: ...` lines on stderr.

Never a traceback, an unexpected exception, a modified input or a leftover temporary file.
CI runs FUZZ_CASES cases (derandomized, so the same ones every run); REWRITE_FUZZ_SCALE=10
runs ten times as many, REWRITE_FUZZ_RANDOM=1 draws new ones. Outcome counts are printed and,
with REWRITE_FUZZ_LOG=path, appended to that file as JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import numpy_helper

from rewrite.cli import main
from tests.robustness.models import SEEDS

SCALE = float(os.environ.get("REWRITE_FUZZ_SCALE", "1"))
STRUCTURE_CASES = int(600 * SCALE)
BYTES_CASES = int(1400 * SCALE)
FUZZ_CASES = STRUCTURE_CASES + BYTES_CASES

ARGS = ["optimize", "-q", "--max-memory", "1000", "--time-limit", "60"]
"""Workers capped at 4 GB: a model declaring huge dims must not take the machine down."""
SETTINGS = settings(
    max_examples=1,  # replaced per test
    deadline=None,
    derandomize=not os.environ.get("REWRITE_FUZZ_RANDOM"),
    database=None,
    suppress_health_check=list(HealthCheck),
)
SEED_BYTES = {name: build().SerializeToString() for name, build in SEEDS.items()}
OUTCOMES: dict[str, Counter[str]] = {"structure": Counter(), "bytes": Counter()}
REASONS: Counter[str] = Counter()
"""Why cases were refused or fell back, by kind of message (for BENCHMARKS.md)."""
_KINDS = [
    ("not an ONNX model", "not ONNX / truncated / empty"),
    ("truncated or corrupt", "not ONNX / truncated / empty"),
    ("file is empty", "not ONNX / truncated / empty"),
    ("no IR version", "not ONNX / truncated / empty"),
    ("onnx.checker rejects", "onnx.checker rejects the model"),
    ("which no node", "dangling input"),
    ("already defines", "a value defined twice"),
    ("declared twice", "a value defined twice"),
    ("cycle", "a cycle"),
    ("opset", "opset / IR version"),
    ("IR version", "opset / IR version"),
    ("failed in ONNX Runtime", "the input model fails in ONNX Runtime"),
    ("not UTF-8", "a name that is not UTF-8"),
    ("declares dims", "dims larger than the data"),
    ("negative dim", "dims larger than the data"),
    ("is not", "an output nothing computes"),
    ("no outputs", "no outputs / no nodes"),
    ("graph is empty", "no outputs / no nodes"),
    ("differential check could not run", "fallback: the check could not run"),
    ("differential check failed", "fallback: the check failed"),
    ("optimized model rejected", "fallback: the optimized model was rejected"),
    ("internal error", "fallback: internal error"),
    ("optimization failed", "fallback: a stage failed"),
    ("worker process ended", "fallback: the worker died"),
]


def _reason(line: str) -> str:
    for key, kind in _KINDS:
        if key in line:
            return kind
    return "other: " + " ".join(line.split(": ")[-1].split()[:6])


DTYPES = [T.FLOAT16, T.DOUBLE, T.INT32, T.INT64, T.BOOL, T.UINT8, T.STRING, 0, 999]
OPS = ["Add", "Relu", "MatMul", "Concat", "Identity", "Reshape", "Softmax", "NoSuchOp", "If"]
WEIRD_INTS = [-(2**63), -(2**31), -5, -1, 0, 1, 2, 3, 7, 99, 2**31, 2**40, 2**62]
WEIRD_FLOATS = [float("nan"), float("inf"), float("-inf"), 3.4e38, -0.0, 1e-45]


# -- structural mutations --------------------------------------------------------------------


def _node(m: onnx.ModelProto, data: st.DataObject) -> onnx.NodeProto | None:
    nodes = m.graph.node
    return nodes[data.draw(st.integers(0, len(nodes) - 1))] if nodes else None


def _init(m: onnx.ModelProto, data: st.DataObject) -> onnx.TensorProto | None:
    inits = m.graph.initializer
    return inits[data.draw(st.integers(0, len(inits) - 1))] if inits else None


def _io(m: onnx.ModelProto, data: st.DataObject) -> onnx.ValueInfoProto | None:
    values = [*m.graph.input, *m.graph.output]
    return values[data.draw(st.integers(0, len(values) - 1))] if values else None


def dangling_input(m: onnx.ModelProto, data: st.DataObject) -> None:
    n = _node(m, data)
    if n is not None and n.input:
        n.input[data.draw(st.integers(0, len(n.input) - 1))] = data.draw(
            st.sampled_from(["ghost", "", "x ", "y"])
        )


def duplicate_name(m: onnx.ModelProto, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["output", "initializer", "input", "node_name"]))
    g = m.graph
    if kind == "output" and len(g.node) >= 2:
        a, b = data.draw(st.lists(st.integers(0, len(g.node) - 1), min_size=2, max_size=2))
        g.node[a].output[0] = g.node[b].output[0]
    elif kind == "initializer" and g.initializer:
        g.initializer.append(g.initializer[0])
    elif kind == "input" and g.input:
        g.input.append(g.input[0])
    elif g.node:
        for n in g.node:
            n.name = "same"


def wrong_dtype(m: onnx.ModelProto, data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from(DTYPES))
    if data.draw(st.booleans()) and m.graph.initializer:
        t = _init(m, data)
        assert t is not None
        t.data_type = dtype
    elif (vi := _io(m, data)) is not None:
        vi.type.tensor_type.elem_type = dtype


def mismatched_shape(m: onnx.ModelProto, data: st.DataObject) -> None:
    if data.draw(st.booleans()) and m.graph.initializer:
        t = _init(m, data)
        assert t is not None
        arr = numpy_helper.to_array(t)
        if arr.size > 1 and data.draw(st.booleans()):  # same elements, another shape
            t.CopyFrom(numpy_helper.from_array(arr.reshape(-1)[::-1].copy(), t.name))
        else:
            t.dims[:] = data.draw(st.lists(st.integers(0, 9), max_size=4))
        return
    vi = _io(m, data)
    if vi is None:
        return
    dims = data.draw(st.lists(st.one_of(st.integers(0, 9), st.just("d")), max_size=4))
    shape = vi.type.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        if isinstance(d, int):
            shape.dim.add().dim_value = d
        else:
            shape.dim.add().dim_param = d


def cycle(m: onnx.ModelProto, data: st.DataObject) -> None:
    g = m.graph
    if not g.node:
        return
    a = data.draw(st.integers(0, len(g.node) - 1))
    b = data.draw(st.integers(a, len(g.node) - 1))
    if g.node[a].input and g.node[b].output:
        g.node[a].input[0] = g.node[b].output[0]


def empty_graph(m: onnx.ModelProto, data: st.DataObject) -> None:
    what = data.draw(st.sampled_from(["nodes", "outputs", "inputs", "all"]))
    if what in ("nodes", "all"):
        m.graph.ClearField("node")
    if what in ("outputs", "all"):
        m.graph.ClearField("output")
    if what in ("inputs", "all"):
        m.graph.ClearField("input")


def opset(m: onnx.ModelProto, data: st.DataObject) -> None:
    what = data.draw(st.sampled_from(["none", "version", "ir", "domain"]))
    if what == "none":
        m.ClearField("opset_import")
    elif what == "version" and m.opset_import:
        m.opset_import[0].version = data.draw(st.sampled_from([0, 1, 6, 9, 12, 13, 21, 25, 1000]))
    elif what == "ir":
        m.ir_version = data.draw(st.sampled_from([0, 1, 3, 4, 7, 12, 99]))
    else:
        m.opset_import.add(domain=data.draw(st.sampled_from(["com.microsoft", "x.y", ""])))


def huge_dims(m: onnx.ModelProto, data: st.DataObject) -> None:
    big = data.draw(st.sampled_from([2**31, 2**40, 2**62, -5, -1]))
    if data.draw(st.booleans()) and m.graph.initializer:
        t = _init(m, data)
        assert t is not None
        t.dims[:] = [big, *t.dims[1:]]
    elif (vi := _io(m, data)) is not None:
        dims = vi.type.tensor_type.shape.dim
        if dims:
            dims[data.draw(st.integers(0, len(dims) - 1))].dim_value = big


def nan_inf(m: onnx.ModelProto, data: st.DataObject) -> None:
    floats = [t for t in m.graph.initializer if t.data_type == T.FLOAT]
    if not floats:
        return
    t = floats[data.draw(st.integers(0, len(floats) - 1))]
    arr = numpy_helper.to_array(t).copy()
    value = data.draw(st.sampled_from(WEIRD_FLOATS))
    if data.draw(st.booleans()):
        arr[...] = value
    elif arr.size:
        arr.reshape(-1)[data.draw(st.integers(0, arr.size - 1))] = value
    t.CopyFrom(numpy_helper.from_array(arr.astype(np.float32), t.name))


def attributes(m: onnx.ModelProto, data: st.DataObject) -> None:
    n = _node(m, data)
    if n is None:
        return
    what = data.draw(st.sampled_from(["drop", "ints", "int", "bogus"]))
    if what == "drop" and n.attribute:
        del n.attribute[data.draw(st.integers(0, len(n.attribute) - 1))]
    elif what == "ints":
        values = data.draw(st.lists(st.sampled_from(WEIRD_INTS), max_size=4))
        name = data.draw(st.sampled_from(["perm", "axes", "pads", "kernel_shape"]))
        n.ClearField("attribute")
        n.attribute.append(onnx.helper.make_attribute(name, values, attr_type=7))
    elif what == "int":
        name = data.draw(st.sampled_from(["axis", "to", "keepdims", "group"]))
        n.attribute.append(onnx.helper.make_attribute(name, data.draw(st.sampled_from(WEIRD_INTS))))
    else:
        n.attribute.append(onnx.helper.make_attribute("bogus", 1.5))


def op_type(m: onnx.ModelProto, data: st.DataObject) -> None:
    n = _node(m, data)
    if n is None:
        return
    if data.draw(st.booleans()):
        n.op_type = data.draw(st.sampled_from(OPS))
    else:
        n.domain = data.draw(st.sampled_from(["custom.domain", "com.microsoft", "ai.onnx"]))


def drop_or_rewire(m: onnx.ModelProto, data: st.DataObject) -> None:
    g = m.graph
    what = data.draw(st.sampled_from(["drop_node", "swap_inputs", "extra_output", "rename_input"]))
    if what == "drop_node" and g.node:
        del g.node[data.draw(st.integers(0, len(g.node) - 1))]
    elif what == "swap_inputs":
        n = _node(m, data)
        if n is not None and len(n.input) >= 2:
            n.input[0], n.input[1] = n.input[1], n.input[0]
    elif what == "extra_output":
        names = ["nowhere", *(n.output[0] for n in g.node[:1]), *(i.name for i in g.input[:1])]
        g.output.append(onnx.helper.make_empty_tensor_value_info(data.draw(st.sampled_from(names))))
    elif what == "rename_input" and g.input:
        names = ["renamed", "", *(o.name for o in g.output[:1])]
        g.input[0].name = data.draw(st.sampled_from(names))


MUTATIONS = [
    dangling_input,
    duplicate_name,
    wrong_dtype,
    mismatched_shape,
    cycle,
    empty_graph,
    opset,
    huge_dims,
    nan_inf,
    attributes,
    op_type,
    drop_or_rewire,
]


# -- byte mutations -------------------------------------------------------------------------


def mutate_bytes(raw: bytes, data: st.DataObject) -> bytes:
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 3))):
        what = data.draw(st.sampled_from(["truncate", "flip", "insert", "delete", "garbage"]))
        pos = data.draw(st.integers(0, max(0, len(buf) - 1)))
        if what == "truncate":
            del buf[pos:]
        elif what == "flip" and buf:
            for _ in range(data.draw(st.integers(1, 8))):
                i = data.draw(st.integers(0, len(buf) - 1))
                buf[i] ^= data.draw(st.integers(1, 255))
        elif what == "insert":
            buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=16))
        elif what == "delete":
            del buf[pos : pos + data.draw(st.integers(1, 16))]
        else:
            buf = bytearray(data.draw(st.binary(max_size=64)))
    return bytes(buf)


# -- the contract ---------------------------------------------------------------------------


@contextlib.contextmanager
def _folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="rewrite-fuzz-") as d:
        yield Path(d)


SLOWEST: list[tuple[float, str, str]] = []


def check_case(raw: bytes, kind: str) -> str:
    """Run `rewrite optimize` on `raw`; assert the contract; return the outcome's name."""
    t0 = time.perf_counter()
    outcome = _check_case(raw, kind)
    SLOWEST.append((time.perf_counter() - t0, outcome, raw.hex()[:0]))
    return outcome


def _check_case(raw: bytes, kind: str) -> str:
    with _folder() as folder:
        src, dst, rep = folder / "in.onnx", folder / "out.onnx", folder / "report.json"
        src.write_bytes(raw)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([*ARGS, str(src), str(dst), "--report", str(rep)])
        text = out.getvalue() + err.getvalue()
        assert "Traceback" not in text, text
        assert src.read_bytes() == raw, "the input file was modified"
        lines = err.getvalue().splitlines()
        written = {"in.onnx", "out.onnx", "out.onnx.data", "report.json"}
        assert set(os.listdir(folder)) <= written, f"leftovers: {os.listdir(folder)}"
        if rc == 1:
            assert len(lines) == 1 and lines[0].startswith("rewrite: error: "), lines
            assert not dst.exists(), "an output was written for a refused model"
            outcome = "refused (exit 1)"
            REASONS[_reason(lines[0])] += 1
        elif rc == 0:
            onnx.checker.check_model(str(dst), full_check=True)
            report = json.loads(rep.read_text())
            assert report["status"] == "optimized" and report["verification"]["ok"] is True
            outcome = "optimized and verified (exit 0)"
        else:
            assert rc == 3, (rc, text)
            assert all(ln.startswith("rewrite: warning: ") for ln in lines), lines
            onnx.checker.check_model(str(dst), full_check=True)
            report = json.loads(rep.read_text())
            assert report["status"] == "fallback"
            why = " ".join(report["warnings"])
            REASONS[_reason(why)] += 1
            kind3 = "internal error" if "internal error" in why else "input graph written"
            outcome = f"{kind3} (exit 3)"
    OUTCOMES[kind][outcome] += 1
    return outcome


@settings(SETTINGS, max_examples=STRUCTURE_CASES)
@given(seed=st.sampled_from(sorted(SEED_BYTES)), data=st.data())
def test_structural_mutations(seed: str, data: st.DataObject) -> None:
    m = onnx.ModelProto()
    m.ParseFromString(SEED_BYTES[seed])
    for mutation in data.draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3)):
        with contextlib.suppress(
            ValueError, IndexError, TypeError, KeyError
        ):  # a mutation of a mutant
            mutation(m, data)
    try:
        raw = m.SerializeToString()
    except Exception:  # e.g. an attribute protobuf refuses: not a file anyone can write
        return
    check_case(raw, "structure")


@settings(SETTINGS, max_examples=BYTES_CASES)
@given(seed=st.sampled_from(sorted(SEED_BYTES)), data=st.data())
def test_byte_mutations(seed: str, data: st.DataObject) -> None:
    check_case(mutate_bytes(SEED_BYTES[seed], data), "bytes")


@pytest.mark.parametrize("seed", sorted(SEED_BYTES))
def test_every_seed_optimizes(seed: str) -> None:
    assert check_case(SEED_BYTES[seed], "structure") == "optimized and verified (exit 0)"


def test_zz_report_outcomes() -> None:
    """Print (and with REWRITE_FUZZ_LOG, record) how the cases ended."""
    total = sum(sum(c.values()) for c in OUTCOMES.values())
    summary = {k: dict(c.most_common()) for k, c in OUTCOMES.items()}
    summary["reasons"] = dict(REASONS.most_common())
    print(f"\nfuzz: {total} cases: {json.dumps(summary)}")
    times = sorted(SLOWEST, reverse=True)
    print(
        "slowest:",
        [(round(t, 2), o) for t, o, _ in times[:10]],
        "total",
        sum(t for t, _, _ in times),
    )
    log = os.environ.get("REWRITE_FUZZ_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"time": time.time(), "cases": total, **summary}) + "\n")
