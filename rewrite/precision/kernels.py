"""What a low-precision form saves on the target: both forms of one op timed in ORT.

For a candidate (op, form) with activation shape (..., K) and weight (K, N), two one-node
models, the exact op (`MatMul`, or `Gemm` with its bias) and the form's node
(`forms.build`), run on the same random A in sessions as the model runs (ORT_ENABLE_ALL, the
target's provider and threads), interleaved, `ROUNDS` rounds of `RUNS`; the median of each
is its cost in µs. Timings are cached in `precision-kernels.json` in `$REWRITE_CACHE_DIR`,
else `user_cache_dir()`, under a key that holds the CPU's ISA (AVX-512 VNNI, AVX-VNNI,
AVX-512, AVX2 or other: the int8 kernels ORT picks differ), the ORT version, the provider
and the thread count, so a table measured on one machine is never read on another kind.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rewrite.files import atomic_text
from rewrite.paths import user_cache_dir
from rewrite.precision import static
from rewrite.precision.forms import MS, Candidate, build
from rewrite.providers import provider

TABLE_VERSION = "v2"
"""Bumped when what a row measures changes (v2: few-row MatMuls timed with cold weights)."""
ROUNDS = 5
RUNS = 5


@cache
def cpu_isa() -> str:
    """The int8-relevant ISA of this CPU: avx512_vnni, avx_vnni, avx512, avx2 or the machine."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine() or "unknown"
    for flag in ("avx512_vnni", "avx_vnni", "avx512f", "avx2"):
        if f" {flag}" in flags:
            return flag.replace("avx512f", "avx512")
    return platform.machine() or "unknown"


def table_key(target: str, threads: int) -> str:
    import onnxruntime as ort

    return f"{cpu_isa()}|ort {ort.__version__}|{provider(target)}|{threads}t|{TABLE_VERSION}"


def shape_key(c: Candidate, a_shape: tuple[int, ...]) -> str:
    op = f"{c.op}{'+b' if c.op == 'Gemm' else ''}"
    if c.form == static.FORM:  # priced inside an int8 chain
        w = "x".join(map(str, c.wshape))
        return f"{op}|{c.form}|chain|{'x'.join(map(str, a_shape))}|{w}|{c.attrs}"
    return f"{op}|{c.form}|{'x'.join(map(str, a_shape))}|{c.k}x{c.n}"


