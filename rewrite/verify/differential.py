"""Differential check: run reference and candidate in ONNX Runtime on the same inputs, compare.

Tolerance policy. Both models run in ONNX Runtime with the same session options (graph
optimizations ORT_ENABLE_ALL, `threads` intra-op threads, sequential execution, the same
providers) on the same feeds: `trials` seeded random feed sets (`make_inputs` with seeds
`seed`, `seed + 1`, ...) plus every feed set the caller gives. Outputs are matched by name.
The candidate passes only if, on every feed set, every output passes:

1. Interface: the candidate has the reference's inputs and exactly the reference's outputs, by
   name (a missing or extra output fails), and each output has the reference's dtype and shape.
2. Integer, bool and string outputs (and any dtype not listed below) must be exactly equal.
3. Floating outputs: NaN must appear in the candidate exactly where it appears in the
   reference, and +Inf / -Inf exactly where the reference has the same infinity. Every element
   finite in both must satisfy |cand - ref| <= atol + rtol * |ref|, with
   scale = max(1, max |ref| over the finite elements of that output on that feed set) and

   | dtype             | rtol | atol           |
   |-------------------|------|----------------|
   | float32           | 1e-4 | 1e-5 * scale   |
   | float16, bfloat16 | 1e-2 | 1e-3 * scale   |
   | float64           | 1e-9 | 1e-12 * scale  |

4. Calibration (`calibrate=True`, off by default): ORT's own graph optimizations change float
   results (fusions reorder sums), so a rewrite can legitimately move an output by as much as
   ORT itself does. `ort_noise` measures, per output, max |ENABLE_ALL - DISABLE_ALL| of the
   reference on the same feeds; that output's atol becomes max(policy atol, 4 * noise) and its
   record says `calibrated=True` and gives the noise. rtol is never widened.

Reported per output (the worst over feed sets): `max_abs` = max |cand - ref| over elements
finite in both; `max_rel` = max |cand - ref| / |ref| over those with ref != 0; `error_ratio` =
max |cand - ref| / (atol + rtol * |ref|) (<= 1 passes; floats only); `mismatches` = elements
outside tolerance, summed over feed sets; `bit_identical` = same dtype, shape and bytes on every
feed set (so -0.0 vs 0.0 or a different NaN payload is not bit-identical, though it passes).

Feed sets the reference cannot run. A generated feed set can be invalid for a valid model (a
value the input generator could not tell apart from any other, `onnx_io.inputs`): a generated
set on which the reference fails in ORT is dropped, and the result lists it in `dropped`. The
caller's feed sets are never dropped: the reference failing on one raises `VerificationError`.
When every generated set is dropped and the caller gave none, `UncheckableError` (a
`VerificationError`) says to give inputs: nothing can be compared.

A candidate that ONNX Runtime cannot load or run fails with the first line of ORT's error; a
reference that ORT cannot load raises `VerificationError` naming the model, since nothing can
be checked against it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints

from rewrite.errors import ModelError, UncheckableError, VerificationError
from rewrite.onnx_io.inputs import Feed, ModelLike, input_specs, sample
from rewrite.verify.compare import OutputDiff, compare, merge

Feeds = dict[str, Feed]


@dataclass
class DiffResult:
    """The verdict of `differential`: `ok`, per-output records, and why it failed."""

    ok: bool
    outputs: list[OutputDiff]
    trials: int
    seconds: float
    reference: str
    candidate: str
    reason: str = ""
    problems: list[str] = field(default_factory=list)
    calibrated: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    """Generated feed sets the reference fails on, each with ORT's error (module docstring)."""

    def summary(self) -> str:
        """One line: the verdict, the worst difference or the first problem, and the time."""
        n = len(self.outputs)
        tail = f"{self.trials} feed set{'s' * (self.trials != 1)}, {self.seconds:.2f} s"
        if self.dropped:
            k = len(self.dropped)
            tail += f"; {k} generated set{'s' * (k != 1)} the input model fails on dropped"
        if not self.ok:
            bad = sum(not o.ok for o in self.outputs)
            return f"FAILED: {self.reason} ({bad} of {n} outputs differ; {tail})"
        same = sum(o.bit_identical for o in self.outputs)
        worst = max(self.outputs, key=lambda o: o.max_abs, default=None)
        where = f", worst max_abs {worst.max_abs:.3g} on {worst.name!r}" if worst else ""
        agree = "output agrees" if n == 1 else "outputs agree"
        return f"ok: {n} {agree} ({same} bit-identical{where}; {tail})"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (non-finite floats become strings)."""
        return _finite(asdict(self))


def differential(
    reference: ModelLike,
    candidate: ModelLike,
    *,
    feeds: Sequence[Feeds] | None = None,
    seed: int = 0,
    trials: int = 2,
    threads: int = 1,
    providers: Sequence[str] = ("CPUExecutionProvider",),
    calibrate: bool = False,
    dims: dict[str, int] | None = None,
) -> DiffResult:
    """Compare `candidate` with `reference` in ORT under the module's tolerance policy.

    Never raises for a candidate problem (the result is not ok and says why); raises
    `VerificationError` when the reference cannot be read or loaded, or fails on a feed set
    the caller gave, and `UncheckableError` when it runs on no feed set (generated sets it
    fails on are dropped: module docstring). Models given as
    paths are loaded by ORT from the file (external data works); a ModelProto is serialized in
    memory, so it must be under 2 GB. Sessions are created one at a time and freed before the
    next, so at most one model is held in ORT at once.
    """
    t0 = time.perf_counter()
    ref_label, cand_label = _label(reference), _label(candidate)
    timings: dict[str, float] = {}
    feed_sets, names = _feed_sets(reference, ref_label, feeds, seed, trials, dims)
    timings["inputs"] = time.perf_counter() - t0

    generated = len(feed_sets) - len(feeds or [])
    ref_out, kept, dropped = _reference_outputs(
        reference, ref_label, feed_sets, names, generated, threads, providers
    )
    feed_sets, names = [feed_sets[i] for i in kept], [names[i] for i in kept]
    timings["reference"] = time.perf_counter() - t0 - sum(timings.values())
    noise: dict[str, float] = {}
    if calibrate:
        plain = _run_reference(reference, ref_label, feed_sets, "DISABLE_ALL", threads, providers)
        noise = _max_abs_diff(ref_out, plain)
        del plain
        timings["calibrate"] = time.perf_counter() - t0 - sum(timings.values())

    def result(ok: bool, outputs: list[OutputDiff], reason: str, problems: list[str]) -> DiffResult:
        timings["candidate"] = time.perf_counter() - t0 - sum(timings.values())
        return DiffResult(
            ok, outputs, len(feed_sets), time.perf_counter() - t0, ref_label, cand_label,
            reason, problems, calibrate, timings, dropped,
        )  # fmt: skip

    try:
        sess = _session(candidate, "ENABLE_ALL", threads, providers)
    except Exception as e:  # ORT raises many types; every one is a failed candidate
        return result(False, [], f"candidate failed to load in ONNX Runtime: {_first(e)}", [])
    missing = [n for n in feed_sets[0] if n not in {i.name for i in sess.get_inputs()}]
    extra = [i.name for i in sess.get_inputs() if i.name not in feed_sets[0]]
    if missing or extra:
        why = f"candidate inputs differ from the reference: missing {missing}, extra {extra}"
        return result(False, [], why, [why])
    try:
        cand_out = _run(sess, feed_sets)
    except Exception as e:
        return result(False, [], f"candidate failed to run in ONNX Runtime: {_first(e)}", [])
    del sess

    outputs, problems = [], []
    for name in ref_out[0]:
        if name not in cand_out[0]:
            problems.append(f"output {name!r} is missing from the candidate")
            outputs.append(OutputDiff(name, "", (), False, False, reason=problems[-1]))
            continue
        per_set = [
            compare(name, r[name], c[name], noise=noise.get(name))
            for r, c in zip(ref_out, cand_out, strict=True)
        ]
        merged = merge(per_set, names)
        outputs.append(merged)
        if not merged.ok:
            problems.append(merged.reason)
    problems += [f"candidate has extra output {n!r}" for n in cand_out[0] if n not in ref_out[0]]
    return result(not problems, outputs, problems[0] if problems else "", problems)


def ort_noise(
    model: ModelLike,
    feeds: Feeds | Sequence[Feeds],
    *,
    threads: int = 1,
    providers: Sequence[str] = ("CPUExecutionProvider",),
) -> dict[str, float]:
    """Per output, max |ORT_ENABLE_ALL - ORT_DISABLE_ALL| of `model` over `feeds` (floats)."""
    feed_sets = [feeds] if isinstance(feeds, dict) else list(feeds)
    label = _label(model)
    full = _run_reference(model, label, feed_sets, "ENABLE_ALL", threads, providers)
    plain = _run_reference(model, label, feed_sets, "DISABLE_ALL", threads, providers)
    return _max_abs_diff(full, plain)


def _feed_sets(
    reference: ModelLike,
    label: str,
    feeds: Sequence[Feeds] | None,
    seed: int,
    trials: int,
    dims: dict[str, int] | None,
) -> tuple[list[Feeds], list[str]]:
    sets: list[Feeds] = []
    if trials > 0:
        try:
            specs = input_specs(reference, dims=dims)
        except ModelError as e:
            raise VerificationError(f"reference model {label}: {e}") from e
        sets = [sample(specs, seed + i) for i in range(trials)]
    names = [f"seed {seed + i}" for i in range(trials)]
    sets += list(feeds or [])
    names += [f"user feed set {i}" for i in range(len(feeds or []))]
    if not sets:
        raise VerificationError(f"{label}: nothing to compare on (trials=0 and no feeds given)")
    return sets, names


def _session(
    model: ModelLike, level: str, threads: int, providers: Sequence[str]
) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_{level}")
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3  # errors only; warnings would flood the user's terminal
    src = model.SerializeToString() if isinstance(model, onnx.ModelProto) else os.fspath(model)
    return ort.InferenceSession(src, so, providers=list(providers))


def _run(
    sess: ort.InferenceSession, feed_sets: list[Feeds], options: ort.RunOptions | None = None
) -> list[dict[str, Any]]:
    names = [o.name for o in sess.get_outputs()]
    return [dict(zip(names, sess.run(names, f, options), strict=True)) for f in feed_sets]


def _reference_outputs(
    model: ModelLike, label: str, feed_sets: list[Feeds], names: list[str], generated: int,
    threads: int, providers: Sequence[str],
) -> tuple[list[dict[str, Any]], list[int], list[str]]:  # fmt: skip
    """The reference's outputs (ORT_ENABLE_ALL) on the feed sets it runs on, their indices, and
    the generated sets (the first `generated`) it fails on, each with ORT's error."""
    try:
        sess = _session(model, "ENABLE_ALL", threads, providers)
    except Exception as e:  # whatever ORT raises, the reference is unusable
        raise VerificationError(
            f"reference model {label} failed in ONNX Runtime (ORT_ENABLE_ALL): {_first(e)}; "
            "nothing was compared. Check that the input model runs in ONNX Runtime."
        ) from e
    quiet = ort.RunOptions()
    quiet.log_severity_level = 4  # a generated set the model fails on is dropped, not an error
    outs, kept, dropped = [], [], []
    for i, feed in enumerate(feed_sets):
        try:
            outs += _run(sess, [feed], quiet if i < generated else None)
        except Exception as e:
            if i >= generated:
                raise VerificationError(
                    f"reference model {label} failed in ONNX Runtime on {names[i]} (the inputs "
                    f"given): {_first(e)}; give inputs the input model runs on"
                ) from e
            dropped.append(f"{names[i]}: {_first(e)}")
            continue
        kept.append(i)
    unfeedable = _unfeedable(sess)
    if not kept and unfeedable:
        raise UncheckableError(
            f"the input model {label} has inputs ONNX Runtime's Python API cannot feed "
            f"({', '.join(unfeedable)}), so nothing was compared (--inputs cannot help)"
        )
    if not kept:
        raise UncheckableError(
            f"the input model {label} runs in ONNX Runtime on none of the {generated} generated "
            "input sets, so nothing was compared; if it runs on other inputs, pass them with "
            f"--inputs ({dropped[0] if dropped else 'no set was generated'})"
        )
    return outs, kept, dropped


