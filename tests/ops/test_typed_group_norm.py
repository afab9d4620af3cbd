"""The typed form of GroupNormalization (ORT runs the ONNX function body).

One-op models at opset 18 (scale per group) and 21 (per channel) encode with no opaque node
and `optimize` without rules writes models whose ORT outputs are bit-identical. The numpy
reference and the Z3 semantics (float32), evaluated on numbers, give ORT's values bit for bit
on random and special inputs (NaN, ±inf, ±0, ±FLT_MAX, subnormals), with groups long enough
for ReduceMean's vectorised order (L = 144).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from rewrite.errors import ShapeError
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, run_ort, same, z3_numbers

# opset, X shape, num_groups, epsilon
CASES: list[tuple[int, tuple[int, ...], int, float]] = [
    (18, (2, 4, 3), 2, 1e-5),
    (18, (1, 6, 5), 3, 1e-3),
    (21, (2, 4, 3), 2, 1e-5),
    (21, (1, 8, 6, 6), 2, 1e-5),  # L = 144: ReduceMean's packets
    (21, (1, 6, 2, 2), 6, 1e-2),  # a channel per group
    (21, (2, 3, 5), 1, 1e-5),
]


def _ids(case: tuple) -> str:
    return f"opset{case[0]}-{list(case[1])}-g{case[2]}"


def _feeds(case: tuple, seed: int, special: bool = False) -> dict[str, np.ndarray]:
    opset, shape, g, _ = case
    n = g if opset < 21 else shape[1]
    x = data(shape, np.float32, seed, special)
    return {"x": x, "s": data((n,), np.float32, seed + 10), "b": data((n,), np.float32, seed + 20)}


def _model(case: tuple, feeds: dict[str, np.ndarray]) -> onnx.ModelProto:
    opset, _, g, eps = case
    m = model("GroupNormalization", feeds, {}, 3, num_groups=g, epsilon=eps)
    m.opset_import[0].version = opset
    m.ir_version = 10 if opset >= 21 else 8
    return m


def _attrs(case: tuple) -> dict[str, Any]:
    return {"num_groups": case[2], "epsilon": case[3]}


@pytest.mark.parametrize("case", CASES[::2], ids=_ids)
def test_optimizes_to_identical_outputs(case: tuple, tmp_path: Path) -> None:
    feeds = _feeds(case, 0)
    assert_optimizes_identically(_model(case, feeds), feeds, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_semantics_give_orts_values(case: tuple) -> None:
    spec = lookup("GroupNormalization")
    assert spec is not None and spec.reference is not None
    for seed in range(4):
        feeds = _feeds(case, seed, special=seed >= 2)
        want = run_ort(_model(case, feeds), feeds)
        arrays = list(feeds.values())
        call = call_of("GroupNormalization", arrays, {}, _attrs(case))
        assert spec.infer(call)[0].shape == want.shape
        assert same(want, spec.reference(call, arrays)[0])
        assert same(want, z3_numbers("GroupNormalization", arrays, {}, _attrs(case)))


def test_a_stash_type_other_than_float_stays_opaque() -> None:
    spec = lookup("GroupNormalization")
    assert spec is not None and spec.egg is not None and spec.egg.to_egg is not None
    assert spec.egg.to_egg({"num_groups": 2, "stash_type": 11}) is None
    assert spec.egg.to_egg({"num_groups": 2, "stash_type": 1}) == {"num_groups": 2}


@pytest.mark.parametrize(
    ("shapes", "groups"),
    [
        (((2, 5, 3), (5,), (5,)), 2),  # 5 channels into 2 groups
        (((2, 4, 3), (3,), (3,)), 2),  # scale neither per group nor per channel
        (((2, 4, 3), (2,), (4,)), 2),  # scale and bias lengths differ
        (((4,), (1,), (1,)), 1),  # rank 1
    ],
)
def test_forms_outside_the_op_are_refused(shapes: tuple, groups: int) -> None:
    spec = lookup("GroupNormalization")
    assert spec is not None
    arrays = [np.zeros(s, np.float32) for s in shapes]
    with pytest.raises(ShapeError, match="GroupNormalization"):
        spec.infer(call_of("GroupNormalization", arrays, {}, {"num_groups": groups}))
