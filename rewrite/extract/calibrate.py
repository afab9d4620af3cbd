"""`rewrite calibrate`: time single-op ORT sessions and fit the cost model's numbers.

Measurement. Every `calib_cases` model runs in its own ORT session (ORT_ENABLE_ALL, the
given intra-op threads, one inter-op thread) on the target's EP. Rounds are interleaved (each
round runs every case once, as a batch of back-to-back runs sized to about `SAMPLE_S`), so drift
in the machine's load hits all ops alike, and a case's time is its fastest round. With one
intra-op thread on the CPU EP, ORT runs the graph on the calling thread, and a run is timed in
that thread's CPU time (`time.thread_time`), not wall time: on a shared machine (the 2-core VM
this was built on ran at load 2-6) wall time also counts the time other processes hold the
core (a GEMM measured 118 ms wall, 60 ms CPU, at load 5.8). The fastest round, not the
median, for the same reason: the fastest of 15 wall-time rounds differed by 2% (median over
cases) between two back-to-back calibrations, the median of rounds by 7.5% (p90: 7% vs 26%).
A single-op session also pays the cost of `run()` itself (outputs are bound once through I/O
binding, so no copy of them is timed), which a node inside a model does not: a one-float Relu
(`t1`) and 33 chained ones (`t33`) give the fixed cost and the cost of one more node,
`node = (t33 - t1) / 32`; a case's kernel-plus-dispatch time is
`y = (t_case - t1 + node) / copies` (at least `node / 2`), where a case with weights runs
`copies` instances of its op so that its weights come from memory, as in a whole model
(`calib_cases.single`). View ops (Reshape, ...) are not timed: the cost model prices them at
the overhead.

Fit. With each case's FLOPs, bytes and constant-input bytes taken from the cost model itself
(`cost.call_work`, the same functions that price e-nodes), the model
`y ≈ max(F / P, A / W + C / W_mem) · c[key] + o` (P = GEMM or vector FLOP/s by op; A the
activation bytes, C the weight bytes) is fitted by Levenberg-Marquardt on log(pred) - log(y),
i.e. relative error, over log-parameters: the globals P_gemm, P_vec, W, W_mem, o and one
multiplier per cost key (`cost.coeff_key`). The multipliers carry a weak ridge prior toward 1
(`RIDGE`), which makes the globals the geometric centre of the ops and each c[key] the op's
deviation from it. Keys with no case get c = 1 at pricing time (`Target.coeff`).

`--only OP` times only OP's cases and refits only its keys' multipliers in an existing table of
this machine (`refit.py`), keeping the globals and every other key.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from rewrite.errors import RewriteError
from rewrite.extract.calib_cases import Case, baseline_cases, cases
from rewrite.extract.cost import BUILTIN_CPU, GEMM_OPS, Work, call_work, coeff_key
from rewrite.extract.snapshot import ENode
from rewrite.extract.table import EP_OF, CalibrationTable, cache_path, machine_key
from rewrite.ops.base import OpCall, TensorType

SAMPLE_S = 0.002
"""Target length of one timed batch of runs (seconds)."""
RIDGE = 0.02
"""Weight of the prior log(c) = 0 per multiplier, against a squared log error per case."""


@dataclass
class Sample:
    """One case's features and measured time (µs, kernel plus dispatch)."""

    name: str
    op: str
    key: str
    flops: float
    nbytes: float
    weights: float
    """Of `nbytes`, the bytes of constant inputs."""
    measured_us: float

    @property
    def gemm(self) -> bool:
        return self.op in GEMM_OPS


