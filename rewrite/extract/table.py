"""Calibration tables: fitted roofline numbers for one machine, ORT version, EP and thread count.

A `CalibrationTable` holds what `rewrite calibrate` fitted (`rewrite/extract/calibrate.py`):
the global roofline numbers (GEMM and vector FLOP/s, bandwidth, per-node overhead) and a
per-op multiplier, plus the fit's own error. It is stored as JSON (schema `SCHEMA`) at
`cache_path(key)`, under `$XDG_CACHE_HOME/rewrite` (else `~/.cache/rewrite`), one file per
`TableKey`: a table measured with another ORT version, EP, thread count or CPU is never used.

`find_table(target, threads)` is what the cost model calls: the environment variable
`REWRITE_COST_TABLE` (a path, or `default` to skip the cache) wins; otherwise the cached table
for this machine's key; otherwise the shipped `default_cpu.json` (measured on the machine that
built this release, 1 thread) or `default_cuda.json` (an NVIDIA H100). It never raises: a
missing, unreadable, corrupt or mismatched file is skipped and the returned note says why.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from rewrite.files import atomic_text
from rewrite.paths import user_cache_dir
from rewrite.providers import EP_OF

SCHEMA = 1
"""Version of the JSON layout; a file with another schema is not used."""

"""ORT execution provider that a target name stands for."""

DEFAULT_CPU = Path(__file__).with_name("default_cpu.json")
"""Shipped table (package data): used for `cpu` when this machine has no calibration."""

DEFAULT_CUDA = Path(__file__).with_name("default_cuda.json")
"""Shipped table for `cuda` (measured on an NVIDIA H100, ORT 1.31.1 CUDA 13 build)."""

DEFAULTS = {"cpu": DEFAULT_CPU, "cuda": DEFAULT_CUDA}

ENV_TABLE = "REWRITE_COST_TABLE"
"""A table path to use instead of the cache, or `default` to use the shipped table only."""


@dataclass(frozen=True)
class TableKey:
    """What a calibration depends on; a table is used only where every field matches."""

    target: str
    cpu: str
    cores: int
    ort: str
    ep: str
    threads: int

    def slug(self) -> str:
        """File name stem: readable prefix + hash of the whole key."""
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()
        return f"{self.target}-t{self.threads}-ort{self.ort}-{digest[:12]}"


def cpu_model() -> str:
    """The CPU's model name (`/proc/cpuinfo`, else `platform.processor()`, else `unknown`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def ort_version() -> str:
    """The onnxruntime version in use: the imported module's, else an installed distribution's
    (GPU build first: beside a CPU build it is the one that was installed on purpose), else
    `none`."""
    module = sys.modules.get("onnxruntime")
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    for dist in ("onnxruntime-gpu", "onnxruntime"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "none"


def machine_key(target: str = "cpu", threads: int = 1) -> TableKey:
    """The key of a calibration run here and now for `target` with `threads` intra-op threads."""
    if target not in EP_OF:
        raise ValueError(f"unknown target {target!r}; known: {', '.join(EP_OF)}")
    return TableKey(target, cpu_model(), os.cpu_count() or 1, ort_version(), EP_OF[target], threads)


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/rewrite`, else `~/.cache/rewrite` (not created here)."""
    return user_cache_dir()


def cache_path(key: TableKey) -> Path:
    return cache_dir() / f"{key.slug()}.json"


@dataclass
class CalibrationTable:
    """Fitted numbers: `cost = max(flops/peak, act/bandwidth + weights/mem_bandwidth)
    ·coeffs[key] + overhead` (`cost.py`).

    `peak_flops` applies to GEMM-like ops, `vector_flops` to the others (FLOP/s); `bandwidth`
    (activations) and `mem_bandwidth` (constant inputs) in bytes/s; `overhead` in seconds per
    node. `coeffs` maps a cost key (`Add`,
    `com.microsoft.Gelu`, `Conv:depthwise`; see `cost.coeff_key`) to its multiplier. `fit`
    holds the fit's diagnostics (sample count, error in log space, per-op errors, samples).
    """

    key: TableKey
    peak_flops: float
    vector_flops: float
    bandwidth: float
    mem_bandwidth: float
    overhead: float
    coeffs: dict[str, float] = field(default_factory=dict)
    fit: dict[str, Any] = field(default_factory=dict)
    created: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_json(cls, data: Any) -> CalibrationTable:
        """Parse and validate; raises ValueError on any missing or non-positive number."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"not a schema-{SCHEMA} calibration table")
        try:
            key = TableKey(**data["key"])
            names = ("peak_flops", "vector_flops", "bandwidth", "mem_bandwidth")
            nums = {n: float(data[n]) for n in names}
            overhead = float(data["overhead"])
            coeffs = {str(k): float(v) for k, v in dict(data.get("coeffs", {})).items()}
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed calibration table: {type(e).__name__}: {e}") from e
        bad = [
            n for n, v in [*nums.items(), ("overhead", overhead), *coeffs.items()] if not _pos(v)
        ]
        if bad:
            raise ValueError(f"calibration table has non-positive or non-finite {bad}")
        return cls(key, overhead=overhead, coeffs=coeffs, fit=dict(data.get("fit") or {}),
                   created=str(data.get("created", "")), **nums)  # fmt: skip

    def save(self, path: Path) -> Path:
        """Write atomically (temp file in the same folder, then rename), mode 0666 & ~umask
        (`rewrite.files`); returns `path`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_text(path) as f:
            json.dump(self.to_json(), f, indent=1, sort_keys=True)
            f.write("\n")
        return path


def _pos(v: float) -> bool:
    return 0.0 < v < math.inf


def load_table(path: Path) -> CalibrationTable:
    """Read one table file; raises OSError or ValueError (bad JSON, bad numbers)."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from e
    return CalibrationTable.from_json(data)


def find_table(target: str = "cpu", threads: int = 1) -> tuple[CalibrationTable | None, str]:
    """The table the cost model should use for `target`, and a note saying where it came from.

    Order: `$REWRITE_COST_TABLE` (path, or `default`), the cache file for this machine's key,
    the shipped default for the target. Never raises: what is skipped, and why, is in the note.
    """
    skipped: list[str] = []
    env = os.environ.get(ENV_TABLE, "").strip()
    candidates: list[tuple[str, Path, bool]] = []
    if env and env != "default":
        candidates.append((f"${ENV_TABLE}", Path(env), False))
    elif not env and target in EP_OF:
        candidates.append(("cache", cache_path(machine_key(target, threads)), True))
    if target in DEFAULTS:
        candidates.append(("shipped default", DEFAULTS[target], False))
    for label, path, must_match in candidates:
        if not path.exists():
            if label != "cache":
                skipped.append(f"{label} {path}: missing")
            continue
        try:
            table = load_table(path)
        except (OSError, ValueError) as e:
            skipped.append(f"{label} {path}: {e}")
            continue
        if must_match and table.key != machine_key(target, threads):
            skipped.append(f"{label} {path}: key mismatch")
            continue
        note = f"{label} ({path})" + (f"; skipped {'; '.join(skipped)}" if skipped else "")
        return table, note
    return None, "built-in constants" + (f"; skipped {'; '.join(skipped)}" if skipped else "")
