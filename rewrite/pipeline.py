"""The pipeline: load -> fold -> encode -> saturate -> extract -> decode -> save -> verify.

One pass of data through the stages (DESIGN.md). Every stage is timed into the `Report`.

Bounded, honest, atomic:
- Nothing is lost. The input file is never written. Every output (the optimized model, or the
  input graph when anything fails) is saved into a staging folder beside the output, checked,
  and renamed into place (`rewrite.publish`: SIGINT held back, a lock on the folder), so an
  interrupt or a second process writing the same path never leaves a partial or mixed file.
- The stages run in a worker process (`rewrite.isolate`): an egglog abort, a runaway
  allocation, an ONNX Runtime crash in the differential check or a worker past the deadline
  costs the optimization, not the process. The worker loads the model itself and writes the
  staged output itself, so no weights cross the process boundary. When the worker dies, a
  second one writes the input graph; the report (and exit status 3) says why.
- `Options.time_limit` bounds the whole run. Saturation gets what is left after load, fold and
  encode, less the estimated time of what follows (snapshot, extraction with its own budget,
  save, verify). A worker still running TIME_GRACE of the limit past the deadline is stopped.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rewrite.egraph.decode import decode
from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.errors import ModelError, RewriteError
from rewrite.extract.check import check_choice
from rewrite.extract.cost import CPU, CUDA, graph_cost, node_costs
from rewrite.extract.greedy import greedy
from rewrite.extract.snapshot import Choice, ENode, Snapshot
from rewrite.isolate import Worker, stage_hook
from rewrite.limits import (
    DEFAULT_TIME_LIMIT,
    Deadline,
    default_max_memory_mb,
    hard_memory_mb,
    peak_rss_mb,
)
from rewrite.onnx_io import load, save
from rewrite.onnx_io.graph import Graph
from rewrite.publish import clear, rename_into_place, staging
from rewrite.report import STATUS_FALLBACK, STATUS_OPTIMIZED, Report
from rewrite.rules.fold import fold_constants
from rewrite.rules.rule import RuleSet
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.differential import DiffResult, differential
from rewrite.verify.inputs import load_inputs

TARGETS = {"cpu": CPU, "cuda": CUDA}
TIME_GRACE = 0.05
"""A worker still running this fraction of the time limit past the deadline is stopped."""
SAVE_SECONDS_PER_MB = 0.025
"""Estimated save time per MB of weights (serialize, fsync, full checker); measured ~0.019."""
VERIFY_SECONDS_PER_MB = 0.02
"""Estimated differential-check time per MB of weights (two ORT sessions); measured ~0.012."""
FIXED_SECONDS = 0.3
"""Estimated fixed part of save + verify (sessions, checker) on a tiny model."""
POST_SECONDS_PER_NODE = 3e-4
"""Snapshot + greedy + decode seconds per e-node of the saturated e-graph (measured 1.5e-4 to
4e-4 on exploded e-graphs of 18k-24k e-nodes, 2 cores)."""


@dataclass
class Options:
    """How `optimize` runs; every limit is a CLI option."""

    rulesets: Sequence[RuleSet] | None = None
    """None = the built-in default rule sets."""
    fold: bool = True
    limits: Limits = field(default_factory=lambda: Limits(seconds=None))
    """Saturation limits; `seconds=None` lets saturation use what `time_limit` leaves."""
    target: str = "cpu"
    verify: bool = True
    seed: int = 0
    trials: int = 2
    inputs: str | None = None
    """An .npz of user inputs, checked in addition to the seeded random ones."""
    time_limit: float | None = DEFAULT_TIME_LIMIT
    """Seconds for the whole run (load to save); None = unlimited."""
    extractor: str = "greedy"
    """"greedy", or "ilp" (greedy, then the ILP warm-started from it)."""
    extract_time_limit: float = 10.0
    """The ILP's own budget (within `time_limit`)."""
    isolate: bool = True
    """Run the stages in a worker process (crash isolation)."""
    hard_memory_mb: float | None = None
    """Address-space cap of the worker; None = derived from the memory limit, 0 = none."""


