"""The typed form of ORT's SimplifiedLayerNormalization (RMSNorm), which ORT 1.32 registers in
the ONNX domain "" (version 1), not in com.microsoft (where it is "not a registered
function/op"): one-op models encode with no opaque node, `optimize` with no rules writes
bit-identical ORT outputs, and the numpy reference is bit-identical to ORT's kernel where it
sums fewer than 16 elements (float32 throughout, x² overflowing to inf at 1e20).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
from onnx import TensorProto as P
from onnx import helper as h

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.roundtrip import assert_optimizes_identically

OPSETS = [h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)]


def _model(
    x_shape: tuple[int, ...], s_shape: tuple[int, ...], eps: float, n_outputs: int = 1
) -> onnx.ModelProto:
    outs = ["y", "inv"][:n_outputs]
    node = h.make_node("SimplifiedLayerNormalization", ["x", "s"], outs, epsilon=eps, axis=-1)
    graph = h.make_graph(
        [node],
        "g",
        [
            h.make_tensor_value_info("x", P.FLOAT, x_shape),
            h.make_tensor_value_info("s", P.FLOAT, s_shape),
        ],
        [h.make_tensor_value_info(o, P.FLOAT, None) for o in outs],
    )
    model = h.make_model(graph, opset_imports=OPSETS)
    model.ir_version = 8
    return model


def _feeds(x_shape: tuple[int, ...], s_shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "x": rng.standard_normal(x_shape).astype(np.float32),
        "s": rng.standard_normal(s_shape).astype(np.float32),
    }


@pytest.mark.parametrize("shape", [(1, 8, 64), (2, 3, 16)])
@pytest.mark.parametrize("eps", [1e-5, 1e-6])
def test_simplified_layer_norm_optimizes_identically(
    shape: tuple[int, ...], eps: float, tmp_path: Path
) -> None:
    s_shape = shape[-1:]
    assert_optimizes_identically(_model(shape, s_shape, eps), _feeds(shape, s_shape), tmp_path)


def test_a_second_output_stays_opaque(tmp_path: Path) -> None:
    src = tmp_path / "m.onnx"
    onnx.save(_model((2, 3, 16), (16,), 1e-5, n_outputs=2), src)
    enc = encode(load(src))
    assert enc.opaque_nodes == 1 and enc.typed == 0


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, ["CPUExecutionProvider"])
    return np.asarray(sess.run(None, feeds)[0])


@pytest.mark.parametrize("n", [1, 3, 8, 15])
def test_the_reference_is_ort_bit_for_bit_below_16_elements(n: int) -> None:
    spec = lookup("SimplifiedLayerNormalization")
    assert spec is not None and spec.reference is not None
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((4, n)) * 10 ** rng.uniform(-3, 3, (4, 1))).astype(np.float32)
    x[0, 0] = 1e20  # x² overflows in float32: ORT's row is 0
    s = rng.standard_normal(n).astype(np.float32)
    call = OpCall(
        "SimplifiedLayerNormalization",
        [TensorType(P.FLOAT, x.shape), TensorType(P.FLOAT, s.shape)],
        [None, None],
        {"epsilon": 1e-6, "axis": -1},
    )
    (ref,) = spec.reference(call, [x, s])
    got = _ort(_model(x.shape, s.shape, 1e-6), {"x": x, "s": s})
    assert ref.tobytes() == got.tobytes()
    assert not got[0].any()
