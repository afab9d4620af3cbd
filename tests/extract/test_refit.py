"""Where's calibration cases are masks as models compute them, and `calibrate --only` refits
one op's multipliers in an existing table without touching anything else."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rewrite.errors import RewriteError
from rewrite.extract.calib_cases import cases
from rewrite.extract.calibrate import Sample, predict
from rewrite.extract.calibrate_cli import add_calibrate_parser
from rewrite.extract.refit import ANCHORS, log_params, refit_keys
from rewrite.extract.table import DEFAULT_CPU, CalibrationTable, load_table, machine_key

WHERE_KEYS = {"Where", "Where:broadcast"}


@pytest.fixture(scope="module")
def conds() -> dict[str, np.ndarray]:
    """Where case name -> the condition it is fed, over every calibration case."""
    return {c.name: c.feeds["c"] for c in cases() if c.op == "Where"}


def is_prefix_mask(cond: np.ndarray) -> bool:
    """Every row along the last axis is some True positions then only False (causal rows,
    padding, all-true): no False followed by a True."""
    rows = cond.reshape(-1, cond.shape[-1]).astype(np.int8)
    return bool(np.all(np.diff(rows, axis=-1) <= 0))


def test_where_cases_are_realistic_masks(conds: dict[str, np.ndarray]) -> None:
    """Was: random 50% conditions, on which ORT's Where is 7-11x slower than on any mask a
    model computes (issue 11)."""
    assert len(conds) >= 6
    for name, cond in conds.items():
        assert cond.dtype == np.bool_ and is_prefix_mask(cond), name
        assert cond.all() or "all-true" not in name, name
    causal = conds["Where causal (1,1,128,128)->(1,12,128,128)"]
    assert causal.shape == (1, 1, 128, 128)
    assert np.array_equal(causal[0, 0], np.tril(np.ones((128, 128), dtype=bool)))
    padding = conds["Where padding (1,1,1,128)->(1,12,128,128)"]
    assert padding.shape == (1, 1, 1, 128) and 0 < padding.sum() < 128
    assert any(c.all() for c in conds.values())


def test_where_cases_cover_both_cost_keys(conds: dict[str, np.ndarray]) -> None:
    """The shipped table holds a sample of every Where case, under both cost keys."""
    table = load_table(DEFAULT_CPU)
    recorded = {r[0]: r[1] for r in table.fit["samples"]}
    names = set(conds)
    assert names <= set(recorded)
    assert {recorded[n] for n in names} == WHERE_KEYS
    assert not [n for n, k in recorded.items() if k in WHERE_KEYS and n not in names]


def test_shipped_table_prices_a_causal_mask_near_its_measured_time() -> None:
    """The refit recorded measured vs predicted µs for every case; a causal mask over
    (1, 12, 128, 128) scores is within 25% after, and was 3x over before."""
    refit = load_table(DEFAULT_CPU).fit["refits"][-1]
    assert set(refit["keys"]) == WHERE_KEYS
    rows = {r[0]: r[1:] for r in refit["raw_scaled_predicted_before_after_us"]}
    _, scaled, before, after = rows["Where causal (1,12,128,128)"]
    assert abs(after / scaled - 1) < 0.25 and before / scaled > 2


def synthetic(table: CalibrationTable, key: str, scale: float) -> list[Sample]:
    """Samples of `key` whose measured time is `scale` times the table's prediction."""
    keys = sorted(table.coeffs)
    p = log_params(table, keys)
    out = []
    for i, n in enumerate([1 << 14, 1 << 18, 1 << 21]):
        s = Sample(f"{key} #{i}", "Where", key, float(n), 13.0 * n, 0.0, 1.0)
        out.append(replace(s, measured_us=scale * predict(p, keys, s)[0]))
    return out


def test_refit_changes_only_the_refitted_keys() -> None:
    table = load_table(DEFAULT_CPU)
    samples = synthetic(table, "Where", 0.5) + synthetic(table, "Where:broadcast", 2.0)
    new = refit_keys(table, samples, 0.3, ["Where"])
    assert new.coeffs["Where"] == pytest.approx(0.5 * table.coeffs["Where"], rel=0.05)
    assert new.coeffs["Where:broadcast"] == pytest.approx(
        2.0 * table.coeffs["Where:broadcast"], rel=0.05
    )
    others = {k: v for k, v in table.coeffs.items() if k not in WHERE_KEYS}
    assert {k: v for k, v in new.coeffs.items() if k not in WHERE_KEYS} == others
    for name in ("peak_flops", "vector_flops", "bandwidth", "mem_bandwidth", "overhead"):
        assert getattr(new, name) == getattr(table, name)
    kept = [r for r in table.fit["samples"] if r[1] not in WHERE_KEYS]
    assert [r for r in new.fit["samples"] if r[1] not in WHERE_KEYS] == kept
    assert [r[0] for r in new.fit["samples"] if r[1] in WHERE_KEYS] == [s.name for s in samples]
    assert new.fit["n"] == len(kept) + len(samples)
    assert new.fit["refits"][-1]["after"] == {k: new.coeffs[k] for k in sorted(WHERE_KEYS)}


def test_refit_scales_new_times_by_the_anchors() -> None:
    """Anchors measured at half their recorded time: the new cases are read at twice theirs."""
    table = load_table(DEFAULT_CPU)
    recorded = {r[0]: r for r in table.fit["samples"]}
    anchors = [
        Sample(n, n.split()[0], recorded[n][1], *recorded[n][2:5], recorded[n][5] / 2)
        for n in ANCHORS
    ]
    samples = synthetic(table, "Where", 0.5)
    new = refit_keys(table, samples, 0.3, ["Where"], anchors)
    assert new.fit["refits"][-1]["anchor_ratio"] == pytest.approx(0.5)
    assert new.coeffs["Where"] == pytest.approx(table.coeffs["Where"], rel=0.05)


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_calibrate_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["calibrate", *argv])
    return args.func(args)


def test_refit_refuses_a_table_of_another_machine(tmp_path: Path) -> None:
    data = json.loads(DEFAULT_CPU.read_text())
    data["key"]["cpu"] = "another CPU"
    base = tmp_path / "other.json"
    base.write_text(json.dumps(data))
    with pytest.raises(RewriteError, match="measured on"):
        run_cli("--only", "Where", "--base", str(base), "--out", str(tmp_path / "out.json"))
    assert not (tmp_path / "out.json").exists()


def test_refit_measures_where_here(tmp_path: Path, conds: dict[str, np.ndarray]) -> None:
    """End to end, a few rounds: the base re-keyed to this machine, Where timed and refitted."""
    data = json.loads(DEFAULT_CPU.read_text())
    data["key"] = vars(machine_key("cpu", 1))
    base, out = tmp_path / "base.json", tmp_path / "out.json"
    base.write_text(json.dumps(data))
    assert run_cli("--only", "Where", "--base", str(base), "--out", str(out), "--rounds", "2") == 0
    new, old = load_table(out), load_table(base)
    assert {k for k in new.coeffs if new.coeffs[k] != old.coeffs[k]} <= WHERE_KEYS
    refit = new.fit["refits"][-1]
    assert refit["cases"] == len(conds) and refit["rounds"] == 2
    assert len(refit["anchors_recorded_measured_us"]) == len(ANCHORS)
    assert all(math.isfinite(v) and v > 0 for v in new.coeffs.values())
