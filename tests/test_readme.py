"""The README's rule file, copied from the README as it stands, fires and is reported by name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from rewrite.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_rule_file() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (block,) = [b for b in blocks if b.startswith("# my_rules.py")]
    return block


def test_readme_rule_file_is_at_most_ten_lines_of_code() -> None:
    code = [ln for ln in readme_rule_file().splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(code) <= 10, code


def test_readme_rule_file_fires_and_shows_in_the_report(tmp_path: Path) -> None:
    rules = tmp_path / "my_rules.py"
    rules.write_text(readme_rule_file())
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["r1"]), helper.make_node("Relu", ["r1"], ["y"])]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    src, dst, rep = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(model, src)
    assert (
        main(["optimize", str(src), str(dst), "--rules", str(rules), "--report", str(rep), "-q"])
        == 0
    )
    report = json.loads(rep.read_text())
    assert report["rules_applied"].get("relu_relu", 0) > 0
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["Relu"]
