"""Latency of each model before and after `rewrite optimize`, on one ORT execution provider.

For every model: `rewrite optimize --target T` writes the optimized model (its report beside
it), then the input and the output run in two ORT sessions (ORT_ENABLE_ALL, I/O binding with
inputs and outputs on the EP's device) back to back in each round, alternating which goes
first; the ratio is the median of the per-round input/optimized ratios (> 1: faster), with
its 95% CI by order statistics. Same inputs on both sides (`onnx_io.inputs.make_inputs`). The
noise floor is the same measurement of the input against a second session of itself. The
predictions are the report's estimated costs of the input and the output graph for the target
(symbolic dims priced as 1, as the pipeline does).

    python bench/ep_latency.py --models /tmp/corpus_mat --target cuda [--rounds 50]
        [--only bert,gpt2] [--work DIR] [--md out.md]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from cost_model import median_ci

from rewrite.extract.table import EP_OF
from rewrite.onnx_io.inputs import make_inputs


class Session:
    """One ORT session with inputs and outputs bound on the EP's device."""

    def __init__(self, path: Path, feeds: dict[str, np.ndarray], ep: str, threads: int) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads
        opts.log_severity_level = 3
        self.sess = ort.InferenceSession(str(path), opts, providers=[ep])
        device = "cuda" if ep == "CUDAExecutionProvider" else "cpu"
        self.bind = self.sess.io_binding()
        for name, arr in feeds.items():
            self.bind.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(arr, device))
        for out in self.sess.get_outputs():
            self.bind.bind_output(out.name, device)

    def run(self, n: int) -> float:
        t = time.perf_counter()
        for _ in range(n):
            self.sess.run_with_iobinding(self.bind)
        return (time.perf_counter() - t) / n


def compare(src: Path, dst: Path, ep: str, threads: int, rounds: int) -> dict:
    feeds = make_inputs(str(src))
    a, b = Session(src, feeds, ep, threads), Session(dst, feeds, ep, threads)
    a.run(3), b.run(3)
    n = max(1, min(200, round(0.02 / max(min(a.run(3), b.run(3)), 1e-7))))
    ta: list[float] = []
    tb: list[float] = []
    for r in range(rounds):
        first, second = (a, b) if r % 2 == 0 else (b, a)
        x, y = first.run(n), second.run(n)
        ta.append(x if first is a else y)
        tb.append(y if first is a else x)
    med, lo, hi = median_ci([math.log(x / y) for x, y in zip(ta, tb, strict=True)])
    return {
        "input_ms": float(np.median(ta)) * 1e3,
        "optimized_ms": float(np.median(tb)) * 1e3,
        "speedup": math.exp(med),
        "ci": [math.exp(lo), math.exp(hi)],
    }


def run_model(src: Path, work: Path, a: argparse.Namespace) -> dict:
    """Optimize `src` for `a.target`, then time input vs output and input vs itself (the noise
    floor: two sessions of one file); the report's estimated costs give the predictions."""
    dst = work / f"{src.stem}.opt.onnx"
    report = work / f"{src.stem}.json"
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "rewrite.cli", "optimize", str(src), str(dst), "-q"]
    cmd += ["--target", a.target, "--report", str(report)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    opt_s = time.perf_counter() - t
    if proc.returncode not in (0, 3) or not dst.exists():
        return {"optimize_s": opt_s, "error": "failed: " + proc.stderr.strip()[-200:]}
    rep = json.loads(report.read_text())
    ep = EP_OF[a.target]
    r = {"model": src.stem, "optimize_s": opt_s, "status": rep.get("status", "?")}
    r.update(compare(src, dst, ep, a.threads, a.rounds))
    control = compare(src, src, ep, a.threads, a.rounds)
    r["control"], r["control_ci"] = control["speedup"], control["ci"]
    before, after = rep.get("cost_before_us") or 0.0, rep.get("cost_after_us") or 0.0
    r["predicted_input_ms"] = before / 1e3
    r["predicted_speedup"] = before / after if after else float("nan")
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path("/tmp/corpus_mat"))
    ap.add_argument("--target", choices=sorted(EP_OF), default="cpu")
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.target == "cuda":
        import onnxruntime as ort

        if hasattr(ort, "preload_dlls"):
            ort.preload_dlls()  # CUDA/cuDNN from the nvidia-* wheels, where they are installed
    work = a.work or Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    keep = set(filter(None, a.only.split(",")))
    rows = []
    lines = [
        f"target {a.target} ({EP_OF[a.target]}), {a.threads} thread(s), {a.rounds} rounds",
        "",
        "| model | input ms | optimized ms | speedup (95% CI) | noise floor (95% CI) "
        "| predicted input ms | predicted speedup | optimize s | status |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for src in sorted(a.models.glob("*.onnx")):
        if keep and src.stem not in keep:
            continue
        r = run_model(src, work, a)
        if "error" in r:
            lines.append(f"| {src.stem} | | | | | | | {r['optimize_s']:.1f} | {r['error']} |")
            continue
        rows.append(r)
        (lo, hi), (clo, chi) = r["ci"], r["control_ci"]
        lines.append(
            f"| {src.stem} | {r['input_ms']:.3f} | {r['optimized_ms']:.3f} | "
            f"{r['speedup']:.3f} ({lo:.3f}-{hi:.3f}) | {r['control']:.3f} ({clo:.3f}-{chi:.3f}) "
            f"| {r['predicted_input_ms']:.3f} | {r['predicted_speedup']:.3f} "
            f"| {r['optimize_s']:.1f} | {r['status']} |"
        )
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if a.md:
        a.md.write_text(text + "\n")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
