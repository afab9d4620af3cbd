"""The typed form of Einsum (two-operand contractions).

Attention's and batched matmul's equations encode with no opaque node and `optimize` without
rules writes models whose ORT outputs are bit-identical (an equation with spaces is written
back without them). The reference, and the Z3 semantics evaluated on numbers (MLAS's FMA
chain), give ORT's values: the Z3 semantics bit for bit on random and special inputs in
float32, float64, float16 (through float32) and int64. Other equations stay opaque.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops.einsum import parse
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, run_ort, same, z3_numbers

CASES: list[tuple[str, tuple[int, ...], tuple[int, ...], type]] = [
    ("bhqd,bhkd->bhqk", (1, 2, 3, 4), (1, 2, 5, 4), np.float32),  # attention scores
    ("bhqk,bhkd->bhqd", (1, 2, 3, 5), (1, 2, 5, 4), np.float32),  # attention context
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 2), np.float64),
    ("bsd,dh->bsh", (2, 3, 4), (4, 3), np.float32),
    ("ij,kj->ik", (3, 6), (4, 6), np.float16),
    ("i j , j k -> i k", (3, 2), (2, 4), np.int64),
    ("bhqd,bkhd->bhqk", (1, 2, 3, 4), (1, 3, 2, 4), np.float32),  # a permuted operand
    ("ij,k->ikj", (2, 3), (2,), np.float32),  # an outer product: no contracted letter
]


def _ids(case: tuple) -> str:
    return f"{case[0].replace(' ', '')}-{np.dtype(case[3]).name}"


def test_optimizes_to_identical_outputs(tmp_path: Path) -> None:
    for n, (eq, sa, sb, dt) in enumerate(CASES):
        feeds = {"a": data(sa, dt, n), "b": data(sb, dt, n + 50)}
        (tmp_path / str(n)).mkdir()
        m = model("Einsum", feeds, {}, 2, equation=eq)
        assert_optimizes_identically(m, feeds, tmp_path / str(n))


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_semantics_give_orts_values(case: tuple) -> None:
    eq, sa, sb, dt = case
    spec = lookup("Einsum")
    assert spec is not None and spec.reference is not None and spec.egg is not None
    attrs = spec.egg.to_egg({"equation": eq})  # type: ignore[misc]
    assert attrs is not None
    for seed in range(4):
        a, b = data(sa, dt, seed, seed >= 2), data(sb, dt, seed + 50, seed >= 2)
        want = run_ort(model("Einsum", {"a": a, "b": b}, {}, 2, equation=eq), {"a": a, "b": b})
        call = call_of("Einsum", [a, b], {}, attrs)
        assert spec.infer(call)[0].shape == want.shape
        ref = spec.reference(call, [a, b])[0]
        assert ref.dtype == want.dtype and ref.shape == want.shape
        if seed < 2:  # numpy's BLAS order: the exact class's tolerance
            np.testing.assert_allclose(ref.astype(np.float64), want.astype(np.float64), 1e-3)
        assert same(want, z3_numbers("Einsum", [a, b], {}, attrs)), (a, b, want)


@pytest.mark.parametrize(
    "eq",
    [
        "ij,jk",
        "ii,ij->j",
        "ij,jk,kl->il",
        "...ij,...jk->...ik",
        "ij,jk->i",
        "bij->bji",
        "ij,jk->ikk",
    ],
)
def test_other_equations_are_not_typed(eq: str) -> None:
    assert parse(eq) is None
    spec = lookup("Einsum")
    assert spec is not None and spec.egg is not None and spec.egg.to_egg is not None
    assert spec.egg.to_egg({"equation": eq}) is None


def test_an_untyped_equation_stays_opaque(tmp_path: Path) -> None:
    a = data((2, 3), np.float32, 0)
    m = model("Einsum", {"a": a}, {}, 1, equation="ij->ji")
    onnx.save(m, tmp_path / "m.onnx")
    enc = encode(load(tmp_path / "m.onnx"))
    assert enc.opaque_nodes == 1 and enc.typed == 0


@pytest.mark.parametrize(
    ("sa", "sb"),
    [((2, 3), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3), (3,))],
)
def test_operands_that_do_not_fit_are_refused(sa: tuple, sb: tuple) -> None:
    spec = lookup("Einsum")
    assert spec is not None
    a, b = np.zeros(sa, np.float32), np.zeros(sb, np.float32)
    with pytest.raises(ShapeError, match="Einsum"):
        spec.infer(call_of("Einsum", [a, b], {}, {"equation": "ij,jk->ik"}))
