"""The README as it stands: its rule file fires and is reported by name; its sample output is
what `make demo` prints (numbers that vary by machine masked)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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


# -- the sample output --------------------------------------------------------------------

MASKS = (
    (re.compile(r"max_abs \S+(?= on )"), "max_abs <n>"),
    (re.compile(r"\d+ bit-identical"), "<n> bit-identical"),
    (re.compile(r"\d+ from the cache"), "<n> from the cache"),
    (re.compile(r"[+-]?\d[\d,]*\.\d+(?:e[+-]?\d+)?|[+-]?\d[\d,]*(?= us\b)"), "<n>"),
)
"""What differs between machines and runs, masked before comparing (in this order): the
differential check's worst error and how many outputs were bit-identical (float kernels differ
by CPU), how many proofs came from the cache, every decimal number (ratios, seconds, stage
times) and every µs value. Node counts, rule names, ops, labels and the order of everything
stay and must match."""


def mask(text: str) -> list[str]:
    lines = []
    for line in text.strip().splitlines():
        for pattern, replacement in MASKS:
            line = pattern.sub(replacement, line)
        lines.append(line)
    return lines


def readme_sample_output() -> str:
    """The block after the README's `rewrite optimize in.onnx out.onnx --report ...` one."""
    text = README.read_text()
    command = "```bash\n.venv/bin/rewrite optimize in.onnx out.onnx --report report.json\n```\n"
    block = re.match(r"\s*```\n(.*?)```", text[text.index(command) + len(command) :], flags=re.S)
    assert block is not None, "no output block after the README's optimize command"
    return block.group(1)


def demo_command() -> list[str]:
    """`make demo`'s `rewrite optimize` command line, from the Makefile."""
    text = (README.parent / "Makefile").read_text().replace("\\\n", " ")
    recipe = text[text.index("\ndemo:") :]
    (line,) = [ln for ln in recipe.splitlines() if "rewrite optimize" in ln][:1]
    return line.replace("$(VENV)", ".venv").split()


def test_readme_sample_output_is_what_make_demo_prints(tmp_path: Path) -> None:
    argv = demo_command()
    assert argv[:3] == [".venv/bin/rewrite", "optimize", "examples/models/tiny_bert_block.onnx"]
    # Same relative paths as `make demo`, in a scratch folder: the first line names them.
    (tmp_path / "examples" / "models").mkdir(parents=True)
    (tmp_path / argv[2]).symlink_to(README.parent / argv[2])
    (tmp_path / "out").mkdir()
    env = {**os.environ, "REWRITE_COST_TABLE": "default"}  # the shipped table, not a calibration
    run = subprocess.run(
        [sys.executable, "-m", "rewrite.cli", *argv[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert mask(readme_sample_output()) == mask(run.stdout)
