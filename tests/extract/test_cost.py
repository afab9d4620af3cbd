"""Cost model: roofline ordering of real ops, free leaves, cheap views, robust to unknown sizes.

Formula tests price with `BUILTIN_CPU` (fixed numbers, every coefficient 1 where it is not
set), so they check the formula, not this machine's calibration.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from rewrite.extract import (
    CUDA,
    Choice,
    CostModel,
    EClass,
    ENode,
    OpaqueInfo,
    Snapshot,
    Target,
    enode_cost,
    graph_cost,
    node_costs,
)
from rewrite.extract.contrib import CONTRIB_WORK
from rewrite.extract.cost import BUILTIN_CPU, coeff_key, load_target
from rewrite.extract.work import assume_type, call_work, type_bytes
from rewrite.ops import lookup
from rewrite.ops.base import OpCall, OpSpec, TensorType
from rewrite.ops.registry import all_specs

CPU = BUILTIN_CPU
F = 1  # onnx.TensorProto.FLOAT
US = 1e6


def leaf(cid: int, name: str, shape: tuple | None, dtype: int = F, op: str = "Input") -> EClass:
    return EClass(cid, [ENode(op, args=(name,))], TensorType(dtype, shape))


def bert_ffn(x_shape: tuple, y_shape: tuple) -> Snapshot:
    """x @ W1 (768 x 3072) and alternatives over the (…, 3072) result."""
    return Snapshot(
        {
            0: leaf(0, "x", x_shape),
            1: leaf(1, "w", (768, 3072), op="Init"),
            2: EClass(2, [ENode("MatMul", (0, 1))], TensorType(F, y_shape)),
            3: leaf(3, "b", y_shape),
            4: EClass(
                4,
                [ENode("Add", (2, 3)), ENode("Identity", (2,)), ENode("Dropout", (2,))],
                TensorType(F, y_shape),
            ),
            5: EClass(5, [ENode("Reshape", (4,), args=(0, (-1, 3072)))], TensorType(F, None)),
        },
        roots=[5],
    )


def costs_by_op(snap: Snapshot, target: Target = CPU) -> dict[str, float]:
    return {node.op: c for (_, node), c in node_costs(snap, target).items()}


def test_matmul_costs_far_more_than_an_add_of_the_same_output() -> None:
    assert lookup("MatMul") is not None and lookup("Add") is not None
    c = costs_by_op(bert_ffn((1, 128, 768), (1, 128, 3072)))
    # 2·128·768·3072 FLOPs at 85 GFLOP/s ≈ 7.1 ms; the Add moves 4.7 MB at 10 GB/s ≈ 0.47 ms.
    assert c["MatMul"] == pytest.approx(2 * 128 * 768 * 3072 / CPU.peak_flops * US + 2, rel=1e-6)
    assert c["Add"] == pytest.approx(3 * 128 * 3072 * 4 / CPU.bandwidth * US + 2, rel=1e-6)
    assert c["MatMul"] > 10 * c["Add"]


def test_views_cost_the_overhead_only_and_less_than_an_add() -> None:
    c = costs_by_op(bert_ffn((1, 128, 768), (1, 128, 3072)))
    overhead = CPU.overhead * US
    assert c["Identity"] == c["Dropout"] == c["Reshape"] == pytest.approx(overhead)
    assert 0 < c["Identity"] < c["Add"]


def test_leaves_and_projections_are_free() -> None:
    c = costs_by_op(bert_ffn((1, 128, 768), (1, 128, 3072)))
    assert c["Input"] == c["Init"] == 0.0
    snap = Snapshot({0: leaf(0, "x", (4,)), 1: EClass(1, [ENode("Out", (0,), args=(0,))])}, [1])
    assert enode_cost(snap, 1, snap.classes[1].nodes[0], CPU) == 0.0


def test_symbolic_and_unknown_dims_do_not_crash_and_use_the_assumed_sizes() -> None:
    sym = bert_ffn(("batch", "seq", 768), ("batch", "seq", 3072))
    model = CostModel(sym, CPU)
    c = {n.op: model.cost(cid, n) for cid, n in sym.enodes()}
    assert c == pytest.approx(costs_by_op(bert_ffn((1, 1, 768), (1, 1, 3072))))
    assert model.fallbacks == []
    named = node_costs(sym, CPU, dims={"batch": 1, "seq": 128})
    assert {n.op: v for (_, n), v in named.items()} == pytest.approx(
        costs_by_op(bert_ffn((1, 128, 768), (1, 128, 3072)))
    )
    unknown = bert_ffn((None, None, None), (None, "seq", 3072))
    assert all(
        0 < v < float("inf") for (_, n), v in node_costs(unknown, CPU).items() if not n.is_leaf
    )
    no_rank = bert_ffn(None, None)
    assert all(0 <= v < float("inf") for v in node_costs(no_rank, CPU).values())


def test_flattening_a_dim_does_not_change_the_estimate() -> None:
    """The same data as (b, s, 768) and as (b·s, 768) (unnamed dim) moves the same bytes."""
    assert type_bytes(TensorType(F, ("b", "s", 768))) == type_bytes(TensorType(F, (None, 768)))


def test_assumed_sizes() -> None:
    assert assume_type(TensorType(F, ("n", None, 3))) == TensorType(F, (1, 1, 3))
    assert assume_type(TensorType(F, ("n", None, 3)), {"n": 8}) == TensorType(F, (8, 1, 3))
    assert assume_type(TensorType(0, None)) == TensorType(0, (1,))
    assert type_bytes(TensorType(0, ("n", 10))) == 10 * 4  # unknown dtype: 4 bytes
    assert type_bytes(None) == 0.0


def test_unknown_op_costs_overhead_plus_bytes_of_its_classes() -> None:
    snap = Snapshot(
        {
            0: leaf(0, "x", (1000,)),
            1: leaf(1, "y", (1000,)),
            2: EClass(2, [ENode("MyOp", (0, 1), domain="custom")], TensorType(F, (500,))),
        },
        roots=[2],
    )
    model = CostModel(snap, CPU)
    expected = (2500 * 4 / CPU.bandwidth + CPU.overhead) * US
    assert model.cost(2, snap.classes[2].nodes[0]) == pytest.approx(expected)


def test_opaque_multi_output_node_sees_its_projections() -> None:
    info = OpaqueInfo({"axis": 0}, n_inputs=1, n_outputs=2)
    snap = Snapshot(
        {
            0: leaf(0, "x", (1000,)),
            1: EClass(1, [ENode("Split", (0,), args=("k0",), opaque=True)], sort="N"),
            2: EClass(2, [ENode("Out", (1,), args=(0,))], TensorType(F, (500,))),
            3: EClass(3, [ENode("Out", (1,), args=(1,))], TensorType(F, (500,))),
        },
        roots=[2, 3],
        opaque={"k0": info},
    )
    model = CostModel(snap, CPU)
    assert model.output_types(1) == [TensorType(F, (500,))] * 2
    expected = (2000 * 4 / CPU.bandwidth + CPU.overhead) * US  # read 1000, write 2 × 500
    assert model.cost(1, snap.classes[1].nodes[0]) == pytest.approx(expected)
    assert model.fallbacks == []


def test_spec_failure_falls_back_to_bytes_and_is_recorded() -> None:
    assert lookup("Gemm") is not None  # registered, and its spec refuses a 3-D A
    snap = Snapshot(
        {
            0: leaf(0, "a", (2, 8, 16)),  # Gemm needs a 2-D A: its spec raises
            1: leaf(1, "b", (16, 4)),
            2: EClass(2, [ENode("Gemm", (0, 1), args=("g",), opaque=True)], TensorType(F, (8, 4))),
        },
        roots=[2],
        opaque={"g": OpaqueInfo({}, n_inputs=2)},
    )
    model = CostModel(snap, CPU)
    cost = model.cost(2, snap.classes[2].nodes[0])
    assert cost == pytest.approx(((256 + 64 + 32) * 4 / CPU.bandwidth + CPU.overhead) * US)
    assert any(f.startswith("Gemm in class 2: ShapeError") for f in model.fallbacks)


def test_cuda_prices_a_matmul_below_the_cpu() -> None:
    snap = bert_ffn((1, 128, 768), (1, 128, 3072))
    assert costs_by_op(snap, CUDA)["MatMul"] < costs_by_op(snap, CPU)["MatMul"]


def test_graph_cost_pays_each_reachable_pick_once() -> None:
    snap = bert_ffn((1, 128, 768), (1, 128, 3072))
    costs = node_costs(snap, CPU)
    nodes = {cid: c.nodes[0] for cid, c in snap.classes.items()}
    choice = Choice(picks=nodes, roots=[5])
    expected = sum(costs[(cid, n)] for cid, n in nodes.items())
    assert graph_cost(snap, choice, costs) == pytest.approx(expected)
    nodes[4] = snap.classes[4].nodes[1]  # Identity(2): class 3 is no longer reachable
    expected -= costs[(4, snap.classes[4].nodes[0])] - costs[(4, nodes[4])]
    assert graph_cost(snap, Choice(picks=nodes, roots=[5]), costs) == pytest.approx(expected)


def residual(op: str, shape: tuple, extra_user: bool = False) -> Snapshot:
    """LayerNormalization(op(x, r)) as the encoder leaves it (op typed or opaque)."""
    add = ENode("Add", (0, 1)) if op == "Add" else ENode(op, (0, 1), args=("s",), opaque=True)
    ln = ENode("LayerNormalization", (2, 3, 4), args=("ln",), opaque=True)
    classes = {
        0: leaf(0, "x", shape),
        1: leaf(1, "r", shape),
        2: EClass(2, [add], TensorType(F, shape)),
        3: leaf(3, "g", shape[-1:], op="Init"),
        4: leaf(4, "b", shape[-1:], op="Init"),
        5: EClass(5, [ln], TensorType(F, shape)),
    }
    roots = [5]
    if extra_user:
        classes[6] = EClass(6, [ENode("Relu", (2,))], TensorType(F, shape))
        roots.append(6)
    opaque = {"s": OpaqueInfo({}, 2), "ln": OpaqueInfo({"axis": -1}, 3)}
    return Snapshot(classes, roots, opaque=opaque)


def total(snap: Snapshot, target: Target) -> float:
    return sum(node_costs(snap, target).values())


def test_add_that_ort_fuses_into_skip_layer_norm_is_priced_as_the_fusion() -> None:
    """ORT turns Add+LayerNormalization into SkipLayerNormalization (5x slower on ORT 1.32):
    the Add is priced as what the fusion adds, so Sum (never fused) wins; no fusion, no
    surcharge (2-D inputs, a second consumer)."""
    cal = load_target("cpu")  # the shipped table (the tests' cache folder has no other)
    assert "com.microsoft.SkipLayerNormalization" in cal.coeffs, cal.source
    shape = (1, 128, 768)
    model = CostModel(residual("Add", shape), cal)
    add_cost = model.cost(2, model.snapshot.classes[2].nodes[0])
    assert model.fused == ["Add in class 2 + LayerNormalization in class 5"]
    assert total(residual("Add", shape), cal) > 2 * total(residual("Sum", shape), cal)
    plain = CostModel(residual("Add", (128, 768)), cal)
    assert plain.cost(2, plain.snapshot.classes[2].nodes[0]) < add_cost / 2 and not plain.fused
    shared = CostModel(residual("Add", shape, extra_user=True), cal)
    assert shared.cost(2, shared.snapshot.classes[2].nodes[0]) < add_cost / 2
    assert not shared.fused


def test_weights_are_priced_at_memory_bandwidth() -> None:
    slow = replace(CPU, mem_bandwidth=CPU.bandwidth / 4)
    snap = bert_ffn((1, 1, 768), (1, 1, 3072))  # a GEMV: bound by reading W
    fast_mm, slow_mm = costs_by_op(snap, CPU)["MatMul"], costs_by_op(snap, slow)["MatMul"]
    w = 768 * 3072 * 4
    assert slow_mm - fast_mm == pytest.approx(3 * w / CPU.bandwidth * US, rel=1e-3)
    assert costs_by_op(snap, slow)["Add"] == costs_by_op(snap, CPU)["Add"]  # no weights


def test_contrib_ops_are_priced_by_their_work() -> None:
    """FusedMatMul pays its FLOPs; an opaque contrib op of unknown output type is priced with
    the output its work function infers, not with a one-element output."""
    q = (1, 12, 128, 64)
    snap = Snapshot(
        {
            0: leaf(0, "q", q),
            1: leaf(1, "k", q),
            2: EClass(2, [ENode("FusedMatMul", (0, 1), ("f",), "com.microsoft", True)]),
            3: leaf(3, "x", (1, 128, 3072)),
            4: EClass(4, [ENode("Gelu", (3,), ("g",), "com.microsoft", True)]),
        },
        roots=[2, 4],
        opaque={"f": OpaqueInfo({"transB": 1}, 2), "g": OpaqueInfo({}, 1)},
    )
    model = CostModel(snap, CPU)
    flops, nbytes, weights = model.work(2, snap.classes[2].nodes[0])
    assert flops == 2 * 12 * 128 * 64 * 128 and weights == 0
    assert nbytes == (2 * 12 * 128 * 64 + 12 * 128 * 128) * 4
    _, gelu_bytes, _ = model.work(4, snap.classes[4].nodes[0])
    assert gelu_bytes == 2 * 128 * 3072 * 4 and model.fallbacks == []


@pytest.mark.parametrize(
    ("op", "shapes", "attrs", "const_b", "key"),
    [
        ("Conv", [(1, 96, 56, 56), (96, 1, 3, 3)], {"group": 96}, True, "Conv:grouped"),
        ("Conv", [(1, 96, 56, 56), (64, 96, 1, 1)], {}, True, "Conv"),
        ("MatMul", [(1, 12, 8, 64), (1, 12, 64, 8)], {}, False, "MatMul:activations"),
        ("MatMul", [(1, 8, 64), (64, 8)], {}, True, "MatMul"),
        ("Add", [(1, 8, 768), (768,)], {}, True, "Add:broadcast"),
        ("Add", [(1, 8, 768), ()], {}, True, "Add"),
        ("Add", [(1, 8, 768), (1, 8, 768)], {}, False, "Add"),
        ("Gelu", [(1, 8, 768)], {}, True, "com.microsoft.Gelu"),
    ],
)
def test_coeff_keys(op: str, shapes: list, attrs: dict, const_b: bool, key: str) -> None:
    domain = "com.microsoft" if op == "Gelu" else ""
    call = OpCall(op, [TensorType(F, s) for s in shapes], [None] * len(shapes), attrs)
    assert coeff_key(ENode(op, domain=domain), call, const_b) == key


def typical_call(spec: OpSpec) -> OpCall | None:
    """A call the op's shape function accepts, from a few typical input lists (None if none)."""
    x, w, i = TensorType(F, (1, 16, 64)), TensorType(F, (64, 64)), TensorType(7, (1, 16))
    x2, b, ax = TensorType(F, (16, 64)), TensorType(9, (1, 16, 64)), TensorType(7, (1,))
    img = TensorType(F, (1, 8, 16, 16))
    u32 = TensorType(12, (1, 16))
    nbits = [x, TensorType(2, (64, 2, 16)), TensorType(F, (128,))]  # N=64, K=64, 32-blocks
    dq = [x, TensorType(3, (64, 64)), TensorType(F, ())]  # DynamicQuantizeMatMul: int8 B
    nhwc = [TensorType(F, (1, 16, 320)), TensorType(F, (320,)), TensorType(F, (1, 16, 320))]
    seq = TensorType(F, (4, 1, 16))  # RNN X: (seq, batch, size), hidden 16; W, R by gate count
    rnns = [
        [seq, TensorType(F, (1, g * 16, 16)), TensorType(F, (1, g * 16, 16))] for g in (4, 3, 1)
    ]
    kv, none = TensorType(F, (1, 16, 32)), TensorType(F, (1, 4, 0, 8))  # GQA: 4 kv heads of 8
    gqa = [x, kv, kv, none, none, TensorType(6, (1,)), TensorType(6, ())]
    candidates = [[x], [x, x], [x, w], [x2, w], [x, i], [b, x, x], [x, ax], [x, x, x], [img],
                  [img, TensorType(F, (4, 8, 3, 3))], [x, ax, ax],
                  [img, TensorType(F, (8,)), TensorType(F, (8,))], [u32, u32], nbits, dq, nhwc,
                  [i, TensorType(6, ()), TensorType(F, (2,))],  # OneHot: int32 depth
                  *rnns, gqa]  # fmt: skip
    attrs = {"to": F, "axis": -1, "kernel_shape": [3, 3], "perm": [0, 2, 1],
             "equation": "ij,jk->ik", "num_groups": 2, "direction": "LEFT", "blocksize": 2,
             "size": 3, "K": 64, "N": 64, "bits": 4, "block_size": 32, "sizes": [32, 32],
             "index": 0, "hidden_size": 16}  # fmt: skip
    rnn_attrs = {**attrs, "direction": "forward"}  # BitShift's LEFT is no RNN direction
    gqa_attrs = {**attrs, "num_heads": 8, "kv_num_heads": 4}  # GroupQueryAttention
    for inputs in candidates:
        consts = [np.array([0], dtype=np.int64) if t.dtype == 7 and k else None
                  for k, t in enumerate(inputs)]  # fmt: skip
        for given in (attrs, rnn_attrs, gqa_attrs):
            call = OpCall(spec.name, inputs, consts, given)
            try:
                spec.infer(call)
            except Exception:
                continue
            return call
    return None


