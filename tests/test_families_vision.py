"""Vision families as exporters write them (`tests/families_vision.py`), through `rewrite optimize`.

Per family: the CLI exits 0 with status "optimized" and a passing verification, the output
agrees with the input in ORT on two seeds (rtol 1e-4, atol 1e-5), and the op types left opaque
in the e-graph `optimize` saturates (the input after constant folding, encoded) are exactly
`EXPECTED_OPAQUE[family]`; ops being typed shrink these sets: update the line.
The checks are shared with `tests/test_families_seq.py` (`tests/families_check.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

import tests.families_vision as fv
from tests.families_check import check_expected_opaque, check_optimize_agrees

EXPECTED_OPAQUE: dict[str, set[str]] = {
    "convnext_stack": set(),
    "resnext_bottleneck": set(),
    "inception_module": set(),
    "squeezenet_fire": set(),
    "mbconv_block": set(),
    "vit_encoder": set(),
}

FAMILIES: dict[str, Callable[[], onnx.ModelProto]] = {
    "convnext_stack": fv.convnext_stack,
    "resnext_bottleneck": fv.resnext_bottleneck,
    "inception_module": fv.inception_module,
    "squeezenet_fire": fv.squeezenet_fire,
    "mbconv_block": fv.mbconv_block,
    "vit_encoder": fv.vit_encoder,
}


@pytest.mark.parametrize("name", FAMILIES)
def test_optimize_verifies_and_agrees_in_ort(name: str, tmp_path: Path) -> None:
    check_optimize_agrees(FAMILIES[name](), tmp_path)


@pytest.mark.parametrize("name", FAMILIES)
def test_opaque_op_types_are_exactly_the_expected(name: str, tmp_path: Path) -> None:
    check_expected_opaque(FAMILIES[name](), tmp_path, EXPECTED_OPAQUE[name])
