"""`optimize --precision auto`: the precision pass (`rewrite.precision`) on the verified exact
output, kept only when it is within the budget and measured faster than the input.

The exact output in the staging folder has passed the differential check. The pass chooses
ops to lower under `--max-error` and checks the result end to end on held-back inputs
(`precision.lower`); the low-precision model is then timed against the input
(`rewrite.measure`, interleaved rounds). It replaces the staged file only when it is faster
beyond noise; otherwise the exact output stays and the report says why. The measurement is
the report's `measured` (so `--measure` does not time the models twice).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

import onnx

from rewrite.files import make_temp
from rewrite.onnx_io.check import run_checker
from rewrite.onnx_io.feeds import load_inputs
from rewrite.onnx_io.inputs import make_inputs
from rewrite.pipeline import Options
from rewrite.report import Report


class _Clock(Protocol):
    """The worker's stage timer (`stages._Clock`)."""

    def stage(self, name: str) -> AbstractContextManager[None]: ...


def lower_staged(
    src: Path, staged: Path, opts: Options, report: Report, clock: _Clock
) -> dict[str, int] | None:
    """Run the precision pass on `staged` (module docstring); the lowered model's op counts
    when it replaced the staged file, else None. Never raises for a model."""
    from rewrite.measure import measure
    from rewrite.precision.forms import FORMS, STANDARD_FORMS
    from rewrite.precision.lower import Config, lower_model

    cfg = Config(
        max_error=float(opts.max_error or 0.0),
        metric=opts.metric,
        calibration=tuple(opts.calibration),
        seed=opts.seed,
        dims=dict(opts.dims),
        target=opts.target,
        threads=opts.measure_threads,
        deadline=time.monotonic() + opts.precision_time_limit,
        forms=STANDARD_FORMS if opts.target == "portable" else FORMS,
    )
    with clock.stage("precision"):
        try:
            result = lower_model(src, staged, cfg)
        except Exception as e:  # a model the pass cannot run: the exact output stays
            if os.environ.get("REWRITE_DEBUG"):
                raise
            report.precision = {"mode": "auto", "result": f"exact: the pass failed ({e})"}
            report.warnings.append(
                f"--precision auto failed ({type(e).__name__}: {str(e).splitlines()[0]}); "
                "the exact output is kept"
            )
            return None
    report.precision = result.report
    if result.model is None:
        return None
    tmp = make_temp(staged.parent, prefix=".lowered.", suffix=".onnx")
    try:
        onnx.save_model(result.model, str(tmp))
        run_checker(tmp, "full")
        with clock.stage("measure"):
            feeds = load_inputs(opts.inputs, str(src)) if opts.inputs else None
            feeds = feeds or make_inputs(str(src), seed=opts.seed, dims=dict(opts.dims) or None)
            m = measure(src, tmp, feeds, threads=opts.measure_threads, target=opts.target)
        report.precision["measured"] = m.to_json()
        if not m.faster:
            report.precision["result"] += "; not faster than the input: exact output kept"
            report.warnings.append(
                f"--precision auto: the lowered model is not faster beyond noise ({m.line()}); "
                "the exact output is kept"
            )
            return None
        os.replace(tmp, staged)
        report.measured = m.to_json()
        return dict(Counter(n.op_type for n in result.model.graph.node))
    finally:
        tmp.unlink(missing_ok=True)