@pytest.mark.parametrize(
    "target",
    [load_target("cpu"), load_target("cuda"), CPU],
    ids=["cpu-calibrated", "cuda", "cpu-builtin"],
)
def test_every_registered_op_costs_positive_and_finite(target: Target) -> None:
    """Every op of the registry and of the contrib table, on typical shapes, on every target:
    its work is finite and its cost positive and finite, priced as an opaque e-node."""
    ops = [(s.name, s.domain) for s in all_specs()] + [(op, dom) for dom, op in CONTRIB_WORK]
    untyped = []
    for op, domain in ops:
        spec = lookup(op, domain)
        call = typical_call(spec) if spec else None
        if call is None:
            if spec:
                untyped.append(op)
            call = OpCall(op, [TensorType(F, (1, 16, 64))] * 2, [None, None], {"transB": 1})
        outs = spec.infer(call) if spec and op not in untyped else [TensorType(F, (1, 16, 64))]
        if op not in untyped:
            work = call_work(op, domain, call, outs)
            assert work is not None and all(0 <= v < math.inf for v in work), (op, work)
        node = ENode(op, tuple(range(len(call.inputs))), ("k",), domain, True)
        classes = {k: leaf(k, f"i{k}", t.shape, t.dtype) for k, t in enumerate(call.inputs)}
        out = len(classes)
        classes[out] = EClass(out, [node], outs[0])
        info = OpaqueInfo(dict(call.attrs), len(call.inputs))
        cost = node_costs(Snapshot(classes, [out], opaque={"k": info}), target)[(out, node)]
        assert 0 < cost < math.inf, (op, cost)
    assert len(untyped) <= 1, f"ops with no typical call here: {untyped}"


