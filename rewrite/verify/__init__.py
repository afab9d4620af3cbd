"""Verification: rules proved (Z3) and sampled (numpy, ORT); models checked differentially.

Rules: `verify_rules(rules)` -> `RuleResult`s, `gate(rulesets, allow_approximate=...)` -> the
rule sets `optimize` may use and the refused rules; `prove(rule)`, `sample(rule)` underneath.
Models: `differential(reference, candidate)`, with seeded inputs from `make_inputs` (and the
`.npz` user inputs of `load_inputs`), which live in `rewrite.onnx_io` and are re-exported here.
"""

from typing import Any

from rewrite.onnx_io.feeds import load_inputs, save_inputs
from rewrite.onnx_io.inputs import InputSpec, input_specs, make_inputs
from rewrite.verify.compare import CALIBRATION_FACTOR, TOLERANCES, OutputDiff, compare
from rewrite.verify.differential import DiffResult, differential, ort_noise

_LAZY = {
    "verify_rules": "rewrite.verify.gate",
    "gate": "rewrite.verify.gate",
    "RuleResult": "rewrite.verify.gate",
    "prove": "rewrite.verify.prove",
    "sample": "rewrite.verify.sample",
}


def __getattr__(name: str) -> Any:
    """The rule verifier is imported on first use (it loads Z3)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


__all__ = [
    "CALIBRATION_FACTOR",
    "TOLERANCES",
    "DiffResult",
    "InputSpec",
    "OutputDiff",
    "RuleResult",
    "compare",
    "differential",
    "gate",
    "input_specs",
    "load_inputs",
    "make_inputs",
    "ort_noise",
    "prove",
    "sample",
    "save_inputs",
    "verify_rules",
]
