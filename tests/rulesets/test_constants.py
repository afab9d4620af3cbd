"""constants: Pad folded into the Conv after it, on every Conv form exporters write.

Each case runs the whole pipeline with CONSTANTS only (folding on, as by default: exports
compute pads with Shape/Slice/Concat chains that only folding makes constant), then checks the
Pad is gone, the written model passes the checker and ORT gives bit-identical outputs (a
Conv's pads are the zeros the Pad wrote, and ORT pads with zeros the same way).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h

from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED, Report
from rulesets.constants import CONSTANTS
from tests.egraph.models import assert_bit_identical, const, ints, model, rand, vi, write


def _pad_conv(
    spatial: int,
    *,
    conv: dict[str, object],
    pads: list[int],
    fill: float | None = None,
    bias: bool = True,
    channels: int = 3,
) -> onnx.ModelProto:
    """x [1, C, 5, ...] -> Pad(pads, fill) -> Conv(W [4, C, 3, ...], B?, **conv) -> Relu."""
    xs = [1, channels] + [5] * spatial
    pad_inputs = ["x", "pads"] + (["fill"] if fill is not None else [])
    padded = channels + pads[1] + pads[len(pads) // 2 + 1]
    per_group = padded // int(conv.get("group", 1))  # type: ignore[call-overload]
    inits = [const("pads", ints(*pads)), const("w", rand((4, per_group) + (3,) * spatial, 1))]
    if fill is not None:
        inits.append(const("fill", np.array(fill, np.float32)))
    conv_inputs = ["p", "w"]
    if bias:
        inits.append(const("b", rand((4,), 2)))
        conv_inputs.append("b")
    return model(
        [
            h.make_node("Pad", pad_inputs, ["p"], name="pad", mode="constant"),
            h.make_node(
                "Conv", conv_inputs, ["c"], name="conv", kernel_shape=[3] * spatial, **conv
            ),
            h.make_node("Relu", ["c"], ["y"]),
        ],
        [vi("x", xs)],
        [vi("y", [None] * (spatial + 2))],
        inits=inits,
    )


FIRES = {
    "2d_valid_asymmetric": _pad_conv(
        2, conv={"auto_pad": "VALID", "strides": [2, 2]}, pads=[0, 0, 0, 0, 0, 0, 1, 1]
    ),
    "2d_explicit_pads_added": _pad_conv(
        2, conv={"pads": [1, 0, 1, 2]}, pads=[0, 0, 1, 2, 0, 0, 2, 1], fill=0.0
    ),
    "2d_no_pads_no_bias": _pad_conv(2, conv={}, pads=[0, 0, 2, 2, 0, 0, 2, 2], bias=False),
    "2d_grouped_dilated": _pad_conv(
        2,
        conv={"group": 4, "dilations": [2, 1]},
        pads=[0, 0, 2, 1, 0, 0, 2, 1],
        channels=4,
    ),
    "1d_valid": _pad_conv(1, conv={"auto_pad": "VALID"}, pads=[0, 0, 2, 0, 0, 1]),
}

KEPT = {
    "nonzero_fill": _pad_conv(2, conv={}, pads=[0, 0, 1, 1, 0, 0, 1, 1], fill=1.0),
    "channel_padding": _pad_conv(2, conv={}, pads=[0, 1, 1, 1, 0, 0, 1, 1]),
    "crop": _pad_conv(2, conv={}, pads=[0, 0, 1, 1, 0, 0, -1, 1]),
}


def run(m: onnx.ModelProto, folder: Path) -> tuple[Report, onnx.ModelProto]:
    src = write(m, folder)
    dst = folder / "out.onnx"
    report = optimize(src, dst, Options(rulesets=[CONSTANTS]))
    assert report.status == STATUS_OPTIMIZED, report.warnings
    return report, onnx.load(dst)


def ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in m.graph.node]


@pytest.mark.parametrize("name", sorted(FIRES))
def test_pad_is_folded_into_the_conv(name: str, tmp_path: Path) -> None:
    m = FIRES[name]
    report, out = run(m, tmp_path)
    assert report.saturation["rule_matches"]["pad_into_conv"] > 0
    assert "Pad" not in ops(out), ops(out)
    onnx.checker.check_model(out, full_check=True)
    assert report.verification["ok"] is True
    assert_bit_identical(m, out)


@pytest.mark.parametrize("name", sorted(KEPT))
def test_a_pad_the_conv_cannot_take_is_kept(name: str, tmp_path: Path) -> None:
    m = KEPT[name]
    _, out = run(m, tmp_path)
    assert "Pad" in ops(out)
    assert_bit_identical(m, out)
