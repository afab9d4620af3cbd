"""Where rewrite keeps per-user state: `user_cache_dir()` holds calibration tables
(`extract/table.py`) and, under `proofs/`, the rule-proof cache (`verify/cache.py`)."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/rewrite`, else `~/.cache/rewrite` (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rewrite"