def default_rulesets() -> list[RuleSet]:
    from rulesets.cleanup import CLEANUP

    return [CLEANUP]


class _Clock:
    def __init__(self, report: Report, progress: Callable[[str], None]) -> None:
        self.report = report
        self.progress = progress

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.progress(name)
        t = time.perf_counter()
        try:
            yield
        finally:
            self.report.stages[name] = self.report.stages.get(name, 0.0) + (time.perf_counter() - t)


def post_seconds(graph: Graph, verify: bool) -> float:
    """Estimated time to save `graph` (and to verify it, when `verify`)."""
    mb = sum(t.ByteSize() for t in graph.initializers.values()) / 1e6
    rate = SAVE_SECONDS_PER_MB + (VERIFY_SECONDS_PER_MB if verify else 0.0)
    return FIXED_SECONDS + mb * rate


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
    stat = _stat(src)
    kill_at = None
    if deadline.seconds is not None:
        kill_at = deadline.at + TIME_GRACE * deadline.seconds
    t = time.monotonic()
    with staging(dst) as tmpdir:
        staged = tmpdir / dst.name
        result, failure, timed_out = _execute(
            _optimize_job, (src, staged, opts, deadline, stat), opts, report, kill_at
        )
        if result is None:  # the worker died or was stopped: write the input graph
            limit = "time_limit" if timed_out else None
            report.saturation = {"stop_reason": limit or "worker died", "limit_hit": limit}
            report.warnings.append(
                f"{'time limit: ' if timed_out else ''}the optimizer's worker process ended "
                f"without a result: {failure}; input graph written instead"
            )
            clear(tmpdir)
            result, failure, _ = _execute(_fallback_job, (src, staged, stat), opts, report, None)
            if result is None:
                raise ModelError(f"{src}: the input graph could not be written either: {failure}")
        if result.error is not None:
            raise result.error
        _merge(report, result)
        rename_into_place(tmpdir, dst)
    if opts.isolate:
        report.stages["isolate"] = max(0.0, time.monotonic() - t - sum(report.stages.values()))
    report.peak_rss_mb = max(result.peak_rss_mb, peak_rss_mb())
    return report


# -- the worker's jobs ----------------------------------------------------------------------


@dataclass
class _JobResult:
    """What a job sends back: its part of the report, or the error that refuses the model."""

    report: Report
    error: RewriteError | None = None
    peak_rss_mb: float = 0.0


def _execute(
    job: Callable[..., _JobResult],
    args: tuple[Any, ...],
    opts: Options,
    report: Report,
    kill_at: float | None,
) -> tuple[_JobResult | None, str, bool]:
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
    return job(*args, progress=lambda stage: stage_hook(stage, worker=False)), "", False


def _merge(report: Report, result: _JobResult) -> None:
    """Copy what the job found into the parent's report (not input, output or options)."""
    part = result.report
    for name in (
        "status",
        "saturation",
        "egraph",
        "extraction",
        "cost_before_us",
        "cost_after_us",
        "nodes_before",
        "nodes_after",
        "folded",
        "verification",
    ):
        value = getattr(part, name)
        if name != "saturation" or value or not report.saturation:
            setattr(report, name, value)
    report.stages.update(part.stages)
    report.notes.extend(n for n in part.notes if n not in report.notes)
    report.warnings.extend(part.warnings)
    if report.saturation:
        report.saturation["worker_peak_rss_mb"] = round(result.peak_rss_mb, 1)


