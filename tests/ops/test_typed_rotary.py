"""com.microsoft RotaryEmbedding is typed (`rewrite.ops.rotary`): its numpy reference and its
Z3 semantics (IEEE float32, every input a numeral, or position_ids a term) give ORT 1.32's
CPU output bit for bit, on random and special values, for both pairings, 3-D input with
num_heads, 4-D input, partial rotary dims and both position_ids forms; a model holding it
encodes with no opaque node, and `optimize --no-rules` writes a model with bit-identical ORT
outputs; the shapes ORT refuses are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto as P
from onnx import helper as h

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops import OpCall, TensorType, _z3, lookup
from rewrite.ops.base import onnx_dtype
from rewrite.verify.semantics import number
from tests.ops.roundtrip import assert_optimizes_identically

MS = "com.microsoft"
OP = "RotaryEmbedding"
Arrays = list[np.ndarray]


def _model(ins: Arrays, **attrs: Any) -> onnx.ModelProto:
    names = [f"i{k}" for k in range(len(ins))]
    node = h.make_node(OP, names, ["y"], domain=MS, **attrs)
    vis = [
        h.make_tensor_value_info(n, onnx_dtype(a), a.shape) for n, a in zip(names, ins, strict=True)
    ]
    y = h.make_tensor_value_info("y", P.FLOAT, ins[0].shape)
    opsets = [h.make_opsetid("", 17), h.make_opsetid(MS, 1)]
    model = h.make_model(h.make_graph([node], OP, vis, [y]), opset_imports=opsets)
    model.ir_version = 8
    return model


def _feeds(ins: Arrays) -> dict[str, np.ndarray]:
    return {f"i{k}": a for k, a in enumerate(ins)}


def _ort(ins: Arrays, **attrs: Any) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(_model(ins, **attrs).SerializeToString(), opts)
    return np.asarray(sess.run(None, _feeds(ins))[0])


def _call(ins: Arrays, **attrs: Any) -> OpCall:
    return OpCall(OP, [TensorType(onnx_dtype(a), a.shape) for a in ins], [None] * 4, attrs)


def _reference(ins: Arrays, **attrs: Any) -> np.ndarray:
    spec = lookup(OP, MS)
    assert spec is not None and spec.reference is not None
    call = _call(ins, **attrs)
    assert spec.infer(call)[0] == TensorType(P.FLOAT, ins[0].shape)
    return spec.reference(call, list(ins))[0]


def _z3_numbers(ins: Arrays, symbolic_positions: bool = False, **attrs: Any) -> np.ndarray:
    """The Z3 semantics in IEEE float32 on numerals (position_ids a term, substituted after,
    when `symbolic_positions`), simplified back to numbers."""
    spec = lookup(OP, MS)
    assert spec is not None and spec.z3 is not None
    subs: list[tuple[Any, Any]] = []
    with _z3.arithmetic(_z3.IEEE), _z3.collecting() as (required, _):
        terms: list[np.ndarray | None] = []
        for k, a in enumerate(ins):
            t = np.empty(a.shape, dtype=object)
            for idx in np.ndindex(*a.shape):
                t[idx] = _z3.symbol("", onnx_dtype(a), a[idx].item())
                if k == 1 and symbolic_positions:
                    name = "p" + "_".join(map(str, idx))
                    subs.append((_z3.symbol(name, P.INT64), t[idx]))
                    t[idx] = subs[-1][0]
            terms.append(t)
        out = spec.z3(_call(ins, **attrs), terms)[0]
    if symbolic_positions:
        assert required, "a position term must be required in range"
        assert z3.is_true(z3.simplify(z3.substitute(z3.And(*required), *subs)))
    res = np.empty(out.shape, dtype=np.float32)
    for idx in np.ndindex(*out.shape):
        res[idx] = number(z3.simplify(z3.substitute(out[idx], *subs)), P.FLOAT)
    return res


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Bit for bit, NaN payloads aside."""
    assert got.shape == want.shape and got.dtype == want.dtype
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert got[~nan].tobytes() == want[~nan].tobytes()


SPECIALS = np.array(
    [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-45, -1e-40, 0.5, 7.0],
    dtype=np.float32,
)


def _values(rng: np.random.Generator, shape: tuple[int, ...], special: bool) -> np.ndarray:
    if special:
        return rng.choice(SPECIALS, size=shape)
    return rng.standard_normal(shape).astype(np.float32)


