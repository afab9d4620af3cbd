"""Where ORT's time goes, before and after `rewrite optimize`: GEMM/Conv kernels vs the rest.

    python bench/profile.py --models .cache/corpus [--only bert,gpt2] [--threads 1] [--runs 20]
        [--optimized DIR] [--args "--rules rulesets/cleanup.py"] [--json out.json]

For each model, `rewrite optimize` writes the output (or `--optimized DIR/<model>.onnx` is
used as it is), then the input and the output each run in ONNX Runtime as users run them
(CPU, ORT_ENABLE_ALL, `--threads` intra-op threads, seeded random inputs from
`rewrite.onnx_io.inputs`) with ORT's profiler on. The profiler's per-kernel events
(`cat == "Node"`, `*_kernel_time`) of the timed runs (warm-up runs excluded by their
`model_run` windows) are summed per op type of the graph ORT executed (so its fusions show:
FusedMatMul, SkipLayerNormalization, Gelu, ...) and divided by the run count.

Buckets: GEMM/Conv (the dense kernels that run near the core's peak), attention (ORT's fused
attention ops: GEMMs and softmax in one kernel) and other (everything else: the time rules
can remove on CPU). Printed per model: the per-run kernel time of each bucket for input and
output, the ratio output/input of "other", and the top "other" op types of each side.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewrite.onnx_io.inputs import make_inputs  # noqa: E402  (after the path setup)

GEMM = frozenset(
    {
        "MatMul", "Gemm", "Conv", "ConvTranspose", "FusedConv", "FusedMatMul", "FusedGemm",
        "MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "MatMulNBits",
        "QLinearConv", "QLinearMatMul", "ConvInteger", "NhwcFusedConv", "QGemm",
        "MatMulFpQ4", "Einsum",
    }
)  # fmt: skip
ATTENTION = frozenset(
    {
        "Attention", "MultiHeadAttention", "GroupQueryAttention", "QAttention",
        "DecoderMaskedMultiHeadAttention", "PackedAttention", "SparseAttention",
    }
)  # fmt: skip


def bucket(op_type: str) -> str:
    """The bucket of an executed op type: "gemm", "attention" or "other"."""
    if op_type in GEMM:
        return "gemm"
    return "attention" if op_type in ATTENTION else "other"


def profile(path: Path, feeds: dict[str, Any], threads: int, runs: int, warmup: int) -> dict:
    """Per-run kernel microseconds of `path` per executed op type, from ORT's profiler."""
    import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints

    with tempfile.TemporaryDirectory() as tmp:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        opts.enable_profiling = True
        opts.profile_file_prefix = str(Path(tmp) / "prof")
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        names = {i.name for i in sess.get_inputs()}
        run_feeds = {k: v for k, v in feeds.items() if k in names}
        for _ in range(warmup + runs):
            sess.run(None, run_feeds)
        trace = json.loads(Path(sess.end_profiling()).read_text())
    windows = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in trace
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    if len(windows) < warmup + runs:
        raise RuntimeError(f"{path}: the profile has {len(windows)} runs, expected {warmup + runs}")
    start = windows[warmup][0]
    per_op: Counter[str] = Counter()
    for e in trace:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        if e["ts"] >= start:
            per_op[e.get("args", {}).get("op_name", "?")] += e["dur"]
    run_us = [b - a for a, b in windows[warmup:]]
    return {
        "per_op_us": {k: v / runs for k, v in per_op.most_common()},
        "run_us": float(np.median(run_us)),
    }


def buckets(per_op_us: dict[str, float]) -> dict[str, float]:
    out = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for op, us in per_op_us.items():
        out[bucket(op)] += us
    return out


def optimized(src: Path, work: Path, extra: list[str]) -> Path | str:
    """`rewrite optimize src` into `work`, or why it wrote nothing."""
    dst = work / f"{src.stem}.opt.onnx"
    cmd = [sys.executable, "-m", "rewrite.cli", "optimize", str(src), str(dst), "-q", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode not in (0, 3) or not dst.exists():
        return f"rewrite optimize failed (exit {proc.returncode}): {proc.stderr.strip()[-200:]}"
    return dst


def top(per_op_us: dict[str, float], n: int = 4) -> str:
    other = [(op, us) for op, us in per_op_us.items() if bucket(op) == "other"]
    return ", ".join(f"{op} {us / 1e3:.2f}" for op, us in sorted(other, key=lambda x: -x[1])[:n])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=ROOT / ".cache" / "corpus")
    ap.add_argument("--only", default="")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--optimized", type=Path, help="take DIR/<model>.onnx as our output")
    ap.add_argument("--args", default="", help="more `rewrite optimize` arguments")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    keep = set(filter(None, a.only.split(",")))
    models = [m for m in sorted(a.models.glob("*.onnx")) if not keep or m.stem in keep]
    if not models:
        print(f"no models in {a.models}" + (f" named {sorted(keep)}" if keep else ""))
        return 1
    print(f"ORT CPU, ORT_ENABLE_ALL, {a.threads} thread(s), {a.runs} runs (+{a.warmup} warm-up)")
    print("kernel ms per run: GEMM/Conv | attention | other (input -> output)\n")
    print("| model | GEMM/Conv | attention | other | other out/in | top other (input) "
          "| top other (output) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---|---|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for src in models:
            dst = (
                a.optimized / src.name if a.optimized else optimized(src, Path(tmp), a.args.split())
            )
            if isinstance(dst, str) or not dst.exists():
                print(f"| {src.stem} | {dst} | | | | | |", flush=True)
                continue
            feeds = make_inputs(str(src))
            p_in = profile(src, feeds, a.threads, a.runs, a.warmup)
            p_out = profile(dst, feeds, a.threads, a.runs, a.warmup)
            b_in, b_out = buckets(p_in["per_op_us"]), buckets(p_out["per_op_us"])
            ratio = b_out["other"] / b_in["other"] if b_in["other"] else math.nan
            cells = " | ".join(
                f"{b_in[k] / 1e3:.2f} -> {b_out[k] / 1e3:.2f}"
                for k in ("gemm", "attention", "other")
            )
            print(
                f"| {src.stem} | {cells} | {ratio:.2f} | {top(p_in['per_op_us'])} | "
                f"{top(p_out['per_op_us'])} |",
                flush=True,
            )
            rows.append({"model": src.stem, "input": p_in, "output": p_out, "other_ratio": ratio})
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
