"""Calibration: a quick run writes a table the cost model loads; keys, fallbacks, the default."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from rewrite.errors import RewriteError
from rewrite.extract import cost
from rewrite.extract.calib_cases import cases
from rewrite.extract.calibrate import Sample, build_table, calibrate, fit
from rewrite.extract.calibrate_cli import add_calibrate_parser
from rewrite.extract.cost import BUILTIN_CPU, load_target, node_costs
from rewrite.extract.snapshot import EClass, ENode, Snapshot
from rewrite.extract.table import (
    DEFAULT_CPU,
    DEFAULTS,
    ENV_TABLE,
    EP_OF,
    CalibrationTable,
    cache_path,
    find_table,
    load_table,
    machine_key,
)
from rewrite.ops.base import TensorType

F = 1


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user cache, and no table forced by the environment."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(ENV_TABLE, raising=False)
    return tmp_path / "rewrite"


@pytest.fixture(scope="module")
def quick_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[CalibrationTable, Path]:
    """One `rewrite calibrate --quick` through the CLI functions, written to a temp file."""
    out = tmp_path_factory.mktemp("cal") / "quick.json"
    parser = argparse.ArgumentParser()
    add_calibrate_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["calibrate", "--quick", "--out", str(out)])
    assert args.func(args) == 0
    return load_table(out), out


def ffn() -> Snapshot:
    """x (1, 128, 768) @ W (768, 3072) + b, then Erf: a GEMM, a broadcast Add and a unary op."""
    return Snapshot(
        {
            0: EClass(0, [ENode("Input", args=("x",))], TensorType(F, (1, 128, 768))),
            1: EClass(1, [ENode("Init", args=("w",))], TensorType(F, (768, 3072))),
            2: EClass(2, [ENode("MatMul", (0, 1))], TensorType(F, (1, 128, 3072))),
            3: EClass(3, [ENode("Init", args=("b",))], TensorType(F, (3072,))),
            4: EClass(4, [ENode("Add", (2, 3))], TensorType(F, (1, 128, 3072))),
            5: EClass(5, [ENode("Erf", (4,))], TensorType(F, (1, 128, 3072))),
        },
        roots=[5],
    )


def test_quick_calibration_is_small_and_writes_a_valid_table(quick_table) -> None:
    table, path = quick_table
    assert len(cases(quick=True)) <= 20
    assert table.key == machine_key("cpu", 1) and table.fit["quick"] is True
    assert {"MatMul", "Add", "com.microsoft.SkipLayerNormalization"} <= set(table.coeffs)
    assert all(0 < v < math.inf for v in table.coeffs.values())
    assert json.loads(path.read_text())["schema"] == 1


def test_cached_table_is_loaded_and_changes_costs(quick_table, cache: Path) -> None:
    table, _ = quick_table
    scaled = replace(table, coeffs={k: v * 3 for k, v in table.coeffs.items()})
    scaled.save(cache_path(table.key))
    found, note = find_table("cpu", 1)
    assert found is not None and found.coeffs == scaled.coeffs and note.startswith("cache")
    target = load_target("cpu")
    assert target.source.startswith("cache")
    calibrated = node_costs(ffn(), target)
    builtin = node_costs(ffn(), BUILTIN_CPU)
    changed = [k for k in calibrated if k[1].op in ("MatMul", "Add", "Erf")]
    assert changed and all(calibrated[k] != pytest.approx(builtin[k]) for k in changed)


def test_calibrate_writes_to_the_user_cache_by_default(cache: Path, monkeypatch) -> None:
    monkeypatch.setattr("rewrite.extract.calibrate.cases", lambda quick: cases(True)[:3])
    table = calibrate("cpu", quick=True)
    assert cache_path(table.key).exists() and cache_path(table.key).parent == cache
    assert find_table("cpu", 1)[1].startswith("cache")


def test_key_separates_ort_versions_threads_and_targets() -> None:
    one, two = machine_key("cpu", 1), machine_key("cpu", 2)
    other_ort = replace(one, ort="0.0.1")
    paths = {cache_path(k) for k in (one, two, other_ort, machine_key("cuda", 1))}
    assert len(paths) == 4
    assert one.ep == "CPUExecutionProvider" and machine_key("cuda").ep == "CUDAExecutionProvider"


def test_table_for_another_ort_version_or_thread_count_is_not_used(cache: Path) -> None:
    default = load_table(DEFAULT_CPU)
    stale = replace(default, key=replace(machine_key("cpu", 1), ort="0.0.1"), coeffs={"Add": 9.0})
    stale.save(cache_path(machine_key("cpu", 1)))  # right file name, wrong key inside
    table, note = find_table("cpu", 1)
    assert table is not None and table.coeffs == default.coeffs
    assert "key mismatch" in note and note.startswith("shipped default")
    four = replace(default, key=machine_key("cpu", 4), coeffs={"Add": 7.0})
    four.save(cache_path(four.key))
    assert find_table("cpu", 4)[0].coeffs == {"Add": 7.0}  # type: ignore[union-attr]
    assert find_table("cpu", 1)[0].coeffs == default.coeffs  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '{"schema": 1}', "", "BAD"],
    ids=["truncated", "list", "no-fields", "empty", "garbage"],
)
def test_corrupt_cache_falls_back_to_the_default(cache: Path, content: str) -> None:
    path = cache_path(machine_key("cpu", 1))
    path.parent.mkdir(parents=True)
    path.write_text(content)
    table, note = find_table("cpu", 1)
    assert table is not None and table.coeffs == load_table(DEFAULT_CPU).coeffs
    assert note.startswith("shipped default") and "skipped cache" in note
    assert load_target("cpu").source.startswith("shipped default")


def test_table_with_bad_numbers_is_refused(cache: Path) -> None:
    data = load_table(DEFAULT_CPU).to_json()
    for field, bad in [("bandwidth", -1.0), ("overhead", float("nan")), ("peak_flops", 0)]:
        broken = {**data, field: bad}
        with pytest.raises(ValueError, match="non-positive or non-finite"):
            CalibrationTable.from_json(broken)
    with pytest.raises(ValueError, match="non-positive"):
        CalibrationTable.from_json({**data, "coeffs": {"Add": 0.0}})


def test_missing_cache_and_env_paths(cache: Path, monkeypatch, tmp_path: Path) -> None:
    assert find_table("cpu", 1)[1].startswith("shipped default")
    monkeypatch.setenv(ENV_TABLE, str(tmp_path / "nowhere.json"))
    table, note = find_table("cpu", 1)
    assert table is not None and "nowhere.json: missing" in note
    monkeypatch.setenv(ENV_TABLE, "default")
    assert find_table("cpu", 1)[1].startswith("shipped default")
    target = load_target("cuda")  # no cuda table in the cache: the shipped H100 table
    assert target.source.startswith("shipped default") and "default_cuda.json" in target.source
    assert target.peak_flops > cost.BUILTIN_CPU.peak_flops


def test_missing_default_falls_back_to_builtin_constants(cache: Path, monkeypatch) -> None:
    monkeypatch.setitem(DEFAULTS, "cpu", cache / "none.json")
    target = load_target("cpu")
    assert target.peak_flops == BUILTIN_CPU.peak_flops and "missing" in target.source
    monkeypatch.setitem(DEFAULTS, "cuda", cache / "none.json")
    target = load_target("cuda")
    assert target.peak_flops == cost.BUILTIN_CUDA.peak_flops and "built-in" in target.source


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_shipped_default_loads_and_covers_the_ops_that_matter(target: str) -> None:
    table = load_table(DEFAULTS[target])
    assert table.key.threads == 1 and table.key.ep == EP_OF[target]
    assert table.fit["n"] >= 100 and not table.fit.get("quick")
    needed = {"MatMul", "MatMul:activations", "Gemm", "Conv", "Conv:grouped", "Add", "Mul",
              "Softmax", "LayerNormalization", "Transpose", "Gather", "Where", "Erf",
              "com.microsoft.SkipLayerNormalization", "com.microsoft.Gelu",
              "com.microsoft.FusedMatMul"}  # fmt: skip
    assert needed <= set(table.coeffs)
    assert table.fit["median_abs_rel_error"] < 0.25


def test_fit_recovers_a_known_roofline() -> None:
    """Samples made by the model itself are fitted back to (nearly) zero error."""
    truth = {"peak": 70e3, "vec": 12e3, "bw": 20e3, "mem": 8e3, "o": 0.5}  # per µs
    coeffs = {"MatMul": 0.8, "Add": 1.3, "Erf": 2.0}
    rows = [("MatMul", 2 * m * 768 * 768, (2 * m * 768 + 768 * 768) * 4, 768 * 768 * 4)
            for m in (1, 16, 128, 512)]  # fmt: skip
    rows += [("Add", 1e5 * k, 1.2e6 * k, 0.0) for k in (0.01, 1, 4)]
    rows += [("Erf", 4e5 * k, 8e5 * k, 0.0) for k in (0.01, 1, 4)]
    samples = []
    for i, (op, flops, nbytes, weights) in enumerate(rows):
        rate = truth["peak"] if op == "MatMul" else truth["vec"]
        memory = (nbytes - weights) / truth["bw"] + weights / truth["mem"]
        t = max(flops / rate, memory) * coeffs[op] + truth["o"]
        samples.append(Sample(f"s{i}", op, op, flops, nbytes, weights, t))
    _, keys = fit(samples)
    table = build_table(samples, "cpu", 1, node_us=0.5)
    assert keys == sorted(coeffs)
    assert table.fit["rms_log_error"] < 0.02


def test_cuda_without_its_provider_is_a_clear_error() -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("CUDA is available here")
    with pytest.raises(RewriteError, match="CUDAExecutionProvider is not available"):
        calibrate("cuda", quick=True, out=Path("/nonexistent/never-written.json"))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(RewriteError, match="unknown target"):
        calibrate("tpu")
    with pytest.raises(RewriteError, match="threads"):
        calibrate("cpu", threads=0)