def merged_weights(concat_of_inits: bool, op: str = "Concat") -> Snapshot:
    """x @ W, where W is Concat(W1, W2) of two initializers or an initializer itself."""
    w = (
        EClass(3, [ENode(op, (1, 2), args=(1,))], TensorType(F, (8, 16)))
        if concat_of_inits
        else leaf(3, "w", (8, 16), op="Init")
    )
    return Snapshot(
        {
            0: leaf(0, "x", (1, 64, 8)),
            1: leaf(1, "w1", (8, 8), op="Init"),
            2: leaf(2, "w2", (8, 8), op="Init"),
            3: w,
            4: EClass(4, [ENode("MatMul", (0, 3))], TensorType(F, (1, 64, 16))),
            5: EClass(5, [ENode("Relu", (4,))], TensorType(F, (1, 64, 16))),
        },
        roots=[5],
    )


def test_nodes_that_compute_constants_are_free_and_read_as_weights() -> None:
    snap = merged_weights(True)
    model = CostModel(snap, CPU)
    assert model.constants == {1, 2, 3}
    costs = costs_by_op(snap)
    assert costs["Concat"] == 0.0 and costs["Relu"] > 0
    assert costs["MatMul"] == costs_by_op(merged_weights(False))["MatMul"]


def test_nondeterministic_and_unknown_ops_on_constants_are_not_free() -> None:
    for op in ("RandomNormalLike", "MyCustomOp"):
        snap = merged_weights(True, op)
        assert CostModel(snap, CPU).constants == {1, 2}
        assert costs_by_op(snap)[op] > 0


