"""The differential check's records, exactly (each test names the shortcut it guards).

`tests/verify/test_differential.py` covers the verdicts; these pin what a report shows and the
edges of the tolerance policy: the numbers of a failed comparison, the boundary of the error
ratio, non-finite values, outputs that are not tensors, the one-line summary, and the records
of a candidate that cannot load, cannot run or has another interface. Real ORT sessions on
small models; `compare` on arrays as ORT returns them.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from rewrite.errors import VerificationError
from rewrite.verify import DiffResult, compare, differential, make_inputs, ort_noise
from rewrite.verify.differential import _first
from tests.verify.models import I64, F, add_model, model, save

BIAS = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
F32 = np.float32


def two_outputs(bias: np.ndarray, scale: np.ndarray) -> onnx.ModelProto:
    """Y = X + bias, Z = X * scale (X float32 [3, 4])."""
    return model(
        [helper.make_node("Add", ["X", "B"], ["Y"]), helper.make_node("Mul", ["X", "S"], ["Z"])],
        [helper.make_tensor_value_info("X", F, [3, 4])],
        [helper.make_tensor_value_info(n, F, [3, 4]) for n in ("Y", "Z")],
        [("B", bias.astype(F32)), ("S", scale.astype(F32))],
    )


def tensor_or_sequence(shape: list[int], *, sequence: bool) -> onnx.ModelProto:
    """Y = X (float32 `shape`), or Y = the sequence [X]."""
    op = "SequenceConstruct" if sequence else "Identity"
    y = helper.make_tensor_sequence_value_info if sequence else helper.make_tensor_value_info
    return model(
        [helper.make_node(op, ["X"], ["Y"])],
        [helper.make_tensor_value_info("X", F, shape)],
        [y("Y", F, shape)],
    )


def gelu() -> onnx.ModelProto:
    """Y = 0.5·X·(1 + erf(X/√2)), X float32 [4, 64]: ORT_ENABLE_ALL fuses the five nodes into
    one Gelu kernel whose float32 results differ from the plain nodes' in the last bits."""
    consts = [("r", np.sqrt(2)), ("one", 1.0), ("half", 0.5)]
    return model(
        [
            helper.make_node("Div", ["X", "r"], ["a"]),
            helper.make_node("Erf", ["a"], ["b"]),
            helper.make_node("Add", ["b", "one"], ["c"]),
            helper.make_node("Mul", ["X", "c"], ["d"]),
            helper.make_node("Mul", ["d", "half"], ["Y"]),
        ],
        [helper.make_tensor_value_info("X", F, [4, 64])],
        [helper.make_tensor_value_info("Y", F, [4, 64])],
        [(n, np.array(v, F32)) for n, v in consts],
    )


# -- compare: exact records ---------------------------------------------------------------------


def test_an_integer_difference_is_recorded_exactly() -> None:
    d = compare("y", np.array([0, 10, -4], np.int64), np.array([0, 11, -4], np.int64))
    assert (d.ok, d.bit_identical, d.dtype, d.shape) == (False, False, "int64", (3,))
    assert (d.max_abs, d.max_rel, d.mismatches) == (1.0, 0.1, 1)
    assert d.reason == "output 'y' (int64, exact): 1 of 3 elements differ, max_abs 1"
    same = compare("y", np.array([0, 10], np.int64), np.array([0, 10], np.int64))
    assert (same.ok, same.bit_identical, same.max_abs, same.max_rel, same.reason) == (
        True, True, 0.0, 0.0, ""
    )  # fmt: skip
    at_zero = compare("y", np.array([0, 5], np.int64), np.array([3, 5], np.int64))
    assert (at_zero.max_abs, at_zero.max_rel) == (3.0, 0.0)  # relative error undefined at 0
    only_zero = compare("y", np.zeros(2, np.int64), np.array([0, 3], np.int64))
    assert (only_zero.max_abs, only_zero.max_rel) == (3.0, 0.0)  # no element has one
    for n in (0, 2):  # equal: nothing to take a maximum of (empty) or of relative errors (0s)
        d = compare("y", np.zeros(n, np.int64), np.zeros(n, np.int64))
        assert (d.ok, d.max_abs, d.max_rel) == (True, 0.0, 0.0)


