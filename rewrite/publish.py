"""Putting outputs in place atomically: a staging folder beside the output, then renames.

Contract: a file at the output path is only ever replaced by a complete, checked model (and
its external data file from the same run). The staging folder is removed whatever happens,
Ctrl-C included. The renames run with SIGINT held back (an interrupt lands after the last one)
and under an exclusive lock on the output folder, so two processes writing one path take
turns: the model and its data file always come from the same writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rewrite.errors import ModelError


@contextmanager
def staging(dst: Path) -> Iterator[Path]:
    """A new temporary folder beside `dst`, removed afterwards whatever happens."""
    try:
        tmpdir = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    except OSError as e:
        raise ModelError(f"{dst}: cannot write in '{dst.parent}': {e.strerror or e}") from e
    try:
        yield tmpdir
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def clear(folder: Path) -> None:
    """Remove every file in `folder` (a staging folder being reused)."""
    for f in folder.iterdir():
        with contextlib.suppress(FileNotFoundError):
            f.unlink()


def rename_into_place(tmpdir: Path, dst: Path) -> None:
    """Move the staged files to `dst`'s folder: data files first, the model last."""
    files = sorted(tmpdir.iterdir(), key=lambda p: p.name == dst.name)
    with _sigint_deferred(), _folder_lock(dst.parent):
        for f in files:
            f.replace(dst.parent / f.name)


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # no lock where the folder cannot be opened; the renames still run
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
