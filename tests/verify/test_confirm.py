"""Counterexample inputs re-run in ORT keep their exact values (`verify.confirm.typed_inputs`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto as T

from rewrite.ops.base import TensorType
from rewrite.verify.confirm import typed_inputs


@dataclass
class _Case:
    tensors: dict[str, TensorType]


def test_int64_values_beyond_2_to_53_stay_whole() -> None:
    case = _Case({"a": TensorType(T.INT64, (3,)), "b": TensorType(T.INT32, ())})
    got = typed_inputs(case, {"a": [2**62 + 1, -(2**63), 2**53 + 1], "b": -5.0})  # type: ignore[arg-type]
    assert got["a"].dtype == np.int64 and got["a"].tolist() == [2**62 + 1, -(2**63), 2**53 + 1]
    assert got["b"].dtype == np.int32 and int(got["b"]) == -5


def test_unsigned_readings_of_bit_vectors_wrap_to_the_dtype() -> None:
    case = _Case({"a": TensorType(T.INT64, (1,)), "c": TensorType(T.UINT8, (2,))})
    got = typed_inputs(case, {"a": [2**64 - 1], "c": [255, 256]})  # type: ignore[arg-type]
    assert got["a"].tolist() == [-1] and got["c"].tolist() == [255, 0]
