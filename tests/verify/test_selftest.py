"""Every typed op's numpy reference and Z3 semantics agree with ONNX Runtime on special values
(`verify.selftest`, `rewrite verify --self-test`)."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from rewrite.ops import registry
from rewrite.verify.command import add_verify_parser
from rewrite.verify.selftest import OpRow, label, self_test, typed_specs

KNOWN = {
    "FastGelu": "float64: ORT's kernel is accurate to about 1e-7 relative (float32-level) "
    "where the reference and Z3 compute in float64 (tolerance 1e-9); rules are not compiled "
    "for float64 FastGelu (outside every non-cast rule's proved domain)",
}
"""Ops whose semantics do not match ORT yet, and why."""


def _row(name: str) -> OpRow:
    (row,) = self_test([name])
    return row


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            label(s.name, s.domain),
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN[s.name])] if s.name in KNOWN else [],
        )
        for s in typed_specs()
    ],
)
def test_semantics_match_ort_on_special_values(name: str) -> None:
    row = _row(name)
    print(f"{name}: {row.cases} input sets, {row.reference_mismatches} reference and "
          f"{row.z3_mismatches} Z3 mismatches; {row.details[:1]}")  # fmt: skip
    assert row.cases > 0, f"{name}: no input set ORT runs"
    assert row.ok, "\n".join(row.details)


@pytest.fixture
def _swap(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def swap(op: str, **fields: object) -> None:
        spec = registry.lookup(op)
        assert spec is not None
        monkeypatch.setitem(registry._SPECS, spec.key, replace(spec, **fields))

    return swap


def test_a_wrong_z3_semantics_is_caught(_swap) -> None:  # type: ignore[no-untyped-def]
    neg = registry.lookup("Neg")
    assert neg is not None
    _swap("Relu", z3=neg.z3)  # Relu "is" Neg
    row = _row("Relu")
    assert row.z3_mismatches > 0 and row.reference_mismatches == 0
    assert "Z3 vs ORT" in row.details[0]


def test_a_wrong_reference_is_caught(_swap) -> None:  # type: ignore[no-untyped-def]
    ident = registry.lookup("Identity")
    assert ident is not None
    _swap("Neg", reference=ident.reference)  # Neg "is" the identity
    row = _row("Neg")
    assert row.reference_mismatches > 0 and "reference vs ORT" in row.details[0]


@pytest.mark.slow  # the whole self-test (~55 s on 2 cores); each op's row runs above
def test_rewrite_verify_self_test_prints_the_table_and_fails_on_a_mismatch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser(prog="rewrite")
    add_verify_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["verify", "--self-test"])
    status = int(args.func(args))
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["op", "cases", "reference", "z3", "status"]
    for spec in typed_specs():
        assert any(line.split()[:1] == [label(spec.name, spec.domain)] for line in lines[1:])
    assert status == (1 if "MISMATCH" in out else 0)
    assert "match ORT" in out
