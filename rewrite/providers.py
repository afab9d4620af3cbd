"""The ONNX Runtime execution provider each `--target` runs on (one table for the cost
calibration, the precision kernels and `--measure`)."""

from __future__ import annotations

EP_OF = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
"""Target name -> ORT execution provider."""


def provider(target: str) -> str:
    """The provider of `target` (`portable` runs on the CPU provider here); a name that is not
    a target is taken as a provider name."""
    return EP_OF.get("cpu" if target == "portable" else target, target)