def test_unsigned_integers_are_numbers_not_strings() -> None:
    d = compare("y", np.array([2, 10], np.uint8), np.array([5, 10], np.uint8))
    assert (d.ok, d.max_abs, d.max_rel, d.mismatches) == (False, 3.0, 1.5, 1)


def test_strings_are_compared_exactly() -> None:
    ref = np.array(["a", "b"], dtype=object)
    same = compare("s", ref, np.array(["a", "b"], dtype=object))
    assert same.ok and same.bit_identical and same.mismatches == 0 and same.reason == ""
    assert (same.max_abs, same.max_rel) == (0.0, 0.0)
    d = compare("s", ref, np.array(["a", "c"], dtype=object))
    assert (d.ok, d.bit_identical, d.max_abs, d.max_rel, d.mismatches) == (False, False, 1, 1, 1)
    assert d.reason == "output 's' (object, exact): 1 of 2 elements differ, max_abs 1"


def test_a_float_type_outside_the_table_is_exact_with_nan_equal_to_nan() -> None:
    ref = np.array([1.0, np.nan], np.longdouble)
    assert compare("y", ref, ref.copy()).ok
    d = compare("y", ref, np.array([1.5, np.nan], np.longdouble))
    assert not d.ok and d.mismatches == 1 and d.max_abs == 0.5
    d = compare("y", ref, np.array([1.0, 2.0], np.longdouble))  # NaN against a number
    assert not d.ok and d.mismatches == 1
    nan = np.full(2, np.nan, np.longdouble)
    d = compare("y", nan, nan.copy())
    assert d.ok and (d.max_abs, d.max_rel) == (0.0, 0.0)


