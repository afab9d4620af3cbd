"""The wrong-rule suite (`wrong_rules.py`) and its sound twins (`twin_rules.py`).

Every wrong rule is refused with a counterexample that reproduces in ONNX Runtime, and every
twin is accepted. The default tests run adversarial sampling alone (the backstop: it needs no
proof); the `slow` ones run the whole gate (`verify_rules`: Z3 proof + sampling). Each test
prints the rule, its cause, status and counterexample line (`pytest -s` shows the table).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rewrite.rules.rule import Rule
from rewrite.verify.gate import PROVED, REFUTED, verify_rules
from rewrite.verify.reproduce import reproduce
from rewrite.verify.sample import sample
from tests.verify.twin_rules import TWIN_OF, TWINS
from tests.verify.wrong_rules import CAUSES, WRONG

SAMPLING_MISSES = {
    "reshape_reshape_copied_dim": "the right side is undefined only for a 0 in s2 that copies "
    "a dim of x the middle shape lacks: rare among sampled cases; the prover refutes it",
    "scale_up_down_small": "wrong only at int32 for 32768 <= x < 40000 (x·65536 wraps): no "
    "special value lands there; the prover's int32 view refutes it",
}
"""Wrong rules that sampling alone does not refute (the prover does)."""

TWIN_XFAIL: dict[str, str] = {}
"""Twins that sampling refutes though they are sound (none)."""
PROVER_XFAIL: dict[str, str] = {}
"""Twins the gate does not prove yet (none)."""


def _marks(name: str, xfails: dict[str, str]) -> list[pytest.MarkDecorator]:
    return [pytest.mark.xfail(strict=True, reason=xfails[name])] if name in xfails else []


def _params(rules: list[Rule], xfails: dict[str, str]) -> list:  # type: ignore[type-arg]
    return [pytest.param(r, id=r.name, marks=_marks(r.name, xfails)) for r in rules]


def test_the_suite_covers_every_cause_with_50_wrong_rules() -> None:
    assert len(WRONG) >= 50
    assert set(CAUSES) == {r.name for r in WRONG}
    assert set(CAUSES.values()) == {0, 1, 2, 3, 4, 5, 6, 7}
    assert set(TWIN_OF.values()) <= set(CAUSES) and set(TWIN_OF) == {r.name for r in TWINS}


@pytest.mark.parametrize("rule", _params(WRONG.rules, SAMPLING_MISSES))
def test_sampling_refutes_wrong_rule(rule: Rule) -> None:
    result = sample(rule)
    print(f"{rule.name} (cause {CAUSES[rule.name]}): {result.counterexample_line or 'accepted'}")
    assert result.refuted, f"{rule.name}: not refuted ({result.samples} samples)"
    assert result.counterexample is not None
    assert reproduce(rule, result.counterexample), "the counterexample does not reproduce in ORT"


@pytest.mark.parametrize("rule", _params(TWINS.rules, TWIN_XFAIL))
def test_sampling_accepts_sound_twin(rule: Rule) -> None:
    result = sample(rule)
    print(f"{rule.name}: {result.numeric}, {result.samples} samples {result.counterexample_line}")
    assert not result.refuted, result.counterexample_line
    assert result.samples > 0


@pytest.fixture
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWRITE_CACHE_DIR", str(tmp_path / "proofs"))


@pytest.mark.slow
@pytest.mark.usefixtures("_cache")
@pytest.mark.parametrize("rule", _params(WRONG.rules, {}))
def test_gate_refuses_wrong_rule(rule: Rule) -> None:
    res = verify_rules([rule])[0]
    print(f"{rule.name} (cause {CAUSES[rule.name]}): {res.status}: {res.counterexample_line}")
    assert res.status == REFUTED and res.counterexample is not None
    shown = reproduce(rule, res.counterexample, overflow_agrees=False)
    assert shown, "the counterexample does not reproduce in ORT"


@pytest.mark.slow
@pytest.mark.usefixtures("_cache")
@pytest.mark.parametrize("rule", _params(TWINS.rules, PROVER_XFAIL))
def test_gate_proves_sound_twin(rule: Rule) -> None:
    res = verify_rules([rule])[0]
    print(f"{rule.name}: {res.status} {res.reason} {res.counterexample_line}")
    assert res.status == PROVED
