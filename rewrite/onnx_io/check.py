"""onnx.checker levels, and the error that says which one rejected a written model.

`save` checks what it writes at a level (the full check by default); `check_level` finds the
strictest level a file passes, so that a caller can tell an input that is itself invalid from
an output that we made invalid (`rewrite.saving`).

Both run `run_checker`: onnx.checker, except that the ops ONNX Runtime registers in the ONNX
domain and onnx does not define (SimplifiedLayerNormalization, `onnx_io.ort_ops`) are checked
against ORT's schemas instead of being refused as "No Op registered". Any other error stands:
an op neither defines (`NotAnOp` in domain "") is still refused. Whether ORT can run such a
model is the differential check's to say (it loads the output in ORT).
"""

from __future__ import annotations

import re
from pathlib import Path

import onnx

from rewrite.errors import ModelError
from rewrite.onnx_io.ort_ops import is_ort_only, ort_schemas_known
from rewrite.onnx_io.shapes import first_line

CHECKS = ("full", "basic", "none")
"""onnx.checker levels, strictest first: `full_check=True`, `full_check=False`, no check."""

_NO_OP = re.compile(r"No Op registered for (\S+) with domain_version of \d+")


class CheckerError(ModelError):
    """onnx.checker rejected a written model: `level` (a CHECKS entry) is the check that
    failed, `reason` the first line of its error."""

    def __init__(self, message: str, level: str, reason: str) -> None:
        super().__init__(message)
        self.level = level
        self.reason = reason

    def __reduce__(self) -> tuple[type[CheckerError], tuple[str, str, str]]:
        return (CheckerError, (str(self), self.level, self.reason))  # it crosses processes


def check_level(path: str | Path) -> tuple[str, str]:
    """The strictest CHECKS level the ONNX file at `path` passes, and the first line of the
    error of the first level it fails ("" when it passes the full check)."""
    reason = ""
    for level in CHECKS[:-1]:
        try:
            run_checker(path, level)
        except Exception as e:  # ValidationError, InferenceError, or C++ errors
            reason = reason or first_line(e)
            continue
        return level, reason
    return CHECKS[-1], reason


def run_checker(path: str | Path, level: str) -> None:
    """onnx.checker at `level` (a CHECKS entry) on the ONNX file at `path`, with ORT's
    ONNX-domain ops known (module docstring); raises what onnx.checker raises."""
    if level == "none":
        return
    full = level == "full"
    try:
        onnx.checker.check_model(str(path), full_check=full)
    except Exception as e:  # ValidationError, InferenceError, or C++ errors
        found = _NO_OP.search(str(e))
        if found is None or not is_ort_only("", found.group(1)):
            raise
        with ort_schemas_known():
            onnx.checker.check_model(str(path), full_check=full)