class Runner:
    """One model's ORT session, run through I/O binding with its feeds bound once (on the EP's
    device), so a timed run is the graph's execution, not Python's copying of outputs."""

    def __init__(
        self,
        model: onnx.ModelProto | str,
        feeds: dict[str, np.ndarray],
        ep: str = "CPUExecutionProvider",
        threads: int = 1,
    ) -> None:
        import onnxruntime as ort  # type: ignore[import-untyped]

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        src = model if isinstance(model, str) else model.SerializeToString()
        self.session = ort.InferenceSession(src, opts, providers=[ep])
        # I/O binding: run() would copy every output into a new numpy array, a cost a node
        # inside a model does not pay (it is as large as an Add's own on this CPU).
        device = "cuda" if ep == "CUDAExecutionProvider" else "cpu"
        # On one thread the CPU EP runs the graph on the calling thread: its CPU time is the
        # latency on an idle core, which wall time is not on a shared machine (module doc).
        self.clock = time.thread_time if device == "cpu" and threads == 1 else time.perf_counter
        self.binding = self.session.io_binding()
        for name, arr in feeds.items():
            value = ort.OrtValue.ortvalue_from_numpy(arr, device)
            self.binding.bind_ortvalue_input(name, value)
        for out in self.session.get_outputs():
            self.binding.bind_output(out.name, device)

    def run(self, n: int = 1) -> float:
        """Seconds per run, over `n` back-to-back runs (`clock`: thread CPU or wall time)."""
        t = self.clock()
        for _ in range(n):
            self.session.run_with_iobinding(self.binding)
        return (self.clock() - t) / n

    def outputs(self) -> list[np.ndarray]:
        self.session.run_with_iobinding(self.binding)
        return list(self.binding.copy_outputs_to_cpu())


def time_cases(runners: list[Runner], rounds: int, quantile: float = 0.0) -> list[float]:
    """µs per run of each runner: the `quantile` (default 0: the fastest) of its batch means
    over `rounds` interleaved rounds (module doc: why not the median)."""
    batch = []
    for r in runners:
        r.run(2)  # warm up: first runs allocate and pre-pack
        batch.append(max(1, min(200, round(SAMPLE_S / max(r.run(3), 1e-7)))))
    times: list[list[float]] = [[] for _ in runners]
    for _ in range(rounds):
        for i, r in enumerate(runners):
            times[i].append(r.run(batch[i]))
    return [float(np.quantile(t, quantile)) * 1e6 for t in times]


def features(case: Case, outputs: list[np.ndarray]) -> tuple[Work, str]:
    """((FLOPs, bytes, constant bytes), cost key) of the case's op, as the cost model sees it."""
    g = case.model.graph
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in g.initializer}
    types = {v.name: v.type.tensor_type for v in g.input}
    node = g.node[0]
    ins: list[TensorType | None] = []
    consts: list[np.ndarray | None] = []
    for name in node.input:
        if name in inits:
            a = inits[name]
            ins.append(TensorType(int(onnx.helper.np_dtype_to_tensor_dtype(a.dtype)), a.shape))
            consts.append(a)
        else:
            tt = types[name]
            ins.append(TensorType(tt.elem_type, tuple(d.dim_value for d in tt.shape.dim)))
            consts.append(None)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    call = OpCall(node.op_type, ins, consts, attrs, len(node.output))
    outs = [
        TensorType(int(onnx.helper.np_dtype_to_tensor_dtype(o.dtype)), o.shape)
        for o in outputs[: len(node.output)]
    ]
    work = call_work(node.op_type, node.domain, call, outs)
    if work is None:
        raise RewriteError(f"calibration case {case.name!r}: the cost model has no work for it")
    const_b = len(consts) > 1 and consts[1] is not None
    return work, coeff_key(ENode(node.op_type, domain=node.domain), call, const_b)


GLOBALS = ("peak_flops", "vector_flops", "bandwidth", "mem_bandwidth", "overhead")
"""The fitted global parameters, in the order of the log-parameter vector (units: µs)."""


def predict(p: np.ndarray, keys: list[str], s: Sample) -> tuple[float, float, float, float]:
    """(predicted µs, R = roofline part, activation-byte time, weight-byte time) under
    log-parameters `p`; the byte times are 0 when the sample is compute-bound."""
    lpg, lpv, lbw, lbm, lo = p[:5]
    tf = s.flops / math.exp(lpg if s.gemm else lpv)
    ta = (s.nbytes - s.weights) / math.exp(lbw)
    tw = s.weights / math.exp(lbm)
    c = math.exp(p[5 + keys.index(s.key)])
    if tf >= ta + tw:
        return tf * c + math.exp(lo), tf * c, 0.0, 0.0
    return (ta + tw) * c + math.exp(lo), (ta + tw) * c, ta * c, tw * c


