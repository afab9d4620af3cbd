"""Estimated seconds of the work after extraction (save, verify, snapshot/decode), which the
deadline reserves before saturation may use the rest (`stages.optimize_job`)."""

from __future__ import annotations

import math

import numpy as np
import onnx

from rewrite.onnx_io.graph import Graph

SAVE_SECONDS_PER_MB = 0.022
"""Estimated save time per MB of weights (serialize, fsync, full checker); measured 0.015-0.019
on this 2-core VM's disk."""
VERIFY_SECONDS_PER_MB = 0.016
"""Estimated differential-check time per MB of weights (two ORT sessions, two input sets);
measured 0.012-0.014."""
FIXED_SECONDS = 0.3
"""Estimated fixed part of save + verify (sessions, checker) on a tiny model."""
POST_SECONDS_PER_NODE = 3e-4
"""Snapshot + greedy + decode seconds per e-node of the saturated e-graph (measured 1.5e-4 to
4e-4 on exploded e-graphs of 18k-24k e-nodes, 2 cores)."""


def post_seconds(graph: Graph, verify: bool) -> float:
    """Estimated time to save `graph` (and to verify it, when `verify`)."""
    rate = SAVE_SECONDS_PER_MB + (VERIFY_SECONDS_PER_MB if verify else 0.0)
    return FIXED_SECONDS + weights_mb(graph) * rate


def weights_mb(graph: Graph) -> float:
    """MB of the graph's initializers, from their dims and dtypes."""
    return sum(nbytes(t) for t in graph.initializers.values()) / 1e6


def nbytes(t: onnx.TensorProto) -> int:
    """A tensor's size from its dims and dtype (reading its data would copy it)."""
    try:
        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except (KeyError, TypeError, ValueError):
        itemsize = 4
    return math.prod(t.dims) * itemsize