_UNFEEDABLE = ("bfloat16", "float8", "float4", "int4", "uint4", "int2", "uint2")
"""Element types whose numpy arrays onnxruntime's Python API does not accept as feeds."""


def _unfeedable(sess: ort.InferenceSession) -> list[str]:
    """'name (type)' of each input of `sess` whose element type cannot be fed from numpy."""
    out = []
    for i in sess.get_inputs():
        # tensor(T), seq(tensor(T)), optional(tensor(T)) or optional(seq(tensor(T)))
        inner = str(i.type).removeprefix("optional(").removeprefix("seq(")
        elem = inner.removeprefix("tensor(").rstrip(")")
        if elem.startswith(_UNFEEDABLE):
            out.append(f"'{i.name}' ({i.type})")
    return out


def _run_reference(
    model: ModelLike, label: str, feed_sets: list[Feeds], level: str, threads: int,
    providers: Sequence[str],
) -> list[dict[str, Any]]:  # fmt: skip
    try:
        return _run(_session(model, level, threads, providers), feed_sets)
    except Exception as e:  # whatever ORT raises, the reference is unusable
        raise VerificationError(
            f"reference model {label} failed in ONNX Runtime (ORT_{level}): {_first(e)}; "
            "nothing was compared. Check that the input model runs in ONNX Runtime."
        ) from e


def _max_abs_diff(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for x, y in zip(a, b, strict=True):
        for name, u in x.items():
            v = y.get(name)
            if not isinstance(u, np.ndarray) or not isinstance(v, np.ndarray) or u.shape != v.shape:
                continue
            if u.dtype == object or u.dtype.kind in "SU":
                continue
            with np.errstate(invalid="ignore"):  # inf - inf where both are inf
                d = np.abs(u.astype(np.float64) - v.astype(np.float64))
            d = d[np.isfinite(d)]
            out[name] = max(out.get(name, 0.0), float(d.max()) if d.size else 0.0)
    return out


def _label(model: ModelLike) -> str:
    if isinstance(model, onnx.ModelProto):
        return f"<ModelProto graph {model.graph.name!r}>"
    return os.fspath(model)


def _first(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    line = lines[0] if lines else type(e).__name__
    return line if len(line) <= 400 else line[:397] + "..."


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x