def _conv_models(c: Candidate, a_shape: tuple[int, ...]) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """One Conv with `c`'s attributes and weight shape (random W and bias), and its
    `int8_static` form as it runs inside an int8 chain: uint8 input and output, so ORT runs
    one QLinearConv (the QuantizeLinear / DequantizeLinear where the chain meets float ops
    are priced apart, `qdq_pair`)."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal(c.wshape) / np.sqrt(c.k)).astype(np.float32)
    b = rng.standard_normal((c.n,)).astype(np.float32)
    node = helper.make_node("Conv", ["X", "W", "B"], ["Y"], **json.loads(c.attrs))
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, list(a_shape))
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")]
    ops = [helper.make_opsetid("", 17)]
    exact = helper.make_model(
        helper.make_graph([node], "exact", [x], [y], inits), opset_imports=ops
    )
    feed = {"X": np.random.default_rng(1).standard_normal(a_shape).astype(np.float32)}
    out = session(exact).run(None, feed)[0]
    ranges = {"X": (float(feed["X"].min()), float(feed["X"].max()))}
    ranges["Y"] = (float(out.min()), float(out.max()))
    qdq = static.QDQ(ranges, lambda hint: hint)
    nodes = qdq.conv(node, w, b, "W")
    # inside a chain: X arrives quantized and Y leaves quantized
    nodes = [n for n in nodes if n.output[0] not in ("X_quantized", "Y")]
    nodes[[n.output[0] for n in nodes].index("X_dequantized")].input[0] = "X"
    nodes[-1].output[0] = "Y"
    xq = helper.make_tensor_value_info("X", TensorProto.UINT8, list(a_shape))
    yq = helper.make_tensor_value_info("Y", TensorProto.UINT8, None)
    low = helper.make_graph(nodes, "low", [xq], [yq], qdq.tensors)
    return exact, helper.make_model(low, opset_imports=ops)


def qdq_models(shape: tuple[int, ...]) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """A QuantizeLinear (float32 -> uint8) and a DequantizeLinear (uint8 -> float32) of one
    tensor of `shape`: what a value costs where an int8 chain meets float ops."""
    ops = [helper.make_opsetid("", 17)]
    s, z = (
        numpy_helper.from_array(np.float32(0.02), "s"),
        numpy_helper.from_array(np.uint8(128), "z"),
    )

    def model(op: str, src: int, dst: int) -> onnx.ModelProto:
        x = helper.make_tensor_value_info("X", src, list(shape))
        y = helper.make_tensor_value_info("Y", dst, list(shape))
        node = helper.make_node(op, ["X", "s", "z"], ["Y"])
        return helper.make_model(helper.make_graph([node], op, [x], [y], [s, z]), opset_imports=ops)

    return (
        model("QuantizeLinear", TensorProto.FLOAT, TensorProto.UINT8),
        model("DequantizeLinear", TensorProto.UINT8, TensorProto.FLOAT),
    )


def _add_models(a_shape: tuple[int, ...]) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """Add of two float32 tensors, and its `int8_static` form as it runs inside an int8 chain
    (uint8 operands and output, so ORT runs one QLinearAdd and no quantize of its own)."""
    ops = [helper.make_opsetid("", 17)]

    def model(dtype: int, nodes: list[onnx.NodeProto], inits: list) -> onnx.ModelProto:
        ins = [helper.make_tensor_value_info(n, dtype, list(a_shape)) for n in ("A", "B")]
        y = helper.make_tensor_value_info("Y", dtype, list(a_shape))
        return helper.make_model(
            helper.make_graph(nodes, "add", ins, [y], inits), opset_imports=ops
        )

    exact = model(TensorProto.FLOAT, [helper.make_node("Add", ["A", "B"], ["Y"])], [])
    s, z = (
        numpy_helper.from_array(np.float32(0.02), "s"),
        numpy_helper.from_array(np.uint8(128), "z"),
    )
    low = model(
        TensorProto.UINT8,
        [
            helper.make_node("DequantizeLinear", ["A", "s", "z"], ["a"]),
            helper.make_node("DequantizeLinear", ["B", "s", "z"], ["b"]),
            helper.make_node("Add", ["a", "b"], ["y"]),
            helper.make_node("QuantizeLinear", ["y", "s", "z"], ["Y"]),
        ],
        [s, z],
    )
    return exact, low


def _random_feed(s: Any) -> dict[str, np.ndarray]:
    """Random values for every input of session `s` (static shapes; float32 or uint8)."""
    rng = np.random.default_rng(1)
    out = {}
    for i in s.get_inputs():
        if i.type == "tensor(uint8)":
            out[i.name] = rng.integers(0, 256, i.shape).astype(np.uint8)
        else:
            out[i.name] = rng.standard_normal(i.shape).astype(np.float32)
    return out


def _pool_chain(a_shape: tuple[int, ...], attrs: dict[str, Any] | None) -> onnx.ModelProto:
    """uint8 X -> two 1x1 QLinearConvs -> [MaxPool(attrs) on uint8] -> uint8 Y, in QDQ form:
    ORT pools uint8 in NHWC after QLinear kernels, as in a lowered CNN (alone, its NCHW uint8
    MaxPool is twenty times slower), so the pool is priced as the difference of this chain
    with and without it."""
    ops = [helper.make_opsetid("", 17)]
    c = a_shape[1]
    w = numpy_helper.from_array(np.ones((c, c, 1, 1), np.int8), "w")
    inits = [w, numpy_helper.from_array(np.full(c, 0.01, np.float32), "ws")]
    inits += [numpy_helper.from_array(np.float32(0.02), "s")]
    inits += [numpy_helper.from_array(np.uint8(0), "z")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"], axis=0)]
    last = "X"
    for i in range(2):
        nodes += [
            helper.make_node("DequantizeLinear", [last, "s", "z"], [f"x{i}"]),
            helper.make_node("Conv", [f"x{i}", "wd"], [f"c{i}"]),
            helper.make_node("QuantizeLinear", [f"c{i}", "s", "z"], [f"q{i}"]),
        ]
        last = f"q{i}"
        if i == 1 and attrs is not None:
            nodes += [
                helper.make_node("DequantizeLinear", [last, "s", "z"], ["p"]),
                helper.make_node("MaxPool", ["p"], ["pooled"], **attrs),
                helper.make_node("QuantizeLinear", ["pooled", "s", "z"], ["pq"]),
            ]
            last = "pq"
    nodes[-1].output[0] = "Y"
    x = helper.make_tensor_value_info("X", TensorProto.UINT8, list(a_shape))
    y = helper.make_tensor_value_info("Y", TensorProto.UINT8, None)
    return helper.make_model(helper.make_graph(nodes, "chain", [x], [y], inits), opset_imports=ops)


def _maxpool_pair(c: Candidate, a_shape: tuple[int, ...], **kw: Any) -> tuple[float, float]:
    """(float MaxPool µs alone, uint8 MaxPool µs inside an int8 chain: `_pool_chain`)."""
    attrs = json.loads(c.attrs)
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, list(a_shape))
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)
    node = helper.make_node("MaxPool", ["X"], ["Y"], **attrs)
    g = helper.make_graph([node], "maxpool", [x], [y])
    exact = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with_pool, without = time_models(
        (_pool_chain(a_shape, attrs), _pool_chain(a_shape, None)), **kw
    )
    return time_models((exact, exact), **kw)[0], max(with_pool - without, 0.0)


COLD_BYTES = 64 << 20
"""Weights a timing model of a few-row MatMul streams: more than this CPU's caches hold."""
FEW_ROWS = 16
"""Up to this many rows a MatMul is memory-bound (its weights read once per row block)."""


