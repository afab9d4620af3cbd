"""Generated feed sets the reference cannot run are dropped; the caller's must run; with none
left the check is uncheckable, not a bad model."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import helper

from rewrite.errors import UncheckableError, VerificationError
from rewrite.verify import differential
from tests.onnx_io.test_feeds import seq_opt_model
from tests.verify.models import I64, F, model


def opaque_shape_model() -> onnx.ModelProto:
    """Y = Reshape(X[2, 3], S + 0, allowzero=1): the shape passes through an Add, so the input
    generator cannot tell it is a shape; random [0, 2) values never make 6 elements."""
    return model(
        [
            helper.make_node("Add", ["S", "Z"], ["S2"]),
            helper.make_node("Reshape", ["X", "S2"], ["Y"], allowzero=1),
        ],
        [
            helper.make_tensor_value_info("X", F, [2, 3]),
            helper.make_tensor_value_info("S", I64, [2]),
        ],
        [helper.make_tensor_value_info("Y", F, None)],
        [("Z", np.zeros(2, np.int64))],
    )


def good_feeds() -> dict[str, np.ndarray]:
    return {"X": np.arange(6, dtype=np.float32).reshape(2, 3), "S": np.array([3, 2], np.int64)}


def test_no_runnable_generated_set_is_uncheckable_and_says_to_pass_inputs() -> None:
    m = opaque_shape_model()
    with pytest.raises(UncheckableError, match="none of the 2 generated input sets") as e:
        differential(m, m)
    assert "pass them with --inputs (seed 0: [ONNXRuntimeError]" in str(e.value)


def test_with_user_inputs_the_failing_generated_sets_are_dropped(
    capfd: pytest.CaptureFixture[str],
) -> None:
    m = opaque_shape_model()
    r = differential(m, m, feeds=[good_feeds()])
    assert r.ok and r.trials == 1
    assert [d.split(":")[0] for d in r.dropped] == ["seed 0", "seed 1"]
    assert re.fullmatch(
        r"ok: 1 output agrees \(1 bit-identical, worst max_abs 0 on 'Y'; 1 feed set, \d+\.\d\d s; "
        r"2 generated sets the input model fails on dropped\)",
        r.summary(),
    ), r.summary()
    assert "[E:onnxruntime" not in capfd.readouterr().err  # dropped quietly: ORT logs no error


def test_user_inputs_the_reference_fails_on_are_refused(
    capfd: pytest.CaptureFixture[str],
) -> None:
    m = opaque_shape_model()
    bad = {**good_feeds(), "S": np.array([4, 2], np.int64)}
    with pytest.raises(VerificationError, match=r"on user feed set 0 \(the inputs given\)") as e:
        differential(m, m, feeds=[bad])
    assert not isinstance(e.value, UncheckableError)
    assert "(the inputs given): [ONNXRuntimeError]" in str(e.value)
    assert str(e.value).endswith("; give inputs the input model runs on")
    assert "[E:onnxruntime" in capfd.readouterr().err  # unlike a generated set's, logged


def test_sequence_and_optional_inputs_are_compared() -> None:
    """Before: no feeds for them, so the reference failed (missing input) or the candidate was
    said to have 'extra' inputs."""
    m = seq_opt_model()
    r = differential(m, m)
    assert r.ok and r.trials == 2 and [o.name for o in r.outputs] == ["Y", "Z", "W"]


def test_an_input_numpy_cannot_feed_is_named_and_inputs_are_not_suggested() -> None:
    m = model(
        [helper.make_node("Cast", ["X"], ["Y"], to=F)],
        [helper.make_tensor_value_info("X", onnx.TensorProto.BFLOAT16, [3])],
        [helper.make_tensor_value_info("Y", F, [3])],
    )
    with pytest.raises(UncheckableError, match="cannot feed") as e:
        differential(m, m)
    assert "'X' (tensor(bfloat16))" in str(e.value) and "--inputs cannot help" in str(e.value)


def test_unfeedable_elements_of_sequences_and_optionals_are_named_too() -> None:
    bf16 = helper.make_tensor_type_proto(onnx.TensorProto.BFLOAT16, [3])
    unused = {
        "S": helper.make_sequence_type_proto(bf16),
        "O": helper.make_optional_type_proto(bf16),
        "Q": helper.make_optional_type_proto(helper.make_sequence_type_proto(bf16)),
    }
    m = model(
        [helper.make_node("Identity", ["X"], ["Y"])],
        [helper.make_tensor_value_info("X", F, [3])]
        + [helper.make_value_info(n, t) for n, t in unused.items()],
        [helper.make_tensor_value_info("Y", F, [3])],
    )
    with pytest.raises(UncheckableError, match="--inputs cannot help") as e:
        differential(m, m)
    assert (
        "cannot feed ('S' (seq(tensor(bfloat16))), 'O' (optional(tensor(bfloat16))), "
        "'Q' (optional(seq(tensor(bfloat16)))))" in str(e.value)
    ), str(e.value)
