"""Every file rewrite writes has the mode `open()` would give it: 0o666 & ~umask.

The model, its external data file, the report JSON, the proof cache and the calibration
tables are all written to a temporary file first (mkstemp makes those 0600) and renamed; the
optimizing worker is a fork-server child that must use the caller's umask, not the one the
fork server started with.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewrite.extract.table import DEFAULTS, load_table
from rewrite.files import current_umask, new_file_mode
from rewrite.isolate import warm_up
from rewrite.onnx_io import load, save
from rewrite.pipeline import Options, optimize
from rewrite.verify import cache
from tests.onnx_io import models

UMASK = 0o027
EXPECTED = 0o640


@pytest.fixture
def umask() -> Iterator[int]:
    """Run the test under UMASK; the previous umask is restored afterwards."""
    old = os.umask(UMASK)
    try:
        yield UMASK
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_current_umask_reads_without_changing_it(umask: int) -> None:
    assert current_umask() == umask
    assert new_file_mode() == EXPECTED
    assert current_umask() == umask


def test_model_and_report_follow_the_callers_umask(tmp_path: Path) -> None:
    src = models.save(models.mlp(), tmp_path / "in.onnx")
    old = os.umask(0o022)
    try:
        warm_up()  # the fork server starts (or already runs) under another umask
        os.umask(UMASK)
        report = optimize(src, tmp_path / "out.onnx", Options(rulesets=[], time_limit=120))
        report.write(tmp_path / "report.json")
    finally:
        os.umask(old)
    assert report.status == "optimized"
    assert mode(tmp_path / "out.onnx") == EXPECTED
    assert mode(tmp_path / "report.json") == EXPECTED


def test_external_data_file_follows_the_umask(tmp_path: Path, umask: int) -> None:
    src = models.save(models.mlp(), tmp_path / "in.onnx")
    save(load(src), tmp_path / "big.onnx", external=True)
    assert (tmp_path / "big.onnx.data").exists()
    assert mode(tmp_path / "big.onnx") == EXPECTED
    assert mode(tmp_path / "big.onnx.data") == EXPECTED


def test_proof_cache_follows_the_umask(
    tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWRITE_CACHE_DIR", str(tmp_path / "proofs"))
    cache.store("k" * 40, {"status": "proved"})
    assert cache.load("k" * 40) == {"status": "proved"}
    assert mode(tmp_path / "proofs" / f"{'k' * 40}.json") == EXPECTED
    assert sorted(p.name for p in (tmp_path / "proofs").iterdir()) == [f"{'k' * 40}.json"]


def test_calibration_table_follows_the_umask(tmp_path: Path, umask: int) -> None:
    table = load_table(DEFAULTS["cpu"])
    out = table.save(tmp_path / "cal" / "table.json")
    assert mode(out) == EXPECTED
    assert load_table(out).coeffs == table.coeffs
