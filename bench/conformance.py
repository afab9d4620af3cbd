"""The ONNX backend conformance suite through `rewrite optimize`: how many single-op models come
out optimized, and whether their outputs still equal ONNX Runtime's on the input.

Every node test case of `onnx.backend.test.case.node.collect_testcases` (one op, its inputs and
expected outputs) is saved as a model and optimized as a user would (built-in rules, CPU
target, crash isolation, the default differential check); with `--inputs`, the case's own
inputs are passed as `--inputs` (an `.npz`, `onnx_io.feeds` format). The baseline is ONNX
Runtime on the input model, on the case's inputs, in the same run. Tally:

- total: node test cases; ORT runs: ORT loads the input model and runs it on the case's inputs;
- optimized, identical: exit 0 and every output bit-identical to ORT on the input;
- optimized, within tolerance: exit 0, outputs within the differential check's tolerance;
- optimized, WRONG: exit 0 but an output differs or the output model does not run (a bug);
- fallback: exit 3 (the input graph written), with the first warning;
- refused: exit 1, with the error.
Cases ORT cannot run are tallied by outcome too, but only "ORT runs" cases count as failures.

    .venv/bin/python bench/conformance.py [--inputs] [--filter REGEX] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints

from rewrite.errors import RewriteError
from rewrite.onnx_io.feeds import save_inputs
from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED
from rewrite.verify.compare import compare

IDENTICAL, TOLERANCE, WRONG = "identical", "within tolerance", "WRONG"


@dataclass
class Outcome:
    """What one case did: whether ORT runs it, `rewrite`'s exit status, why, and the match."""

    name: str
    ort_runs: bool
    exit: int
    reason: str = ""
    match: str = ""  # IDENTICAL | TOLERANCE | WRONG (exit 0 on an ORT-runnable case only)
    seconds: float = 0.0


def node_cases(pattern: str | None = None) -> list[Any]:
    """The suite's node test cases (sorted by name), those whose name matches `pattern`."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own numpy overflow warnings
        cases = [c for c in collect_testcases(None) if c.kind == "node"]
    rx = re.compile(pattern) if pattern else None
    return sorted((c for c in cases if rx is None or rx.search(c.name)), key=lambda c: c.name)


def case_feeds(case: Any) -> dict[str, Any]:
    """The case's first data set as feeds: graph input name -> array, list or None."""
    inputs = case.data_sets[0][0]
    return {  # a rank-0 input arrives as a numpy scalar, which ORT refuses: an array
        vi.name: np.asarray(x) if isinstance(x, np.generic) else x
        for vi, x in zip(case.model.graph.input, inputs, strict=False)
    }


def ort_run(path: Path, feeds: dict[str, Any]) -> dict[str, Any]:
    """Every output of the model at `path` in ORT (CPU, default options) on `feeds`."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds), strict=True))


def run_case(case: Any, folder: Path, *, with_inputs: bool, isolate: bool = True) -> Outcome:
    """Optimize `case`'s model (in `folder`) as `rewrite optimize` does and judge the output."""
    t0 = time.perf_counter()
    src, dst = folder / "model.onnx", folder / "out.onnx"
    onnx.save(case.model, src)
    feeds = case_feeds(case)
    try:
        ref = ort_run(src, feeds)
    except Exception:  # ORT cannot load or run it: not counted against rewrite
        ref = None
    npz = str(save_inputs(feeds, folder / "inputs.npz")) if with_inputs else None
    from rewrite.rules.load import select_rulesets

    opts = Options(rulesets=select_rulesets(target="cpu"), inputs=npz, isolate=isolate)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = optimize(src, dst, opts)
    except RewriteError as e:
        return Outcome(case.name, ref is not None, 1, _line(e), "", time.perf_counter() - t0)
    if report.status != STATUS_OPTIMIZED:
        written = [w for w in report.warnings if "input graph written" in w]
        why = _line((written or report.warnings or [report.status])[0])
        return Outcome(case.name, ref is not None, 3, why, "", time.perf_counter() - t0)
    match = "" if ref is None else _match(ref, dst, feeds)
    return Outcome(case.name, ref is not None, 0, "", match, time.perf_counter() - t0)


def _match(ref: dict[str, Any], dst: Path, feeds: dict[str, Any]) -> str:
    try:
        out = ort_run(dst, feeds)
    except Exception as e:
        return f"{WRONG}: the output model fails in ORT ({_line(e)})"
    if list(out) != list(ref):
        return f"{WRONG}: outputs {list(out)}, the input's {list(ref)}"
    diffs = [compare(n, ref[n], out[n]) for n in ref]
    bad = [d for d in diffs if not d.ok]
    if bad:
        return f"{WRONG}: {bad[0].reason}"
    return IDENTICAL if all(d.bit_identical for d in diffs) else TOLERANCE


def _line(e: object) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else type(e).__name__


def tally(outcomes: Iterable[Outcome]) -> dict[str, Any]:
    """Counts (see the module docstring) and the reasons of fallbacks and refusals."""
    outs = list(outcomes)
    runs = [o for o in outs if o.ort_runs]
    return {
        "total": len(outs),
        "ort_runs": len(runs),
        "optimized_identical": sum(o.exit == 0 and o.match == IDENTICAL for o in runs),
        "optimized_within_tolerance": sum(o.exit == 0 and o.match == TOLERANCE for o in runs),
        "optimized_wrong": [f"{o.name}: {o.match}" for o in runs if o.match.startswith(WRONG)],
        "fallback": [f"{o.name}: {o.reason}" for o in runs if o.exit == 3],
        "refused": [f"{o.name}: {o.reason}" for o in runs if o.exit == 1],
        "ort_fails": dict(Counter(f"exit {o.exit}" for o in outs if not o.ort_runs)),
    }


def print_tally(t: dict[str, Any], seconds: float) -> None:
    """The tally as a few lines, then every fallback and refusal with its reason."""
    print(f"total {t['total']}, ORT runs {t['ort_runs']} ({seconds:.0f} s)")
    print(f"  optimized, identical to ORT on the input: {t['optimized_identical']}")
    print(f"  optimized, within tolerance:              {t['optimized_within_tolerance']}")
    print(f"  optimized, WRONG:                         {len(t['optimized_wrong'])}")
    print(f"  fallback (exit 3, input graph written):   {len(t['fallback'])}")
    print(f"  refused (exit 1):                         {len(t['refused'])}")
    print(f"  ORT cannot run the input: {sum(t['ort_fails'].values())} {t['ort_fails']}")
    for key in ("optimized_wrong", "fallback", "refused"):
        for line in t[key]:
            print(f"{key}: {line}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", action="store_true", help="pass each case's inputs as --inputs")
    ap.add_argument("--filter", help="only cases whose name matches this regex")
    ap.add_argument("--json", help="also write every outcome here")
    args = ap.parse_args(argv)
    cases = node_cases(args.filter)
    t0 = time.perf_counter()
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            folder = Path(tmp) / case.name
            folder.mkdir()
            outcomes.append(run_case(case, folder, with_inputs=args.inputs))
            if (i + 1) % 100 == 0:
                print(f"{i + 1}/{len(cases)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    t = tally(outcomes)
    print_tally(t, time.perf_counter() - t0)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 1 if t["optimized_wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
