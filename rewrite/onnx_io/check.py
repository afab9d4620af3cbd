"""onnx.checker levels, and the error that says which one rejected a written model.

`save` checks what it writes at a level (the full check by default); `check_level` finds the
strictest level a file passes, so that a caller can tell an input that is itself invalid from
an output that we made invalid (`rewrite.saving`).
"""

from __future__ import annotations

from pathlib import Path

import onnx

from rewrite.errors import ModelError
from rewrite.onnx_io.shapes import first_line

CHECKS = ("full", "basic", "none")
"""onnx.checker levels, strictest first: `full_check=True`, `full_check=False`, no check."""


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
            onnx.checker.check_model(str(path), full_check=level == "full")
        except Exception as e:  # ValidationError, InferenceError, or C++ errors
            reason = reason or first_line(e)
            continue
        return level, reason
    return CHECKS[-1], reason
