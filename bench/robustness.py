"""Robustness numbers: e-node overshoot, time-limit accuracy, crash-isolation overhead.

    python bench/robustness.py [--models /tmp/corpus_mat] [--md out.md] [--only overshoot,...]

- overshoot: saturation with Add assoc + comm (`EXPLODE`) under node limits; the largest
  e-graph over the limit, as a fraction of it (the promise: <= 10%). Baseline in the same run:
  plain egglog iterations (no driver) from the same model until past the limit.
- time: whole runs of `optimize` with `EXPLODE` + cleanup, nodes and iterations unlimited, under
  `time_limit` T; wall time / T (the promise: <= 1.1).
- isolation: `rewrite optimize` in fresh processes with and without the worker process
  (`--no-isolate`, the baseline), alternating; median wall seconds and the ratio.
- big (not in the default set): `optimize` (worker process, one feed set) on the 2.42 GB
  external-data model of tests/robustness/test_big.py, generated in `--big-dir` (needs 10 GB
  free there) and deleted afterwards; wall time, peak RSS of the worker and of this process.
- fuzz (not in the default set): the fuzz tests' own derandomized cases
  (tests/robustness/test_fuzz.py, as many as CI runs times `--fuzz-scale`), outcomes counted
  per mutation kind; a crash is counted, saved under `--crash-dir` and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rewrite.egraph.encode import encode
from rewrite.limits import peak_rss_mb
from rewrite.onnx_io import load
from rewrite.pipeline import Options, optimize
from rewrite.rules.saturate import RULES, Limits, egraph_size, install, saturate
from rulesets.cleanup import CLEANUP
from tests.robustness.models import EXPLODE, add_chain, write
from tests.robustness.test_big import big_model

UNLIMITED = 10**9


def overshoot(models: dict[str, Path], limits: list[int]) -> list[str]:
    rows = [
        "| model | node limit | plain egglog: size after passing it | driver: max size | "
        "overshoot | stop | iterations | bounded | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, path in models.items():
        graph = load(path)
        for limit in limits:
            enc = encode(graph)
            install(enc, [EXPLODE])
            plain = egraph_size(enc.egraph)
            for _ in range(30):
                if plain >= limit or plain > 3_000_000:
                    break
                enc.egraph.parse_and_run_program(f"(run-schedule (run {RULES}))")
                plain = egraph_size(enc.egraph)
            del enc
            enc = encode(graph)
            t = time.perf_counter()
            stats = saturate(enc, [EXPLODE], Limits(iterations=200, nodes=limit, seconds=120))
            rows.append(
                f"| {name} | {limit:,} | {plain:,} ({plain / limit - 1:+.0%}) | "
                f"{max(stats.sizes):,} | {stats.overshoot:.1%} | {stats.stop_reason} | "
                f"{stats.iterations} | {stats.bounded_iterations} | "
                f"{time.perf_counter() - t:.2f} |"
            )
            print(rows[-1], flush=True)
    return rows


def time_limits(models: dict[str, Path], seconds: list[float], tmp: Path) -> list[str]:
    rows = ["| model | time limit s | wall s | wall / limit | status | stop | e-graph | stages |",
            "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, path in models.items():
        for limit in seconds:
            opts = Options(
                rulesets=[EXPLODE, CLEANUP],
                prove_rules=False,  # EXPLODE's add_assoc is not exact in float32 (models.py)
                limits=Limits(iterations=UNLIMITED, nodes=UNLIMITED, seconds=None),
                time_limit=limit,
            )
            t = time.perf_counter()
            report = optimize(path, tmp / f"{name}.out.onnx", opts)
            wall = time.perf_counter() - t
            stages = " ".join(f"{k} {v:.1f}" for k, v in report.stages.items() if v >= 0.05)
            sizes = report.saturation.get("egraph_sizes", [0])
            if report.status != "optimized":
                print(f"{name} T={limit:g}: {report.status}: {report.warnings}", flush=True)
            rows.append(
                f"| {name} | {limit:g} | {wall:.2f} | {wall / limit:.3f} | {report.status} | "
                f"{report.saturation.get('stop_reason')} | {max(sizes):,} | {stages} |"
            )
            print(rows[-1], flush=True)
    return rows


def isolation(models: dict[str, Path], repeats: int, tmp: Path) -> list[str]:
    rows = [
        "| model | runs | isolated s (median) | in-process s (median) | ratio | "
        "isolate stage s | peak MB parent / worker |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, path in models.items():
        walls: dict[str, list[float]] = {"iso": [], "plain": []}
        extra = ""
        for _ in range(repeats):
            for mode in ("iso", "plain"):
                rep = tmp / f"{name}.{mode}.json"
                cmd = [sys.executable, "-m", "rewrite.cli", "optimize", str(path),
                       str(tmp / f"{name}.{mode}.onnx"), "-q", "--report", str(rep)]  # fmt: skip
                if mode == "plain":
                    cmd.append("--no-isolate")
                t = time.perf_counter()
                subprocess.run(cmd, check=True, capture_output=True)
                walls[mode].append(time.perf_counter() - t)
                if mode == "iso":
                    r = json.loads(rep.read_text())
                    worker = r["saturation"].get("worker_peak_rss_mb", 0)
                    iso_s = r["stages"].get("isolate", 0)
                    extra = f"{iso_s:.2f} | {r['peak_rss_mb']:.0f} / {worker:.0f}"
        iso, plain = statistics.median(walls["iso"]), statistics.median(walls["plain"])
        rows.append(
            f"| {name} | {repeats} | {iso:.2f} | {plain:.2f} | {iso / plain:.3f} | {extra} |"
        )
        print(rows[-1], flush=True)
    return rows


def isolation_warm(models: dict[str, Path], repeats: int, tmp: Path) -> list[str]:
    """The same comparison through the Python API in one process, the fork server already up
    (a service or a test suite calling `optimize` repeatedly)."""
    rows = [
        "| model | runs | isolated s (median) | in-process s (median) | ratio |",
        "|---|---|---|---|---|",
    ]
    for name, path in models.items():
        optimize(path, tmp / f"{name}.warm.onnx", Options(isolate=True))  # starts the server
        walls: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeats):
            for iso in (True, False):
                t = time.perf_counter()
                optimize(path, tmp / f"{name}.warm.onnx", Options(isolate=iso))
                walls[iso].append(time.perf_counter() - t)
        iso_s, plain = statistics.median(walls[True]), statistics.median(walls[False])
        rows.append(f"| {name} | {repeats} | {iso_s:.2f} | {plain:.2f} | {iso_s / plain:.3f} |")
        print(rows[-1], flush=True)
    return rows


def big(folder: Path, repeats: int) -> list[str]:
    """The >2 GB model with external data: wall, worker and caller peak RSS, stage times."""
    rows = [
        "| model GB | status | wall s | worker peak RSS MB | x model | caller peak MB | stages s |",
        "|---|---|---|---|---|---|---|",
    ]
    if shutil.disk_usage(folder).free < 10 * 2**30:
        raise SystemExit(f"big: needs 10 GB free in {folder}")
    work = Path(tempfile.mkdtemp(prefix="rewrite-big-", dir=folder))
    try:
        src = big_model(work)
        size = src.stat().st_size + (work / "big.onnx.data").stat().st_size
        (work / "out").mkdir()
        for _ in range(repeats):
            t = time.perf_counter()
            report = optimize(src, work / "out" / "big.opt.onnx", Options(trials=1))
            wall = time.perf_counter() - t
            worker = report.saturation.get("worker_peak_rss_mb", 0.0)
            stages = " ".join(f"{k} {v:.1f}" for k, v in report.stages.items() if v >= 0.05)
            rows.append(
                f"| {size / 1e9:.2f} | {report.status} | {wall:.1f} | {worker:,.0f} | "
                f"{worker * 2**20 / size:.2f} | {peak_rss_mb():.0f} | {stages} |"
            )
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(work)
    return rows


def fuzz(scale: float, crash_dir: Path, json_out: Path | None) -> list[str]:
    """Run the fuzz tests' cases, keep going past crashes; the table by mutation kind."""
    os.environ["REWRITE_FUZZ_SCALE"] = str(scale)  # read when test_fuzz is imported
    from tests.robustness import test_fuzz
    from tests.robustness.fuzzing import TALLY

    TALLY.keep_going, TALLY.crash_dir = True, crash_dir
    t = time.perf_counter()
    test_fuzz.test_structural_mutations()
    test_fuzz.test_byte_mutations()
    wall = time.perf_counter() - t
    cases = test_fuzz.FUZZ_CASES
    print(f"fuzz: {TALLY.total()} cases ({cases} drawn) in {wall:.0f} s", flush=True)
    for crash in TALLY.crashes:
        print("CRASH:", json.dumps(crash), flush=True)
    for case in TALLY.notable:
        print("NOTABLE:", json.dumps(case), flush=True)
    if json_out is not None:
        json_out.write_text(json.dumps({"wall_s": round(wall, 1), **TALLY.to_json()}, indent=1))
    return [f"{TALLY.total()} cases in {wall:.0f} s", "", *TALLY.table()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=Path, default=Path("/tmp/corpus_mat"))
    p.add_argument("--only", default="overshoot,time,isolation")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--md", type=Path)
    p.add_argument("--big-dir", type=Path, default=Path(tempfile.gettempdir()))
    p.add_argument("--fuzz-scale", type=float, default=1.0, help="x the CI fuzz case count")
    p.add_argument("--crash-dir", type=Path, default=Path("fuzz-crashes"))
    p.add_argument("--json", type=Path, help="fuzz: every count, per kind, as JSON")
    args = p.parse_args()
    only = set(args.only.split(","))
    out: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        chain = {"add_chain16": write(add_chain(16), tmp, "chain.onnx")}
        gpt2 = {"gpt2": args.models / "gpt2.onnx"} if (args.models / "gpt2.onnx").exists() else {}
        bert = {"bert": args.models / "bert.onnx"} if (args.models / "bert.onnx").exists() else {}
        if "overshoot" in only:
            out += [
                "",
                "### Node limit",
                "",
                *overshoot({**chain, **gpt2}, [2_000, 20_000, 200_000]),
            ]
        if "time" in only:
            out += ["", "### Whole-run time limit", ""]
            out += time_limits(chain, [5, 10, 20], tmp)
            out += time_limits(gpt2, [20, 30, 60], tmp)[2:] if gpt2 else []
        if "isolation" in only:
            out += ["", "### Crash isolation", ""]
            out += isolation({**chain, **bert}, args.repeats, tmp)
            out += ["", "Warm fork server (Python API, one process):", ""]
            out += isolation_warm({**chain, **bert}, args.repeats, tmp)
        if "big" in only:
            out += ["", "### >2 GB model with external data", "", *big(args.big_dir, args.repeats)]
        if "fuzz" in only:
            out += ["", "### Fuzzing", "", *fuzz(args.fuzz_scale, args.crash_dir, args.json)]
    text = "\n".join(out)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")


if __name__ == "__main__":
    main()
