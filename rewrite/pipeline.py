"""The pipeline: load -> fold -> encode -> saturate -> extract -> decode -> save -> verify.

One pass of data through the stages (DESIGN.md; the stages are in `rewrite.stages`). Every
stage is timed into the `Report`.

Bounded, honest, atomic:
- Nothing is lost. The input file is never written. Every output (the optimized model, or the
  input graph when anything fails) is saved into a staging folder beside the output, checked,
  and renamed into place (`rewrite.publish`: SIGINT held back, a lock on the folder), so an
  interrupt or a second process writing the same path never leaves a partial or mixed file.
- The stages run in a worker process (`rewrite.isolate`): an egglog abort, a runaway
  allocation, an ONNX Runtime crash in the differential check or a worker past the deadline
  costs the optimization, not the process. The worker loads the model itself and writes the
  staged output itself, so no weights cross the process boundary. When the worker dies, a
  second one writes the input graph; the report (and exit status 3) says why. This module
  imports none of the stages' heavy dependencies (egglog, onnxruntime): with isolation, only
  the workers' fork server does.
- `Options.time_limit` bounds the whole run. Saturation gets what is left after load, fold and
  encode, less the estimated time of what follows (snapshot, extraction with its own budget,
  save, verify). A worker still running TIME_GRACE of the limit past the deadline is stopped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewrite.errors import ModelError, RewriteError
from rewrite.isolate import Worker, resolve, stage_hook
from rewrite.limits import (
    DEFAULT_TIME_LIMIT,
    Deadline,
    Limits,
    default_max_memory_mb,
    hard_memory_mb,
    peak_rss_mb,
)
from rewrite.onnx_io.feeds import load_inputs
from rewrite.publish import clear, rename_into_place, staging
from rewrite.report import Report

if TYPE_CHECKING:
    from rewrite.rules.rule import RuleSet

TIME_GRACE = 0.05
"""A worker still running this fraction of the time limit past the deadline is stopped."""
_OPTIMIZE_JOB = "rewrite.stages:optimize_job"
_FALLBACK_JOB = "rewrite.stages:fallback_job"


@dataclass
class Options:
    """How `optimize` runs; every limit is a CLI option."""

    rulesets: Sequence[RuleSet] | None = None
    """None = the built-in default rule sets."""
    fold: bool = True
    limits: Limits = field(default_factory=lambda: Limits(seconds=None))
    """Saturation limits; `seconds=None` lets saturation use what `time_limit` leaves."""
    target: str = "cpu"
    dims: Mapping[str, int] = field(default_factory=dict)
    """Sizes of symbolic dims (e.g. {"batch": 8, "sequence": 128}): the cost model prices at
    them and the random check inputs use them; a symbolic dim not named here counts as 1 in
    the cost model (`extract.cost`: why)."""
    verify: bool = True
    seed: int = 0
    trials: int = 2
    inputs: str | None = None
    """An .npz of user inputs, checked in addition to the seeded random ones."""
    time_limit: float | None = DEFAULT_TIME_LIMIT
    """Seconds for the whole run (load to save); None = unlimited."""
    extractor: str = "ilp"
    """"ilp" (greedy, then the ILP warm-started from it; greedy when the ILP fails) or
    "greedy"."""
    prove_rules: bool = True
    """Use only rules `rewrite.verify` proves (results cached); False = trust every rule."""
    allow_approximate: bool = False
    extract_time_limit: float = 10.0
    """The ILP's own budget (within `time_limit`)."""
    isolate: bool = True
    """Run the stages in a worker process (crash isolation)."""
    hard_memory_mb: float | None = None
    """Address-space cap of the worker; None = derived from the memory limit, 0 = none."""
    measure: bool = False
    """Time input and output in ORT after verification; keep the output only if it is faster
    beyond noise (`rewrite.measure`)."""
    measure_threads: int = 1
    precision: str = "exact"
    """"exact" (every rewrite exact) or "auto": lower the precision of ops where the error
    stays within `max_error` (`rewrite.lowering`, `rewrite.precision`)."""
    max_error: float | None = None
    """The error budget of `precision="auto"`, per output, in `metric`."""
    metric: str = "maxrel"
    """maxrel (max |Δ| / max |reference|), cosine (1 - cosine similarity) or top1 (fraction
    of rows whose argmax changed)."""
    calibration: tuple[str, ...] = ()
    """.npz feed sets (the `inputs` format) to calibrate and check the lowered model on;
    empty = seeded random ones."""
    precision_time_limit: float = 300.0
    """Seconds for measuring sensitivities; ops not measured by then stay exact."""


