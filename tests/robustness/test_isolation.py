"""Crash isolation: an egglog abort in the worker becomes a warning and the input graph.

The real abort: Add associativity + commutativity with every soft limit off and the worker's
address space capped, so egglog's allocator fails mid-iteration and Rust aborts (SIGABRT,
"memory allocation of N bytes failed"). Aborts at the other stages use the REWRITE_TEST_HOOK
hook (os.abort() when a stage starts), which only tests set.
"""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import onnx
import pytest

from rewrite.cli import EXIT_FALLBACK, main
from rewrite.pipeline import Options, optimize
from rewrite.rules.saturate import Limits
from tests.robustness.models import EXPLODE, add_chain, leftovers, mlp, write

UNBOUNDED = Limits(iterations=10**6, nodes=10**9, seconds=None, memory_mb=10**7, match_limit=10**9)


def _ops(path: Path) -> list[str]:
    return [n.op_type for n in onnx.load(str(path)).graph.node]


def test_real_egglog_abort_falls_back_to_the_input_graph(tmp_path: Path) -> None:
    src, dst = write(add_chain(16), tmp_path), tmp_path / "out.onnx"
    before = src.read_bytes()
    # No time limit either: a time budget would bound the iterations too.
    opts = Options(
        rulesets=[EXPLODE],
        prove_rules=False,  # EXPLODE's add_assoc is not exact in float32 (models.py)
        limits=UNBOUNDED,
        hard_memory_mb=700,
        time_limit=None,
    )
    report = optimize(src, dst, opts)
    assert report.status == "fallback"
    (warning,) = report.warnings
    assert "SIGABRT" in warning and "'saturate'" in warning, warning
    assert "memory allocation" in warning, warning  # egglog's own last words, quoted
    assert "input graph written instead" in warning
    assert src.read_bytes() == before
    onnx.checker.check_model(str(dst), full_check=True)
    assert _ops(dst) == ["Add"] * 16
    assert leftovers(tmp_path, {"in.onnx", "out.onnx"}) == set()


@pytest.mark.parametrize("stage", ["fold", "encode", "saturate", "extract", "decode", "verify"])
def test_abort_at_any_worker_stage(
    tmp_path: Path, stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = write(mlp(), tmp_path), tmp_path / "out.onnx"
    monkeypatch.setenv("REWRITE_TEST_HOOK", f"abort:{stage}")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(["optimize", str(src), str(dst)])
    assert rc == EXIT_FALLBACK
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rewrite: warning: "), lines
    assert "SIGABRT" in lines[0] and f"'{stage}'" in lines[0]
    assert "fallback" in out.getvalue()
    onnx.checker.check_model(str(dst), full_check=True)
    assert _ops(dst) == [n.op_type for n in mlp().graph.node]
    assert leftovers(tmp_path, {"in.onnx", "out.onnx"}) == set()


def test_worker_past_its_deadline_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = write(mlp(), tmp_path), tmp_path / "out.onnx"
    monkeypatch.setenv("REWRITE_TEST_HOOK", f"pause:saturate:{tmp_path / 'paused'}")
    report = optimize(src, dst, Options(time_limit=3.0))
    assert report.status == "fallback"
    assert report.saturation["limit_hit"] == "time_limit"
    assert any("time limit" in w and "'saturate'" in w for w in report.warnings), report.warnings
    assert sum(report.stages.values()) <= 3.0 * 1.1
    onnx.checker.check_model(str(dst), full_check=True)


def test_in_process_mode_still_works(tmp_path: Path) -> None:
    src, dst = write(mlp(), tmp_path), tmp_path / "out.onnx"
    report = optimize(src, dst, Options(isolate=False))
    assert report.status == "optimized" and "isolate" not in report.stages


def test_a_script_without_a_main_guard_is_not_rerun_in_the_worker(tmp_path: Path) -> None:
    """multiprocessing re-imports __main__ in forkserver children; the worker must not."""
    src = write(mlp(), tmp_path)
    script = tmp_path / "script.py"
    script.write_text(
        "from rewrite.pipeline import optimize\n"
        f"print('script body ran')\n"
        f"r = optimize({str(src)!r}, {str(tmp_path / 'out.onnx')!r})\n"
        "print(r.status)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["script body ran", "optimized"], done.stdout
