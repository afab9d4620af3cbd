"""Each candidate's error, measured: the model with that op alone lowered, on calibration
inputs, against the exact model's outputs (`metrics.errors`, per output). Also the runner the
pass shares: a model in ORT on a list of feed sets, and the shapes of the candidates'
activations read from one run of the exact model."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from rewrite.precision.forms import Candidate, lower
from rewrite.precision.metrics import errors

Outputs = list[dict[str, np.ndarray]]


def session(model: onnx.ModelProto, *, target: str = "cpu", threads: int = 1) -> Any:
    import onnxruntime as ort

    from rewrite.precision.kernels import PROVIDERS

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), so, providers=[PROVIDERS.get(target, target)]
    )


def run(model: onnx.ModelProto, feed_sets: list[Mapping[str, Any]], **kw: Any) -> Outputs:
    """Every graph output of `model` on each feed set."""
    s = session(model, **kw)
    names = [o.name for o in s.get_outputs()]
    fed = {i.name for i in s.get_inputs()}
    return [
        dict(zip(names, s.run(None, {k: v for k, v in f.items() if k in fed}), strict=True))
        for f in feed_sets
    ]


def activation_stats(
    model: onnx.ModelProto, cands: list[Candidate], feed_sets: list[Mapping[str, Any]], **kw: Any
) -> tuple[dict[str, tuple[int, ...]], dict[str, np.ndarray]]:
    """Per candidate activation: its concrete shape on the first feed set, and the largest
    |value| of each of its last-axis channels over all sets (one run of `model` per set with
    those values added as outputs)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {o.name for o in probe.graph.output}
    acts = list(dict.fromkeys(c.activation for c in cands))
    for name in acts:
        if name not in have:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    got = run(probe, feed_sets, **kw)
    shapes = {a: tuple(int(d) for d in np.shape(got[0][a])) for a in acts}
    amax: dict[str, np.ndarray] = {}
    for a in acts:
        for g in got:
            v = np.asarray(g[a], np.float32)
            if v.ndim == 0 or v.size == 0:
                continue
            m = np.max(np.abs(v.reshape(-1, v.shape[-1])), axis=0)
            amax[a] = m if a not in amax else np.maximum(amax[a], m)
    return shapes, amax


def sensitivities(
    model: onnx.ModelProto,
    cands: list[Candidate],
    feed_sets: list[Mapping[str, Any]],
    reference: Outputs,
    metric: str,
    *,
    smooth: dict[str, np.ndarray] | None = None,
    deadline: float | None = None,
    **kw: Any,
) -> dict[tuple[int, str], dict[str, float]]:
    """Per candidate (by its (node index, form) key), its error per output when lowered
    alone. Candidates not reached before `deadline` (a `time.monotonic()` value) are left out
    (they stay exact)."""
    out: dict[tuple[int, str], dict[str, float]] = {}
    for c in cands:
        if deadline is not None and time.monotonic() > deadline:
            break
        out[c.key] = errors(metric, reference, run(lower(model, [c], smooth), feed_sets, **kw))
    return out
