"""`rewrite verify`: `--rule` / `--ruleset` selection, the per-rule progress lines on stderr,
and counterexample values printed with enough digits to tell float32 neighbours apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rewrite.cli import main
from rewrite.verify.result import Counterexample, num
from tests.verify.test_gate import USER_RULES

RULES = (
    USER_RULES.replace('RuleSet("mine")', 'RuleSet("mine")\nMORE = RuleSet("more")')
    + '''

@MORE.rule
def relu_relu(x: Tensor) -> Rewrite:
    """Relu(Relu(x)) = Relu(x)"""
    return rewrite(op.Relu(op.Relu(x))).to(op.Relu(x))


@MORE.rule(tags=["bit-exact"])
def mul_div(x: Tensor) -> Rewrite:
    """x * 3 / 3 = x (not bit-exact: an ulp apart for some float32 x)"""
    return rewrite(x * 3.0 / 3.0).to(x, x.dtype == "float32")
'''
)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWRITE_CACHE_DIR", str(tmp_path / "proofs"))


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    path = tmp_path / "my_rules.py"
    path.write_text(RULES)
    return path


def rows(out: str) -> list[str]:
    """The rule names in the table of `rewrite verify`'s stdout (up to its first blank line)."""
    table = out.split("\nrule ")[1].split("\n\n")[0]
    return [line.split()[0] for line in table.splitlines()[1:]]


def test_rule_selects_only_the_named_rules(rules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["verify", "--no-sample", str(rules), "--rule", "neg_neg", "--rule", "relu_relu"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert rows(out) == ["mine/neg_neg", "more/relu_relu"]
    assert "2 rules: 2 proved" in out
    progress = [line for line in err.splitlines() if line.startswith("verify: ")]
    assert [p.split(":")[1].strip() for p in progress] == ["mine/neg_neg", "more/relu_relu"]
    assert all(": proved (" in p and "s; proof " in p for p in progress)


def test_ruleset_selects_a_rule_set_and_rule_narrows_it(
    rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "--no-sample", "-q", str(rules), "--ruleset", "mine"]) == 1
    out, err = capsys.readouterr()
    assert rows(out) == ["mine/neg_neg", "mine/sub_commutes"]
    assert "verify: " not in err  # -q: no progress lines
    argv = ["verify", "--no-sample", str(rules), "--ruleset", "mine", "--rule", "neg_neg"]
    assert main(argv) == 0
    assert rows(capsys.readouterr().out) == ["mine/neg_neg"]


@pytest.mark.parametrize(
    ("option", "name", "message"),
    [
        ("--rule", "neg_nge", "no rule named neg_nge (did you mean neg_neg?); rules: neg_neg, "
         "sub_commutes, relu_relu, mul_div"),
        ("--ruleset", "mnie", "no rule set named mnie (did you mean mine?); rule sets: mine, "
         "more"),
    ],
)  # fmt: skip
def test_an_unknown_name_is_an_error_with_a_suggestion(
    rules: Path, capsys: pytest.CaptureFixture[str], option: str, name: str, message: str
) -> None:
    assert main(["verify", "--no-sample", str(rules), option, name]) == 1
    out, err = capsys.readouterr()
    assert message in err
    assert out == "" and "verify: " not in err  # refused before any rule is verified


def test_a_rule_outside_the_selected_rule_sets_is_unknown(
    rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify", str(rules), "--ruleset", "more", "--rule", "neg_neg"]
    assert main(argv) == 1
    assert "no rule named neg_neg; rules: relu_relu, mul_div" in capsys.readouterr().err


def test_a_counterexample_an_ulp_apart_prints_two_values(
    rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "--no-sample", str(rules), "--rule", "mul_div"]) == 1
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("more/mul_div (")]
    left, right = line.split("-> left=[")[1].split("]")[0], line.split(" right=[")[1].split("]")[0]
    assert left != right
    assert np.float32(left) != np.float32(right)


def test_float32_neighbours_print_differently() -> None:
    a = np.float32(0.345714)
    b = np.nextafter(a, np.float32(1))
    cx = Counterexample(
        "r", "the sides differ", {"shapes": {"x": [1]}, "dtypes": {"x": "float32"}},
        {"x": [1.5]}, [float(a)], [float(b)],
    )  # fmt: skip
    assert cx.line().endswith("x=[1.5] -> left=[0.345714] right=[0.34571403]")
    for x in (a, b, np.float32(1e-45), np.float32(3.4028235e38), np.float32(-1 / 3)):
        assert np.float32(num(float(x))) == x  # every float32 round-trips
    assert num(float(np.float16(0.1))) == "0.099976"  # a float16 value: at most 5 digits
    assert num(0.1) == "0.1" and num(1 / 3) == "0.3333333333333333"  # float64: shortest
    assert num(-2.0) == "-2" and num(-0.0) == "-0" and num(float("nan")) == "nan"


def test_a_float32_and_a_float64_value_that_shorten_alike_print_in_full() -> None:
    f32, f64 = float(np.float32(0.1)), 0.1  # "0.1" both, as their own types' shortest
    cx = Counterexample("r", "the sides differ", {"shapes": {}, "dtypes": {}}, {}, f32, f64)
    assert cx.line().endswith("left=0.10000000149011612 right=0.1")


def test_the_reported_gelu_counterexample_shows_where_the_sides_differ() -> None:
    """The values of a refuted tanh-GELU -> FastGelu rule, once printed as 0.345714 twice."""
    case = {"shapes": {"x": [1]}, "dtypes": {"x": "float32"}}
    lhs, rhs = [0.34571394324302673], [0.3457140028476715]
    cx = Counterexample(
        "r", "the sides differ (confirmed in float64)", case, {"x": [0.5]}, lhs, rhs
    )
    cx.lhs_ort, cx.rhs_ort = lhs, rhs
    assert cx.line().endswith(
        "x=[0.5] -> left=[0.34571394] right=[0.345714] (ORT: left=[0.34571394] right=[0.345714])"
    )
