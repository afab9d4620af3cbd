"""ORT's NCHWc layout and Pad/activation fusions as the cost model prices them, checked
against the graph ORT itself builds (`optimized_model_filepath`, ORT_ENABLE_ALL, CPU EP)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h

from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.extract.cost import CostModel
from rewrite.extract.fusions import activation_fused, pad_fused
from rewrite.extract.nchwc import block_size
from rewrite.onnx_io import load
from tests.egraph.models import const, ints, model, rand, vi, write

pytestmark = pytest.mark.skipif(block_size() == 0, reason="no NCHWc on this CPU (AVX2 needed)")

C = 32  # a multiple of every NCHWc block (8 with AVX2, 16 with AVX-512)


def _conv_pad_conv(auto_pad: str, act: str = "swish") -> onnx.ModelProto:
    """Conv -> activation -> Pad (zeros, spatial only) -> Conv(auto_pad) -> Relu."""
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[1, 1])]
    if act == "swish":
        nodes += [
            h.make_node("Sigmoid", ["c1"], ["s"]),
            h.make_node("Mul", ["c1", "s"], ["a"]),
        ]
    else:
        nodes.append(h.make_node("Clip", ["c1", "lo", "hi"], ["a"]))
    conv2: dict[str, object] = {"kernel_shape": [3, 3]}
    conv2.update({"auto_pad": "VALID"} if auto_pad == "VALID" else {"pads": [0, 0, 0, 0]})
    nodes += [
        h.make_node("Pad", ["a", "pads"], ["p"], mode="constant"),
        h.make_node("Conv", ["p", "w2"], ["c2"], **conv2),
        h.make_node("Relu", ["c2"], ["y"]),
    ]
    inits = [
        const("w1", rand((C, C, 1, 1), 1)),
        const("w2", rand((C, C, 3, 3), 2)),
        const("pads", ints(0, 0, 1, 1, 0, 0, 1, 1)),
        const("lo", np.array(0.0, np.float32)),
        const("hi", np.array(6.0, np.float32)),
    ]
    return model(nodes, [vi("x", [1, C, 8, 8])], [vi("y", [1, C, 8, 8])], inits=inits)


def _priced(m: onnx.ModelProto, folder: Path) -> tuple[CostModel, dict[str, tuple[int, object]]]:
    snap = take_snapshot(encode(load(write(m, folder))))
    cm = CostModel(snap)
    first = {n.op: (cid, n) for cid, n in snap.enodes()}
    return cm, first


def _ort_ops(m: onnx.ModelProto, folder: Path) -> Counter[str]:
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(folder / "ort.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return Counter(n.op_type for n in onnx.load(folder / "ort.onnx").graph.node)


def test_a_pad_before_a_valid_conv_costs_two_reorders_as_ort_runs_it(tmp_path: Path) -> None:
    m = _conv_pad_conv("VALID")
    ops = _ort_ops(m, tmp_path)
    assert ops["Pad"] == 1 and ops["ReorderOutput"] >= 1 and ops["ReorderInput"] == 2
    cm, first = _priced(m, tmp_path)
    pad_cid, pad = first["Pad"]
    assert not pad_fused(cm, pad_cid, pad)  # type: ignore[arg-type]
    assert pad_cid not in cm.layout.blocked
    assert cm.layout.extra(pad_cid, pad) > 0  # type: ignore[arg-type]
    conv_cid, conv = [(c, n) for c, n in cm.snapshot.enodes() if n.op == "Conv"][-1]
    assert cm.layout.extra(conv_cid, conv) > 0  # reads the plain padded value


def test_a_pad_ort_fuses_into_the_conv_costs_next_to_nothing(tmp_path: Path) -> None:
    m = _conv_pad_conv("NOTSET")
    ops = _ort_ops(m, tmp_path)
    assert ops["Pad"] == 0 and ops["ReorderInput"] == 1  # the model input only
    cm, first = _priced(m, tmp_path)
    pad_cid, pad = first["Pad"]
    assert pad_fused(cm, pad_cid, pad)  # type: ignore[arg-type]
    assert 0 < cm.cost(pad_cid, pad) < cm.target.overhead * 1e6 / 10  # type: ignore[arg-type]
    assert pad_cid in cm.layout.blocked


def test_a_clip_after_a_conv_is_part_of_the_blocked_conv(tmp_path: Path) -> None:
    m = _conv_pad_conv("NOTSET", act="clip")
    ops = _ort_ops(m, tmp_path)
    assert ops["Clip"] == 0 and ops["ReorderInput"] == 1  # the model input only
    cm, first = _priced(m, tmp_path)
    clip_cid, clip = first["Clip"]
    assert activation_fused(cm, clip_cid, clip)  # type: ignore[arg-type]
    assert clip_cid in cm.layout.blocked
    reorders = [n.op for c, n in cm.snapshot.enodes() if cm.layout.extra(c, n) > 0]
    assert reorders == ["Conv"]  # the first Conv, reading the model input
