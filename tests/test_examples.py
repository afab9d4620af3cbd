"""The examples run as the README says, and every rule of examples/custom_rules.py fires."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rewrite.cli import main

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "examples" / "custom_rules.py"


def _user_model(path: Path) -> None:
    """SiLU written out, a reshape round trip, and two MatMuls sharing their input."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w2")
    s1 = numpy_helper.from_array(np.array([2, 4, 2, 4], np.int64), "s1")
    s2 = numpy_helper.from_array(np.array([2, 4, 8], np.int64), "s2")
    n = helper.make_node
    nodes = [
        n("Sigmoid", ["x"], ["sig"], name="sig"),
        n("Mul", ["x", "sig"], ["silu"], name="silu"),
        n("Reshape", ["silu", "s1"], ["heads"], name="split_heads"),
        n("Reshape", ["heads", "s2"], ["merged"], name="merge_heads"),
        n("MatMul", ["merged", "w1"], ["y1"], name="proj1"),
        n("MatMul", ["merged", "w2"], ["y2"], name="proj2"),
    ]
    graph = helper.make_graph(
        nodes,
        "user",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8])],
        [
            helper.make_tensor_value_info("y1", TensorProto.FLOAT, [2, 4, 6]),
            helper.make_tensor_value_info("y2", TensorProto.FLOAT, [2, 4, 4]),
        ],
        [w1, w2, s1, s2],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_custom_rules_fire_and_show_in_the_report(tmp_path: Path) -> None:
    src, dst, rep = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    _user_model(src)
    code = main(["optimize", str(src), str(dst), "--rules", str(RULES), "--report", str(rep), "-q"])
    assert code == 0
    report = json.loads(rep.read_text())
    fired = report["rules_applied"]
    for rule in ("silu_to_quickgelu", "reshape_round_trip", "merge_shared_matmuls"):
        assert fired.get(rule, 0) > 0, f"{rule} did not fire: {fired}"
    assert report["verification"]["ok"] is True
    ops = {nd.op_type for nd in onnx.load(dst).graph.node}
    assert "QuickGelu" in ops and "Reshape" not in ops


def test_rules_list_shows_the_user_rules() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rewrite.cli", "rules", "list", "--rules", str(RULES)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "silu_to_quickgelu" in out and "custom_rules.py:" in out and "cleanup" in out
