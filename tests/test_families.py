"""Model families as exporters write them (`tests/families.py`), through `rewrite optimize`.

The Llama-family decoder (issue 11) used to end in "greedy: root class ('logits') has no e-node
of finite cost": exit 0, status "optimized", the differential check passed, and the output
compared in ORT here too: bit-identical with `--no-rules`, within float32 tolerance with the
built-in rules.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

from rewrite.verify import make_inputs
from tests.egraph.models import assert_bit_identical, ort_run
from tests.families import llama_decoder
from tests.families_check import optimize

DECODERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "opset17": lambda: llama_decoder(17),
    "opset18": lambda: llama_decoder(18),
    "static": lambda: llama_decoder(17, static=(1, 8)),
    "folded_split": lambda: llama_decoder(17, folded_split=True),
    "opset18_static_folded": lambda: llama_decoder(18, static=(2, 5), folded_split=True),
}


@pytest.mark.parametrize("name", DECODERS)
def test_llama_decoder_with_no_rules_is_bit_identical(name: str, tmp_path: Path) -> None:
    m = DECODERS[name]()
    out, _ = optimize(m, tmp_path, "--no-rules")
    assert_bit_identical(m, out)


@pytest.mark.parametrize("name", DECODERS)
def test_llama_decoder_with_builtin_rules_agrees(name: str, tmp_path: Path) -> None:
    m = DECODERS[name]()
    out, report = optimize(m, tmp_path)
    assert report["cost_after_us"] <= report["cost_before_us"]
    assert len(out.graph.node) <= len(m.graph.node)
    for seed in (0, 1):
        feeds = make_inputs(m, seed=seed)
        want, got = ort_run(m, feeds)["logits"], ort_run(out, feeds)["logits"]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
