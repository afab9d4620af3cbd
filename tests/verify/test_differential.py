"""differential() in real ONNX Runtime: verdicts, reasons, tolerance policy, calibration."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from rewrite.errors import VerificationError
from rewrite.verify import compare, differential, make_inputs, ort_noise
from tests.conftest import corpus_model
from tests.verify.models import I64, F, add_model, model, save

BIAS = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


def unary_model(*ops: str, dtype: int = F) -> onnx.ModelProto:
    """Y = ops[-1](...ops[0](X)), X [3, 4]."""
    names = ["X"] + [f"t{i}" for i in range(len(ops) - 1)] + ["Y"]
    nodes = [
        helper.make_node(op, [a], [b]) for op, a, b in zip(ops, names, names[1:], strict=False)
    ]
    return model(
        nodes,
        [helper.make_tensor_value_info("X", dtype, [3, 4])],
        [helper.make_tensor_value_info("Y", dtype, [3, 4])],
    )


def test_identical_models_are_ok_and_bit_identical(tmp_path: Path) -> None:
    ref = save(add_model(BIAS), tmp_path / "ref.onnx")
    r = differential(ref, add_model(BIAS), trials=3)
    assert r.ok and r.trials == 3 and r.reason == "" and r.problems == []
    (y,) = r.outputs
    assert y.name == "Y" and y.bit_identical and y.max_abs == 0 and y.shape == (3, 4)
    assert y.dtype == "float32" and y.rtol == 1e-4 and y.atol >= 1e-5 and not y.calibrated
    assert r.summary().startswith("ok: 1 output agrees (1 bit-identical")
    json.dumps(r.to_json())


def test_difference_above_tolerance_names_output_and_max_abs(tmp_path: Path) -> None:
    r = differential(add_model(BIAS), add_model(BIAS + 1e-3))
    assert not r.ok
    (y,) = r.outputs
    assert not y.ok and not y.bit_identical
    assert y.max_abs == pytest.approx(1e-3, rel=1e-2) and y.mismatches > 0
    assert "output 'Y'" in r.reason and "max_abs 0.001" in r.reason and "seed 0" in r.reason
    assert r.summary().startswith("FAILED: output 'Y'")


def test_difference_within_tolerance_is_ok_but_not_bit_identical() -> None:
    r = differential(add_model(BIAS), add_model(BIAS + 3e-6))
    (y,) = r.outputs
    assert r.ok and y.ok and not y.bit_identical and 0 < y.max_abs < 1e-5
    assert y.error_ratio is not None and 0 < y.error_ratio <= 1


def test_int64_output_off_by_one_fails() -> None:
    def int_add(c: int) -> onnx.ModelProto:
        return model(
            [helper.make_node("Add", ["X", "C"], ["Y"])],
            [helper.make_tensor_value_info("X", I64, [5])],
            [helper.make_tensor_value_info("Y", I64, [5])],
            [("C", np.array(c, np.int64))],
        )

    r = differential(int_add(1), int_add(2))
    (y,) = r.outputs
    assert not r.ok and y.max_abs == 1 and y.mismatches == 10  # 5 elements x 2 feed sets
    assert "output 'Y' (int64, exact): 5 of 5 elements differ" in r.reason


def test_nan_positions_must_match() -> None:
    r = differential(unary_model("Sqrt"), unary_model("Abs", "Sqrt"))
    assert not r.ok and "NaN/Inf positions differ" in r.reason and "'Y'" in r.reason
    assert differential(unary_model("Sqrt"), unary_model("Sqrt")).ok  # NaN == NaN in place


def test_compare_infinities_and_calibration() -> None:
    inf = np.float32(np.inf)
    ref = np.array([1.0, inf, -inf, np.nan], np.float32)
    assert compare("y", ref, ref.copy()).ok
    assert not compare("y", ref, np.array([1.0, -inf, -inf, np.nan], np.float32)).ok
    assert not compare("y", ref, np.array([1.0, 1e30, -inf, np.nan], np.float32)).ok
    off = np.array([1.0 + 3e-4, inf, -inf, np.nan], np.float32)
    assert not compare("y", ref, off).ok
    wide = compare("y", ref, off, noise=1e-4)  # atol 4e-4 after calibration, + 1e-4·|ref|
    assert wide.ok and wide.calibrated and wide.atol == pytest.approx(4e-4) and wide.noise == 1e-4
    narrow = compare("y", ref, ref, noise=1e-9)  # noise below policy atol: no widening
    assert not narrow.calibrated and narrow.atol == pytest.approx(1e-5)


def test_tolerance_scales_with_magnitude_and_dtype() -> None:
    big = np.full(4, 1000.0, np.float32)
    assert compare("y", big, big + np.float32(0.05)).ok  # atol 1e-2 + rtol 0.1 at |ref| 1000
    assert not compare("y", big, big + np.float32(0.5)).ok
    h = np.ones(4, np.float16)
    assert (
        compare("y", h, h + np.float16(0.005)).ok and not compare("y", h, h + np.float16(0.05)).ok
    )
    d = np.ones(4)
    assert compare("y", d, d + 1e-10).ok and not compare("y", d, d + 1e-8).ok
    assert not compare("y", np.ones(2, np.float32), np.ones(2)).ok  # dtype mismatch
    assert "float32[3] in the candidate" in compare("y", d[:2], np.ones(3, np.float32)).reason


def test_calibrate_records_noise(tmp_path: Path) -> None:
    path = save(add_model(BIAS), tmp_path / "m.onnx")
    noise = ort_noise(path, make_inputs(path))
    assert list(noise) == ["Y"] and noise["Y"] == 0.0
    r = differential(path, path, calibrate=True)
    assert r.ok and r.calibrated and r.outputs[0].noise == 0.0 and not r.outputs[0].calibrated
    assert "calibrate" in r.timings


def test_missing_and_extra_outputs_and_shapes() -> None:
    ref = add_model(BIAS)
    two = add_model(BIAS)
    two.graph.node.append(helper.make_node("Neg", ["Y"], ["Z"]))
    two.graph.output.append(helper.make_tensor_value_info("Z", F, [3, 4]))
    r = differential(ref, two)
    assert not r.ok and r.reason == "candidate has extra output 'Z'"
    r = differential(two, ref)
    assert not r.ok and "output 'Z' is missing from the candidate" in r.reason
    flat = model(
        [
            helper.make_node("Add", ["X", "B"], ["T"]),
            helper.make_node("Flatten", ["T"], ["Y"], axis=0),
        ],
        [helper.make_tensor_value_info("X", F, [3, 4])],
        [helper.make_tensor_value_info("Y", F, None)],
        [("B", BIAS)],
    )
    r = differential(ref, flat)
    assert not r.ok and "output 'Y' is float32[1, 12] in the candidate" in r.reason


def test_candidate_that_fails_to_load_or_run_is_not_ok(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    r = differential(add_model(BIAS), bad)
    assert not r.ok and r.reason.startswith("candidate failed to load in ONNX Runtime: ")
    assert "\n" not in r.reason and r.outputs == []
    reshape = model(
        [helper.make_node("Reshape", ["X", "S"], ["Y"])],
        [helper.make_tensor_value_info("X", F, [3, 4])],
        [helper.make_tensor_value_info("Y", F, None)],
        [("S", np.array([5, -1], np.int64))],  # 12 elements do not split into rows of 5
    )
    r = differential(add_model(BIAS), reshape)
    assert not r.ok and r.reason.startswith("candidate failed to")
    other_input = add_model(BIAS)
    other_input.graph.input[0].name = "X2"
    other_input.graph.node[0].input[0] = "X2"
    r = differential(add_model(BIAS), other_input)
    assert not r.ok and "missing ['X'], extra ['X2']" in r.reason


def test_reference_that_fails_raises_naming_the_file(tmp_path: Path) -> None:
    ref = tmp_path / "ref.onnx"
    unknown = unary_model("NoSuchOp")
    save(unknown, ref)
    with pytest.raises(
        VerificationError,
        match=r"^reference model .*ref\.onnx failed in ONNX Runtime \(ORT_ENABLE_ALL\): "
        r"\[ONNXRuntimeError\] .*NoSuchOp.*; nothing was compared\. "
        r"Check that the input model runs in ONNX Runtime\.$",
    ):
        differential(ref, add_model(BIAS))
    ref.write_bytes(b"garbage")
    with pytest.raises(VerificationError, match=r"ref\.onnx"):
        differential(ref, add_model(BIAS))
    # with no generated sets only ORT reads the model, not the input generator
    with pytest.raises(VerificationError, match=r"ref\.onnx failed in ONNX Runtime \(ORT_ENABLE"):
        differential(ref, add_model(BIAS), feeds=[{"X": np.ones((3, 4), np.float32)}], trials=0)


def test_a_model_corrupted_on_disk_fails_against_its_original(tmp_path: Path) -> None:
    """One weight changed in the candidate's external data file: the check reads the candidate
    file (not the reference twice) and fails on both outputs, one element each."""
    two = add_model(BIAS)
    two.graph.node.append(helper.make_node("Mul", ["X", "B"], ["Z"]))
    two.graph.output.append(helper.make_tensor_value_info("Z", F, [3, 4]))
    ref, cand = tmp_path / "ref" / "m.onnx", tmp_path / "cand" / "m.onnx"
    for path in (ref, cand):
        path.parent.mkdir()
        m = onnx.ModelProto()
        m.CopyFrom(two)  # (saving with external data empties the proto's tensors)
        onnx.save_model(m, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    assert differential(ref, cand).ok  # the same bytes: agree
    data = np.fromfile(cand.parent / "w.bin", np.float32)
    data[5] += 10.0  # B[1, 1]: Y = X + B and Z = X * B each change in one element
    data.tofile(cand.parent / "w.bin")
    r = differential(ref, cand, trials=1)
    assert not r.ok and r.candidate == str(cand)
    bad = [o.name for o in r.outputs if not o.ok]
    assert bad == ["Y", "Z"] and all(o.mismatches == 1 for o in r.outputs)
    assert r.reason.startswith("output 'Y'")


def test_user_feeds_are_compared_too() -> None:
    x = np.full((3, 4), 2.0, np.float32)
    r = differential(add_model(BIAS), add_model(BIAS), feeds=[{"X": x}], trials=1)
    assert r.ok and r.trials == 2
    r = differential(unary_model("Sqrt"), unary_model("Abs", "Sqrt"), feeds=[{"X": x}], trials=0)
    assert r.ok and r.trials == 1  # equal on positive inputs
    with pytest.raises(VerificationError, match=r"^<ModelProto graph 'g'>: nothing to compare"):
        differential(add_model(BIAS), add_model(BIAS), trials=0)


@pytest.mark.slow
def test_bert_against_itself() -> None:
    bert = corpus_model("bert.onnx")
    t0 = time.perf_counter()
    r = differential(bert, bert, threads=os.cpu_count() or 1)
    print(
        f"\ndifferential(bert, bert): {time.perf_counter() - t0:.2f} s; {r.summary()}; {r.timings}"
    )
    assert r.ok and [o.name for o in r.outputs] == ["last_hidden_state", "pooler_output"]
    assert all(o.bit_identical for o in r.outputs)