def _optimize_job(
    src: Path,
    staged: Path,
    opts: Options,
    deadline: Deadline,
    stat: tuple[int, int, int],
    *,
    progress: Callable[[str], None],
) -> _JobResult:
    """Load, optimize, save the result to `staged` and verify it; where that fails, save the
    input graph to `staged` instead. A model that cannot be read comes back as `error`."""
    report = Report(str(src), str(staged))
    clock = _Clock(report, progress)
    try:
        with clock.stage("load"):
            graph = _load(src, stat)
        report.nodes_before = graph.op_counts()
        report.notes = list(graph.notes)
        end = None
        if deadline.seconds is not None:
            end = deadline.at - post_seconds(graph, opts.verify)
        optimized = _optimize_guarded(graph, opts, report, clock, end)
        if optimized is not None and _save_verified(optimized, src, staged, opts, report, clock):
            report.status = STATUS_OPTIMIZED
            report.nodes_after = optimized.op_counts()
        else:
            clear(staged.parent)
            with clock.stage("save"):
                save(graph, staged, source=src)
            report.status = STATUS_FALLBACK
            report.nodes_after = graph.op_counts()
            report.cost_after_us = report.cost_before_us
    except RewriteError as e:
        return _JobResult(report, e, peak_rss_mb())
    return _JobResult(report, None, peak_rss_mb())


def _fallback_job(
    src: Path, staged: Path, stat: tuple[int, int, int], *, progress: Callable[[str], None]
) -> _JobResult:
    """Load the input and save its graph to `staged` (after the optimizing worker died)."""
    report = Report(str(src), str(staged))
    clock = _Clock(report, progress)
    try:
        with clock.stage("load"):
            graph = _load(src, stat)
        with clock.stage("save"):
            save(graph, staged, source=src)
    except RewriteError as e:
        return _JobResult(report, e, peak_rss_mb())
    report.status = STATUS_FALLBACK
    report.nodes_before = report.nodes_after = graph.op_counts()
    report.notes = list(graph.notes)
    return _JobResult(report, None, peak_rss_mb())


def _save_verified(
    optimized: Graph, src: Path, staged: Path, opts: Options, report: Report, clock: _Clock
) -> bool:
    """Save `optimized` to `staged` and check it against `src`; False (and a warning) if it
    is rejected. Raises RewriteError when `src` itself cannot be run (nothing to check)."""
    try:
        with clock.stage("save"):
            save(optimized, staged, source=src)
    except ModelError as e:
        report.warnings.append(f"optimized model rejected, input graph written instead: {e}")
        return False
    if not opts.verify:
        report.verification = {"ok": None, "summary": "skipped (--no-verify)"}
        return True
    with clock.stage("verify"):
        try:
            result = _differential(src, staged, opts)
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


# -- the stages ---------------------------------------------------------------------------


def _optimize_guarded(
    graph: Graph, opts: Options, report: Report, clock: _Clock, deadline: float | None
) -> Graph | None:
    """`_optimize_graph`, with every failure of ours turned into a warning and None."""
    try:
        if deadline is not None and time.monotonic() >= deadline:
            report.saturation = {"stop_reason": "time_limit", "limit_hit": "time_limit"}
            report.warnings.append(
                "time limit: no time is left to optimize after loading (saving and checking "
                "the model are estimated to need the rest); input graph written instead"
            )
            return None
        return _optimize_graph(graph, opts, report, clock, deadline)
    except RewriteError as e:
        report.warnings.append(f"optimization failed, input graph written instead: {e}")
    except Exception as e:  # a bug of ours must not cost the user their model
        if os.environ.get("REWRITE_DEBUG"):
            raise
        where = traceback.extract_tb(e.__traceback__)[-1]
        report.warnings.append(
            f"internal error ({type(e).__name__}: {e} at {Path(where.filename).name}:"
            f"{where.lineno}); input graph written instead. Set REWRITE_DEBUG=1 for the traceback"
        )
    return None


