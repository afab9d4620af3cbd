"""The pipeline: load -> fold -> encode -> saturate -> extract -> decode -> verify -> save.

One pass of data through the stages (DESIGN.md). Every stage is timed into the `Report`.
Nothing is lost: the input file is never written; the optimized model is written only after
the differential check passes (to a temporary folder beside the output, then renamed into
place); when the check fails or a stage after loading fails, the input graph is written instead
and the report (and exit status) says so.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from rewrite.egraph.decode import decode
from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.errors import ModelError, RewriteError
from rewrite.extract.check import check_choice
from rewrite.extract.cost import CPU, CUDA, graph_cost, node_costs
from rewrite.extract.greedy import greedy
from rewrite.onnx_io import load, save
from rewrite.onnx_io.graph import Graph
from rewrite.report import STATUS_FALLBACK, STATUS_OPTIMIZED, Report
from rewrite.rules.fold import fold_constants
from rewrite.rules.rule import RuleSet
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.differential import DiffResult, differential
from rewrite.verify.inputs import load_inputs

TARGETS = {"cpu": CPU, "cuda": CUDA}


@dataclass
class Options:
    """How `optimize` runs; every limit is a CLI option."""

    rulesets: Sequence[RuleSet] | None = None
    """None = the built-in default rule sets."""
    fold: bool = True
    limits: Limits = field(default_factory=Limits)
    target: str = "cpu"
    verify: bool = True
    seed: int = 0
    trials: int = 2
    inputs: str | None = None
    """An .npz of user inputs, checked in addition to the seeded random ones."""


def default_rulesets() -> list[RuleSet]:
    from rulesets.cleanup import CLEANUP

    return [CLEANUP]


class _Clock:
    def __init__(self, report: Report) -> None:
        self.report = report

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.report.stages[name] = self.report.stages.get(name, 0.0) + (time.perf_counter() - t)


def optimize(
    input_path: str | Path, output_path: str | Path, options: Options | None = None
) -> Report:
    """Optimize `input_path` into `output_path`; returns the report (never raises after load
    for a failure of ours: the input graph is written and the report says why)."""
    opts = options or Options()
    src, dst = Path(input_path), Path(output_path)
    report = Report(str(src), str(dst))
    report.options = _options_json(opts)
    clock = _Clock(report)
    _check_paths(src, dst)
    with clock.stage("load"):
        graph = load(src)
    report.nodes_before = graph.op_counts()
    report.notes = list(graph.notes)
    try:
        optimized = _optimize_graph(graph, opts, report, clock)
    except RewriteError as e:
        report.warnings.append(f"optimization failed, input graph written instead: {e}")
        optimized = None
    except Exception as e:  # a bug of ours must not cost the user their model
        if os.environ.get("REWRITE_DEBUG"):
            raise
        where = traceback.extract_tb(e.__traceback__)[-1]
        report.warnings.append(
            f"internal error ({type(e).__name__}: {e} at {Path(where.filename).name}:"
            f"{where.lineno}); input graph written instead. Set REWRITE_DEBUG=1 for the traceback"
        )
        optimized = None
    if optimized is not None and _write_verified(optimized, src, dst, opts, report, clock):
        report.status = STATUS_OPTIMIZED
        report.nodes_after = optimized.op_counts()
    else:
        with clock.stage("save"):
            save(graph, dst, source=src)
        report.status = STATUS_FALLBACK
        report.nodes_after = graph.op_counts()
        report.cost_after_us = report.cost_before_us
    report.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return report


def _optimize_graph(graph: Graph, opts: Options, report: Report, clock: _Clock) -> Graph:
    rulesets = default_rulesets() if opts.rulesets is None else list(opts.rulesets)
    target = TARGETS[opts.target]
    work = graph
    if opts.fold and rulesets:
        with clock.stage("fold"):
            work, fstats = fold_constants(graph)
        report.folded = fstats.folded
        if fstats.skipped:
            report.warnings.append(fstats.skipped)
    with clock.stage("encode"):
        enc = encode(work)
    with clock.stage("cost"):
        before = take_snapshot(enc)
        costs0 = node_costs(before, target)
        report.cost_before_us = graph_cost(before, greedy(before, costs0), costs0)
    with clock.stage("saturate"):
        stats = saturate(enc, rulesets, opts.limits)
    report.saturation = stats.to_json()
    with clock.stage("snapshot"):
        snap = take_snapshot(enc)
    report.egraph = {
        "classes": len(snap),
        "enodes": snap.n_nodes,
        "typed_nodes": enc.typed,
        "opaque_nodes": enc.opaque_nodes,
    }
    with clock.stage("extract"):
        costs = node_costs(snap, target)
        choice = greedy(snap, costs)
        check_choice(snap, choice)
        report.cost_after_us = graph_cost(snap, choice, costs)
    report.extraction = {"extractor": "greedy", "cost_us": report.cost_after_us}
    with clock.stage("decode"):
        return decode(enc, snap, choice)


def _write_verified(
    optimized: Graph, src: Path, dst: Path, opts: Options, report: Report, clock: _Clock
) -> bool:
    """Save `optimized` beside `dst`, check it against `src`, rename it into place if it passes."""
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        staged = tmpdir / dst.name
        try:
            with clock.stage("save"):
                save(optimized, staged, source=src)
        except ModelError as e:
            report.warnings.append(f"optimized model rejected, input graph written instead: {e}")
            return False
        if opts.verify:
            with clock.stage("verify"):
                result = _differential(src, staged, opts)
            report.verification = result.to_json()
            report.verification["summary"] = result.summary()
            if not result.ok:
                report.warnings.append(
                    f"differential check failed, input graph written instead: {result.summary()}"
                )
                return False
        else:
            report.verification = {"ok": None, "summary": "skipped (--no-verify)"}
        for f in sorted(tmpdir.iterdir(), key=lambda p: p.name == dst.name):
            f.replace(dst.parent / f.name)  # data files first, the model last
        return True
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _differential(src: Path, staged: Path, opts: Options) -> DiffResult:
    feeds: list[dict[str, np.ndarray]] = []
    if opts.inputs:
        feeds.append(load_inputs(opts.inputs, str(src)))
    return differential(
        str(src), str(staged), feeds=feeds or None, seed=opts.seed, trials=opts.trials
    )


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


def _options_json(opts: Options) -> dict[str, object]:
    out = asdict(opts)
    out["rulesets"] = None if opts.rulesets is None else [r.name for r in opts.rulesets]
    out["limits"] = asdict(opts.limits)
    return out
