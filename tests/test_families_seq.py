"""Sequence families as exporters write them (`tests/families_seq.py`), through `rewrite optimize`.

The same checks as `tests/test_families_vision.py`: exit 0, status "optimized", verification
ok, ORT agreement on two seeds, and exactly `EXPECTED_OPAQUE[family]` left opaque (update the
line as ops get typed). ConstantOfShape is typed only with a constant shape; the unrolled
cells' h0 = zeros(batch, hidden) and the Dynamo mask's ones(seq, seq) read theirs from Shape.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

import tests.families_seq as fs
from tests.test_families import optimize
from tests.test_families_vision import assert_agrees, opaque_op_types

EXPECTED_OPAQUE: dict[str, set[str]] = {
    "whisper_encoder": set(),
    "gpt2_block": set(),
    "rnn_unrolled": {"ConstantOfShape"},
    "lstm_unrolled": {"ConstantOfShape"},
    "dynamo_opset18": {"ConstantOfShape"},
    "dynamo_opset20_gelu": {"ConstantOfShape"},
}

FAMILIES: dict[str, Callable[[], onnx.ModelProto]] = {
    "whisper_encoder": fs.whisper_encoder,
    "gpt2_block": fs.gpt2_block,
    "rnn_unrolled": fs.rnn_unrolled,
    "lstm_unrolled": fs.lstm_unrolled,
    "dynamo_opset18": lambda: fs.dynamo_decoder(18),
    "dynamo_opset20_gelu": lambda: fs.dynamo_decoder(20),
}


@pytest.mark.parametrize("name", FAMILIES)
def test_optimize_verifies_and_agrees_in_ort(name: str, tmp_path: Path) -> None:
    m = FAMILIES[name]()
    out, report = optimize(m, tmp_path)
    assert report["cost_after_us"] <= report["cost_before_us"]
    assert_agrees(m, out)
    _, count = opaque_op_types(m, tmp_path)
    assert report["egraph"]["opaque_nodes"] == count


@pytest.mark.parametrize("name", FAMILIES)
def test_opaque_op_types_are_exactly_the_expected(name: str, tmp_path: Path) -> None:
    types, _ = opaque_op_types(FAMILIES[name](), tmp_path)
    assert types == EXPECTED_OPAQUE[name]


def test_dynamo_opset20_writes_the_standard_gelu_op() -> None:
    ops = {n.op_type for n in fs.dynamo_decoder(20).graph.node}
    assert {"Gelu", "Trilu", "CumSum", "Einsum", "Split"} <= ops and "Erf" not in ops
