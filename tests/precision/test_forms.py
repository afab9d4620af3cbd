"""`precision.forms`: where int8_dynamic applies, and the lowered model in ORT."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from rewrite.precision.forms import (
    candidates,
    lower,
    quantize_blocks,
    quantize_weight,
    smoothing,
)
from rewrite.precision.metrics import maxrel
from rewrite.precision.sensitivity import activation_stats, run, switchable
from tests.precision.models import mlp

DYN = ("int8_dynamic",)


def test_matmul_and_gemm_with_constant_weights_are_candidates() -> None:
    both = candidates(mlp((16, 32, 8)))
    forms = ("int8_dynamic", "int8_block", "int4_block")
    assert [c.key for c in both] == [(i, f) for i in (0, 2) for f in forms]
    cs = candidates(mlp((16, 32, 8)), DYN)
    assert [(c.node, c.op, c.k, c.n, c.transposed) for c in cs] == [
        ("matmul0", "MatMul", 16, 32, False),
        ("matmul1", "MatMul", 32, 8, False),
    ]
    g = candidates(mlp((16, 32, 8), gemm=True), DYN)
    assert [(c.op, c.k, c.n, c.transposed) for c in g] == [
        ("Gemm", 16, 32, True),
        ("Gemm", 32, 8, True),
    ]


def test_ops_outside_the_form_are_not_candidates() -> None:
    m = mlp((16, 32, 8), gemm=True)
    m.graph.node[0].attribute.append(h.make_attribute("alpha", 0.5))
    m.graph.input.append(h.make_tensor_value_info("wx", T.FLOAT, [32, 8]))
    m.graph.node[2].input[1] = "wx"  # the second Gemm's weight is a graph input now
    assert candidates(m) == []
    d = mlp((16, 8))
    d.graph.initializer[0].CopyFrom(nh.from_array(np.ones((16, 8), np.float64), "w0"))
    assert candidates(d) == []  # float64 weights


def test_quantized_weights_are_within_half_a_step_per_column() -> None:
    w = np.random.default_rng(1).standard_normal((40, 7)).astype(np.float32)
    w[:, 3] = 0
    q, s = quantize_weight(w)
    assert q.dtype == np.int8 and s.shape == (7,) and np.abs(q).max() <= 127
    assert np.all(np.abs(w - q * s) <= s / 2 + 1e-7)
    assert s[3] == 1 and not q[:, 3].any()


def test_the_lowered_model_runs_in_ort_close_to_the_exact_one() -> None:
    for gemm in (False, True):
        m = mlp((64, 128, 64), gemm=gemm)
        low = lower(m, candidates(m, DYN))
        onnx.checker.check_model(low, full_check=True)
        ops = [n.op_type for n in low.graph.node]
        assert ops.count("DynamicQuantizeMatMul") == 2 and "MatMul" not in ops and "Gemm" not in ops
        assert {t.name for t in low.graph.initializer}.isdisjoint({"w0", "w1"})
        x = [{"x": np.random.default_rng(2).standard_normal((32, 64)).astype(np.float32)}]
        err = maxrel(run(m, x)[0]["y"], run(low, x)[0]["y"])
        assert 0 < err < 0.03


def test_a_weight_shared_by_two_ops_is_quantized_once_and_kept_when_still_read() -> None:
    m = mlp((32, 32, 32))
    m.graph.node[2].input[1] = "w0"  # both MatMuls read w0; w1 is unused
    cs = candidates(m, DYN)
    low = lower(m, cs[:1])  # only the first lowered: w0 is still read by the second
    names = [t.name for t in low.graph.initializer]
    assert "w0" in names and sum(n.startswith("w0_int8") for n in names) == 1
    both = lower(m, cs)
    names = [t.name for t in both.graph.initializer]
    assert "w0" not in names and sum(n.startswith("w0_int8") for n in names) == 1


def test_smoothing_is_exact_before_rounding_and_cuts_the_error_of_outlier_channels() -> None:
    m = mlp((64, 256), rows=64)
    cs = candidates(m, DYN)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    x[:, 5] *= 30  # one outlier channel, as LayerNorm outputs have
    sets = [{"x": x}]
    _, amax = activation_stats(m, cs, sets)
    sm = smoothing(cs, m, amax)
    assert sm["x"].shape == (64,) and sm["x"][5] > 3 * np.median(sm["x"])
    ref = run(m, sets)[0]["y"]
    plain = maxrel(ref, run(lower(m, cs), sets)[0]["y"])
    smooth_low = lower(m, cs, sm)
    assert [n.op_type for n in smooth_low.graph.node][:2] == ["Mul", "DynamicQuantizeMatMul"]
    smoothed = maxrel(ref, run(smooth_low, sets)[0]["y"])
    assert smoothed < plain / 1.5


def test_block_quantized_weights_are_within_half_a_step_per_block() -> None:
    w = np.random.default_rng(4).standard_normal((70, 5)).astype(np.float32)  # 3 blocks, padded
    q, s = quantize_blocks(w)
    assert q.shape == (5, 3, 32) and q.dtype == np.uint8 and s.shape == (15,)
    back = ((q.astype(np.float32) - 128) * s.reshape(5, 3, 1)).reshape(5, 96).T[:70]
    assert np.all(np.abs(w - back) <= np.repeat(s.reshape(5, 3).T, 32, axis=0)[:70] / 2 + 1e-7)


def test_the_block_form_runs_in_ort_and_is_more_accurate_on_an_outlier_channel() -> None:
    for gemm in (False, True):
        m = mlp((256, 128), rows=4, gemm=gemm)
        rng = np.random.default_rng(6)
        x = rng.standard_normal((4, 256)).astype(np.float32)
        x[:, 7] *= 50
        sets = [{"x": x}]
        ref = run(m, sets)[0]["y"]
        errs = {}
        for form in ("int8_dynamic", "int8_block"):
            low = lower(m, candidates(m, (form,)))
            onnx.checker.check_model(low, full_check=True)
            errs[form] = maxrel(ref, run(low, sets)[0]["y"])
        assert "MatMulNBits" in {n.op_type for n in low.graph.node}
        assert 0 < errs["int8_block"] < errs["int8_dynamic"] / 1.5


def test_two_forms_of_one_op_are_refused() -> None:
    m = mlp((16, 8))
    try:
        lower(m, candidates(m))
    except ValueError as e:
        assert "two forms" in str(e)
    else:
        raise AssertionError("lower accepted two forms of one op")


def test_the_switchable_model_computes_the_exact_op_or_one_form_per_switch() -> None:
    m = mlp((64, 128, 64), gemm=True)
    x = np.random.default_rng(8).standard_normal((32, 64)).astype(np.float32)
    exact = run(m, [{"x": x}])[0]["y"]
    for form in ("int8_dynamic", "int8_block", "int4_block"):
        cs = candidates(m, (form,))
        _, amax = activation_stats(m, cs, [{"x": x}])
        sm = smoothing(cs, m, amax)
        probe, switches = switchable(m, cs, sm)
        onnx.checker.check_model(probe, full_check=True)
        assert set(switches) == {c.key for c in cs}
        off = {sw: np.array(False) for sw in switches.values()}
        assert np.allclose(run(probe, [{"x": x, **off}])[0]["y"], exact, rtol=1e-6, atol=1e-6)
        for c in cs:
            on = {**off, switches[c.key]: np.array(True)}
            alone = run(lower(m, [c], sm), [{"x": x}])[0]["y"]
            got = run(probe, [{"x": x, **on}])[0]["y"]
            assert np.allclose(got, alone, rtol=1e-5, atol=1e-5), c.key
            assert not np.allclose(got, exact, rtol=1e-6, atol=1e-6)


def test_int4_blocks_pack_two_values_per_byte() -> None:
    w = np.random.default_rng(9).standard_normal((64, 3)).astype(np.float32)
    q, s = quantize_blocks(w, 32, 4)
    assert q.shape == (3, 2, 16) and s.shape == (6,)
    v = np.stack([q & 15, q >> 4], axis=-1).reshape(3, 2, 32).astype(np.float32)
    back = ((v - 8) * s.reshape(3, 2, 1)).reshape(3, 64).T
    assert np.all(np.abs(w - back) <= np.repeat(s.reshape(3, 2).T, 32, axis=0) / 2 + 1e-7)