def test_equal_strings_out_of_two_sessions_are_bit_identical() -> None:
    """ORT makes new string objects on every run: their addresses are not the strings. (Python
    keeps one object for each one-character string.)"""
    m = model(
        [helper.make_node("Identity", ["T"], ["S"])],
        [helper.make_tensor_value_info("T", onnx.TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("S", onnx.TensorProto.STRING, [2])],
    )
    feeds = [{"T": np.array(["two words", "three more words"], dtype=object)}]
    r = differential(m, m, feeds=feeds, trials=0)
    assert r.ok and r.outputs[0].bit_identical


def test_bit_identity_is_of_the_bytes() -> None:
    """NaN where the reference has it is bit-identical; -0.0 against 0.0 passes but is not."""
    nan = np.array([np.nan, 1.0], F32)
    d = compare("y", nan, nan.copy())
    assert d.ok and d.bit_identical
    d = compare("y", np.zeros(2, F32), -np.zeros(2, F32))
    assert d.ok and not d.bit_identical


def test_infinite_and_huge_values_raise_no_numpy_warnings() -> None:
    """inf - inf where both are inf, and a float64 difference past the largest float64."""
    inf = np.array([np.inf, -np.inf, 1.0])
    huge = np.array([1e308])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compare("y", inf, inf.copy()).ok
        d = compare("y", huge, -huge)
    assert not d.ok and d.max_abs == np.inf and d.error_ratio == np.inf


def test_a_float_difference_is_recorded_exactly() -> None:
    d = compare("y", np.array([2.0, 0.0], F32), np.array([2.5, 0.1], F32))
    assert not d.ok and d.mismatches == 2 and d.atol == pytest.approx(2e-5)
    assert d.max_abs == pytest.approx(0.5) and d.max_rel == pytest.approx(0.25)  # 0.5 / 2
    assert d.error_ratio == pytest.approx(0.1 / 2e-5, rel=1e-4)  # at the 0: atol only
    ok = compare("y", np.array([2.0, 0.0], F32), np.array([2.0, 0.0], F32))
    assert ok.ok and ok.reason == "" and ok.error_ratio == 0.0


def test_the_error_ratio_boundary_is_inclusive() -> None:
    ref = np.array([0.0, 1.0])  # float64: atol 1e-12 at scale 1, rtol 1e-9
    assert compare("y", ref, np.array([1e-12, 1.0])).ok  # ratio exactly 1
    assert not compare("y", ref, np.array([1.5e-12, 1.0])).ok  # ratio 1.5


def test_atol_scales_with_the_largest_finite_reference_value() -> None:
    ref = np.array([1000.0, 0.0, np.inf], F32)
    d = compare("y", ref, np.array([1000.0, 0.005, np.inf], F32))
    assert d.ok and d.atol == pytest.approx(1e-2)  # 1e-5 x 1000: the 0 may move by 0.01
    nan = np.full(2, np.nan, F32)  # no finite value: scale 1
    d = compare("y", nan, nan.copy())
    assert d.ok and d.atol == pytest.approx(1e-5) and d.max_abs == 0.0


def test_a_non_finite_mismatch_counts_once() -> None:
    inf_vs_one = compare("y", np.array([np.inf, 1.0], F32), np.array([1.0, 1.0], F32))
    assert not inf_vs_one.ok and inf_vs_one.mismatches == 1
    nan_vs_inf = compare("y", np.array([np.nan], F32), np.array([np.inf], F32))
    assert not nan_vs_inf.ok and nan_vs_inf.mismatches == 1
    assert nan_vs_inf.reason == "output 'y': NaN/Inf positions differ at 1 of 1 elements"


def test_calibration_widens_only_past_the_policy() -> None:
    ref = np.zeros(2, F32)
    at = compare("y", ref, ref.copy(), noise=2.5e-6)  # 4 x noise == atol: nothing to widen
    assert not at.calibrated and at.atol == pytest.approx(1e-5)
    past = compare("y", ref, ref.copy(), noise=3e-6)
    assert past.calibrated and past.atol == pytest.approx(1.2e-5)


def test_empty_outputs_agree() -> None:
    d = compare("y", np.zeros((0, 3), F32), np.zeros((0, 3), F32))
    assert d.ok and (d.max_abs, d.max_rel, d.error_ratio, d.mismatches) == (0.0, 0.0, 0.0, 0)


def test_a_type_or_shape_change_is_recorded_against_the_reference() -> None:
    d = compare("y", np.ones((2, 3), F32), np.ones((3, 2), F32))
    assert (d.name, d.dtype, d.shape, d.ok, d.bit_identical) == (
        "y", "float32", (2, 3), False, False
    )  # fmt: skip
    assert (
        d.reason == "output 'y' is float32[3, 2] in the candidate, float32[2, 3] in the reference"
    )


def test_outputs_that_are_not_tensors() -> None:
    """Sequences come back as lists, maps as dicts: equal element by element, or not."""
    seq = [np.ones(2, F32), np.zeros(3, F32)]
    same = compare("s", seq, [np.ones(2, F32), np.zeros(3, F32)])
    assert (same.dtype, same.shape, same.ok, same.bit_identical, same.max_abs, same.reason) == (
        "list", (), True, True, 0.0, ""
    )  # fmt: skip
    for other in (
        [np.ones(2, F32)],  # shorter
        [np.ones(2, F32), np.ones(3, F32)],  # a value differs
        [np.ones(2, np.float64), np.zeros(3, F32)],  # a dtype differs
        [np.ones((1, 2), F32), np.zeros(3, F32)],  # a shape differs
    ):
        d = compare("s", seq, other)
        assert (d.ok, d.bit_identical, d.max_abs) == (False, False, 1.0)
        assert d.reason == "output 's' (list) differs"
    maps = {"a": 1.0, "b": 2.0}
    assert compare("m", maps, {"a": 1.0, "b": 2.0}).ok
    assert not compare("m", maps, {"a": 1.0, "b": 3.0}).ok
    assert not compare("m", maps, {"a": 1.0}).ok
    strings = [np.array(["a", "b"], dtype=object)]
    assert compare("s", strings, [np.array(["a", "b"], dtype=object)]).ok


def test_a_tensor_is_never_a_sequence() -> None:
    """An output that becomes a sequence, or stops being one, differs: of one element too, and
    without numpy's "truth value of an array is ambiguous" (the check raised it before)."""
    for shape in ([3, 4], [1]):
        tensor = tensor_or_sequence(shape, sequence=False)
        seq = tensor_or_sequence(shape, sequence=True)
        for ref, cand, kind in ((tensor, seq, "ndarray"), (seq, tensor, "list")):
            r = differential(ref, cand, trials=1)
            assert not r.ok and r.reason == f"output 'Y' ({kind}) differs on seed 0"


def test_nan_in_sequences_and_maps_is_equal_to_nan() -> None:
    """A model whose sequence or map outputs hold NaN agrees with itself (it failed before)."""
    seq = model(
        [
            helper.make_node("Sqrt", ["X"], ["R"]),  # NaN at the negative inputs
            helper.make_node("SequenceConstruct", ["R"], ["Y"]),
        ],
        [helper.make_tensor_value_info("X", F, [3, 4])],
        [helper.make_tensor_sequence_value_info("Y", F, [3, 4])],
    )
    probs = helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F, []))
    zipmap = model(
        [
            helper.make_node("Sqrt", ["X"], ["R"]),
            helper.make_node(
                "ZipMap", ["R"], ["Y"], domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2, 3]
            ),
        ],
        [helper.make_tensor_value_info("X", F, [3, 4])],
        [helper.make_value_info("Y", helper.make_sequence_type_proto(probs))],
    )
    zipmap.opset_import.append(helper.make_opsetid("ai.onnx.ml", 1))
    for m in (seq, zipmap):
        r = differential(m, m)
        assert r.ok and r.outputs[0].bit_identical, r.reason
    assert not compare("s", [np.array([np.nan], F32)], [np.array([1.0], F32)]).ok
    assert not compare("m", {0: np.nan}, {0: 1.0}).ok
    assert not compare("m", {0: 1.0}, {0: np.nan}).ok