def fit(samples: list[Sample], iterations: int = 200) -> tuple[np.ndarray, list[str]]:
    """Levenberg-Marquardt on log error (module doc); returns log-parameters and the keys.

    Parameters: log of `GLOBALS` (FLOP/µs, bytes/µs, µs), then log c per key (sorted).
    """
    keys = sorted({s.key for s in samples})
    b = BUILTIN_CPU
    start = [b.peak_flops, b.vector_flops, b.bandwidth, b.bandwidth / 2, b.overhead * 1e12]
    p = np.array([math.log(v / 1e6) for v in start] + [0.0] * len(keys))
    prior0 = p[:5].copy()

    def residuals(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows, jac = [], []
        for s in samples:
            pred, r, ta, tw = predict(p, keys, s)
            j = np.zeros(len(p))
            j[4] = math.exp(p[4]) / pred
            j[5 + keys.index(s.key)] = r / pred
            if ta == tw == 0.0:
                j[0 if s.gemm else 1] = -r / pred
            else:
                j[2], j[3] = -ta / pred, -tw / pred
            rows.append(math.log(pred) - math.log(s.measured_us))
            jac.append(j)
        for i in range(len(p)):  # priors: c toward 1 (ridge); globals barely held at start
            j = np.zeros(len(p))
            w = math.sqrt(RIDGE) if i >= 5 else 1e-3
            j[i] = w
            rows.append(w * (p[i] - (0.0 if i >= 5 else prior0[i])))
            jac.append(j)
        return np.array(rows), np.array(jac)

    lam = 1e-2
    r, J = residuals(p)
    cost = float(r @ r)
    for _ in range(iterations):
        A = J.T @ J
        step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-9), -J.T @ r)
        r2, J2 = residuals(p + step)
        if float(r2 @ r2) < cost:
            p, r, J, cost, lam = p + step, r2, J2, float(r2 @ r2), lam / 3
            if np.abs(step).max() < 1e-6:
                break
        else:
            lam *= 4
    return p, keys


def fit_errors(keys: list[str], logerr: list[float]) -> dict[str, Any]:
    """`n`, `rms_log_error`, `median_abs_rel_error` and `per_key` (n, median) of a fit whose
    i-th sample has cost key `keys[i]` and log error log(predicted / measured) `logerr[i]`."""
    per_key: dict[str, list[float]] = {}
    for k, e in zip(keys, logerr, strict=True):
        per_key.setdefault(k, []).append(abs(math.expm1(e)))
    return {
        "n": len(logerr),
        "rms_log_error": math.sqrt(sum(e * e for e in logerr) / len(logerr)),
        "median_abs_rel_error": float(np.median([abs(math.expm1(e)) for e in logerr])),
        "per_key": {
            k: {"n": len(v), "median_abs_rel_error": float(np.median(v))}
            for k, v in sorted(per_key.items())
        },
    }


def build_table(
    samples: list[Sample], target: str, threads: int, node_us: float
) -> CalibrationTable:
    """Fit `samples` into a `CalibrationTable` with the fit's errors in `fit`."""
    p, keys = fit(samples)
    preds = [predict(p, keys, s)[0] for s in samples]
    logerr = [math.log(pr / s.measured_us) for pr, s in zip(preds, samples, strict=True)]
    fit_info = {
        "method": "Levenberg-Marquardt on log(pred/measured); ridge on log c = "
        f"{RIDGE}; node dispatch from chained Relus = {node_us:.3f} us",
        **fit_errors([s.key for s in samples], logerr),
        "samples": [
            [s.name, s.key, s.flops, s.nbytes, s.weights, round(s.measured_us, 3), round(pr, 3)]
            for s, pr in zip(samples, preds, strict=True)
        ],
    }
    g = {name: math.exp(v) for name, v in zip(GLOBALS, p[:5], strict=True)}
    return CalibrationTable(
        key=machine_key(target, threads),
        peak_flops=g["peak_flops"] * 1e6,
        vector_flops=g["vector_flops"] * 1e6,
        bandwidth=g["bandwidth"] * 1e6,
        mem_bandwidth=g["mem_bandwidth"] * 1e6,
        overhead=g["overhead"] * 1e-6,
        coeffs={k: round(math.exp(p[5 + i]), 4) for i, k in enumerate(keys)},
        fit=fit_info,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )


