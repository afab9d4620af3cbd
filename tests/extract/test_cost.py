"""Cost model: roofline ordering of real ops, free leaves, cheap views, robust to unknown sizes."""

from __future__ import annotations

import pytest

from rewrite.extract import (
    CPU,
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
from rewrite.extract.cost import assume_type, type_bytes
from rewrite.ops import lookup
from rewrite.ops.base import TensorType

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
    if lookup("MatMul") is None or lookup("Add") is None:
        pytest.skip("MatMul/Add op modules not registered yet")
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
    assert all(0 < v < float("inf") for (_, n), v in node_costs(unknown).items() if not n.is_leaf)
    no_rank = bert_ffn(None, None)
    assert all(0 <= v < float("inf") for v in node_costs(no_rank).values())


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
    if lookup("Gemm") is None:
        pytest.skip("Gemm op module not registered yet")
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
    costs = node_costs(snap)
    nodes = {cid: c.nodes[0] for cid, c in snap.classes.items()}
    choice = Choice(picks=nodes, roots=[5])
    expected = sum(costs[(cid, n)] for cid, n in nodes.items())
    assert graph_cost(snap, choice, costs) == pytest.approx(expected)
    nodes[4] = snap.classes[4].nodes[1]  # Identity(2): class 3 is no longer reachable
    expected -= costs[(4, snap.classes[4].nodes[0])] - costs[(4, nodes[4])]
    assert graph_cost(snap, Choice(picks=nodes, roots=[5]), costs) == pytest.approx(expected)
