"""The egglog shape/dtype rules of typed ops (`schema.shape_rules`, `shape_rules.family_rules`)
agree with the ops' Python `infer` and, for ai.onnx ops, with ONNX shape inference.

Each case builds the schema program, leaves with seeded shapes and dtypes, ONE unseeded term of
the op, runs the `shapes` ruleset and reads back `(shape e)` / `(dtype e)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from egglog import bindings
from onnx import TensorProto as P
from onnx import helper as h

from rewrite.egraph.encode import encode
from rewrite.egraph.schema import SYM_BASE, egg_name, program, shape_rules, typed_specs
from rewrite.egraph.snapshot import take_snapshot
from rewrite.onnx_io import load
from rewrite.ops.base import OpCall, OpSpec, TensorType
from rewrite.ops.registry import lookup, opset_for
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.saturate import Limits, saturate
from tests.egraph import models as mk

F = P.FLOAT
MS = "com.microsoft"
Shape = tuple[int | str, ...]


@dataclass(frozen=True)
class Case:
    """One typed term: its attributes (ONNX names), constant vector inputs (by ONNX input
    index), tensor inputs ((shape, dtype), None = omitted) and whether a rule must type it."""

    op: str
    inputs: tuple[tuple[Shape, int] | None, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    consts: dict[int, list[int]] = field(default_factory=dict)
    domain: str = ""
    typed: bool = True

    def spec(self) -> OpSpec:
        spec = lookup(self.op, self.domain)
        assert spec is not None, self.op
        return spec

    def __repr__(self) -> str:
        shapes = [None if i is None else i[0] for i in self.inputs]
        return f"{self.op}{shapes}{self.attrs}{self.consts}"


def _lit(value: Any, sort: str) -> str:
    if sort == "VecI":
        return f"(vec-of {' '.join(str(int(v)) for v in value)})" if len(value) else "(vec-empty)"
    if sort == "String":
        return f'"{value}"'
    if sort == "f64":
        return repr(float(value))
    return str(int(value))


def _dim(d: int | str, names: dict[str, int]) -> int:
    return d if isinstance(d, int) else SYM_BASE + names.setdefault(d, len(names) + 1)


def egglog_type(case: Case) -> tuple[Shape | None, int | None]:
    """(shape, dtype) the shapes ruleset gives the case's term (None where it gives none)."""
    spec = case.spec()
    egg = spec.egg
    assert egg is not None
    names: dict[str, int] = {}
    lines = ["(push)"]
    xs = []
    for i, inp in enumerate(case.inputs):
        if inp is None:
            xs.append("(Absent)")
            continue
        shape, dtype = inp
        lines.append(f'(let $x{i} (Input "x{i}"))')
        shape = tuple(_dim(d, names) for d in shape)
        lines.append(f"(set (shape $x{i}) {_lit(shape, 'VecI')})")
        lines.append(f"(set (dtype $x{i}) {dtype})")
        xs.append(f"$x{i}")
    args = [_lit(case.attrs.get(n, d), s) for n, s, d in egg.attrs]
    args += [_lit(case.consts.get(i, []), "VecI") for i in egg.const_inputs]
    ctor = egg_name(spec, len(case.inputs))
    lines.append(f"(let $e ({ctor} {' '.join(args + xs)}))")
    lines.append("(run-schedule (saturate (run shapes)))")
    eg = _schema()
    eg.parse_and_run_program("\n".join(lines))
    back = {SYM_BASE + i: n for n, i in names.items()}
    try:
        return _read(eg, "shape", back), _read(eg, "dtype", back)
    finally:
        eg.parse_and_run_program("(pop)")


@cache
def _schema() -> bindings.EGraph:
    """One e-graph holding the schema; each case runs inside a push/pop."""
    eg = bindings.EGraph()
    eg.parse_and_run_program(program())
    return eg


def _read(eg: bindings.EGraph, fn: str, back: dict[int, str]) -> Any:
    try:
        (out,) = eg.parse_and_run_program(f"(extract ({fn} $e))")
    except bindings.EggSmolError:
        return None
    assert isinstance(out, bindings.ExtractBest)
    text = out.termdag.to_string(out.term)
    if fn == "dtype":
        return int(text)
    nums = [int(t) for t in text.strip("()").split()[1:]]
    return tuple(back.get(d, d) if d >= SYM_BASE else d for d in nums)