# -- differential: records and summary ----------------------------------------------------------


def test_summary_names_the_worst_output_and_counts_feed_sets() -> None:
    ref = two_outputs(BIAS, BIAS)
    r = differential(ref, two_outputs(BIAS, BIAS * (1 + 1e-6)), trials=1)
    assert r.ok and [o.name for o in r.outputs] == ["Y", "Z"] and not r.calibrated
    worst = max(r.outputs, key=lambda o: o.max_abs)
    assert worst.name == "Z" and worst.max_abs > 0
    assert re.fullmatch(
        rf"ok: 2 outputs agree \(1 bit-identical, worst max_abs {worst.max_abs:.3g} on 'Z'; "
        r"1 feed set, \d+\.\d\d s\)",
        r.summary(),
    ), r.summary()
    bad = differential(ref, two_outputs(BIAS + 1, BIAS), trials=3)
    assert re.fullmatch(
        r"FAILED: output 'Y': .* \(1 of 2 outputs differ; 3 feed sets, \d+\.\d\d s\)",
        bad.summary(),
    ), bad.summary()
    both = differential(ref, two_outputs(BIAS + 1, BIAS + 1), trials=1)
    assert "(2 of 2 outputs differ; 1 feed set, " in both.summary(), both.summary()
    none = DiffResult(True, [], 1, 0.0, "a", "b")  # (ORT runs no model without outputs)
    assert none.summary() == "ok: 0 outputs agree (0 bit-identical; 1 feed set, 0.00 s)"


def test_timings_are_the_parts_of_the_run() -> None:
    r = differential(add_model(BIAS), add_model(BIAS), calibrate=True)
    assert set(r.timings) == {"inputs", "reference", "calibrate", "candidate"}
    assert all(0 <= t < 60 for t in r.timings.values()) and 0 <= r.seconds < 60
    assert sum(r.timings.values()) <= r.seconds + 1e-6
    assert r.reference == r.candidate == "<ModelProto graph 'g'>"


