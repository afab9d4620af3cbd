"""Putting outputs in place (`rewrite.publish`): the order of the renames, SIGINT held back
across them, and the folder lock that keeps one writer's model and data file together.

Every staged output here is a real ONNX model with its weights in an external data file
(`m.onnx` + `m.onnx.data`), tagged with the writer and the run: the model's doc string names
the tag and every weight equals it, so a reader can tell a model from another run's data.
"""

from __future__ import annotations

import ctypes
import fcntl
import multiprocessing
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewrite.errors import RewriteError
from rewrite.publish import rename_into_place, staging

if TYPE_CHECKING:
    from multiprocessing.synchronize import Barrier

REPO = Path(__file__).resolve().parents[1]
NAME = "m.onnx"
DATA = NAME + ".data"


def tagged_model(tag: int) -> onnx.ModelProto:
    """Y = X + W, W 1,024 floats all equal to `tag`; the doc string says `tag`."""
    w = numpy_helper.from_array(np.full(1024, float(tag), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "W"], ["Y"])],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1024])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1024])],
        [w],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], doc_string=str(tag))
    m.ir_version = 8
    return m


def stage(folder: Path, tag: int) -> Path:
    """A staging folder beside `folder / NAME` holding the model tagged `tag` and its data."""
    staged = folder / f".stage-{tag}"
    staged.mkdir()
    onnx.save_model(
        tagged_model(tag), staged / NAME, save_as_external_data=True, location=DATA,
        size_threshold=0,
    )  # fmt: skip
    assert sorted(os.listdir(staged)) == [NAME, DATA]
    return staged


def read_tag(path: Path) -> tuple[int, int]:
    """(the model's tag, the tag of the weights it reads from its data file)."""
    m = onnx.load(str(path))  # loads the external data from the model's folder
    (w,) = m.graph.initializer
    values = np.unique(numpy_helper.to_array(w))
    assert values.size == 1, f"{path}: weights from several writers: {values}"
    return int(m.doc_string), int(values[0])


# -- the order: data files first, the model last ------------------------------------------------

IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100


def _moved_in(folder: Path, action: object) -> list[str]:
    """The names moved into `folder` while `action()` runs, in order (Linux inotify)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    try:
        wd = libc.inotify_add_watch(fd, os.fsencode(folder), IN_MOVED_TO | IN_CREATE)
        assert wd >= 0, os.strerror(ctypes.get_errno())
        action()  # type: ignore[operator]
        buf = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    names, i = [], 0
    while i < len(buf):
        _, mask, _, length = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16 : i + 16 + length].rstrip(b"\0").decode()
        names.append(name if mask & IN_MOVED_TO else f"created {name}")
        i += 16 + length
    return names


def test_the_data_file_is_in_place_before_the_model_appears(tmp_path: Path) -> None:
    """A reader that sees the new model finds its data file: the model is renamed last."""
    staged = stage(tmp_path, 1)
    # (a second data file named to sort after the model, so no name order gives this one)
    (staged / "z.bin").write_bytes(b"more data")
    events = _moved_in(tmp_path, lambda: rename_into_place(staged, tmp_path / NAME))
    assert sorted(events) == sorted([NAME, DATA, "z.bin"]), events
    assert events[-1] == NAME, f"the model was not renamed last: {events}"
    assert read_tag(tmp_path / NAME) == (1, 1)


def test_a_failed_data_rename_leaves_no_model_behind(tmp_path: Path) -> None:
    """When the data file cannot be put in place, no model at the output path points at a
    missing data file: the model is only renamed after its data."""
    staged = stage(tmp_path, 1)
    (tmp_path / DATA).mkdir()  # a folder in the way: renaming the data file onto it fails
    (tmp_path / DATA / "keep").write_text("not empty")
    with pytest.raises((OSError, RewriteError)):
        rename_into_place(staged, tmp_path / NAME)
    assert not (tmp_path / NAME).exists(), "a model was put in place without its data file"


# -- SIGINT held back ---------------------------------------------------------------------------

_CHILD = """
import os, sys
from pathlib import Path
from rewrite.publish import rename_into_place
staged, dst = Path(sys.argv[1]), Path(sys.argv[2])
try:
    rename_into_place(staged, dst)