def default_rulesets() -> list[RuleSet]:
    from rulesets import builtin

    return list(builtin().values())


def optimize(
    input_path: str | Path, output_path: str | Path, options: Options | None = None
) -> Report:
    """Optimize `input_path` into `output_path`; returns the report.

    Raises RewriteError only for a model that cannot be read (or whose reference run fails
    in ONNX Runtime, or whose input graph cannot be written) and an output path that cannot be
    written; nothing is written then. Every other failure (an egglog abort, a limit, a failed
    check) writes the input graph and the report says why.
    """
    opts = options or Options()
    deadline = Deadline.starting_now(opts.time_limit)
    src, dst = Path(input_path), Path(output_path)
    report = Report(str(src), str(dst))
    report.options = _options_json(opts)
    _check_paths(src, dst)
    _check_precision(src, opts)
    stat = _stat(src)
    kill_at = None
    if deadline.seconds is not None:
        kill_at = deadline.at + TIME_GRACE * deadline.seconds
        if opts.precision == "auto":  # the pass runs after the check, on its own limit
            kill_at += opts.precision_time_limit + PRECISION_EXTRA_S
    t = time.monotonic()
    with staging(dst) as tmpdir:
        staged = tmpdir / dst.name
        result, failure, timed_out = _execute(
            _OPTIMIZE_JOB, (src, dst, staged, opts, deadline, stat), opts, report, kill_at
        )
        if result is None:  # the worker died or was stopped: write the input graph
            limit = "time_limit" if timed_out else None
            report.saturation = {"stop_reason": limit or "worker died", "limit_hit": limit}
            report.warnings.append(
                f"{'time limit: ' if timed_out else ''}the optimizer's worker process ended "
                f"without a result: {failure}; input graph written instead"
            )
            clear(tmpdir)
            job = (src, dst, staged, stat)
            result, failure, _ = _execute(_FALLBACK_JOB, job, opts, report, None)
            if result is None:
                raise ModelError(f"{src}: the input graph could not be written either: {failure}")
        result = _user_paths(result, staged, dst)
        if result.error is not None:
            raise result.error
        _merge(report, result)
        rename_into_place(tmpdir, dst)
    if opts.isolate:
        report.stages["isolate"] = max(0.0, time.monotonic() - t - sum(report.stages.values()))
    report.peak_rss_mb = max(result.peak_rss_mb, peak_rss_mb())
    return report


# -- running a job ------------------------------------------------------------------------


@dataclass
class JobResult:
    """What a job sends back: its part of the report, or the error that refuses the model."""

    report: Report
    error: RewriteError | None = None
    peak_rss_mb: float = 0.0


def _execute(
    job: str,
    args: tuple[Any, ...],
    opts: Options,
    report: Report,
    kill_at: float | None,
) -> tuple[JobResult | None, str, bool]:
    """Run `job` in a worker (or here, without isolation): (result, failure, timed out)."""
    if opts.isolate:
        try:
            worker = Worker(job, args, hard_memory_mb=_hard_memory(opts))
        except Exception as e:  # e.g. rules that cannot be pickled: run in this process
            report.notes.append(
                f"crash isolation off: the worker could not start ({type(e).__name__}: "
                f"{_first_line(e)})"
            )
        else:
            try:
                outcome = worker.result(kill_at=kill_at)
            finally:
                worker.close()
            if not outcome.ok:
                return None, outcome.failure, outcome.timed_out
            return outcome.value, "", False
    return resolve(job)(*args, progress=lambda s: stage_hook(s, worker=False)), "", False


