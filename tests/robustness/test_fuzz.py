"""Fuzzing `rewrite optimize` with broken models: it answers, it never crashes or lies.

Hypothesis draws cases from the shared generator (tests/robustness/mutations.py): seed models
with their structure mutated (dangling inputs, duplicate names, wrong dtypes, mismatched shapes,
cycles, an empty graph, a missing or strange opset import, huge dims, NaN/Inf constants, broken
attributes, unknown ops, dropped or rewired nodes) or their serialized bytes mutated
(truncation, flipped, inserted and deleted bytes, random files). Every case must keep the
contract of `tests.robustness.fuzzing.check_case`: exit 1 with one line, or a verified output
that also agrees with its input in the test's own ORT run, or the input graph written with
warnings; never a traceback, a modified input or a leftover. Each test checks how many cases
it ran and which endings were reached (all three for structural mutations; byte mutations
are refused or leave a valid model).

CI runs FUZZ_CASES cases (derandomized, so the same ones every run); REWRITE_FUZZ_SCALE=10
runs ten times as many, REWRITE_FUZZ_RANDOM=1 draws new ones. The outcome table (one row per
mutation kind) is printed and, with REWRITE_FUZZ_LOG=path, appended to that file as JSON.
`bench/robustness.py --only fuzz` runs these same tests and keeps going past a crash.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from hypothesis import HealthCheck, given, settings

from tests.robustness.fuzzing import FALLBACK, OPTIMIZED, REFUSED, TALLY, check_case
from tests.robustness.mutations import (
    SEED_BYTES,
    Case,
    byte_cases,
    generator_only,
    structure_cases,
)

SCALE = float(os.environ.get("REWRITE_FUZZ_SCALE", "1"))
STRUCTURE_CASES = int(600 * SCALE)
BYTES_CASES = int(1400 * SCALE)
FUZZ_CASES = STRUCTURE_CASES + BYTES_CASES
SETTINGS = settings(
    max_examples=1,  # replaced per test
    deadline=None,
    derandomize=not os.environ.get("REWRITE_FUZZ_RANDOM"),
    database=None,
    suppress_health_check=list(HealthCheck),
)


@settings(SETTINGS, max_examples=STRUCTURE_CASES)
@given(case=structure_cases())
def _structural(case: Case) -> None:
    check_case(case)


@settings(SETTINGS, max_examples=BYTES_CASES)
@given(case=byte_cases())
def _bytes(case: Case) -> None:
    check_case(case)


def test_structural_mutations() -> None:
    """Every case keeps the contract; all three endings are reached (exit 3 at least by the
    models whose symbolic dims were made too big to check)."""
    before = TALLY.outcomes("structure")
    with generator_only():  # the same cases here, in the whole suite and in the bench
        _structural()
    ran = TALLY.outcomes("structure") - before
    assert ran.total() == STRUCTURE_CASES, ran
    assert ran[REFUSED] > 0 and ran[OPTIMIZED] > 0 and ran[FALLBACK] > 0, ran


def test_byte_mutations() -> None:
    before = TALLY.outcomes("bytes")
    with generator_only():
        _bytes()
    ran = TALLY.outcomes("bytes") - before
    assert ran.total() == BYTES_CASES, ran
    assert ran[REFUSED] > 0 and ran[OPTIMIZED] > 0, ran


@pytest.mark.parametrize("seed", sorted(SEED_BYTES))
def test_every_seed_optimizes(seed: str) -> None:
    case = Case("structure", "seed (unmutated)", seed, (), SEED_BYTES[seed])
    assert check_case(case) == OPTIMIZED


def test_zz_report_outcomes() -> None:
    """Print (and with REWRITE_FUZZ_LOG, record) how the cases ended, per mutation kind."""
    print(f"\nfuzz: {TALLY.total()} cases: {json.dumps(TALLY.summary())}")
    print("\n".join(TALLY.table()))
    log = os.environ.get("REWRITE_FUZZ_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"time": time.time(), **TALLY.to_json()}) + "\n")
