"""Sequence families as exporters write them (`tests/families_seq.py`), through `rewrite optimize`.

The same checks as `tests/test_families_vision.py` (`tests/families_check.py`): exit 0, status
"optimized", verification ok, ORT agreement on two seeds, and exactly `EXPECTED_OPAQUE[family]`
left opaque (update the line as ops get typed). The unrolled cells' h0 = zeros(batch, hidden)
and the Dynamo mask's ones(seq, seq) read their shapes from Shape: typed as ConstantOfShapeDyn
(`ops.dynamic`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

import tests.families_seq as fs
from tests.families_check import check_expected_opaque, check_optimize_agrees

EXPECTED_OPAQUE: dict[str, set[str]] = {
    "whisper_encoder": set(),
    "gpt2_block": set(),
    "rnn_unrolled": set(),
    "lstm_unrolled": set(),
    "dynamo_opset18": set(),
    "dynamo_opset20_gelu": set(),
}

FAMILIES: dict[str, Callable[[], onnx.ModelProto]] = {
    "whisper_encoder": fs.whisper_encoder,
    "gpt2_block": fs.gpt2_block,
    "rnn_unrolled": fs.rnn_unrolled,
    "lstm_unrolled": fs.lstm_unrolled,
    "dynamo_opset18": lambda: fs.dynamo_decoder(18),
    "dynamo_opset20_gelu": lambda: fs.dynamo_decoder(20),
}


SLOW = {"whisper_encoder"}  # 33 s on 2 cores: runs with the slow (CI) tests
OPTIMIZED = [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in FAMILIES]


@pytest.mark.parametrize("name", OPTIMIZED)
def test_optimize_verifies_and_agrees_in_ort(name: str, tmp_path: Path) -> None:
    check_optimize_agrees(FAMILIES[name](), tmp_path)


@pytest.mark.parametrize("name", FAMILIES)
def test_opaque_op_types_are_exactly_the_expected(name: str, tmp_path: Path) -> None:
    check_expected_opaque(FAMILIES[name](), tmp_path, EXPECTED_OPAQUE[name])


def test_dynamo_opset20_writes_the_standard_gelu_op() -> None:
    ops = {n.op_type for n in fs.dynamo_decoder(20).graph.node}
    assert {"Gelu", "Trilu", "CumSum", "Einsum", "Split"} <= ops and "Erf" not in ops