def test_the_seed_makes_the_inputs() -> None:
    """The same seed draws the same inputs (the same worst error), another seed others."""
    ref, cand = two_outputs(BIAS, BIAS), two_outputs(BIAS, BIAS * (1 + 1e-6))  # Z's error ~ X
    runs = [differential(ref, cand, seed=s, trials=1).outputs[1].max_abs for s in (3, 3, 4)]
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_a_candidate_that_cannot_run_is_recorded(tmp_path: Path) -> None:
    """Gather of row 7 of a 3-row input loads, then fails when run."""
    gather = model(
        [helper.make_node("Gather", ["X", "I"], ["Y"], axis=0)],
        [helper.make_tensor_value_info("X", F, [3, 4])],
        [helper.make_tensor_value_info("Y", F, [1, 4])],
        [("I", np.array([7], np.int64))],
    )
    r = differential(add_model(BIAS), gather, trials=1)
    assert not r.ok and r.reason.startswith(
        "candidate failed to run in ONNX Runtime: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : "
        "Non-zero status code returned while running Gather node."
    ), r.reason
    assert (r.outputs, r.problems, r.trials) == ([], [], 1)
    assert json.loads(json.dumps(r.to_json()))["ok"] is False


def test_a_candidate_that_cannot_load_is_recorded(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    r = differential(add_model(BIAS), bad, trials=1)
    assert (r.ok, r.outputs, r.problems, r.candidate) == (False, [], [], str(bad))
    assert r.reason.startswith("candidate failed to load in ONNX Runtime: [ONNXRuntimeError]")
    assert f"Load model from {bad} failed" in r.reason


def test_an_extra_candidate_input_alone_is_an_interface_change() -> None:
    extra = add_model(BIAS)
    extra.graph.input.append(helper.make_tensor_value_info("W", F, [3, 4]))
    r = differential(add_model(BIAS), extra, trials=1)
    why = "candidate inputs differ from the reference: missing [], extra ['W']"
    assert (r.ok, r.reason, r.problems, r.outputs) == (False, why, [why], [])


def test_a_missing_output_does_not_stop_the_comparison_of_the_others() -> None:
    ref = two_outputs(BIAS, BIAS)
    only_z = two_outputs(BIAS, BIAS + 1)
    del only_z.graph.output[0]
    del only_z.graph.node[0]
    r = differential(ref, only_z, trials=1)
    missing, z = r.outputs
    assert (missing.name, missing.dtype, missing.shape, missing.ok, missing.bit_identical) == (
        "Y", "", (), False, False
    )  # fmt: skip
    assert missing.reason == "output 'Y' is missing from the candidate"
    assert z.name == "Z" and not z.ok
    assert r.problems[0] == missing.reason and r.problems[1] == z.reason


def test_records_merge_over_feed_sets() -> None:
    """max_rel is the worst over the feed sets; calibrated is a bool, false when not asked."""
    ref, cand = two_outputs(BIAS, BIAS), two_outputs(BIAS, BIAS * (1 + 1e-6))
    one = [differential(ref, cand, seed=s, trials=1).outputs[1] for s in (0, 1)]
    both = differential(ref, cand, seed=0, trials=2).outputs[1]
    assert one[0].max_rel != one[1].max_rel or one[0].max_abs != one[1].max_abs
    assert both.max_rel == max(o.max_rel for o in one) and both.max_abs == max(
        o.max_abs for o in one
    )
    assert both.calibrated is False


def test_a_merged_record_keeps_the_tolerance_of_its_worst_feed_set() -> None:
    """Z = X·S with S off by 1e-6: equal where X = 0 (error ratio 0), off within tolerance where
    X = 1000, and there atol is 1e-5 x max |Z| = 1e-2."""
    ref, cand = two_outputs(BIAS, BIAS), two_outputs(BIAS, BIAS * (1 + 1e-6))
    feeds = [{"X": np.zeros((3, 4), F32)}, {"X": np.full((3, 4), 1000, F32)}]
    z = differential(ref, cand, feeds=feeds, trials=0).outputs[1]
    assert z.ok and z.error_ratio is not None and 0 < z.error_ratio < 1
    assert z.atol == pytest.approx(1e-2)


def test_non_finite_numbers_become_strings_in_json() -> None:
    def inf_model(value: float) -> onnx.ModelProto:
        return add_model(np.full((3, 4), value, F32))

    r = differential(inf_model(np.inf), inf_model(1.0), trials=1)
    out = r.to_json()["outputs"][0]
    assert not r.ok and json.loads(json.dumps(r.to_json()))["outputs"][0] == out
    assert out["max_abs"] == 0.0 and out["mismatches"] == 12  # positions of +inf differ

    def f64_add(c: float) -> onnx.ModelProto:
        return model(
            [helper.make_node("Add", ["X", "C"], ["Y"])],
            [helper.make_tensor_value_info("X", onnx.TensorProto.DOUBLE, [3])],
            [helper.make_tensor_value_info("Y", onnx.TensorProto.DOUBLE, [3])],
            [("C", np.array(c))],
        )

    r = differential(f64_add(1e308), f64_add(-1e308), trials=1)  # 1e308 - -1e308 is inf
    out = json.loads(json.dumps(r.to_json()))["outputs"][0]
    assert (out["max_abs"], out["error_ratio"]) == ("inf", "inf")


def test_an_error_is_reported_by_its_first_line_up_to_400_characters() -> None:
    assert _first(ValueError("\n  first line \nsecond")) == "first line"
    assert _first(ValueError(" \n ")) == "ValueError"  # nothing but its type to show
    assert _first(ValueError("x" * 400)) == "x" * 400
    assert _first(ValueError("x" * 401)) == "x" * 397 + "..."


# -- the ORT sessions ---------------------------------------------------------------------------


def test_sessions_log_errors_not_warnings(capfd: pytest.CaptureFixture[str]) -> None:
    """ORT's warnings (here: an unused initializer) would flood the terminal; its errors show."""
    unused = add_model(BIAS)
    unused.graph.initializer.append(numpy_helper.from_array(np.zeros(2, F32), "U"))
    assert differential(unused, unused, trials=1).ok
    assert "[W:onnxruntime" not in capfd.readouterr().err
    gather = model(
        [helper.make_node("Gather", ["X", "I"], ["Y"], axis=0)],
        [helper.make_tensor_value_info("X", F, [3, 4])],
        [helper.make_tensor_value_info("Y", F, [1, 4])],
        [("I", np.array([7], np.int64))],
    )
    assert not differential(add_model(BIAS), gather, trials=1).ok
    assert "[E:onnxruntime" in capfd.readouterr().err


def test_the_providers_asked_for_reach_onnx_runtime() -> None:
    """ORT warns of a provider it does not have (and falls back to the CPU)."""
    with pytest.warns(UserWarning, match="NoSuchExecutionProvider"):
        r = differential(
            add_model(BIAS),
            add_model(BIAS),
            trials=1,
            providers=("NoSuchExecutionProvider", "CPUExecutionProvider"),
        )
    assert r.ok


# -- ort_noise ----------------------------------------------------------------------------------


def test_ort_noise_takes_one_feed_set_or_several_and_skips_strings(tmp_path: Path) -> None:
    strings = model(
        [
            helper.make_node("Identity", ["T"], ["S"]),
            helper.make_node("Add", ["X", "B"], ["Y"]),
        ],
        [
            helper.make_tensor_value_info("T", onnx.TensorProto.STRING, [2]),
            helper.make_tensor_value_info("X", F, [3, 4]),
        ],
        [
            helper.make_tensor_value_info("S", onnx.TensorProto.STRING, [2]),
            helper.make_tensor_value_info("Y", F, [3, 4]),
        ],
        [("B", BIAS)],
    )
    path = save(strings, tmp_path / "s.onnx")
    feed = {"T": np.array(["a", "b"], dtype=object), "X": np.ones((3, 4), F32)}
    assert ort_noise(path, feed) == {"Y": 0.0}  # strings skipped, the output after them kept
    assert ort_noise(path, [feed, feed]) == {"Y": 0.0}


def test_ort_noise_names_a_model_it_cannot_run(tmp_path: Path) -> None:
    path = save(
        model(
            [helper.make_node("NoSuchOp", ["X"], ["Y"])],
            [helper.make_tensor_value_info("X", F, [3, 4])],
            [helper.make_tensor_value_info("Y", F, [3, 4])],
        ),
        tmp_path / "bad.onnx",
    )
    with pytest.raises(VerificationError) as e:
        ort_noise(path, {"X": np.ones((3, 4), F32)})
    assert str(e.value).startswith(
        f"reference model {path} failed in ONNX Runtime (ORT_ENABLE_ALL): [ONNXRuntimeError]"
    ) and str(e.value).endswith(
        "; nothing was compared. Check that the input model runs in ONNX Runtime."
    ), str(e.value)


def test_a_model_that_runs_only_optimized_is_named_when_calibrating(tmp_path: Path) -> None:
    """ORT has no bfloat16 Dropout: ORT_ENABLE_ALL removes the Dropout and runs the model,
    ORT_DISABLE_ALL cannot load it."""
    path = save(
        model(
            [
                helper.make_node("Cast", ["X"], ["H"], to=onnx.TensorProto.BFLOAT16),
                helper.make_node("Dropout", ["H"], ["D"]),
                helper.make_node("Cast", ["D"], ["Y"], to=F),
            ],
            [helper.make_tensor_value_info("X", F, [3, 4])],
            [helper.make_tensor_value_info("Y", F, [3, 4])],
        ),
        tmp_path / "bf16.onnx",
    )
    assert differential(path, path).ok
    for calibrate in (
        lambda: differential(path, path, calibrate=True),
        lambda: ort_noise(path, make_inputs(path)),
    ):
        with pytest.raises(VerificationError) as e:
            calibrate()
        assert str(e.value).startswith(
            f"reference model {path} failed in ONNX Runtime (ORT_DISABLE_ALL): [ONNXRuntimeError]"
        ) and str(e.value).endswith(
            "; nothing was compared. Check that the input model runs in ONNX Runtime."
        ), str(e.value)


def test_ort_noise_is_the_largest_difference_over_the_feed_sets() -> None:
    m = gelu()
    x, zero = make_inputs(m), {"X": np.zeros((4, 64), F32)}  # Gelu(0) is 0 either way
    noise = ort_noise(m, x)["Y"]
    assert 0 < noise < 1e-5
    assert ort_noise(m, [x, zero]) == {"Y": noise} == ort_noise(m, [zero, x])
    assert ort_noise(m, zero) == {"Y": 0.0}
    y = differential(m, m, calibrate=True, trials=1).outputs[0]
    assert y.noise == noise and not y.calibrated  # 4 x noise is under the policy's atol


def test_ort_noise_measures_every_numeric_output() -> None:
    """Outputs after a sequence, unsigned integers, and infinities (without numpy warnings)."""
    m = model(
        [
            helper.make_node("SequenceConstruct", ["X"], ["S"]),
            helper.make_node("Cast", ["X"], ["U"], to=onnx.TensorProto.UINT8),
            helper.make_node("Add", ["X", "B"], ["Y"]),
        ],
        [helper.make_tensor_value_info("X", F, [3, 4])],
        [
            helper.make_tensor_sequence_value_info("S", F, [3, 4]),
            helper.make_tensor_value_info("U", onnx.TensorProto.UINT8, [3, 4]),
            helper.make_tensor_value_info("Y", F, [3, 4]),
        ],
        [("B", np.full((3, 4), -np.inf, F32))],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ort_noise(m, {"X": np.ones((3, 4), F32)}) == {"U": 0.0, "Y": 0.0}


def test_int_outputs_are_exact_through_differential() -> None:
    def int_add(c: int) -> onnx.ModelProto:
        return model(
            [helper.make_node("Add", ["X", "C"], ["Y"])],
            [helper.make_tensor_value_info("X", I64, [5])],
            [helper.make_tensor_value_info("Y", I64, [5])],
            [("C", np.array(c, np.int64))],
        )

    r = differential(int_add(1), int_add(1), trials=1)
    assert r.ok and r.outputs[0].bit_identical and r.outputs[0].error_ratio is None