def onnx_call(case: Case) -> OpCall:
    """The `OpCall` `infer` sees for the case (constants at their ONNX input indices)."""
    egg = case.spec().egg
    assert egg is not None
    n = len(case.inputs) + len(egg.const_inputs)
    inputs: list[TensorType | None] = []
    consts: list[np.ndarray | None] = []
    tensors = iter(case.inputs)
    for i in range(n):
        if i in egg.const_inputs:
            value = np.array(case.consts.get(i, []), dtype=np.int64)
            inputs.append(TensorType(P.INT64, value.shape))
            consts.append(value)
        else:
            t = next(tensors)
            inputs.append(None if t is None else TensorType(t[1], t[0]))
            consts.append(None)
    while inputs and inputs[-1] is None:  # trailing omitted inputs are left out
        inputs.pop()
        consts.pop()
    return OpCall(case.spec().op_type, inputs, consts, case.attrs)


def onnx_inferred(case: Case) -> tuple[Shape | None, int]:
    """ONNX shape inference's output 0 for a one-node model of the case (ai.onnx ops)."""
    call = onnx_call(case)
    names, vis, inits = [], [], []
    for i, t in enumerate(call.inputs):
        if t is None:
            names.append("")
        elif call.consts[i] is not None:
            names.append(f"c{i}")
            inits.append(onnx.numpy_helper.from_array(call.consts[i], f"c{i}"))  # type: ignore[arg-type]
        else:
            names.append(f"x{i}")
            vis.append(h.make_tensor_value_info(f"x{i}", t.dtype, list(t.shape or ())))
    attrs: dict[str, Any] = {k: v for k, v in case.attrs.items() if v != []}
    node = h.make_node(case.op, names, ["y"], **attrs)
    graph = h.make_graph([node], "g", vis, [h.make_empty_tensor_value_info("y")], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset_for([(case.op, "")]))])
    out = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph.output[0].type
    dims = out.tensor_type.shape.dim
    shape = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims)
    return shape, out.tensor_type.elem_type


def x(*shape: int | str, dtype: int = F) -> tuple[Shape, int]:
    return shape, dtype


