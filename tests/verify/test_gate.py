"""The gate and the proof cache, and `rewrite verify` on a user's rule file."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

from rewrite.errors import RuleError
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.verify import cache as proof_cache
from rewrite.verify.command import add_verify_parser
from rewrite.verify.gate import APPROXIMATE, PROVED, REFUTED, UNKNOWN, gate, verify_rules
from rulesets import builtin
from tests.verify.wrong_rules import CAUSES, WRONG


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "proofs"
    monkeypatch.setenv("REWRITE_CACHE_DIR", str(folder))
    return folder


MIXED = RuleSet("mixed")


@MIXED.rule
def identity_elim(x: Tensor) -> Rewrite:
    """Identity(x) = x"""
    return rewrite(op.Identity(x)).to(x)


@MIXED.rule
def neg_is_identity(x: Tensor) -> Rewrite:
    """Neg(x) = x (wrong)"""
    return rewrite(-x).to(x)


@MIXED.rule(tags=["approximate"])
def gelu_fast(x: Tensor) -> Rewrite:
    """Gelu(x) ≈ FastGelu(x)   (ORT's FastGelu takes float32 of rank 1 or more)"""
    return rewrite(op.ms.Gelu(x)).to(op.ms.FastGelu(x), x.dtype == 1, x.rank >= 1)


def test_a_warm_cache_pays_nothing(_cache: Path) -> None:
    rules = list(builtin()["cleanup"])
    t0 = time.perf_counter()
    cold = verify_rules(rules)
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm = verify_rules(rules)
    t_warm = time.perf_counter() - t0
    assert all(r.status == PROVED and not r.cached for r in cold)
    assert all(r.status == PROVED and r.cached for r in warm)
    assert len(list(_cache.glob("*.json"))) == len(rules)
    assert t_warm < 0.25 and t_warm < t_cold / 5, (t_cold, t_warm)


def test_the_cache_key_follows_the_rule() -> None:
    a, b = RuleSet("a"), RuleSet("b")

    @a.rule
    def r(x: Tensor) -> Rewrite:
        """Neg(Neg(x)) = x"""
        return rewrite(op.Neg(op.Neg(x))).to(x)

    @b.rule
    def r(x: Tensor) -> Rewrite:  # noqa: F811  (the same name, another identity)
        """Neg(x) = x"""
        return rewrite(-x).to(x)

    ka, kb = proof_cache.key(a.rules[0], "bound"), proof_cache.key(b.rules[0], "bound")
    assert ka != kb
    assert ka == proof_cache.key(a.rules[0], "bound")
    assert ka != proof_cache.key(a.rules[0], "another bound")


def test_gate_keeps_proved_rules_and_refuses_unsound_ones() -> None:
    accepted, refused = gate([MIXED], allow_approximate=False)
    assert [rs.name for rs in accepted] == ["mixed"]
    assert [r.name for r in accepted[0]] == ["identity_elim"]
    assert [r.rule for r in refused] == ["neg_is_identity"]
    bad = refused[0]
    assert bad.status == REFUTED and bad.counterexample is not None
    assert "neg_is_identity (test_gate.py:" in bad.refusal()
    assert "x=[" in bad.refusal() and "not used" in bad.refusal()


def test_approximate_rules_need_the_opt_in_and_their_tolerance() -> None:
    accepted, _ = gate([MIXED], allow_approximate=True)
    assert [r.name for r in accepted[0]] == ["identity_elim", "gelu_fast"]
    result = verify_rules([MIXED.rules[2]])[0]
    assert result.status == APPROXIMATE and result.max_error is not None
    assert 1e-5 < result.max_error < 1e-3
    strict = verify_rules([MIXED.rules[2]], tolerance=1e-6)[0]
    assert strict.status == REFUTED and "exceeds the tolerance" in strict.reason


def _verify(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rewrite")
    add_verify_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["verify", *argv])
    return int(args.func(args))


USER_RULES = '''
from rewrite.errors import RuleError
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite

MINE = RuleSet("mine")


@MINE.rule
def neg_neg(x: Tensor) -> Rewrite:
    """Neg(Neg(x)) = x"""
    return rewrite(op.Neg(op.Neg(x))).to(x)


@MINE.rule
def sub_commutes(x: Tensor, y: Tensor) -> Rewrite:
    """x - y = y - x (unsound)"""
    return rewrite(x - y).to(y - x)
'''


def test_rewrite_verify_refuses_an_unsound_user_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "my_rules.py"
    path.write_text(USER_RULES)
    report = tmp_path / "verify.json"
    status = _verify([str(path), "--report", str(report)])
    out = capsys.readouterr().out
    assert status == 1
    assert "mine/neg_neg" in out and "mine/sub_commutes" in out
    assert "mine/sub_commutes (my_rules.py:" in out
    assert "refuted: the sides differ for x: float32[1], y: float32[1]: x=[" in out
    data = json.loads(report.read_text())
    by_name = {r["rule"]: r for r in data["rules"]}
    assert by_name["neg_neg"]["status"] == PROVED
    assert by_name["neg_neg"]["numeric"] == "bit-exact"
    assert by_name["sub_commutes"]["status"] == REFUTED
    assert by_name["sub_commutes"]["counterexample"]["inputs"]
    assert data["summary"]["refuted"] == 1


def test_rewrite_verify_of_sound_rules_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ok_rules.py"
    path.write_text(USER_RULES.split("@MINE.rule\ndef sub_commutes")[0])
    assert _verify([str(path), "--no-sample"]) == 0
    out = capsys.readouterr().out
    assert "mine/neg_neg" in out and "1 proved" in out


def test_the_original_wrong_rules_are_refused_by_the_gate() -> None:
    """The first 23 wrong rules (fast to prove); `test_wrong_rules.py` checks all of them,
    the whole gate under `slow`."""
    original = RuleSet("wrong", [r for r in WRONG if CAUSES[r.name] == 0])
    accepted, refused = gate([original], allow_approximate=False)
    assert not accepted[0].rules
    assert len(refused) == len(original)
    assert all(r.status == REFUTED and r.counterexample for r in refused)


def test_rewrite_verify_marks_proofs_read_from_the_cache(
    _cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ok_rules.py"
    path.write_text(USER_RULES.split("@MINE.rule\ndef sub_commutes")[0])
    assert _verify([str(path), "--no-sample"]) == 0
    cold = capsys.readouterr().out
    assert "(cached)" not in cold and f"0 of 1 proofs read from {_cache}\n" in cold
    report = tmp_path / "verify.json"
    # The proof is cached, the numeric sample is not: the row is still a cached proof.
    assert _verify([str(path), "--report", str(report)]) == 0
    warm = capsys.readouterr().out
    (row,) = [line for line in warm.splitlines() if line.startswith("mine/neg_neg")]
    assert row.endswith("s (cached)") and "bit-exact" in row
    assert f"proof cache: 1 of 1 proofs read from {_cache} (marked (cached)" in warm
    data = json.loads(report.read_text())
    assert data["summary"]["cached"] == 1 and data["summary"]["cache"] == str(_cache)
    assert data["rules"][0]["cached"] is True


def test_rewrite_verify_refuses_a_rule_name_optimize_would_refuse(tmp_path: Path) -> None:
    path = tmp_path / "clash.py"
    path.write_text(USER_RULES.replace("neg_neg", "double_neg"))  # a built-in rule's name
    with pytest.raises(RuleError, match=r"'double_neg' is defined twice: cleanup\.py:\d+ "):
        _verify([str(path)])


SIGMOID = RuleSet("sigmoid")


@SIGMOID.rule(tags=["approximate"])
def sigmoid_as_tanh(x: Tensor) -> Rewrite:
    """Sigmoid(x) = 0.5 · (Tanh(0.5 · x) + 1) for float32 (rounding differs)"""
    return rewrite(op.Sigmoid(x)).to(0.5 * (op.Tanh(0.5 * x) + 1.0), x.dtype == "float32")


def test_an_approximate_rule_is_not_accepted_where_its_sampling_crashed(_cache: Path) -> None:
    """A sampler failure (a bug of ours, `SampleResult.crashed`) leaves gaps in the evidence
    an approximate rule is accepted on: the rule is `unknown`, not `approximate`. The cached
    entry of a real run is edited as if Z3 had given up on the proof (so the sample decides),
    then once more with a crashed case."""
    rule = next(iter(SIGMOID))
    (first,) = verify_rules([rule])
    assert first.status == PROVED and first.max_error is not None, first.message()
    (entry,) = list(_cache.glob("*.json"))
    data = json.loads(entry.read_text())
    data["proof"].update(status=UNKNOWN, reason="Z3 gave up (timeout)")
    entry.write_text(json.dumps(data))
    (sampled,) = verify_rules([rule])
    assert sampled.status == APPROXIMATE, sampled.message()
    data["sample"].update(crashed=1, notes=["not sampled (TypeError): a bug"])
    entry.write_text(json.dumps(data))
    (crashed,) = verify_rules([rule])
    assert crashed.status == UNKNOWN and "a bug of rewrite's" in crashed.reason


def test_an_approximate_rule_refuted_by_type_stays_refuted_whatever_its_sample(
    _cache: Path,
) -> None:
    """No tolerance excuses sides of different types or an undefined right side: a clean
    sample does not make such a refuted approximate rule `approximate`. As above, the cached
    entry of a real run is edited to hold such a proof."""
    rule = next(iter(SIGMOID))
    verify_rules([rule])
    (entry,) = list(_cache.glob("*.json"))
    data = json.loads(entry.read_text())
    why = "the sides differ in type: left float32[3], right float32[1]"
    cx = {"rewrite": "r", "why": why, "case": {}}
    data["proof"].update(status=REFUTED, counterexample=cx, counterexample_line=why)
    entry.write_text(json.dumps(data))
    (res,) = verify_rules([rule])
    assert res.status == REFUTED and "differ in type" in res.message(), res.message()
    cx["why"] = "the sides differ (confirmed in float64) for x: float32[1]"
    entry.write_text(json.dumps(data))
    (res,) = verify_rules([rule])
    assert res.status == APPROXIMATE, res.message()
