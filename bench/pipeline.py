"""Per-stage time and peak memory of `rewrite optimize` on every model in a folder.

Each model runs in a fresh process (so peak RSS is that model's), through the real CLI, with
its JSON report read back. The baseline, timed in the same run, is the I/O floor any
optimizer pays: `onnx.load` + `onnx.save` + `onnx.checker.check_model(full_check=True)` of the
same model, also in a fresh process; the ratio is rewrite's total over that floor.

    python bench/pipeline.py --models /tmp/corpus_mat [--only bert,gpt2] [--md out.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = """
import sys, time, onnx, resource
t = time.perf_counter()
m = onnx.load(sys.argv[1])
big = m.ByteSize() > 1_800_000_000
onnx.save(m, sys.argv[2], save_as_external_data=big)
onnx.checker.check_model(sys.argv[2], full_check=True)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""

STAGES = (
    "load",
    "fold",
    "encode",
    "cost",
    "saturate",
    "snapshot",
    "extract",
    "decode",
    "save",
    "verify",
)


def run_model(model: Path, tmp: Path) -> dict[str, object]:
    out, rep = tmp / f"{model.stem}.opt.onnx", tmp / f"{model.stem}.json"
    t = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewrite.cli",
            "optimize",
            str(model),
            str(out),
            "--report",
            str(rep),
            "-q",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t
    if proc.returncode != 0 or not rep.exists():
        return {"model": model.stem, "error": (proc.stderr or proc.stdout).strip()[-300:]}
    report = json.loads(rep.read_text())
    floor = subprocess.run(
        [sys.executable, "-c", FLOOR, str(model), str(tmp / "floor.onnx")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for f in tmp.iterdir():
        f.unlink()
    return {
        "model": model.stem,
        "wall": wall,
        "report": report,
        "floor_s": float(floor[0]),
        "floor_rss_mb": float(floor[1]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, type=Path, help="folder of .onnx models")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--md", type=Path, help="also write the table as Markdown here")
    args = ap.parse_args()
    names = {n for n in args.only.split(",") if n}
    models = sorted(p for p in args.models.glob("*.onnx") if not names or p.stem in names)
    head = ["model", "nodes", *STAGES, "total s", "peak MB", "io floor s", "ratio", "status"]
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as d:
        for m in models:
            r = run_model(m, Path(d))
            if "error" in r:
                rows.append([m.stem] + ["-"] * (len(head) - 2) + [f"error: {r['error']}"])
            else:
                rep = r["report"]
                st = rep["stages"]
                total = rep["total_seconds"]
                rows.append(
                    [
                        m.stem,
                        f"{rep['node_count_before']}->{rep['node_count_after']}",
                        *(f"{st.get(s, 0.0):.2f}" for s in STAGES),
                        f"{total:.2f}",
                        f"{rep['peak_rss_mb']:.0f}",
                        f"{r['floor_s']:.2f}",
                        f"{total / r['floor_s']:.2f}x",
                        rep["status"],
                    ]
                )
            print(" | ".join(rows[-1]), flush=True)
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    print("\n".join(md))
    if args.md:
        args.md.write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
