"""Test-wide setup: caches go to a per-session temporary folder, never the user's; where the
materialized corpus is, and what a test that needs it does when it is missing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("REWRITE_CACHE_DIR", tempfile.mkdtemp(prefix="rewrite-test-cache-"))

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("REWRITE_CORPUS") or REPO / ".cache" / "corpus")
"""The materialized corpus models: `REWRITE_CORPUS`, else `.cache/corpus` (where
`make test-corpus` writes them)."""
IN_CI = os.environ.get("CI", "").lower() in ("true", "1")


def require(path: Path) -> Path:
    """`path`, which a test needs: when it is missing the test skips, except in CI (CI=true),
    where it fails: a CI run must not pass by skipping what it claims to test."""
    if not path.exists():
        why = f"{path} is missing: run `make test-corpus` or set REWRITE_CORPUS"
        if IN_CI:
            pytest.fail(f"CI: {why}")
        pytest.skip(why)
    return path


def corpus_model(name: str) -> Path:
    """The corpus model `name` (e.g. "bert.onnx"), through `require`."""
    return require(CORPUS / name)


def corpus_models() -> list[Path]:
    """Every corpus model, for parametrizing; with none, one missing path, so that a test over
    them goes through `require` (skips, or fails in CI) instead of silently collecting none."""
    found = sorted(CORPUS.glob("*.onnx")) if CORPUS.is_dir() else []
    return found or [CORPUS / "no-corpus-model.onnx"]
