"""FLOPs and bytes of the ORT contrib ops (`com.microsoft`) that the op registry lacks.

The cost model prices an op from its `OpSpec`; contrib ops that the fusion rules create (and
that ORT's own passes create after us) have no spec yet, so without this table a
`FusedMatMul` would be priced by its bytes alone, as if it were free of arithmetic. Each entry
gives `(flops, outputs)` from the op's `OpCall`; bytes are the inputs' plus the outputs'
(`bytes_moved`). A registered spec for the same (domain, op) always wins over this table, so
an op module added later under `rewrite/ops/` replaces its entry here without other changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rewrite.ops.base import OpCall, TensorType, bytes_moved

MS = "com.microsoft"
TRANSCENDENTAL = 4.0
"""FLOPs counted per exp/erf/tanh (matches `rewrite.ops.unary`)."""

WorkFn = Callable[[OpCall, list[TensorType]], tuple[float, list[TensorType]]]


def _like_input0(k: float) -> WorkFn:
    """An elementwise op with `k` FLOPs per element whose output has input 0's type."""

    def work(call: OpCall, outputs: list[TensorType]) -> tuple[float, list[TensorType]]:
        x = call.input(0)
        outs = outputs if outputs and outputs[0].numel is not None else [x]
        return k * float(outs[0].numel or 0), outs[:1]

    return work


def _fused_matmul(call: OpCall, outputs: list[TensorType]) -> tuple[float, list[TensorType]]:
    """2·batch·m·k·n with A and B transposed per `transA`/`transB`; output computed if unknown."""
    a, b = call.input(0).shape, call.input(1).shape
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return 0.0, outputs
    ta, tb = int(call.attr("transA", 0)), int(call.attr("transB", 0))
    m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
    n = b[-2] if tb else b[-1]
    batch = a[:-2] if len(a) >= len(b) else b[:-2]
    if not all(isinstance(d, int) for d in (*batch, m, k, n)):
        return 0.0, outputs
    out = TensorType(call.input(0).dtype, (*batch, m, n))
    flops = 2.0 * math.prod(batch) * m * k * n  # type: ignore[arg-type, operator]
    return flops, outputs if outputs and outputs[0].numel is not None else [out]


def _fused_gemm(call: OpCall, outputs: list[TensorType]) -> tuple[float, list[TensorType]]:
    flops, outs = _fused_matmul(call, outputs)
    n_out = outs[0].numel if outs else None
    return flops + (float(n_out or 0) if call.has_input(2) else 0.0), outs


CONTRIB_WORK: dict[tuple[str, str], WorkFn] = {
    (MS, "FusedMatMul"): _fused_matmul,
    (MS, "FusedGemm"): _fused_gemm,
    (MS, "Gelu"): _like_input0(TRANSCENDENTAL + 4),
    (MS, "FastGelu"): _like_input0(TRANSCENDENTAL + 7),
    (MS, "BiasGelu"): _like_input0(TRANSCENDENTAL + 5),
    (MS, "QuickGelu"): _like_input0(TRANSCENDENTAL + 3),
    (MS, "SkipLayerNormalization"): _like_input0(9),
    (MS, "SkipSimplifiedLayerNormalization"): _like_input0(7),
    (MS, "SimplifiedLayerNormalization"): _like_input0(6),
    (MS, "BiasAdd"): _like_input0(2),
}
"""(domain, op) -> its work function. GEMM-like entries are listed in `cost.GEMM_OPS`."""


def contrib_work(
    domain: str, op: str, call: OpCall, outputs: list[TensorType]
) -> tuple[float, float] | None:
    """(FLOPs, bytes) of a known contrib op on static types, or None if the op is not listed."""
    fn = CONTRIB_WORK.get((domain, op))
    if fn is None:
        return None
    flops, outs = fn(call, outputs)
    return flops, bytes_moved(call, outs)
