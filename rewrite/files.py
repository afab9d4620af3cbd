"""Files rewrite writes: created with mode `0o666 & ~umask`, as `open()` would, and replaced
atomically.

Every file we write (the model and its data file, the report JSON, the proof cache, the
calibration tables) is first written to a temporary file beside its destination and then
renamed over it. `tempfile.mkstemp` creates such files 0600 whatever the umask; the helpers
here give them the mode a plain `open(path, "w")` would have given, so that an output is as
readable as every other file the user's umask lets them create.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it where the kernel reports it (Linux
    /proc); elsewhere set and restored under a lock (os.umask has no read-only form)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode `open(path, "w")` gives a new file: 0o666 & ~umask."""
    return 0o666 & ~current_umask()


def make_temp(folder: str | os.PathLike[str], prefix: str, suffix: str = "") -> Path:
    """A new empty file in `folder` with `new_file_mode()` (mkstemp's 0600 widened to it).
    The caller removes or renames it. OSError when the folder cannot be written."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=suffix)
    try:
        os.fchmod(fd, new_file_mode())
    finally:
        os.close(fd)
    return Path(name)


@contextmanager
def atomic_text(path: str | os.PathLike[str]) -> Iterator[IO[str]]:
    """Write text to `path` atomically: a temporary file beside it (mode `new_file_mode()`)
    that replaces `path` when the block ends without an exception, and is removed otherwise.
    OSError when the folder cannot be written."""
    dst = Path(path)
    tmp = make_temp(dst.parent if str(dst.parent) else ".", prefix=f".{dst.name}.", suffix=".tmp")
    try:
        with open(tmp, "w") as f:
            yield f
        os.replace(tmp, dst)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
