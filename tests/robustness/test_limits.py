"""Limits are kept: e-nodes (overshoot <= 10%), memory, saturation time, whole-run time.

Each limit is hit on purpose with `EXPLODE` (Add associativity + commutativity), which grows an
e-graph without end; the run must stop within the limit, keep what it has, produce a verified
model and say in the report which limit stopped it.
"""

from __future__ import annotations

import time
from pathlib import Path

import onnx
import pytest

from rewrite.egraph.encode import Encoded, encode
from rewrite.limits import rss_mb
from rewrite.onnx_io import load
from rewrite.pipeline import Options, optimize
from rewrite.rules.saturate import NODE_OVERSHOOT, RULES, Limits, egraph_size, install, saturate
from rulesets.cleanup import CLEANUP
from tests.conftest import corpus_model
from tests.robustness.models import EXPLODE, add_chain, write

NO_LIMIT = 10**9


def chain(tmp_path: Path, n: int = 12) -> Encoded:
    return encode(load(write(add_chain(n), tmp_path)))


def test_the_rule_set_explodes_without_the_driver(tmp_path: Path) -> None:
    """Plain egglog iterations jump far past a limit in one step: the bound below matters."""
    enc = chain(tmp_path)
    install(enc, [EXPLODE])
    sizes = [egraph_size(enc.egraph)]
    while sizes[-1] < 2000:
        enc.egraph.parse_and_run_program(f"(run-schedule (run {RULES}))")
        sizes.append(egraph_size(enc.egraph))
    assert sizes[-1] > 2000 * (1 + NODE_OVERSHOOT) * 2, sizes


@pytest.mark.parametrize("nodes", [300, 2000, 8000])
def test_node_limit_overshoot_is_at_most_ten_percent(tmp_path: Path, nodes: int) -> None:
    stats = saturate(chain(tmp_path), [EXPLODE], Limits(iterations=200, nodes=nodes))
    assert stats.stop_reason == "node_limit" and stats.limit_hit == "node_limit"
    assert max(stats.sizes) <= nodes * (1 + NODE_OVERSHOOT), stats.sizes
    assert stats.overshoot <= NODE_OVERSHOOT
    assert stats.throttled, "the exploding rules were never held back"
    assert stats.bounded_iterations > 0


def test_a_limit_already_passed_runs_no_iteration(tmp_path: Path) -> None:
    enc = chain(tmp_path)
    stats = saturate(enc, [EXPLODE], Limits(nodes=5))
    assert stats.stop_reason == "node_limit" and stats.iterations == 0
    assert stats.sizes == [egraph_size(enc.egraph)]


def test_memory_limit_stops_saturation(tmp_path: Path) -> None:
    enc = chain(tmp_path, 14)
    limit = rss_mb() + 40
    stats = saturate(enc, [EXPLODE], Limits(iterations=500, nodes=NO_LIMIT, memory_mb=limit))
    assert stats.stop_reason == "memory_limit", stats.to_json()
    assert stats.peak_rss_mb <= limit * 1.1
    assert stats.sizes[-1] > stats.sizes[0]  # it did use what it had


@pytest.mark.parametrize("seconds", [0.5, 2.0])
def test_saturation_time_limit(tmp_path: Path, seconds: float) -> None:
    enc = chain(tmp_path, 14)
    t = time.monotonic()
    stats = saturate(enc, [EXPLODE], Limits(iterations=500, nodes=NO_LIMIT, seconds=seconds))
    elapsed = time.monotonic() - t
    assert stats.stop_reason == "time_limit", stats.to_json()
    assert stats.seconds <= seconds * 1.1 + 0.05, stats.iteration_seconds
    assert elapsed <= seconds * 1.1 + 0.2  # install and the first shape run included


def test_deadline_reserves_time_for_the_e_graph_left(tmp_path: Path) -> None:
    """With 1 ms per e-node reserved, saturation stops while size * 1 ms still fits."""
    enc = chain(tmp_path, 14)
    deadline = time.monotonic() + 3.0
    stats = saturate(
        enc,
        [EXPLODE],
        Limits(iterations=500, nodes=NO_LIMIT, seconds=None),
        deadline=deadline,
        seconds_per_node=1e-3,
    )
    assert stats.stop_reason == "time_limit", stats.to_json()
    assert time.monotonic() + stats.sizes[-1] * 1e-3 <= deadline + 0.3


def test_normal_rules_are_not_throttled(tmp_path: Path) -> None:
    """A model with nothing explosive saturates: the bounds cost nothing there."""
    stats = saturate(chain(tmp_path, 6), [CLEANUP], Limits())
    assert stats.stop_reason == "saturated"
    assert stats.bounded_iterations == 0 and not stats.throttled


@pytest.mark.parametrize("limit", [6.0, 12.0])
def test_whole_run_time_limit(tmp_path: Path, limit: float) -> None:
    """`time_limit` bounds load to save; the explosion is cut, the result is verified."""
    src, dst = write(add_chain(16), tmp_path), tmp_path / "out.onnx"
    opts = Options(
        rulesets=[EXPLODE, CLEANUP],
        prove_rules=False,  # EXPLODE's add_assoc is not exact in float32 (models.py)
        limits=Limits(iterations=NO_LIMIT, nodes=NO_LIMIT, seconds=None),
        time_limit=limit,
    )
    t = time.monotonic()
    report = optimize(src, dst, opts)
    elapsed = time.monotonic() - t
    assert elapsed <= limit * 1.1, (elapsed, report.stages)
    assert report.status == "optimized", report.warnings
    assert report.verification["ok"] is True
    assert report.saturation["limit_hit"] in ("time_limit", "memory_limit"), report.saturation
    onnx.checker.check_model(str(dst), full_check=True)


def test_report_names_the_limit(tmp_path: Path) -> None:
    src, dst = write(add_chain(10), tmp_path), tmp_path / "out.onnx"
    report = optimize(
        src, dst, Options(rulesets=[EXPLODE], limits=Limits(nodes=500), prove_rules=False)
    )
    assert report.status == "optimized"
    assert report.saturation["stop_reason"] == "node_limit"
    assert report.saturation["limit_hit"] == "node_limit"
    assert max(report.saturation["egraph_sizes"]) <= 550
    assert "node_limit" in report.summary()


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [20_000, 200_000])
def test_exploding_rules_on_gpt2_finish_within_limits(tmp_path: Path, nodes: int) -> None:
    """The acceptance case: Add assoc + comm on gpt2 stops within its limits, usable."""
    limit = 120.0
    dst = tmp_path / "out.onnx"
    opts = Options(
        rulesets=[EXPLODE, CLEANUP],
        prove_rules=False,  # EXPLODE's add_assoc is not exact in float32 (models.py)
        limits=Limits(iterations=200, nodes=nodes, seconds=None),
        time_limit=limit,
    )
    t = time.monotonic()
    report = optimize(corpus_model("gpt2.onnx"), dst, opts)
    elapsed = time.monotonic() - t
    sat = report.saturation
    print(
        f"\ngpt2 explode nodes={nodes}: {elapsed:.1f} s, {sat['stop_reason']}, sizes "
        f"{sat['egraph_sizes']}, peak RSS {report.peak_rss_mb:.0f} MB, stages {report.stages}"
    )
    assert report.status == "optimized", report.warnings
    assert report.verification["ok"] is True
    assert max(sat["egraph_sizes"]) <= nodes * (1 + NODE_OVERSHOOT)
    assert sat["stop_reason"] in ("node_limit", "memory_limit", "time_limit", "saturated")
    assert elapsed <= limit * 1.1
