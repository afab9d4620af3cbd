"""Rule files: loading, selection, and errors that name the file and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rewrite.errors import RuleError
from rewrite.rules.load import load_rule_file, select_rulesets

GOOD = '''
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite

MINE = RuleSet("mine")


@MINE.rule
def relu_relu(x: Tensor) -> Rewrite:
    """Relu(Relu(x)) = Relu(x)"""
    return rewrite(op.Relu(op.Relu(x))).to(op.Relu(x))


@MINE.rule(tags=["approximate"])
def sloppy(x: Tensor) -> Rewrite:
    """Tanh(x) ≈ x  (approximate)"""
    return rewrite(op.Tanh(x)).to(x)
'''


def write(tmp_path: Path, text: str, name: str = "rules.py") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_rule_file_loads_its_rulesets(tmp_path: Path) -> None:
    (rs,) = load_rule_file(write(tmp_path, GOOD))
    assert rs.name == "mine" and [r.name for r in rs] == ["relu_relu", "sloppy"]
    assert rs.rules[0].source == "rules.py:7"  # the decorator line


def test_selection_adds_files_to_builtins_and_filters(tmp_path: Path) -> None:
    f = str(write(tmp_path, GOOD))
    names = [rs.name for rs in select_rulesets(rule_files=[f])]
    assert names == ["cleanup", "constants", "ort", "merge", "mine"]
    (mine,) = select_rulesets(rule_files=[f], names=["mine"])
    assert [r.name for r in mine] == ["relu_relu"], "approximate rules need opting in"
    (mine,) = select_rulesets(rule_files=[f], names=["mine"], allow_approximate=True)
    assert [r.name for r in mine] == ["relu_relu", "sloppy"]
    (cleanup,) = select_rulesets(names=["cleanup"], disabled=["cast_noop"])
    assert "cast_noop" not in {r.name for r in cleanup}
    assert select_rulesets(no_rules=True) == []


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("def f(:\n", r"rules\.py:1: syntax error"),
        ("from rewrite.rules import RuleSet\nX = 1\n", r"rules\.py: defines no RuleSet"),
        ("import no_such_module_xyz\n", r"rules\.py:1: ModuleNotFoundError"),
        (
            "from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite\nR = RuleSet('r')\n"
            "@R.rule\ndef f(x: Tensor) -> Rewrite:\n    return rewrite(op.Nope(x)).to(x)\n",
            r"rules\.py: f \(rules\.py:3\): unknown op op\.Nope",
        ),
        (
            "from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite\nR = RuleSet('r')\n"
            "@R.rule\ndef f(x: Tensor, y: Tensor) -> Rewrite:\n    return rewrite(-x).to(y)\n",
            r"f \(rules\.py:3\): variable y on the right side is not bound",
        ),
    ],
    ids=["syntax", "no-ruleset", "import-error", "unknown-op", "unbound-variable"],
)
def test_rule_file_errors_name_file_and_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(RuleError, match=match):
        load_rule_file(write(tmp_path, text))


def test_missing_file_unknown_ruleset_and_unknown_disabled_rule(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match=r"nope\.py: no such rule file"):
        load_rule_file(tmp_path / "nope.py")
    with pytest.raises(RuleError, match=r"unknown ruleset zzz; available: cleanup"):
        select_rulesets(names=["zzz"])
    with pytest.raises(RuleError, match=r"--disable-rule: no rule named zzz"):
        select_rulesets(disabled=["zzz"])


def test_a_ruleset_name_defined_twice_is_refused(tmp_path: Path) -> None:
    text = "from rewrite.rules import RuleSet\nC = RuleSet('cleanup')\n"
    with pytest.raises(RuleError, match=r"ruleset 'cleanup' is already defined"):
        select_rulesets(rule_files=[str(write(tmp_path, text))])


def test_rules_are_chosen_by_target() -> None:
    cpu = {r.name for rs in select_rulesets(target="cpu") for r in rs}
    cuda = {r.name for rs in select_rulesets(target="cuda") for r in rs}
    assert "add_as_sum" in cpu and "add_as_sum" not in cuda  # tagged ort-cpu only
    assert "identity_elim" in cpu and "identity_elim" in cuda  # portable


def relu_rule(ruleset: str, name: str = "relu_relu", pad: int = 0) -> str:
    """A rule file whose rule `name` is defined at line 5 + pad (the decorator's line)."""
    return (
        "from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite\n"
        f"R = RuleSet({ruleset!r})\n" + "\n" * (2 + pad) + "@R.rule\n"
        f"def {name}(x: Tensor) -> Rewrite:\n"
        "    return rewrite(op.Relu(op.Relu(x))).to(op.Relu(x))\n"
    )


def test_a_rule_name_in_two_files_is_refused_naming_both(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write(tmp_path / "a", relu_rule("first"))
    b = write(tmp_path / "b", relu_rule("second", pad=3))
    with pytest.raises(RuleError) as info:
        select_rulesets(rule_files=[str(a), str(b)], names=["first"])
    message = str(info.value)
    assert "rule 'relu_relu' is defined twice" in message
    assert f"{a}:5 (ruleset 'first')" in message and f"{b}:8 (ruleset 'second')" in message


def test_a_rule_name_of_a_builtin_rule_is_refused(tmp_path: Path) -> None:
    f = write(tmp_path, relu_rule("mine", name="identity_elim"))
    with pytest.raises(
        RuleError,
        match=rf"'identity_elim' is defined twice: cleanup\.py:\d+ \(built-in ruleset "
        rf"'cleanup'\) and {re.escape(str(f))}:5 \(ruleset 'mine'\)",
    ):
        select_rulesets(rule_files=[str(f)])


def test_a_rule_name_twice_in_one_file_is_refused_naming_both_lines(tmp_path: Path) -> None:
    two_sets = relu_rule("one") + relu_rule("two").replace("R = ", "S = ").replace("@R", "@S")
    f = write(tmp_path, two_sets)
    with pytest.raises(
        RuleError, match=rf"{re.escape(str(f))}:5 .* and {re.escape(str(f))}:12 \(ruleset 'two'\)"
    ):
        select_rulesets(rule_files=[str(f)])
    one_set = relu_rule("one") + relu_rule("one").split("\n", 2)[2]
    with pytest.raises(
        RuleError,
        match=r"relu_relu \(rules\.py:10\): a rule of that name is already in ruleset 'one' "
        r"\(rules\.py:5\)",
    ):
        load_rule_file(write(tmp_path, one_set))