def _inputs(cfg: dict[str, Any], special: bool, seed: int = 0) -> Arrays:
    """(input, position_ids, cos_cache, sin_cache) of one configuration."""
    rng = np.random.default_rng(seed)
    b, s, n, hd, rd, rows = cfg["b"], cfg["s"], cfg["n"], cfg["hd"], cfg["rd"], 6
    shape = (b, n, s, hd) if cfg["rank"] == 4 else (b, s, n * hd)
    if cfg["pos"] == "rows":
        pos = rng.integers(0, rows, size=(b, s)).astype(np.int64)
    else:
        pos = np.array(rows - s if cfg["pos"] == "scalar" else [1], dtype=np.int64)
    cache = (rows, (rd or hd) // 2)
    return [
        _values(rng, shape, special),
        pos,
        _values(rng, cache, special),
        _values(rng, cache, special),
    ]


def _attrs(cfg: dict[str, Any], interleaved: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {"interleaved": interleaved}
    if cfg["rank"] == 3 or cfg["rd"]:
        attrs["num_heads"] = cfg["n"]
    if cfg["rd"]:
        attrs["rotary_embedding_dim"] = cfg["rd"]
    return attrs


def _cfg(rank: int, hd: int, rd: int = 0, pos: str = "rows", n: int = 2) -> dict[str, Any]:
    return {"rank": rank, "hd": hd, "rd": rd, "pos": pos, "n": n, "b": 2, "s": 3}


CONFIGS = [
    _cfg(3, 4),
    _cfg(3, 8),
    _cfg(3, 16),
    _cfg(3, 18),
    _cfg(3, 20, n=1),
    _cfg(3, 36, n=1),
    _cfg(3, 64, n=1),
    _cfg(4, 8),
    _cfg(4, 34, n=1),
    _cfg(3, 8, rd=4),
    _cfg(4, 24, rd=20, n=1),
    _cfg(3, 6, pos="scalar"),
    _cfg(4, 10, pos="one"),
]
ID = [f"r{c['rank']}h{c['hd']}d{c['rd']}{c['pos']}" for c in CONFIGS]


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("cfg", CONFIGS, ids=ID)
def test_reference_is_ort_bit_for_bit(cfg: dict[str, Any], interleaved: int, special: bool) -> None:
    ins, attrs = _inputs(cfg, special), _attrs(cfg, interleaved)
    _same(_reference(ins, **attrs), _ort(ins, **attrs))


@pytest.mark.parametrize("hd", range(2, 42, 2))
@pytest.mark.parametrize("interleaved", [0, 1])
def test_reference_is_ort_bit_for_bit_at_every_head_size(hd: int, interleaved: int) -> None:
    """Each head size puts the AVX2 blocks' tails elsewhere (the fma / plain forms)."""
    for seed in range(3):
        cfg = _cfg(3, hd, n=3)
        ins, attrs = _inputs(cfg, False, seed), _attrs(cfg, interleaved)
        _same(_reference(ins, **attrs), _ort(ins, **attrs))


Z3_CONFIGS = [_cfg(3, 4, n=1), _cfg(3, 20, n=1), _cfg(4, 8, rd=6, n=1), _cfg(3, 4, pos="scalar")]


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("cfg", Z3_CONFIGS, ids=[f"r{c['rank']}h{c['hd']}" for c in Z3_CONFIGS])
def test_z3_semantics_is_ort_bit_for_bit(
    cfg: dict[str, Any], interleaved: int, special: bool
) -> None:
    cfg = {**cfg, "b": 1, "s": 2}
    ins, attrs = _inputs(cfg, special, seed=7), _attrs(cfg, interleaved)
    _same(_z3_numbers(ins, **attrs), _ort(ins, **attrs))


@pytest.mark.parametrize("pos", ["rows", "scalar"])
def test_z3_selects_the_cache_row_of_a_position_term(pos: str) -> None:
    cfg = {**_cfg(3, 4, n=1, pos=pos), "b": 2, "s": 2}
    ins, attrs = _inputs(cfg, False, seed=3), _attrs(cfg, 1)
    _same(_z3_numbers(ins, symbolic_positions=True, **attrs), _ort(ins, **attrs))


def test_a_position_outside_the_cache_is_refused_like_ort() -> None:
    cfg = _cfg(3, 4)
    ins, attrs = _inputs(cfg, False), _attrs(cfg, 0)
    ins[1] = ins[1].copy()
    ins[1][0, 1] = 6
    with pytest.raises(ShapeError):
        _reference(ins, **attrs)
    with pytest.raises(Exception, match="out of range"):
        _ort(ins, **attrs)


@pytest.mark.parametrize("cfg", [_cfg(3, 8), _cfg(4, 8), _cfg(3, 8, rd=4), _cfg(3, 6, pos="one")])
@pytest.mark.parametrize("interleaved", [0, 1])
def test_a_model_with_rotary_embedding_optimizes_identically(
    cfg: dict[str, Any], interleaved: int, tmp_path: Path
) -> None:
    ins = _inputs(cfg, False)
    model = _model(ins, **_attrs(cfg, interleaved))
    assert_optimizes_identically(model, _feeds(ins), tmp_path)
    out = onnx.load(tmp_path / "out.onnx")
    assert [(n.op_type, n.domain) for n in out.graph.node] == [(OP, MS)]


def test_constant_position_ids_and_caches_are_typed(tmp_path: Path) -> None:
    ins = _inputs(_cfg(3, 8), False)
    model = _model(ins, num_heads=2)
    inits = [onnx.numpy_helper.from_array(a, f"i{k}") for k, a in enumerate(ins) if k]
    model.graph.initializer.extend(inits)
    del model.graph.input[1:]
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    enc = encode(load(src))
    assert enc.opaque_nodes == 0 and enc.typed == 1


REFUSED = [
    ((2, 3, 8, 1), (2, 3), (6, 4), {"num_heads": 2}),  # a rank-4 input's head size is 1
    ((2, 3, 8), (3, 2), (6, 2), {"num_heads": 2}),  # position_ids not (batch, seq)
    ((2, 3, 9), (2, 3), (6, 2), {"num_heads": 2}),  # hidden not a multiple of num_heads
    ((2, 3, 8), (2, 3), (6, 3), {"num_heads": 2}),  # cache dim 1 not head_size / 2
    ((2, 3, 8), (2, 3), (6, 2), {"rotary_embedding_dim": 4}),  # no num_heads
    ((2, 3, 8), (2, 3), (6, 4), {"num_heads": 2, "rotary_embedding_dim": 8}),  # above head
    ((2, 7, 8), (2, 7), (6, 2), {"num_heads": 2}),  # seq above the caches' rows
]


@pytest.mark.parametrize(("x", "pos", "cache", "attrs"), REFUSED)
def test_shapes_ort_refuses_are_refused(
    x: tuple[int, ...], pos: tuple[int, ...], cache: tuple[int, ...], attrs: dict[str, Any]
) -> None:
    rng = np.random.default_rng(0)
    ins = [_values(rng, x, False), np.zeros(pos, np.int64)]
    ins += [_values(rng, cache, False), _values(rng, cache, False)]
    spec = lookup(OP, MS)
    assert spec is not None
    with pytest.raises(ShapeError):
        spec.infer(_call(ins, **attrs))
    with pytest.raises(Exception):  # noqa: B017  (ORT's own messages vary)
        _ort(ins, **attrs)


def test_symbolic_batch_and_sequence_dims_are_typed(tmp_path: Path) -> None:
    cfg = _cfg(3, 8)
    ins = _inputs(cfg, False)
    model = _model(ins, **_attrs(cfg, 1))
    for vi in [*model.graph.input[:2], *model.graph.output]:
        vi.type.tensor_type.shape.dim[0].dim_param = "B"
        vi.type.tensor_type.shape.dim[1].dim_param = "S"
    assert_optimizes_identically(model, _feeds(ins), tmp_path)


def test_float64_which_ort_s_schema_refuses_is_refused() -> None:
    ins = _inputs(_cfg(3, 4), False)
    ins = [ins[0].astype(np.float64), ins[1], ins[2].astype(np.float64), ins[3].astype(np.float64)]
    spec = lookup(OP, MS)
    assert spec is not None
    with pytest.raises(ShapeError):
        spec.infer(_call(ins, num_heads=2))
    with pytest.raises(Exception, match="is invalid"):
        _ort(ins, num_heads=2)


def test_a_float16_model_is_written_back_identically(tmp_path: Path) -> None:
    cfg = _cfg(3, 8)
    ins = [a.astype(np.float16) if a.dtype == np.float32 else a for a in _inputs(cfg, False)]
    model = _model(ins, **_attrs(cfg, 1))
    model.graph.output[0].type.tensor_type.elem_type = P.FLOAT16
    assert_optimizes_identically(model, _feeds(ins), tmp_path)
