"""Crash isolation: the pipeline's stages run in a worker process the caller can lose.

egglog is Rust: an allocation failure or a panic outside its error paths aborts the process
(SIGABRT), which no `except` catches; ONNX Runtime and onnx's C++ code can crash on broken
models too. So `rewrite.pipeline` runs its jobs (`rewrite.stages`) in workers forked from a
`forkserver`: a clean, single-threaded process that preloads the stages once, so a worker
starts in ~15 ms instead of the ~2.5 s of a fresh interpreter. A worker that dies, or runs
past the caller's deadline, comes back as an `Outcome` whose `failure` says how (the signal or
exit status, the stage it had reported starting, and the telling line of its stderr).

Worker contract: SIGINT is ignored (the caller handles Ctrl-C and ends the worker); its stderr
goes to a temporary file that `Worker.close` removes; its address space is capped
(`hard_memory_mb`), so a runaway allocation fails inside the worker; it does not re-run the
caller's `__main__` (multiprocessing would, for a script without a `__main__` guard).
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import popen_forkserver, spawn
from multiprocessing.context import ForkServerContext, ForkServerProcess
from pathlib import Path
from typing import Any

from rewrite.files import current_umask
from rewrite.limits import cap_address_space

_PRELOAD = [
    "rewrite.stages",
    "rewrite.extract.select",
    "rewrite.verify.gate",
    "rulesets.cleanup",
    "rulesets.ort",
]
"""Imported once by the fork server, so workers start with them (what the jobs import lazily
included: ~90 ms a worker). A module that fails to import is skipped by the server."""
_TEST_HOOK = "REWRITE_TEST_HOOK"
"""Tests only: `abort:STAGE` aborts the worker (os.abort) when STAGE starts;
`pause:STAGE:FILE` creates FILE and sleeps when STAGE starts (parent or worker)."""
_PASSED_ENV = (_TEST_HOOK, "REWRITE_DEBUG")
"""Variables the worker takes from its parent as they are now (a forkserver child otherwise
has the environment the fork server was started with)."""
_CONTEXT: ForkServerContext | None = None
_IN_WORKER = False


def in_worker() -> bool:
    """True inside a worker process (which exits without freeing what its job kept)."""
    return _IN_WORKER


def context() -> ForkServerContext:
    """The forkserver context, its server preloading the pipeline (started on first use)."""
    global _CONTEXT
    if _CONTEXT is None:
        ctx = multiprocessing.get_context("forkserver")
        assert isinstance(ctx, ForkServerContext)
        ctx.set_forkserver_preload(_PRELOAD)
        _CONTEXT = ctx
    return _CONTEXT


def warm_up() -> None:
    """Start the fork server now (it preloads in the background); returns at once."""
    context()
    from multiprocessing import forkserver

    with contextlib.suppress(Exception):  # isolation then starts it later, or falls back
        forkserver.ensure_running()


def stage_hook(stage: str, *, worker: bool) -> None:
    """Test hook (inert unless REWRITE_TEST_HOOK is set): pause or abort at `stage`."""
    spec = os.environ.get(_TEST_HOOK)
    if not spec:
        return
    action, _, rest = spec.partition(":")
    where, _, arg = rest.partition(":")
    if where != stage:
        return
    if action == "abort" and worker:
        os.abort()
    if action == "pause":
        Path(arg).touch()
        time.sleep(60)


class _Popen(popen_forkserver.Popen):
    """Starts a forkserver child without re-running the parent's `__main__` in it.

    multiprocessing re-imports the main script in every spawned or forkserver child so that
    functions defined there can be unpickled; a user's script without a `__main__` guard would
    then run again inside the worker. Our worker needs nothing from `__main__`.
    """

    def _launch(self, process_obj: Any) -> None:
        real = spawn.get_preparation_data

        def preparation_data(name: str) -> dict[str, Any]:
            data = real(name)
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
            return data

        spawn.get_preparation_data = preparation_data  # type: ignore[assignment]
        try:
            super()._launch(process_obj)  # type: ignore[misc]  # untyped CPython internals
        finally:
            spawn.get_preparation_data = real  # type: ignore[assignment]


class _Process(ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> _Popen:
        return _Popen(process_obj)


@dataclass
class Job:
    """What the worker needs: the model path, the work function and its arguments."""

    run: Callable[..., Any] | str
    """Called in the worker as run(*args, progress=callback); its return value is sent back.
    A "module:function" string is imported in the worker (the parent need not import it)."""
    args: tuple[Any, ...]
    hard_memory_mb: float | None
    stderr_path: str
    env: dict[str, str | None] = field(default_factory=dict)
    umask: int | None = None
    """The parent's umask, for the files the job writes (a forkserver child otherwise has the
    fork server's, from when it started)."""