except KeyboardInterrupt:
    print("interrupted after:", " ".join(sorted(os.listdir(dst.parent))), flush=True)
    sys.exit(130)
print("not interrupted", flush=True)
"""


def _waits_for_lock(pid: int) -> bool:
    """Whether `pid` is blocked waiting for a lock (a `->` line of /proc/locks)."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and str(pid) in fields:
            return True
    return False


def test_ctrl_c_during_the_renames_lands_after_the_last_one(tmp_path: Path) -> None:
    """SIGINT arriving while a writer is inside `rename_into_place` (here: waiting for the
    folder lock that this test holds) is delivered only after every file is in place."""
    staged = stage(tmp_path, 7)
    folder_fd = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(folder_fd, fcntl.LOCK_EX)  # the writer will wait for this, SIGINT held back
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(staged), str(tmp_path / NAME)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        while not _waits_for_lock(proc.pid):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the writer never waited for the folder lock"
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)  # the signal is pending in the writer, not yet acted on
        assert proc.poll() is None, proc.communicate()
    finally:
        os.close(folder_fd)  # releases the lock: the writer goes on
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert out.split() == ["interrupted", "after:", ".stage-7", NAME, DATA], out
    assert read_tag(tmp_path / NAME) == (7, 7)


# -- the folder lock: concurrent writers --------------------------------------------------------

WRITERS, ROUNDS = 3, 60


def _writer(folder: str, index: int, barrier: Barrier) -> None:
    """Each round: stage a tagged model, start renaming with the others, then check (writer
    0) that the output's model and data file come from one writer."""
    out = Path(folder) / NAME
    for r in range(ROUNDS):
        tag = 1000 * r + index
        with staging(out) as tmp:
            onnx.save_model(
                tagged_model(tag), tmp / NAME, save_as_external_data=True, location=DATA,
                size_threshold=0,
            )  # fmt: skip
            barrier.wait()
            rename_into_place(tmp, out)
        barrier.wait()
        if index == 0:
            try:
                model_tag, data_tag = read_tag(out)
                assert model_tag == data_tag, f"round {r}: model {model_tag}, data {data_tag}"
                assert model_tag // 1000 == r
            except BaseException:
                barrier.abort()  # the others stop at once instead of waiting
                raise
        barrier.wait()


def test_concurrent_writers_leave_one_writers_model_and_data(tmp_path: Path) -> None:
    """Three writers publish to one path at the same moment, round after round: after each
    round the model and its data file come from the same writer (without the folder lock, a
    writer's data lands between another's data and model within a few rounds)."""
    ctx = multiprocessing.get_context("forkserver")
    barrier = ctx.Barrier(WRITERS, timeout=120)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), i, barrier)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WRITERS, "a round mixed two writers' files"
    assert sorted(os.listdir(tmp_path)) == [NAME, DATA]


class _RacedFolder(type(Path())):  # type: ignore[misc]
    """A folder another process empties while we list it: every listed entry is gone by the
    time it is unlinked (as when two cleanups of one staging folder overlap)."""

    def iterdir(self):  # type: ignore[no-untyped-def]
        names = list(super().iterdir())
        for f in names:
            f.unlink()
        yield from names


def test_clear_tolerates_files_another_process_removed(tmp_path: Path) -> None:
    from rewrite.publish import clear

    for name in ("m.onnx", "m.onnx.data"):
        (tmp_path / name).write_bytes(b"x")
    clear(_RacedFolder(tmp_path))  # FileNotFoundError for each entry, suppressed
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "left.onnx").write_bytes(b"x")
    clear(tmp_path)
    assert list(tmp_path.iterdir()) == []