def measure(
    target: str,
    threads: int,
    quick: bool,
    select: Callable[[Case], bool] | None = None,
    rounds: int | None = None,
) -> tuple[list[Sample], float]:
    """Time every case on `target` (only those `select` accepts when given) over `rounds`
    interleaved rounds (default 5 quick, else 15); returns the samples and the per-node
    dispatch (µs)."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    ep = EP_OF[target]
    if ep == "CUDAExecutionProvider" and hasattr(ort, "preload_dlls"):
        ort.preload_dlls()  # CUDA and cuDNN from the nvidia-* wheels, where they are installed
    if ep not in ort.get_available_providers():
        raise RewriteError(
            f"calibrate --target {target}: ORT's {ep} is not available in this onnxruntime "
            f"({ort.__version__}; available: {', '.join(ort.get_available_providers())}); "
            f"install onnxruntime-gpu with a matching CUDA, or calibrate --target cpu"
        )
    todo = [c for c in cases(quick) if select is None or select(c)]
    one, chain = baseline_cases()
    runners = [Runner(c.model, c.feeds, ep, threads) for c in [one, chain, *todo]]
    medians = time_cases(runners, rounds=rounds or (5 if quick else 15))
    t1, t33 = medians[0], medians[1]
    node_us = max((t33 - t1) / 32, 0.05)
    samples = []
    for case, runner, t in zip(todo, runners[2:], medians[2:], strict=True):
        (flops, nbytes, weights), key = features(case, runner.outputs())
        y = max((t - t1 + node_us) / case.copies, node_us / 2)
        samples.append(Sample(case.name, case.op, key, flops, nbytes, weights, y))
    return samples, node_us


def check_out(out: Path | None) -> None:
    """Raise RewriteError if `out` cannot be a calibration table's file path (before timing)."""
    if out is not None and (out.is_dir() or (out.parent.exists() and not out.parent.is_dir())):
        raise RewriteError(f"{out}: cannot write the calibration table there (not a file path)")


def calibrate(
    target: str = "cpu",
    *,
    threads: int = 1,
    quick: bool = False,
    out: Path | None = None,
    rounds: int | None = None,
) -> CalibrationTable:
    """Measure and fit the cost model for `target` with `threads` intra-op threads; write the
    table to `out` (default: the user cache, `table.cache_path`) and return it.

    Raises RewriteError if the target's EP is not available here, or if `out` cannot be
    written (checked before measuring, where it can be). `quick` times a handful of cases in a
    few rounds (seconds; for tests), not enough for a table worth keeping.
    """
    if target not in EP_OF:
        raise RewriteError(f"unknown target {target!r}; known: {', '.join(EP_OF)}")
    if threads < 1:
        raise RewriteError(f"--threads must be >= 1, not {threads}")
    check_out(out)
    samples, node_us = measure(target, threads, quick, rounds=rounds)
    table = build_table(samples, target, threads, node_us)
    table.fit["quick"] = quick
    path = out or cache_path(table.key)
    try:
        table.save(path)
    except OSError as e:
        raise RewriteError(f"{path}: cannot write the calibration table: {e.strerror}") from e
    return table


def summary(table: CalibrationTable, path: Path) -> str:
    """A few readable lines: globals, fit error, per-key multipliers."""
    f = table.fit
    lines = [
        f"calibrated {table.key.target} ({table.key.ep}, {table.key.threads} thread(s), "
        f"ORT {table.key.ort}, {table.key.cpu}) -> {path}",
        f"GEMM {table.peak_flops / 1e9:.1f} GFLOP/s, vector {table.vector_flops / 1e9:.1f} "
        f"GFLOP/s, bandwidth {table.bandwidth / 1e9:.1f} GB/s (weights "
        f"{table.mem_bandwidth / 1e9:.1f} GB/s), overhead "
        f"{table.overhead * 1e6:.2f} us/node",
        f"fit over {f['n']} cases: median |error| {f['median_abs_rel_error']:.1%}, "
        f"rms log error {f['rms_log_error']:.3f}",
        "multipliers: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(table.coeffs.items())),
    ]
    return "\n".join(lines)
