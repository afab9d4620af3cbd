"""The fuzzer's contract for one case, and the tally of how cases ended, by mutation kind.

`check_case` runs `rewrite.cli.main` in this process on a `Case` (tests/robustness/mutations.py)
and asserts that it ends in one of three ways:

- exit 1 with exactly one line on stderr (`rewrite: error: ...`) and nothing written;
- exit 0 with an output that passes the ONNX checks the input passes (the full checker,
  unless the input fails it: `rewrite.saving`), a report whose differential check passed, and
  outputs that agree with the input's in an independent run (`agree_in_ort`: this module's own
  inputs, session and tolerance, none of the tool's verdict);
- exit 3 with the input graph written (it passes the same checks) and only
  `rewrite: warning: ...` lines on stderr.

Never a traceback, an unexpected exception, a modified input or a leftover temporary file.
`TALLY` counts every outcome per (family, kind). A contract violation is raised (the test);
with `TALLY.keep_going` (the bench) it is counted as a crash, the case is written to
`TALLY.crash_dir` and the run goes on.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from rewrite.cli import main
from rewrite.onnx_io.check import check_level
from tests.robustness.mutations import BYTES, MIXED, NO_CHANGE, STRUCTURE, Case

ARGS = ["optimize", "-q", "--max-memory", "1000", "--time-limit", "60"]
"""Workers capped at 4 GB: a model declaring huge dims must not take the machine down."""

REFUSED, OPTIMIZED, FALLBACK, CRASH, SKIPPED = (
    "refused (exit 1)",
    "optimized and verified (exit 0)",
    "input graph written (exit 3)",
    "crash",
    "not serializable",
)
REASONS = [
    ("differential check could not run", "the check could not run"),
    ("differential check failed", "the check failed"),
    ("optimized model rejected", "the optimized model was rejected"),
    ("internal error", "internal error"),
    ("optimization failed", "a stage failed"),
    ("worker process ended", "the worker died"),
    ("not an ONNX model", "not ONNX / truncated / empty"),
    ("truncated or corrupt", "not ONNX / truncated / empty"),
    ("file is empty", "not ONNX / truncated / empty"),
    ("no IR version", "not ONNX / truncated / empty"),
    ("onnx.checker rejects", "onnx.checker rejects the model"),
    ("ONNX Runtime cannot load it", "fails onnx.checker and ONNX Runtime cannot load it"),
    ("which no node", "dangling input"),
    ("already defines", "a value defined twice"),
    ("declared twice", "a value defined twice"),
    ("cycle", "a cycle"),
    ("opset", "opset / IR version"),
    ("IR version", "opset / IR version"),
    ("failed in ONNX Runtime", "the input model fails in ONNX Runtime"),
    ("on none of the", "no generated input runs on the input model"),
    ("not UTF-8", "a name that is not UTF-8"),
    ("codec can't decode", "a string that is not UTF-8"),
    ("declares a negative dim", "a negative declared dim"),
    ("declares dims", "dims larger than the data"),
    ("negative dim", "dims larger than the data"),
    ("is not", "an output nothing computes"),
    ("no outputs", "no outputs / no nodes"),
    ("graph is empty", "no outputs / no nodes"),
]
"""(text in the message, reason group): the first match names why a case was refused or fell
back (the fallback warnings first: they quote the error that caused them)."""


def reason(line: str) -> str:
    """The reason group of an error or warning message (REASONS; else "other: ...")."""
    for key, group in REASONS:
        if key in line:
            return group
    return "other: " + " ".join(line.split(": ")[-1].split()[:6])


@dataclass
class Tally:
    """Outcomes per (family, kind), reasons per (family, kind, outcome), crash details."""

    counts: defaultdict[tuple[str, str], Counter[str]] = field(
        default_factory=lambda: defaultdict(Counter)
    )
    reasons: defaultdict[tuple[str, str, str], Counter[str]] = field(
        default_factory=lambda: defaultdict(Counter)
    )
    seconds: Counter[tuple[str, str]] = field(default_factory=Counter)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    notable: list[dict[str, Any]] = field(default_factory=list)
    """Every case that ended with the input graph written, or was refused for a reason no
    REASONS entry names: what it was, and the message."""
    keep_going: bool = False
    crash_dir: Path | None = None

    def add(self, case: Case, outcome: str, why: str, seconds: float, message: str = "") -> None:
        """Count one case: its outcome, the reason group `why`, the message behind it."""
        key = (case.family, case.kind)
        self.counts[key][outcome] += 1
        if why:
            self.reasons[(*key, outcome)][why] += 1
        if outcome == FALLBACK or why.startswith("other"):  # worth reading one by one
            self.notable.append({"outcome": outcome, "kind": case.kind, "seed": case.seed,
                                 "steps": list(case.steps), "why": message})  # fmt: skip
        self.seconds[key] += seconds

    def total(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())

    def outcomes(self, family: str) -> Counter[str]:
        """How many cases of `family` ended in each outcome, so far."""
        out: Counter[str] = Counter()
        for (f, _), c in self.counts.items():
            if f == family:
                out.update(c)
        return out

    def summary(self) -> dict[str, Any]:
        """Outcome counts per family and reason counts (JSON-ready)."""
        out: dict[str, Any] = {}
        for (family, _), c in self.counts.items():
            out.setdefault(family, Counter()).update(c)
        reasons: Counter[str] = Counter()
        for c in self.reasons.values():
            reasons.update(c)
        return {
            **{k: dict(v.most_common()) for k, v in out.items()},
            "reasons": dict(reasons.most_common()),
        }

    def to_json(self) -> dict[str, Any]:
        """Everything, per kind (for REWRITE_FUZZ_LOG and the bench's --json)."""
        rows = []
        for (family, kind), c in sorted(self.counts.items()):
            rows.append({
                "family": family, "kind": kind, "seconds": round(self.seconds[(family, kind)], 2),
                "outcomes": dict(c),
                "reasons": {o: dict(self.reasons[(family, kind, o)]) for o in (REFUSED, FALLBACK)
                            if self.reasons[(family, kind, o)]},
            })  # fmt: skip
        return {"cases": self.total(), **self.summary(), "kinds": rows, "crashes": self.crashes,
                "notable": self.notable}  # fmt: skip

    def table(self) -> list[str]:
        """The markdown table: one row per mutation kind (see BENCHMARKS.md)."""
        rows = [
            "| family | mutation kind | cases | refused, exit 1 (by reason) | optimized + "
            "verified | input graph written, exit 3 (why) | crashes | s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        order = {"structure": [*STRUCTURE, MIXED, NO_CHANGE], "bytes": [*BYTES, MIXED, NO_CHANGE]}
        grand: Counter[str] = Counter()
        for family, kinds in order.items():
            for kind in kinds:
                c = self.counts.get((family, kind))
                if not c:
                    continue
                grand.update(c)
                refused = self._cell(c[REFUSED], (family, kind, REFUSED))
                fallback = self._cell(c[FALLBACK], (family, kind, FALLBACK))
                skipped = f" (+{c[SKIPPED]} not serializable)" if c[SKIPPED] else ""
                rows.append(
                    f"| {family} | {kind} | {sum(c.values()) - c[SKIPPED]}{skipped} | {refused} | "
                    f"{c[OPTIMIZED]} | {fallback} | {c[CRASH]} | "
                    f"{self.seconds[(family, kind)]:.0f} |"
                )
        rows.append(
            f"| **all** | | **{sum(grand.values()) - grand[SKIPPED]}** | **{grand[REFUSED]}** | "
            f"**{grand[OPTIMIZED]}** | **{grand[FALLBACK]}** | **{grand[CRASH]}** | "
            f"{sum(self.seconds.values()):.0f} |"
        )
        return rows

    def _cell(self, n: int, key: tuple[str, str, str]) -> str:
        if not n:
            return "0"
        parts = ", ".join(f"{why} {k}" for why, k in self.reasons[key].most_common())
        return f"{n}: {parts}"


TALLY = Tally()


def check_case(case: Case, tally: Tally = TALLY) -> str:
    """Run `rewrite optimize` on `case`; assert the contract; count and return the outcome.

    With `tally.keep_going`, a violation (or any exception) is counted as CRASH instead of
    raised, and the case is saved under `tally.crash_dir` when there is one.
    """
    t0 = time.perf_counter()
    if case.raw is None:
        tally.add(case, SKIPPED, "", 0.0)
        return SKIPPED
    message = ""
    try:
        outcome, why, message = _run(case.raw)
    except Exception as e:  # AssertionError: the contract; anything else escaped `main`
        if not tally.keep_going:
            raise
        outcome, why = CRASH, f"{type(e).__name__}: {str(e)[:500]}"
        record = {"family": case.family, "kind": case.kind, "seed": case.seed,
                  "steps": list(case.steps), "error": why}  # fmt: skip
        if tally.crash_dir is not None:
            tally.crash_dir.mkdir(parents=True, exist_ok=True)
            path = tally.crash_dir / f"crash{len(tally.crashes)}.onnx"
            path.write_bytes(case.raw)
            record["file"] = str(path)
        tally.crashes.append(record)
    tally.add(case, outcome, why, time.perf_counter() - t0, message)
    return outcome


def _check_like_input(src: Path, dst: Path) -> None:
    """`dst` passes the strictest onnx.checker level `src` passes (raises if not)."""
    level, _ = check_level(src)
    if level != "none":
        onnx.checker.check_model(str(dst), full_check=level == "full")


def _session(path: Path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _feed(i: Any, rng: np.random.Generator) -> np.ndarray:
    """A seeded input for ORT's description `i` of it: symbolic dims 1, floats N(0, 1), ints
    0 or 1 (valid indices wherever an index is expected), bools at random."""
    shape = [d if isinstance(d, int) and d >= 0 else 1 for d in (i.shape or [])]
    kind = i.type.removeprefix("tensor(").removesuffix(")")
    dtype = {"float": np.float32, "double": np.float64, "float16": np.float16}.get(kind)
    if dtype is not None:
        return rng.standard_normal(shape).astype(dtype)
    if kind == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.integers(0, 2, size=shape).astype(np.dtype(kind))


def agree_in_ort(src: Path, dst: Path, seeds: int = 2) -> None:
    """`dst` computes what `src` computes, checked independently of the tool's own check: both
    in ORT on this module's seeded inputs, every output the same dtype and shape and equal
    (floats within rtol 1e-3, atol 1e-4 x the output's largest magnitude; NaN where NaN). Where
    `src` fails on these inputs, `dst` must fail too. AssertionError when they differ."""
    ref, cand = _session(src), _session(dst)
    assert [i.name for i in cand.get_inputs()] == [i.name for i in ref.get_inputs()]
    assert [o.name for o in cand.get_outputs()] == [o.name for o in ref.get_outputs()]
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        feeds = {i.name: _feed(i, rng) for i in ref.get_inputs()}
        try:
            want = ref.run(None, feeds)
        except Exception as e:  # ORT raises many types: the input model fails on these inputs
            failed = f"{type(e).__name__}: {e}"
        else:
            failed = ""
        if failed:
            try:
                cand.run(None, feeds)
            except Exception:
                continue
            raise AssertionError(f"seed {seed}: the input fails ({failed[:300]}), the output not")
        got = cand.run(None, feeds)
        for o, w, g in zip(ref.get_outputs(), want, got, strict=True):
            w, g = np.asarray(w), np.asarray(g)
            where = f"seed {seed}, output {o.name!r}"
            assert (g.dtype, g.shape) == (w.dtype, w.shape), (where, g.dtype, g.shape, w.shape)
            if w.dtype.kind == "f":
                finite = np.abs(w[np.isfinite(w)])
                scale = max(1.0, float(finite.max()) if finite.size else 1.0)
                np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4 * scale, err_msg=where)
            else:
                np.testing.assert_array_equal(g, w, err_msg=where)


def _run(raw: bytes) -> tuple[str, str, str]:
    """(outcome, reason group, message) of one run on `raw`; AssertionError when the contract
    breaks."""
    with tempfile.TemporaryDirectory(prefix="rewrite-fuzz-") as d:
        folder = Path(d)
        src, dst, rep = folder / "in.onnx", folder / "out.onnx", folder / "report.json"
        src.write_bytes(raw)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([*ARGS, str(src), str(dst), "--report", str(rep)])
        text = out.getvalue() + err.getvalue()
        assert "Traceback" not in text, text
        assert src.read_bytes() == raw, "the input file was modified"
        lines = err.getvalue().splitlines()
        written = {"in.onnx", "out.onnx", "out.onnx.data", "report.json"}
        assert set(os.listdir(folder)) <= written, f"leftovers: {os.listdir(folder)}"
        if rc == 1:
            assert len(lines) == 1 and lines[0].startswith("rewrite: error: "), lines
            assert not dst.exists(), "an output was written for a refused model"
            return REFUSED, reason(lines[0]), lines[0]
        if rc == 0:
            _check_like_input(src, dst)
            report = json.loads(rep.read_text())
            assert report["status"] == "optimized" and report["verification"]["ok"] is True
            agree_in_ort(src, dst)
            return OPTIMIZED, "", ""
        assert rc == 3, (rc, text)
        assert all(ln.startswith("rewrite: warning: ") for ln in lines), lines
        _check_like_input(src, dst)
        report = json.loads(rep.read_text())
        assert report["status"] == "fallback"
        warnings = " ".join(report["warnings"])
        return FALLBACK, reason(warnings), warnings[:500]
