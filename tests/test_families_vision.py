"""Vision families as exporters write them (`tests/families_vision.py`), through `rewrite optimize`.

Per family: the CLI exits 0 with status "optimized" and a passing verification, the output
agrees with the input in ORT on two seeds (rtol 1e-4, atol 1e-5), and the op types left opaque
in the e-graph `optimize` saturates (the input after constant folding, encoded) are exactly
`EXPECTED_OPAQUE[family]`; ops being typed shrink these sets: update the line.
`opaque_op_types` and `assert_agrees` are shared with `tests/test_families_seq.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

import tests.families_vision as fv
from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.rules.fold import fold_to_fixpoint
from rewrite.verify import make_inputs
from tests.egraph.models import ort_run, write
from tests.test_families import optimize

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


def opaque_op_types(m: onnx.ModelProto, folder: Path) -> tuple[set[str], int]:
    """The op types `optimize` (with rules) keeps opaque in `m`, and its count of opaque
    nodes: the loaded model, folded to a fixpoint, then encoded, as `stages` does."""
    graph, _ = fold_to_fixpoint(load(write(m, folder, "opaque.onnx")))
    enc = encode(graph)
    return {e.op_type for e in enc.opaque.values()}, enc.opaque_nodes


def assert_agrees(m: onnx.ModelProto, out: onnx.ModelProto) -> None:
    """Every output of `out` matches `m`'s in ORT (dtype, shape, values) on seeds 0 and 1."""
    for seed in (0, 1):
        feeds = make_inputs(m, seed=seed)
        want, got = ort_run(m, feeds), ort_run(out, feeds)
        assert list(got) == list(want)
        for name, w in want.items():
            assert got[name].dtype == w.dtype and got[name].shape == w.shape, name
            np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5, err_msg=name)


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