def test_skip_layer_norm_fusion_needs_shapes_ort_can_see_are_equal() -> None:
    """Declared input dims (`batch`) are names ORT sees too; a dim our shape inference named
    (`unk__2`) is not, so no fusion is predicted there (bert_dynamic: ORT fuses none). Priced
    at concrete sizes (`Snapshot.retyped`), the fusion decision still follows the symbolic
    types."""
    cal = load_target("cpu")

    def fused(snap: Snapshot, symbolic: Snapshot | None = None) -> list[str]:
        model = CostModel(snap, cal, symbolic=symbolic)
        for cid, node in snap.enodes():
            model.cost(cid, node)
        return model.fused

    assert fused(residual("Add", ("batch", "seq", 768)))
    unk = ("unk__2", "unk__3", 768)
    inferred = residual("Add", unk)
    for cid in (0, 1):  # computed values whose dims shape inference named; inputs declare others
        inferred.classes[cid] = EClass(cid, [ENode("Relu", (cid + 6,))], TensorType(F, unk))
        inferred.classes[cid + 6] = leaf(cid + 6, f"in{cid}", ("batch", "seq", 768))
    for cid, name in ((0, "p"), (1, "q"), (2, "a")):
        inferred.classes[cid].names.append(name)
    assert not fused(inferred)
    concrete = inferred.retyped({n: TensorType(F, (1, 128, 768)) for n in "pqa"})
    assert concrete.classes[2].type.shape == (1, 128, 768)
    assert fused(concrete) and not fused(concrete, symbolic=inferred)


def test_retyped_prices_named_values_at_their_concrete_sizes() -> None:
    snap = bert_ffn(("b", "s", 768), ("b", "s", 3072))
    snap.classes[2].names.append("mm")
    sized = snap.retyped({"mm": TensorType(F, (1, 128, 3072)), "x": TensorType(7, (1, 128, 768))})
    assert sized.classes[2].type.shape == (1, 128, 3072)
    assert sized.classes[0].type == snap.classes[0].type  # no name given; wrong dtype ignored
    assert costs_by_op(sized)["MatMul"] > 5 * costs_by_op(snap)["MatMul"]