I64 = P.INT64
CASES = [
    Case("LogSoftmax", (x(2, "N", 5),), {"axis": 1}),
    Case("Hardmax", (x(3, 4),)),
    Case("CumSum", (x("B", 4),), {"reverse": 1}, {1: [1]}),
    Case("Trilu", (x(2, 4, 4),), {"upper": 0}),
    Case("LRN", (x(1, 6, 5, 5),), {"size": 3}),
    Case("InstanceNormalization", (x(2, 3, 5), x(3), x(3))),
    Case("BatchNormalization", (x("N", 3, 4, 4), x(3), x(3), x(3), x(3))),
    Case("ReverseSequence", (x(5, 2, 3), x(2, dtype=I64))),
    Case("GroupNormalization", (x(2, 4, 3, 3), x(4), x(4)), {"num_groups": 2}),
    Case("BiasGelu", (x("B", 7, 16), x(16)), domain=MS),
    Case("FastGelu", (x(2, 16),), domain=MS),
    Case("QuickGelu", (x(2, 16),), domain=MS),
    Case("BiasAdd", (x(2, 3, 320), x(320), x(2, 3, 320)), domain=MS),
    Case("SkipLayerNormalization", (x(2, 3, 8), x(2, 3, 8), x(8), None, None), domain=MS),
    Case(
        "BiasSoftmax",
        (x(2, 3, 2, 4), x(2, 1, 1, 4)),
        {"axis": 3, "is_inner_broadcast": 1},
        domain=MS,
    ),
    Case("RotaryEmbedding", (x(1, 4, 16), x(1, 4, dtype=I64), x(8, 8), x(8, 8)), domain=MS),
    Case("SkipSimplifiedLayerNormalization", (x(2, 3, 8), x(2, 3, 8), x(8), None), domain=MS),
    Case(
        "SkipSimplifiedLayerNormalizationPart",
        (x(2, 3, 8), x(2, 3, 8), x(8), None),
        {"index": 0},
        domain=MS,
    ),
    Case(
        "MatMulNBits",
        (x("S", 32), x(6, 2, 8, dtype=P.UINT8), x(12), None),
        {"K": 32, "N": 6, "block_size": 16},
        domain=MS,
    ),
    Case(
        "FusedConv",
        (x(1, 3, 10, 12), x(8, 3, 3, 3), None, None),
        {"activation": "Relu", "strides": [2, 1], "pads": [1, 0, 1, 2]},
        domain=MS,
    ),
    Case("LayerNormalizationPart", (x(2, 3, 8), x(8), x(8)), {"index": 0}),
    Case("LayerNormalizationPart", (x(2, 3, 8), x(8), x(8)), {"index": 1}, typed=False),
    Case(
        "SkipLayerNormalizationPart",
        (x(2, 3, 8), x(2, 3, 8), x(8), None, None),
        {"index": 3},
        domain=MS,
    ),
    Case("GatherElements", (x(3, 4), x(2, 4, dtype=I64)), {"axis": 0}),
    Case("ScatterND", (x(4, 5), x(2, 1, dtype=I64), x(2, 5))),
    *(
        Case("Gemm", (x(a, b), x(c, d), x(1, 6)), {"transA": ta, "transB": tb})
        for ta, tb, a, b, c, d in [
            (0, 0, 3, 4, 4, 6),
            (1, 0, 4, 3, 4, 6),
            (0, 1, 3, 4, 6, 4),
            (1, 1, 4, 3, 6, 4),
        ]
    ),
    Case("Gemm", (x("M", 4), x(4, 6), None)),
    Case("FusedMatMul", (x(2, 5, 4), x(6, 4)), {"transB": 1}, domain=MS),
    Case("FusedMatMul", (x(2, 4, 5), x(2, 4, 6)), {"transA": 1}, domain=MS),
    Case("FusedMatMul", (x("B", 3, 5, 4), x("B", 3, 6, 5)), {"transA": 1, "transB": 1}, domain=MS),
    Case(
        "DynamicQuantizeMatMul", (x("B", 5, 4), x(4, 6, dtype=P.INT8), x(1), None, None), domain=MS
    ),
    Case("Concat", (x(2, 3), x(2, 5)), {"axis": 1}),
    Case("Concat", (x(2, 3),), {"axis": -1}),
    Case("Concat", (x("N", 1, 4), x("N", 2, 4), x("N", 3, 4)), {"axis": -2}),
    Case(
        "Concat",
        (x(2, 3, dtype=I64), x(4, 3, dtype=I64), x(1, 3, dtype=I64), x(1, 3, dtype=I64)),
        {"axis": 0},
    ),
    Case("Concat", (x("N", 3), x(2, 3)), {"axis": 0}, typed=False),
    *(Case("Flatten", (x(2, 3, 4, 5),), {"axis": a}) for a in (0, 1, 2, 4, -1, -4)),
    Case("Flatten", (x(3),), {"axis": 1}),
    Case("Flatten", (x("N", 3, 4),), {"axis": 1}, typed=False),
    Case("Squeeze", (x(1, 3, 1, 5),), consts={1: [0]}),
    Case("Squeeze", (x("N", 1, 1, 5),), consts={1: [-2, 1]}),
    Case("Squeeze", (x(1, 3, 1),), consts={1: [2, 0]}),
    Case("Squeeze", (x(1, 3, 1),), typed=False),
    *(
        Case("Unsqueeze", (x(3, "N"),), consts={1: a})
        for a in ([0], [2], [-1], [1, 3], [-1, 0], [0, 1])
    ),
    Case("Unsqueeze", (x(),), consts={1: [0]}),
    *(Case("Gather", (x(5, "N", 4), x(2, 3, dtype=I64)), {"axis": a}) for a in (0, 1, -1)),
    Case("Gather", (x(5, 4), (((), I64))), {"axis": 0}),
    Case("Conv", (x("N", 3, 10, 12), x(8, 3, 3, 3), x(8))),
    Case(
        "Conv",
        (x(1, 3, 10, 12), x(8, 3, 3, 3), None),
        {"strides": [2, 2], "pads": [1, 1, 1, 1], "dilations": [2, 1]},
    ),
    Case(
        "Conv",
        (x(1, 4, 11), x(6, 2, 4), None),
        {"kernel_shape": [4], "strides": [3], "pads": [0, 2], "group": 2},
    ),
    Case("Conv", (x(2, 2, 5, 6, 7), x(4, 2, 1, 2, 3), None), {"strides": [1, 2, 2]}),
    Case("Conv", (x(1, 3, "H", 12), x(8, 3, 3, 3), None), typed=False),
    Case("Conv", (x(1, 3, 8, 8), x(8, 3, 3, 3), None), {"auto_pad": "SAME_UPPER"}, typed=False),
    Case("MaxPool", (x(1, 3, 9, 9),), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    Case(
        "MaxPool",
        (x(1, 3, 10, 9),),
        {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1},
    ),
    Case(
        "MaxPool",
        (x(1, 3, 6),),
        {"kernel_shape": [2], "strides": [2], "pads": [1, 1], "ceil_mode": 1},
    ),
    Case("MaxPool", (x(2, 3, 10, 10),), {"kernel_shape": [3, 3], "dilations": [2, 2]}),
    Case(
        "AveragePool",
        (x("N", 3, 7, 7),),
        {"kernel_shape": [2, 2], "ceil_mode": 1, "strides": [2, 2]},
    ),
    Case(
        "AveragePool", (x(1, 3, 8, 8, 8),), {"kernel_shape": [3, 3, 3], "pads": [1, 1, 1, 1, 1, 1]}
    ),
    Case("GlobalAveragePool", (x("N", 8, 7, 7),)),
    Case("GlobalMaxPool", (x(2, 8, 5),)),
    *(
        Case("ReduceMean", (x(2, "S", 4),), {"axes": a, "keepdims": k})
        for a in ([], [-1], [0, 2], [2, 0, 1])
        for k in (0, 1)
        if len(a) < 3 or k
    ),
    Case("ReduceMean", (x(2, 3, 4, 5),), {"axes": [0, 1, 3], "keepdims": 0}, typed=False),
    Case("ReduceMean", (x(2, 3, 4),), {"axes": [2, 0, 1], "keepdims": 0}, typed=False),
    Case("ReduceMax", (x(2, 3, 4),), {"axes": [1]}),
    *(
        Case("ReduceSum", (x(2, 3, 4),), {"keepdims": k, "noop_with_empty_axes": n}, {1: a})
        for a in ([], [1], [-1, 0])
        for k in (0, 1)
        for n in (0, 1)
    ),
    *(
        Case(o, (x(2, 3, 4),), {"axis": a, "keepdims": k})
        for o in ("ArgMax", "ArgMin")
        for a in (0, -1)
        for k in (0, 1)
    ),
    Case("Pad", (x(2, 3), None), consts={1: [0, 1, 2, 3]}),
    Case(
        "Pad",
        (x(1, 3, 8, 8), x(dtype=F)),
        {"mode": "constant"},
        consts={1: [0, 0, -1, 2, 0, 0, 1, 2]},
    ),
    Case("Pad", (x("N", 3), None), consts={1: [0, 1, 0, 1]}, typed=False),
    Case("Tile", (x(2, 3, 1),), consts={1: [2, 1, 4]}),
    *(
        Case("Slice", (x(10, 5, 6),), consts={1: s, 2: e, 3: a, 4: t})
        for s, e, a, t in [
            ([1], [8], [0], [1]),
            ([-3], [100], [2], [2]),
            ([0, 2], [-1, -7], [-1, 0], [2, 1]),
            ([5], [2], [0], [1]),
            ([-100, 1, 0], [3, 7, 2**31 - 1], [0, 2, 1], [1, 3, 1]),
        ]
    ),
    Case("Slice", (x(10, 4),), consts={1: [8], 2: [2], 3: [0], 4: [-2]}, typed=False),
    Case("Slice", (x(10, "S"),), consts={1: [0], 2: [2**31 - 1], 3: [1], 4: [1]}, typed=False),
    Case("SplitPart", (x(2, 10, 3),), {"axis": 1, "sizes": [3, 7], "index": 1}),
    Case("SplitPart", (x("B", 10),), {"axis": -1, "sizes": [4, 4, 2], "index": 2}),
    Case("TopKPart", (x(2, 10),), {"axis": -1, "largest": 1, "k": 3, "index": 0}),
    Case("TopKPart", (x(2, 10, "S"),), {"axis": 1, "largest": 0, "k": 4, "index": 1}),
    *(
        Case("Shape", (x(2, "N", 4, 5),), {"start": s, "end": e})
        for s, e in [(0, 2**63 - 1), (1, -1), (-2, 2**63 - 1), (-10, 10), (3, 1)]
    ),
    Case("Size", (x(2, "N"),)),
    Case("DepthToSpace", (x(1, 8, 3, 4),), {"blocksize": 2}),
    Case("SpaceToDepth", (x(2, 3, 4, 6),), {"blocksize": 2}),
]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_rule_agrees_with_infer(case: Case) -> None:
    shape, dtype = egglog_type(case)
    (want,) = case.spec().infer(onnx_call(case))
    if not case.typed:
        assert shape is None, shape
        return
    assert shape == want.shape and dtype == want.dtype, (shape, dtype, want)


STANDARD = [
    c
    for c in CASES
    if c.typed
    and not c.domain
    and not c.op.endswith("Part")
    # opset 18's GroupNormalization (scale of num_groups) is a function ONNX does not type
    and c.op != "GroupNormalization"
]


@pytest.mark.parametrize("case", STANDARD, ids=repr)
def test_rule_agrees_with_onnx_shape_inference(case: Case) -> None:
    shape, dtype = egglog_type(case)
    assert (shape, dtype) == onnx_inferred(case)


DTYPE_ONLY = [
    Case("OneHot", (x(3, dtype=I64), x(dtype=I64), x(2, dtype=P.DOUBLE)), {"axis": -1}),
    Case("Einsum", (x(2, 3), x(3, 4)), {"equation": "ij,jk->ik"}),
    Case("BitShift", (x(4, dtype=P.UINT8), x(4, dtype=P.UINT8)), {"direction": "LEFT"}),
    Case("GatherND", (x(4, 5, dtype=I64), x(2, 2, dtype=I64))),
    Case("Compress", (x(4, 5), x(4, dtype=P.BOOL)), {"axis": [0]}),
]


@pytest.mark.parametrize("case", DTYPE_ONLY, ids=repr)
def test_dtype_rule_agrees_with_infer(case: Case) -> None:
    _, dtype = egglog_type(case)
    (want,) = case.spec().infer(onnx_call(case))
    assert dtype == want.dtype


def test_every_typed_op_has_a_dtype_rule() -> None:
    """Every typed op's output dtype comes from egglog (parts: at least their output 0)."""
    missing = [
        egg_name(s) for s in typed_specs() if not any("(set (dtype e)" in r for r in shape_rules(s))
    ]
    assert missing == [], missing


CHAINED = RuleSet("chained")


@CHAINED.rule
def batched_matmul_as_gemm(a: Tensor, w: Tensor) -> Rewrite:
    """A @ W = reshape(Gemm(reshape(A, (10, 4)), W), (2, 5, 3))   for A (2, 5, 4), W (4, 3)
    (the Gemm is a new class: only the Gemm shape rule types it)"""
    flat = op.Gemm(op.Reshape(a, shape=[10, 4]), w)
    return rewrite(a @ w).to(op.Reshape(flat, shape=[2, 5, 3]), a.rank == 3, w.rank == 2)


@CHAINED.rule
def gemm_as_matmul(p: Tensor, q: Tensor) -> Rewrite:
    """Gemm(P, Q) = P @ Q   for a 2-D Gemm result (a guard on the new term's rank)"""
    gemm = op.Gemm(p, q)
    return rewrite(gemm).to(p @ q, gemm.rank == 2)


def test_a_later_rule_matches_a_new_gemm_by_its_rank(tmp_path: Path) -> None:
    m = mk.model(
        [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Neg", ["m"], ["y"])],
        [mk.vi("x", [2, 5, 4])],
        [mk.vi("y", [2, 5, 3])],
        inits=[mk.const("w", mk.rand((4, 3), 1))],
    )
    enc = encode(load(mk.write(m, tmp_path)))
    stats = saturate(enc, [CHAINED], Limits(iterations=4))
    fired = {name.rsplit(".", 1)[-1]: n for name, n in stats.matches.items()}
    assert fired["batched_matmul_as_gemm"] > 0 and fired["gemm_as_matmul"] > 0, fired
    snap = take_snapshot(enc)
    (gemm,) = [c for c in snap if any(n.op == "Gemm" for n in c.nodes)]
    assert gemm.type == TensorType(F, (10, 3))
    assert any(n.op == "MatMul" for n in gemm.nodes)
