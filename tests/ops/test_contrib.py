"""com.microsoft contrib ops: reference and infer against ORT."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ops.harness import check_op

RNG = np.random.default_rng(7)


def x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("op", "inputs", "attrs"),
    [
        ("QuickGelu", [x(2, 3, 5)], {"alpha": 1.0}),
        ("QuickGelu", [x(4, 6)], {}),
        ("Gelu", [x(2, 3, 5)], {}),
        ("FastGelu", [x(3, 8)], {}),
        ("BiasGelu", [x(2, 4, 8), x(8)], {}),
        ("FusedMatMul", [x(2, 3, 4), x(2, 4, 5)], {"alpha": 0.5}),
        ("FusedMatMul", [x(2, 4, 3), x(5, 4)], {"transA": 1, "transB": 1}),
        # 1-D operands, as ORT runs them: numpy's MatMul rules, trans only on rank >= 2
        ("FusedMatMul", [x(3), x(3, 2)], {}),
        ("FusedMatMul", [x(4, 2, 3), x(3)], {"alpha": 2.0}),
        ("FusedMatMul", [x(3), x(3)], {}),
        ("FusedMatMul", [x(3), x(2, 3)], {"transB": 1}),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_contrib_op_matches_ort(op: str, inputs: list[np.ndarray], attrs: dict) -> None:
    check_op(op, inputs, attrs, domain="com.microsoft", rtol=1e-4, atol=1e-5)
