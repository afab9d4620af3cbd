"""The stages, as the jobs a worker process runs: load, optimize, save and verify.

`optimize_job` loads the model, runs fold -> encode -> saturate -> snapshot -> extract ->
decode, saves the result to the staging path and checks it against the input; where any of
that fails it saves the input graph there instead. `fallback_job` only loads and saves the
input graph (after a worker died). Both return a `JobResult`: the report's part they fill, or
the RewriteError that refuses the model. `rewrite.pipeline` runs them (in a worker process, or
in the calling one) and puts the staged output in place.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from rewrite.acceptance import checked, measured
from rewrite.egraph.decode import decode
from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import take_snapshot
from rewrite.errors import ModelError, RewriteError
from rewrite.estimates import POST_SECONDS_PER_NODE, post_seconds, weights_mb
from rewrite.extract.check import check_choice
from rewrite.extract.cost import (
    cost_by_op,
    graph_cost,
    node_costs,
    op_types,
    standard_only,
)
from rewrite.extract.greedy import greedy
from rewrite.extract.snapshot import Choice, ENode, Snapshot
from rewrite.extract.target import TARGETS
from rewrite.isolate import in_worker
from rewrite.limits import Deadline, peak_rss_mb
from rewrite.lowering import lower_staged
from rewrite.onnx_io import load
from rewrite.onnx_io.concrete import sizing_types
from rewrite.onnx_io.graph import Graph
from rewrite.pipeline import JobResult, Options, _first_line, _stat, default_rulesets
from rewrite.provenance import rule_effects
from rewrite.publish import clear
from rewrite.report import STATUS_FALLBACK, STATUS_NOT_FASTER, STATUS_OPTIMIZED, Report
from rewrite.rules.fold import fold_constants, fold_to_fixpoint
from rewrite.rules.relevance import relevant
from rewrite.rules.saturate import saturate
from rewrite.saving import Saver

_KEPT: list[object] = []
"""Inside a worker, a finished job's big objects are kept here rather than freed: the worker
exits right after sending its result, and the kernel reclaims them at once."""
RELEASE_MB = 256.0
"""Inputs with this many MB of weights are freed once the optimized model is saved, before the
differential check loads the input and the output into ONNX Runtime from disk; a fallback to
the input graph then reads it again (a load's time, only then)."""


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


def optimize_job(
    src: Path,
    dst: Path,
    staged: Path,
    opts: Options,
    deadline: Deadline,
    stat: tuple[int, int, int],
    *,
    progress: Callable[[str], None],
) -> JobResult:
    """Load, optimize, save the result to `staged` and verify it; where that fails, save the
    input graph to `staged` instead. A model that cannot be read comes back as `error`.
    Messages name `dst` (the output path asked for), never `staged` (`rewrite.saving`)."""
    report = Report(str(src), str(dst))
    clock = _Clock(report, progress)
    saver = Saver(src, dst, staged, report)
    try:
        with clock.stage("load"):
            graph = _load(src, stat)
        opts = _gate_rules(opts, graph, report, clock)  # a broken file needs no proof
        report.nodes_before = graph.op_counts()
        report.notes = list(graph.notes)
        end = None
        if deadline.seconds is not None:
            end = deadline.at - post_seconds(graph, opts.verify)
        optimized = _optimize_guarded(graph, opts, report, clock, end)
        graph._arrays.clear()  # numpy values of the weights, made for encoding: not needed now
        release = weights_mb(graph) >= RELEASE_MB
        if in_worker() and not release:
            _KEPT.extend((graph, optimized))
        saved = optimized is not None and _save_optimized(optimized, saver, clock)
        nodes_after = optimized.op_counts() if saved and optimized is not None else {}
        if saved and release:  # written: free the weights before ORT loads both models
            del graph, optimized
        verified = saved and checked(src, staged, opts, report, clock)
        if saved and not verified and not release and _refold_may_help(opts, report):
            # Folding can expose to ORT what the input hides from its checks (a constant If
            # condition inlines a branch ORT then refuses): the same rules without folding.
            report.warnings[-1] = report.warnings[-1].replace(
                "input graph written instead", "retried without constant folding"
            )
            clear(staged.parent)
            opts = replace(opts, fold=False)
            report.folded = {}
            optimized = _optimize_guarded(graph, opts, report, clock, end)
            saved = optimized is not None and _save_optimized(optimized, saver, clock)
            nodes_after = optimized.op_counts() if saved and optimized is not None else {}
            verified = saved and checked(src, staged, opts, report, clock)
        if verified and opts.precision == "auto":
            counts = lower_staged(src, staged, opts, report, clock)  # sets `measured` if lowered
            nodes_after = counts or nodes_after
        faster = verified and (
            not opts.measure or bool(report.measured) or measured(src, staged, opts, report, clock)
        )
        if verified and faster:
            report.status = STATUS_OPTIMIZED
            report.nodes_after = nodes_after
            return JobResult(report, None, peak_rss_mb())
        clear(staged.parent)
        if saved and release:  # freed above: read the input again
            with clock.stage("load"):
                graph = _load(src, stat)
        with clock.stage("save"):
            saver.save_input(graph)
        # the input graph was written: its counts and costs, and no rule made it in
        report.status = STATUS_NOT_FASTER if verified else STATUS_FALLBACK  # --measure: slower
        report.nodes_after = graph.op_counts()
        report.cost_after_us = report.cost_before_us
        report.cost_by_op = {op: [b, b] for op, (b, _) in report.cost_by_op.items()}
        report.rule_effects = {}
    except RewriteError as e:
        return JobResult(report, e, peak_rss_mb())
    return JobResult(report, None, peak_rss_mb())


def _refold_may_help(opts: Options, report: Report) -> bool:
    """Whether a run without constant folding may pass where this one failed the differential
    check: folding was on and did fold, and the check ran (it was not left without inputs)."""
    summary = str((report.verification or {}).get("summary", ""))
    return opts.fold and bool(report.folded) and not summary.startswith("could not run")


def _gate_rules(opts: Options, graph: Graph, report: Report, clock: _Clock) -> Options:
    """Keep only the rules that can match `graph` (`rules.relevance`) and that verification
    accepts; each refused rule is a warning with its counterexample, and the report lists
    it."""
    if not opts.prove_rules:
        return opts
    from rewrite.verify.gate import gate

    with clock.stage("prove"):
        rulesets = default_rulesets() if opts.rulesets is None else list(opts.rulesets)
        rulesets, report.rules_unmatchable = relevant(rulesets, graph.op_counts())
        ok: list = []
        accepted, refused = gate(
            rulesets, allow_approximate=opts.allow_approximate, accepted_results=ok
        )
    keys = ("rule", "source", "status", "bound", "domain", "cases", "cached", "numeric")
    keys += ("max_error",)
    report.rules_verified = [{k: r.to_json()[k] for k in keys} for r in ok]
    report.rules_refused = [r.to_json() for r in refused]
    report.warnings += [r.refusal() for r in refused]
    return replace(opts, rulesets=accepted)


def fallback_job(
    src: Path,
    dst: Path,
    staged: Path,
    stat: tuple[int, int, int],
    *,
    progress: Callable[[str], None],
) -> JobResult:
    """Load the input and save its graph to `staged` (after the optimizing worker died)."""
    report = Report(str(src), str(dst))
    clock = _Clock(report, progress)
    try:
        with clock.stage("load"):
            graph = _load(src, stat)
        with clock.stage("save"):
            Saver(src, dst, staged, report).save_input(graph)
    except RewriteError as e:
        return JobResult(report, e, peak_rss_mb())
    report.status = STATUS_FALLBACK
    report.nodes_before = report.nodes_after = graph.op_counts()
    report.notes = list(graph.notes)
    return JobResult(report, None, peak_rss_mb())


def _save_optimized(optimized: Graph, saver: Saver, clock: _Clock) -> bool:
    """Save `optimized` to the staging file; False (and a warning) if it is rejected."""
    with clock.stage("save"):
        return saver.save_optimized(optimized)


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
    if opts.rulesets is None:
        with clock.stage("prove"):  # building the built-in rule sets (proved or not)
            rulesets = default_rulesets()
    else:
        rulesets = list(opts.rulesets)
    target = TARGETS[opts.target]
    work = graph
    if opts.fold and rulesets:
        with clock.stage("fold"):
            work, fstats = fold_to_fixpoint(graph)
        report.folded = fstats.folded
        if fstats.skipped:
            report.warnings.append(fstats.skipped)
    with clock.stage("encode"):
        enc = encode(work)
    with clock.stage("cost"):
        t = time.perf_counter()
        before = take_snapshot(enc)
        concrete, note = sizing_types(graph, opts.dims)
        if note:
            report.warnings.append(note)
        costs0 = node_costs(before.retyped(concrete), target, opts.dims, before)
        choice0 = greedy(before, costs0)
        report.cost_before_us = graph_cost(before, choice0, costs0)
        by_op0 = cost_by_op(before, choice0, costs0)
        per_node = POST_SECONDS_PER_NODE  # small e-graphs: fixed costs would inflate a rate
        if before.n_nodes >= 2000:
            per_node = max(per_node, 1.5 * (time.perf_counter() - t) / before.n_nodes)
    # The ILP's own budget is reserved out of what is left, but never more than half of it.
    extract_budget = opts.extract_time_limit if opts.extractor == "ilp" else 0.0
    if deadline is not None:
        extract_budget = min(extract_budget, 0.5 * max(0.0, deadline - time.monotonic()))
    with clock.stage("saturate"):
        stats = saturate(
            enc,
            rulesets,
            opts.limits,
            deadline=None if deadline is None else deadline - extract_budget,
            seconds_per_node=per_node,
        )
    report.saturation = stats.to_json()
    report.warnings += stats.refused  # rules egglog refused, each left out alone
    with clock.stage("snapshot"):
        snap = take_snapshot(enc)
    report.egraph = {
        "classes": len(snap),
        "enodes": snap.n_nodes,
        "typed_nodes": enc.typed,
        "opaque_nodes": enc.opaque_nodes,
    }
    with clock.stage("extract"):
        costs = node_costs(snap.retyped(concrete), target, opts.dims, snap)
        if opts.target == "portable":  # only standard ONNX ops besides the input's own
            costs = standard_only(costs, snap, op_types(before))
        left = None if deadline is None else deadline - time.monotonic()
        choice = _extract(snap, costs, opts, left, report)
        report.cost_after_us = graph_cost(snap, choice, costs)
        by_op = cost_by_op(snap, choice, costs)
        report.cost_by_op = {
            op: [round(by_op0.get(op, 0.0), 3), round(by_op.get(op, 0.0), 3)]
            for op in sorted(set(by_op0) | set(by_op))
        }
        report.rule_effects = rule_effects(
            (before, choice0, costs0), (snap, choice, costs), rulesets, stats.matches
        )
    with clock.stage("decode"):
        out = decode(enc, snap, choice)
    if opts.fold and rulesets:
        with clock.stage("fold"):  # constants the extraction computed (cost.py: they are free)
            out, fstats = fold_constants(out)
        for op, n in fstats.folded.items():
            report.folded[op] = report.folded.get(op, 0) + n
    return out


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
    over as bytes), initializers without their data (`Graph.require_data`), and a file that
    changed since `stat` was taken. Any other exception while reading the file is a model we
    cannot read."""
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
    graph.require_data()
    return graph
