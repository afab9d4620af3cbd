"""The `.npz` of `--inputs` holds sequences, optionals, strings and dtypes numpy lacks; and
`make_inputs` generates sequence and optional inputs that ONNX Runtime runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewrite.errors import ModelError
from rewrite.onnx_io.feeds import load_inputs, save_inputs
from rewrite.onnx_io.inputs import SEQUENCE_LENGTH, make_inputs, real_inputs
from tests.verify.models import model

F = TensorProto.FLOAT


def _seq(name: str, shape: list[int] | None = None) -> onnx.ValueInfoProto:
    elem = helper.make_tensor_type_proto(F, shape)
    return helper.make_value_info(name, helper.make_sequence_type_proto(elem))


def _opt(name: str, inner: onnx.TypeProto) -> onnx.ValueInfoProto:
    return helper.make_value_info(name, helper.make_optional_type_proto(inner))


def seq_opt_model() -> onnx.ModelProto:
    """S (sequence of float[2, 3]) and O (optional float[4]) and T (optional sequence):
    Y = SequenceLength(S), Z = OptionalHasElement(O), W = Identity(T)."""
    opt_seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, [2]))
    nodes = [
        helper.make_node("SequenceLength", ["S"], ["Y"]),
        helper.make_node("OptionalHasElement", ["O"], ["Z"]),
        helper.make_node("Identity", ["T"], ["W"]),
    ]
    ins = [_seq("S", [2, 3]), _opt("O", helper.make_tensor_type_proto(F, [4])), _opt("T", opt_seq)]
    outs = [
        helper.make_tensor_value_info("Y", TensorProto.INT64, []),
        helper.make_tensor_value_info("Z", TensorProto.BOOL, []),
        helper.make_value_info("W", helper.make_optional_type_proto(opt_seq)),
    ]
    return model(nodes, ins, outs, opset=18)


def test_sequence_and_optional_inputs_are_generated_and_run() -> None:
    m = seq_opt_model()
    assert [vi.name for vi in real_inputs(m)] == ["S", "O", "T"]
    feeds = make_inputs(m, seed=1)
    assert isinstance(feeds["S"], list) and len(feeds["S"]) == SEQUENCE_LENGTH
    assert all(a.shape == (2, 3) and a.dtype == np.float32 for a in feeds["S"])
    assert isinstance(feeds["O"], np.ndarray) and feeds["O"].shape == (4,)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    y, z, _ = sess.run(None, feeds)
    assert y == SEQUENCE_LENGTH and z


def test_round_trip_of_sequences_optionals_and_odd_dtypes(tmp_path: Path) -> None:
    m = seq_opt_model()
    feeds = {"S": [np.ones((2, 3), np.float32)] * 3, "O": None, "T": []}
    back = load_inputs(save_inputs(feeds, tmp_path / "a.npz"), m)
    assert back["O"] is None and back["T"] == [] and len(back["S"]) == 3
    strings = model(
        [helper.make_node("Identity", ["X"], ["Y"])],
        [helper.make_tensor_value_info("X", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.STRING, [2])],
    )
    x = np.array(["a", "bc"], dtype=object)
    back = load_inputs(save_inputs({"X": x}, tmp_path / "s.npz"), strings)
    assert back["X"].dtype == object and back["X"].tolist() == ["a", "bc"]
    bf16 = model(
        [helper.make_node("Cast", ["X"], ["Y"], to=F)],
        [helper.make_tensor_value_info("X", TensorProto.BFLOAT16, [3])],
        [helper.make_tensor_value_info("Y", F, [3])],
    )
    x = make_inputs(bf16)["X"]
    back = load_inputs(save_inputs({"X": x}, tmp_path / "b.npz"), bf16)
    assert back["X"].dtype == x.dtype and back["X"].tobytes() == x.tobytes()


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        ({"S[0]": np.ones((2, 3), np.float32), "S[2]": np.ones((2, 3), np.float32)}, "no gaps"),
        ({"O": np.ones(4, np.float32)}, "input 'S' is missing .* given as S\\[0\\], S\\[1\\]"),
        ({"S[0]": np.ones((2, 4), np.float32)}, "input 'S\\[0\\]' has shape \\[2, 4\\]"),
        ({"S[]": np.zeros(0), "X[0]": np.zeros(1)}, "input 'X\\[0\\]' is not an input"),
    ],
)
def test_errors_name_the_element(tmp_path: Path, arrays: dict, match: str) -> None:
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    with pytest.raises(ModelError, match=match):
        load_inputs(path, seq_opt_model())