def _merge(report: Report, result: JobResult) -> None:
    """Copy what the job found into the parent's report (not input, output or options)."""
    part = result.report
    for name in (
        "status",
        "saturation",
        "egraph",
        "extraction",
        "cost_before_us",
        "cost_after_us",
        "cost_by_op",
        "nodes_before",
        "nodes_after",
        "folded",
        "verification",
        "measured",
        "precision",
        "rules_refused",
        "rules_verified",
        "rules_unmatchable",
        "rule_effects",
    ):
        value = getattr(part, name)
        if name != "saturation" or value or not report.saturation:
            setattr(report, name, value)
    report.stages.update(part.stages)
    report.notes.extend(n for n in part.notes if n not in report.notes)
    report.warnings.extend(part.warnings)
    if report.saturation:
        report.saturation["worker_peak_rss_mb"] = round(result.peak_rss_mb, 1)


def _user_paths(result: JobResult, staged: Path, dst: Path) -> JobResult:
    """`result` with the staging file's path replaced by the user's output path wherever a
    message or a report field (e.g. the differential check's `candidate`) names it: the user
    never sees the staging folder."""
    names = [(str(staged), str(dst)), (str(staged.parent), str(dst.parent))]

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            for old, new in names:
                value = value.replace(old, new)
            return value
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    part = result.report
    for name in ("verification", "warnings", "notes", "extraction", "saturation"):
        setattr(part, name, fix(getattr(part, name)))
    error = result.error
    if error is not None and fix(str(error)) != str(error):
        error.args = (fix(str(error)),)
    return result


def _stat(p: Path) -> tuple[int, int, int]:
    st = p.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _hard_memory(opts: Options) -> float | None:
    """The worker's address-space cap, MiB (None: no cap)."""
    if opts.hard_memory_mb is not None:
        return opts.hard_memory_mb or None
    return hard_memory_mb(opts.limits.memory_mb or default_max_memory_mb())


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else ""


def _check_paths(src: Path, dst: Path) -> None:
    if not src.exists():
        raise ModelError(f"{src}: no such file")
    if dst.exists() and dst.resolve() == src.resolve():
        raise ModelError(f"{dst}: the output path is the input path; refusing to overwrite it")
    folder = dst.parent if str(dst.parent) else Path(".")
    if not folder.is_dir():
        raise ModelError(f"{dst}: the output folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ModelError(f"{dst}: the output folder {folder} is not writable")


PRECISION_EXTRA_S = 180.0
"""What the precision pass may take beyond its sensitivities: kernel timings, end-to-end
checks, the final measurement."""


def _check_precision(src: Path, opts: Options) -> None:
    """RewriteError unless the precision options make sense together and every calibration
    file fits the model (`feeds.load_inputs` names the file and the input at fault)."""
    from rewrite.precision.metrics import METRICS

    if opts.precision not in ("exact", "auto"):
        raise RewriteError(f"--precision must be exact or auto, not {opts.precision!r}")
    if opts.metric not in METRICS:
        raise RewriteError(f"--metric must be one of {', '.join(METRICS)}, not {opts.metric!r}")
    if opts.precision == "exact":
        if opts.max_error is not None or opts.calibration:
            raise RewriteError(
                "--max-error and --calibration need --precision auto (without it every "
                "rewrite stays exact)"
            )
        return
    if opts.max_error is None or not opts.max_error > 0:
        raise RewriteError("--precision auto needs --max-error E with E > 0 (the error budget)")
    for path in opts.calibration:
        load_inputs(path, str(src))


def _options_json(opts: Options) -> dict[str, object]:
    out = asdict(opts)
    out["rulesets"] = None if opts.rulesets is None else [r.name for r in opts.rulesets]
    out["limits"] = asdict(opts.limits)
    if opts.limits.memory_mb is None:
        out["limits"]["memory_mb"] = default_max_memory_mb()
    return out
