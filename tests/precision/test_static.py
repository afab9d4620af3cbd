"""`precision.static`: Conv's int8 QDQ form, where it applies, and what ORT makes of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h

from rewrite.precision.forms import candidates, lower
from rewrite.precision.kernels import time_pair
from rewrite.precision.lower import Config, lower_model
from rewrite.precision.metrics import maxrel
from rewrite.precision.sensitivity import activation_stats, run, sensitivities
from rewrite.precision.static import activation_qparams, quantize_conv_weight
from tests.precision.models import cnn

STATIC = ("int8_static",)


def _feeds(n: int, shape: tuple[int, ...] = (1, 8, 16, 16)) -> list[dict[str, np.ndarray]]:
    return [
        {"x": np.random.default_rng(10 + i).standard_normal(shape).astype(np.float32)}
        for i in range(n)
    ]


def _lowered(m: onnx.ModelProto) -> tuple[onnx.ModelProto, list]:
    cs = candidates(m, STATIC)
    ranges: dict[str, tuple[float, float]] = {}
    activation_stats(m, cs, _feeds(2), ranges)
    return lower(m, cs, None, ranges), cs


def _executed(m: onnx.ModelProto, tmp_path: Path) -> list[str]:
    """The op types of the graph ORT runs (ORT_ENABLE_ALL, CPU)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "ort.onnx")
    ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(str(tmp_path / "ort.onnx")).graph.node]


def test_convs_with_constant_weights_are_candidates_and_relus_fold_into_them() -> None:
    m = cnn()
    cs = candidates(m, STATIC)
    assert [(c.node, c.op, c.form, c.wshape) for c in cs] == [
        ("conv0", "Conv", "int8_static", (16, 8, 3, 3)),
        ("conv1", "Conv", "int8_static", (16, 16, 3, 3)),
        ("residual", "Add", "int8_static", ()),
        ("head", "Conv", "int8_static", (4, 16, 1, 1)),
    ]
    # conv0's and conv1's outputs are read only by a Relu: its output is what they quantize
    assert [(c.output, c.relu) for c in cs] == [("r0", 1), ("r1", 3), ("sum", -1), ("y", -1)]
    assert (cs[2].activation, cs[2].operand) == ("r0", "r1")
    assert all(c.form != "int8_static" for c in candidates(m, ("int8_dynamic",)))


def test_convs_outside_the_form_are_not_candidates() -> None:
    assert candidates(cnn(opset=12), STATIC) == []  # per-axis DequantizeLinear needs 13
    m = cnn()
    m.graph.input.append(h.make_tensor_value_info("wx", onnx.TensorProto.FLOAT, [16, 16, 3, 3]))
    m.graph.node[2].input[1] = "wx"  # conv1's weight is a graph input now
    assert [c.node for c in candidates(m, STATIC)] == ["conv0", "residual", "head"]
    m.graph.node[4].input[1] = "w0"  # the residual Add of a constant: stays with its op
    assert [c.node for c in candidates(m, STATIC)] == ["conv0", "head"]


def test_a_relu_with_a_second_reader_is_not_folded() -> None:
    m = cnn()
    m.graph.output.append(h.make_tensor_value_info("c1", onnx.TensorProto.FLOAT, None))
    assert [(c.output, c.relu) for c in candidates(m, STATIC)][1] == ("c1", -1)


@pytest.mark.parametrize(
    ("lo", "hi", "scale", "zero"),
    [(-1.0, 3.0, 4 / 255, 64), (0.0, 2.55, 0.01, 0), (0.5, 2.55, 0.01, 0), (0.0, 0.0, 1.0, 0)],
)
def test_activation_ranges_hold_zero_exactly(lo: float, hi: float, scale: float, zero: int) -> None:
    s, z = activation_qparams(lo, hi)
    assert s == pytest.approx(scale, rel=1e-6) and z == zero
    # the range (widened to hold 0) is covered to within half a step at both ends
    assert (0 - int(z)) * s <= min(lo, 0) + s / 2 and (255 - int(z)) * s >= max(hi, 0) - s / 2


def test_conv_weights_are_within_half_a_step_per_output_channel() -> None:
    w = np.random.default_rng(1).standard_normal((6, 3, 3, 3)).astype(np.float32)
    w[2] = 0
    q, s = quantize_conv_weight(w)
    assert q.dtype == np.int8 and s.shape == (6,) and np.abs(q).max() == 127
    assert np.all(np.abs(w - q * s[:, None, None, None]) <= s[:, None, None, None] / 2 + 1e-7)
    assert s[2] == 1 and not q[2].any()