@dataclass
class Outcome:
    """The worker's result, or why there is none."""

    value: Any = None
    ok: bool = False
    stage: str = "start"
    """The last stage the worker reported starting."""
    failure: str = ""
    """Why there is no value: one line naming the signal or exit status and the stage."""
    timed_out: bool = False
    seconds: float = 0.0
    startup_seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)


def _worker_main(job: Job, conn: multiprocessing.connection.Connection) -> None:
    """Entry point of the worker process."""
    global _IN_WORKER
    _IN_WORKER = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for key, value in job.env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if job.umask is not None:
        os.umask(job.umask)
    fd = os.open(job.stderr_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 2)
    os.close(fd)
    if job.hard_memory_mb:
        with contextlib.suppress(ValueError, OSError):
            cap_address_space(job.hard_memory_mb)
    conn.send(("started", time.monotonic()))

    def progress(stage: str) -> None:
        conn.send(("stage", stage))
        stage_hook(stage, worker=True)

    value = resolve(job.run)(*job.args, progress=progress)
    conn.send(("done", value))
    conn.close()
    # Exit now: freeing what the job kept (a model's weights, GBs) would only delay the end.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def resolve(run: Callable[..., Any] | str) -> Callable[..., Any]:
    """`run`, or the function a "module:function" string names."""
    if not isinstance(run, str):
        return run
    module, _, name = run.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


class Worker:
    """One worker process running `job`; `result()` waits for it, `close()` ends it."""

    def __init__(
        self,
        run: Callable[..., Any] | str,
        args: tuple[Any, ...],
        *,
        hard_memory_mb: float | None = None,
    ) -> None:
        ctx = context()
        self.t0 = time.monotonic()
        fd, self.stderr_path = tempfile.mkstemp(prefix="rewrite-worker-", suffix=".log")
        os.close(fd)
        self.conn, child = ctx.Pipe(duplex=False)
        self.outcome = Outcome()
        env = {key: os.environ.get(key) for key in _PASSED_ENV}
        job = Job(run, args, hard_memory_mb, self.stderr_path, env, current_umask())
        self.proc = _Process(target=_worker_main, args=(job, child), daemon=True)
        try:
            self.proc.start()
        except BaseException:
            self.close()
            raise
        finally:
            child.close()

    def result(self, kill_at: float | None = None) -> Outcome:
        """Wait for the worker (until the monotonic time `kill_at`, then end it)."""
        out = self.outcome
        while True:
            timeout = None if kill_at is None else max(0.0, kill_at - time.monotonic())
            ready = multiprocessing.connection.wait([self.conn, self.proc.sentinel], timeout)
            if not ready:
                self._stop()
                out.timed_out = True
                out.failure = f"it was still running ('{out.stage}') at its deadline: stopped"
                break
            if self.conn in ready or self.conn.poll():
                try:
                    kind, payload = self.conn.recv()
                except (EOFError, OSError):
                    out.failure = self._death()
                    break
                if kind == "started":
                    out.startup_seconds = payload - self.t0
                elif kind == "stage":
                    out.stage = payload
                elif kind == "done":
                    out.value, out.ok = payload, True
                    break  # no need to wait for its exit: close() ends it if it lingers
                continue
            out.failure = self._death()
            break
        out.seconds = time.monotonic() - self.t0
        return out

    def _death(self) -> str:
        """Why the worker ended without a result: its signal or exit status, stage, stderr."""
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        if code is None:
            self._stop()
            code = self.proc.exitcode
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        why = self._stderr_tail()
        return f"it {how} during '{self.outcome.stage}'" + (f" ({why})" if why else "")

    def _stderr_tail(self) -> str:
        """The most telling line of the worker's stderr (egglog's panic or allocation error)."""
        try:
            text = Path(self.stderr_path).read_text(errors="replace")[-20000:]
        except OSError:
            return ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        for ln in reversed(lines):
            low = ln.lower()
            if "memory allocation" in low or "panicked" in low or "error" in low:
                return ln[:300]
        skip = ("stack backtrace", "note:", "at ")
        lines = [ln for ln in lines if not ln.startswith(skip) and not ln[:1].isdigit()]
        return lines[-1][:300] if lines else ""

    def _stop(self) -> None:
        """End the worker: SIGTERM, then SIGKILL if it is still there a second later."""
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=1)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)

    def close(self) -> None:
        """Stop the worker if it runs and remove its temporary file (idempotent)."""
        with contextlib.suppress(Exception):
            if self.outcome.ok:  # it is only exiting: no need to wait for that
                if self.proc.is_alive():
                    self.proc.terminate()
            else:
                self._stop()
        with contextlib.suppress(Exception):
            self.conn.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.stderr_path)
