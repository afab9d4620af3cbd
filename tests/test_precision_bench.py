"""`bench/precision.py`'s verdict: the issue's bar, per ORT variant, at equal or lower error."""

from __future__ import annotations

from bench.precision import verdict


def _row(speed: dict[str, float], error: dict[str, float]) -> dict:
    return {"speedup": {"input": 1.0, **speed}, "error": {"input": 0.0, **error}}


def test_ours_at_an_ort_variants_error_must_be_as_fast_as_it() -> None:
    row = _row(
        {"ort_dynamic": 0.2, "ort_static": 3.3, "rewrite": 1.1, "rewrite@ort_static": 3.27},
        {"ort_dynamic": 0.048, "ort_static": 0.058, "rewrite": 0.009, "rewrite@ort_static": 0.054},
    )
    assert verdict(row, 0.01) == "ok"  # 3.27 is within 2% of 3.3, at lower error
    row["speedup"]["rewrite@ort_static"] = 2.7
    assert verdict(row, 0.01) == "slower than ort_static at <= its error"


def test_a_slow_ort_variant_is_matched_by_the_exact_input() -> None:
    row = _row({"ort_dynamic": 0.1, "rewrite": 1.2}, {"ort_dynamic": 0.004, "rewrite": 0.007})
    assert verdict(row, 0.01) == "ok"  # no output of ours at 0.004, but the input: 1x > 0.1x


def test_over_budget_and_slower_than_the_input_are_named() -> None:
    row = _row({"rewrite": 0.9}, {"rewrite": 0.02})
    assert verdict(row, 0.01) == "SLOWER than input, over budget"
