"""Ctrl-C and concurrent writers: never a partial output, never a temporary file left.

Ctrl-C is SIGINT to the whole process group of a `rewrite optimize` subprocess (as a terminal
sends it), at the start of a given stage (the REWRITE_TEST_HOOK pause hook makes the stage
wait there). Two writers of one output path are two subprocesses started together. The renames
themselves (their order, SIGINT held back, the folder lock) are tested in tests/test_publish.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest

from tests.robustness.models import leftovers, mlp, norm, write

REWRITE = Path(sys.executable).parent / "rewrite"
REPO = Path(__file__).resolve().parents[2]
FAST_STAGES = ["saturate", "save"]
ALL_STAGES = ["load", "fold", "encode", "saturate", "extract", "decode", "save", "verify"]


def _as_foreground_job() -> None:
    """In the child before exec: SIGINT handled by default, as for a terminal's foreground job.
    A shell starts background jobs (`pytest ... &`, a CI runner's) with SIGINT ignored, which
    exec keeps and Python then leaves alone: Ctrl-C would not reach `rewrite` at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_at(stage: str, tmp_path: Path) -> None:
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    src = write(mlp(), work)
    marker = tmp_path / "paused"
    env = {**os.environ, "REWRITE_TEST_HOOK": f"pause:{stage}:{marker}", "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [str(REWRITE), "optimize", str(src), str(work / "out.onnx")],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_as_foreground_job,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"stage {stage} was never reached"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (out, err)
    assert err.splitlines() == ["rewrite: interrupted; nothing was written"], err
    assert leftovers(work, {"in.onnx"}) == set()
    # (onnxruntime writes a `.ses` session-id file in TMPDIR: not ours)
    assert [f for f in os.listdir(tmp) if f.startswith("rewrite-")] == []


@pytest.mark.parametrize("stage", FAST_STAGES)
def test_ctrl_c_leaves_no_partial_output(stage: str, tmp_path: Path) -> None:
    _interrupt_at(stage, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("stage", [s for s in ALL_STAGES if s not in FAST_STAGES])
def test_ctrl_c_at_every_stage(stage: str, tmp_path: Path) -> None:
    _interrupt_at(stage, tmp_path)


def test_two_processes_writing_one_path(tmp_path: Path) -> None:
    a, b = write(mlp(), tmp_path, "a.onnx"), write(norm(), tmp_path, "b.onnx")
    dst = tmp_path / "out.onnx"
    procs = [
        subprocess.Popen([str(REWRITE), "optimize", str(m), str(dst), "-q"], cwd=REPO)
        for m in (a, b)
    ]
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    onnx.checker.check_model(str(dst), full_check=True)
    ops = [n.op_type for n in onnx.load(str(dst)).graph.node]
    assert ops in ([n.op_type for n in mlp().graph.node], [n.op_type for n in norm().graph.node])
    assert leftovers(tmp_path, {"a.onnx", "b.onnx", "out.onnx"}) == set()