def test_the_lowered_model_is_qlinearconv_in_ort_and_close_to_the_exact_one(
    tmp_path: Path,
) -> None:
    m = cnn()
    low, _ = _lowered(m)
    onnx.checker.check_model(low, full_check=True)
    ops = [n.op_type for n in low.graph.node]
    assert "Relu" not in ops  # both folded into their Conv's output quantization
    # r0 is read by conv1 and the residual Add: one pair, which both read directly
    assert ops.count("QuantizeLinear") == 5  # x, r0, r1, sum, y
    executed = _executed(low, tmp_path)
    assert executed.count("QLinearConv") == 3 and "Conv" not in executed
    assert executed.count("QLinearAdd") == 1 and "Add" not in executed
    feeds = _feeds(2)  # the calibration sets: no activation outside its range
    ref, got = run(m, feeds), run(low, feeds)
    errs = [maxrel(r["y"], g["y"]) for r, g in zip(ref, got, strict=True)]
    assert 0 < max(errs) < 0.05


def test_a_candidates_sensitivity_is_its_error_when_lowered_alone() -> None:
    m = cnn()
    cs = candidates(m, STATIC)
    ranges: dict[str, tuple[float, float]] = {}
    feeds = _feeds(2)
    activation_stats(m, cs, feeds, ranges)
    ref = run(m, feeds)
    sens = sensitivities(m, cs, feeds, ref, "maxrel", ranges=ranges)
    for c in cs:
        alone = run(lower(m, [c], None, ranges), feeds)
        want = max(maxrel(r["y"], a["y"]) for r, a in zip(ref, alone, strict=True))
        assert sens[c.key]["y"] == pytest.approx(want, rel=1e-3, abs=1e-6), c.node


def test_a_3x3_conv_is_faster_in_its_static_form_on_this_cpu() -> None:
    c = next(c for c in candidates(cnn((64, 64, 64)), STATIC) if c.node == "conv1")
    exact, low = time_pair(c, (1, 64, 56, 56))
    assert low < exact, (exact, low)


def test_the_pass_lowers_a_cnn_within_the_budget(tmp_path: Path) -> None:
    src = tmp_path / "cnn.onnx"
    onnx.save(cnn((32, 64, 64), size=56), str(src))
    got = lower_model(src, src, Config(max_error=0.05, kernel_table=tmp_path / "k.json"))
    assert got.model is not None, got.report
    rep = got.report
    assert rep["forms"] == ["int8_static"] and rep["candidates"] == 4
    assert {c["form"] for c in rep["changed"]} == {"int8_static"}
    worst = max([*rep["error"]["calibration"].values(), *rep["error"]["held_back"].values()])
    assert 0 < worst <= 0.05


def test_a_maxpool_pools_the_quantized_values_at_its_inputs_scale(tmp_path: Path) -> None:
    m = cnn(pool=True)
    cs = candidates(m, STATIC)
    pool = next(c for c in cs if c.op == "MaxPool")
    assert (pool.node, pool.activation, pool.output, pool.relu) == ("pool", "sum", "pooled", -1)
    low, _ = _lowered(m)
    onnx.checker.check_model(low, full_check=True)
    executed = _executed(low, tmp_path)
    # int8 from x's quantize to y's dequantize: ORT pools uint8, no float op in between
    assert executed.count("QuantizeLinear") == 1 and executed.count("DequantizeLinear") == 1
    assert executed.count("NhwcMaxPool") == 1 and executed.count("QLinearAdd") == 1
    feeds = _feeds(2)
    ranges: dict[str, tuple[float, float]] = {}
    activation_stats(m, cs, feeds, ranges)
    both = lower(m, [c for c in cs if c.node in ("residual", "pool")], None, ranges)
    add_only = lower(m, [c for c in cs if c.node == "residual"], None, ranges)
    for a, b in zip(run(both, feeds), run(add_only, feeds), strict=True):
        np.testing.assert_array_equal(a["y"], b["y"])  # max commutes with the rounding


def test_a_few_row_matmul_is_timed_over_more_weights_than_the_caches_hold() -> None:
    """Decoding one token streams each weight from memory inside a model: timed alone, a
    repeated run would find it in cache (the int8 forms then look 2-3x faster than they run)."""
    from rewrite.precision.forms import Candidate
    from rewrite.precision.kernels import COLD_BYTES, copies

    gemv = Candidate(0, "m", "MatMul", "int8_dynamic", "a", "w", 768, 3072, False)
    assert copies(gemv, (1, 768)) * 768 * 3072 >= COLD_BYTES
    assert copies(gemv, (128, 768)) == 1  # many rows: compute-bound, timed as it is
    head = Candidate(0, "m", "MatMul", "int8_dynamic", "a", "w", 768, 50257, False)
    assert copies(head, (1, 768)) == 2
    conv = candidates(cnn(), STATIC)[0]
    assert copies(conv, (1, 8, 16, 16)) == 1