def copies(c: Candidate, a_shape: tuple[int, ...]) -> int:
    """How many independent copies of a MatMul candidate one timing model holds: a few-row
    MatMul (decoding one token) streams its weights from memory inside a model, where every
    other op's weights have evicted them; timed alone, repeated runs find them in cache (its
    MatMulNBits form measured 3x faster alone than in gpt2_decode). Enough copies that their
    int8 weights exceed `COLD_BYTES` (at most 64) are timed together and the time divided."""
    rows = int(np.prod(a_shape[:-1])) if len(a_shape) > 1 else 1
    if c.form == static.FORM or rows > FEW_ROWS:
        return 1
    return int(min(64, max(1, -(-COLD_BYTES // max(1, c.k * c.n)))))


def _models(c: Candidate, a_shape: tuple[int, ...]) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """The exact op and its form, each `copies(c, a_shape)` times over its own random
    weights, reading one input A and writing outputs Y0..."""
    if c.form == static.FORM:
        return _add_models(a_shape) if c.op == "Add" else _conv_models(c, a_shape)
    rng = np.random.default_rng(0)
    out_shape = [*a_shape[:-1], c.n]
    a = helper.make_tensor_value_info("A", TensorProto.FLOAT, list(a_shape))
    bias = c.op == "Gemm"
    nodes: tuple[list[onnx.NodeProto], list[onnx.NodeProto]] = ([], [])
    inits: tuple[list[onnx.TensorProto], list[onnx.TensorProto]] = ([], [])
    ys = []
    for r in range(copies(c, a_shape)):
        w = (rng.standard_normal((c.k, c.n)) / np.sqrt(c.k)).astype(np.float32)
        b = numpy_helper.from_array(rng.standard_normal((c.n,)).astype(np.float32), f"b{r}")
        y = f"Y{r}"
        ys.append(helper.make_tensor_value_info(y, TensorProto.FLOAT, out_shape))
        ins = ["A", f"W{r}", *([f"b{r}"] if bias else [])]
        nodes[0].append(helper.make_node(c.op, ins, [y]))
        inits[0].extend([numpy_helper.from_array(w, f"W{r}"), *([b] if bias else [])])
        node, tensors = build(
            c, "A", w, f"b{r}" if bias else None, y, f"low{r}", lambda hint, r=r: f"{hint}{r}"
        )
        nodes[1].append(node)
        inits[1].extend([*tensors, *([b] if bias else [])])
    ops = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    exact, low = (helper.make_graph(nodes[i], f"g{i}", [a], ys, inits[i]) for i in (0, 1))
    return helper.make_model(exact, opset_imports=ops), helper.make_model(low, opset_imports=ops)


def session(model: onnx.ModelProto, *, target: str = "cpu", threads: int = 1) -> Any:
    """An ORT session of `model` as it will run: ORT_ENABLE_ALL, the target's provider,
    `threads` intra-op threads, errors only in the log."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=[provider(target)])


def time_pair(
    c: Candidate, a_shape: tuple[int, ...], *, target: str = "cpu", threads: int = 1
) -> tuple[float, float]:
    """(exact µs, low-precision µs) of candidate `c` at activation shape `a_shape` (per copy,
    `copies`)."""
    if c.form == static.FORM and c.op == "MaxPool":
        return _maxpool_pair(c, a_shape, target=target, threads=threads)
    n = copies(c, a_shape)
    exact, low = time_models(_models(c, a_shape), target=target, threads=threads)
    return exact / n, low / n


def time_models(
    models: tuple[onnx.ModelProto, onnx.ModelProto], *, target: str = "cpu", threads: int = 1
) -> tuple[float, float]:
    """The median µs of each of two models on random inputs, timed interleaved."""
    sessions = [session(m, target=target, threads=threads) for m in models]
    feeds = [_random_feed(s) for s in sessions]
    for s, feed in zip(sessions, feeds, strict=True):
        s.run(None, feed)
    medians: tuple[list[float], list[float]] = ([], [])
    for r in range(ROUNDS):
        for k in (0, 1) if r % 2 == 0 else (1, 0):
            times = []
            for _ in range(RUNS):
                t = time.perf_counter()
                sessions[k].run(None, feeds[k])
                times.append(time.perf_counter() - t)
            medians[k].append(statistics.median(times))
    return 1e6 * statistics.median(medians[0]), 1e6 * statistics.median(medians[1])


class KernelTable:
    """Cached (exact µs, low µs) per candidate shape for one target (module docstring)."""

    def __init__(self, target: str = "cpu", threads: int = 1, path: Path | None = None) -> None:
        self.target, self.threads = target, threads
        folder = Path(os.environ.get("REWRITE_CACHE_DIR") or user_cache_dir())
        self.path = path or folder / "precision-kernels.json"
        self.key = table_key(target, threads)
        self.measured = 0
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}
        self._all: dict[str, dict[str, list[float]]] = data if isinstance(data, dict) else {}
        self.rows = self._all.setdefault(self.key, {})

    def cost(self, c: Candidate, a_shape: tuple[int, ...]) -> tuple[float, float]:
        k = shape_key(c, a_shape)
        row = self.rows.get(k)
        if not (isinstance(row, list) and len(row) == 2):
            row = list(time_pair(c, a_shape, target=self.target, threads=self.threads))
            self.rows[k] = row
            self.measured += 1
        return float(row[0]), float(row[1])

    def qdq_pair(self, shape: tuple[int, ...]) -> tuple[float, float]:
        """(QuantizeLinear µs, DequantizeLinear µs) of a tensor of `shape` (`qdq_models`)."""
        k = f"QDQ|{'x'.join(map(str, shape))}"
        row = self.rows.get(k)
        if not (isinstance(row, list) and len(row) == 2):
            row = list(time_models(qdq_models(shape), target=self.target, threads=self.threads))
            self.rows[k] = row
            self.measured += 1
        return float(row[0]), float(row[1])

    def save(self) -> None:
        """Write the table back (atomically); a cache that cannot be written is skipped."""
        if not self.measured:
            return
        try:
            os.makedirs(self.path.parent, exist_ok=True)
            with atomic_text(self.path) as f:
                json.dump(self._all, f, indent=1, sort_keys=True)
        except OSError:
            pass
