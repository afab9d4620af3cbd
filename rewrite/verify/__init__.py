"""Verification: seeded model inputs and the differential check of a model against another."""

from rewrite.verify.differential import (
    CALIBRATION_FACTOR,
    TOLERANCES,
    DiffResult,
    OutputDiff,
    compare,
    differential,
    ort_noise,
)
from rewrite.verify.inputs import InputSpec, input_specs, load_inputs, make_inputs, save_inputs

__all__ = [
    "CALIBRATION_FACTOR",
    "TOLERANCES",
    "DiffResult",
    "InputSpec",
    "OutputDiff",
    "compare",
    "differential",
    "input_specs",
    "load_inputs",
    "make_inputs",
    "ort_noise",
    "save_inputs",
]