def _optimize_graph(
    graph: Graph, opts: Options, report: Report, clock: _Clock, deadline: float | None
) -> Graph:
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
        t = time.perf_counter()
        before = take_snapshot(enc)
        costs0 = node_costs(before, target)
        report.cost_before_us = graph_cost(before, greedy(before, costs0), costs0)
        per_node = POST_SECONDS_PER_NODE  # small e-graphs: fixed costs would inflate a rate
        if before.n_nodes >= 2000:
            per_node = max(per_node, 1.5 * (time.perf_counter() - t) / before.n_nodes)
    extract_budget = opts.extract_time_limit if opts.extractor == "ilp" else 0.0
    with clock.stage("saturate"):
        stats = saturate(
            enc,
            rulesets,
            opts.limits,
            deadline=None if deadline is None else deadline - extract_budget,
            seconds_per_node=per_node,
        )
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
        left = None if deadline is None else deadline - time.monotonic()
        choice = _extract(snap, costs, opts, left, report)
        report.cost_after_us = graph_cost(snap, choice, costs)
    with clock.stage("decode"):
        return decode(enc, snap, choice)


def _extract(
    snap: Snapshot,
    costs: Mapping[tuple[int, ENode], float],
    opts: Options,
    left: float | None,
    report: Report,
) -> Choice:
    """The chosen e-nodes: greedy, or greedy + ILP within min(its budget, the time left)."""
    if opts.extractor == "greedy":
        choice = greedy(snap, costs)
        check_choice(snap, choice)
        report.extraction = {"extractor": "greedy", "cost_us": graph_cost(snap, choice, costs)}
        return choice
    from rewrite.extract.select import run_extraction

    limit = opts.extract_time_limit
    if left is not None:
        limit = max(0.5, min(left, limit))
    out = run_extraction(snap, costs, method=opts.extractor, time_limit=limit)
    report.extraction = out.to_json()
    return out.choice


def _load(src: Path, stat: tuple[int, int, int] | None = None) -> Graph:
    """`load`, plus what it does not yet refuse: names that are not UTF-8 (protobuf hands them
    over as bytes), and a file that changed since `stat` was taken. Any other exception while
    reading the file is a model we cannot read."""
    if stat is not None and _stat(src) != stat:
        raise ModelError(f"{src}: the file changed while it was being optimized")
    try:
        graph = load(src)
    except RewriteError:
        raise
    except Exception as e:
        raise ModelError(f"{src}: cannot be read ({type(e).__name__}: {_first_line(e)})") from e
    for i, n in enumerate(graph.nodes):
        for what, value in (("op_type", n.op_type), ("domain", n.domain), ("name", n.name)):
            if not isinstance(value, str):
                raise ModelError(f"{src}: node {i} has a {what} that is not UTF-8: {value!r}")
        for value in [*n.inputs, *n.outputs]:
            if not isinstance(value, str):
                raise ModelError(f"{src}: {n.label()} names a value that is not UTF-8: {value!r}")
    for value in [*graph.inputs, *graph.outputs, *graph.initializers]:
        if not isinstance(value, str):
            raise ModelError(f"{src}: a graph value name is not UTF-8: {value!r}")
    return graph


def _stat(p: Path) -> tuple[int, int, int]:
    st = p.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _hard_memory(opts: Options) -> float | None:
    """The worker's address-space cap, MiB (None: no cap)."""
    if opts.hard_memory_mb is not None:
        return opts.hard_memory_mb or None
    return hard_memory_mb(opts.limits.memory_mb or default_max_memory_mb())


def _differential(src: Path, staged: Path, opts: Options) -> DiffResult:
    feeds: list[dict[str, np.ndarray]] = []
    if opts.inputs:
        feeds.append(load_inputs(opts.inputs, str(src)))
    return differential(
        str(src), str(staged), feeds=feeds or None, seed=opts.seed, trials=opts.trials
    )


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


def _options_json(opts: Options) -> dict[str, object]:
    out = asdict(opts)
    out["rulesets"] = None if opts.rulesets is None else [r.name for r in opts.rulesets]
    out["limits"] = asdict(opts.limits)
    if opts.limits.memory_mb is None:
        out["limits"]["memory_mb"] = default_max_memory_mb()
    return out
