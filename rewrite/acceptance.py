"""What the staged output must pass before it is published: the differential check against the
input (`checked`), and with `--measure` a timing in ORT (`measured`, `rewrite.measure`)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from rewrite.errors import RewriteError, UncheckableError
from rewrite.onnx_io.feeds import load_inputs
from rewrite.onnx_io.inputs import Feed, make_inputs
from rewrite.pipeline import Options, _first_line
from rewrite.report import Report
from rewrite.verify.differential import DiffResult, differential


class _Clock(Protocol):
    """The worker's stage timer (`stages._Clock`)."""

    def stage(self, name: str) -> AbstractContextManager[None]: ...


def checked(src: Path, staged: Path, opts: Options, report: Report, clock: _Clock) -> bool:
    """Check the model saved at `staged` against `src` (both read from disk by ORT); False (and
    a warning) if it is rejected, or if `src` runs on none of the generated inputs (the
    warning says to pass --inputs). Raises RewriteError when `src` cannot be loaded in ONNX
    Runtime or fails on the user's inputs."""
    if not opts.verify:
        report.verification = {"ok": None, "summary": "skipped (--no-verify)"}
        return True
    with clock.stage("verify"):
        try:
            result = differential_check(src, staged, opts)
        except UncheckableError as e:
            report.verification = {"ok": False, "summary": f"could not run: {e}"}
            report.warnings.append(f"{e}; input graph written instead")
            return False
        except RewriteError:
            raise
        except Exception as e:  # e.g. inputs too large to sample: nothing was verified
            report.verification = {"ok": False, "summary": f"could not run: {_first_line(e)}"}
            report.warnings.append(
                f"the differential check could not run ({type(e).__name__}: "
                f"{_first_line(e)}); input graph written instead"
            )
            return False
    report.verification = result.to_json()
    report.verification["summary"] = result.summary()
    if not result.ok:
        report.warnings.append(
            f"differential check failed, input graph written instead: {result.summary()}"
        )
    return result.ok


def differential_check(src: Path, staged: Path, opts: Options) -> DiffResult:
    feeds: list[dict[str, Feed]] = []
    if opts.inputs:
        feeds.append(load_inputs(opts.inputs, str(src)))
    # calibrate: an output's atol widens to 4x ORT's own noise (ENABLE_ALL vs DISABLE_ALL)
    return differential(
        str(src),
        str(staged),
        feeds=feeds or None,
        seed=opts.seed,
        trials=opts.trials,
        dims=dict(opts.dims) or None,
        calibrate=True,
    )


def measured(src: Path, staged: Path, opts: Options, report: Report, clock: _Clock) -> bool:
    """`--measure`: time the input and the staged output in ORT (`rewrite.measure`); False
    (and a warning) when the output is not faster beyond noise. A timing that cannot run
    keeps the output, saying so."""
    from rewrite.measure import measure

    with clock.stage("measure"):
        try:
            feeds = load_inputs(opts.inputs, str(src)) if opts.inputs else None
            feeds = feeds or make_inputs(str(src), seed=opts.seed, dims=dict(opts.dims) or None)
            m = measure(src, staged, feeds, threads=opts.measure_threads, target=opts.target)
        except Exception as e:  # a model ORT cannot time here: nothing was measured
            report.warnings.append(
                f"--measure could not time the models ({type(e).__name__}: {_first_line(e)}); "
                "the output is kept unmeasured"
            )
            return True
    report.measured = m.to_json()
    if not m.faster:
        report.warnings.append(
            f"--measure: the output is not faster beyond noise ({m.line()}); "
            "input graph written instead"
        )
    return m.faster
