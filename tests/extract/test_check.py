"""check_choice: accepts valid extractions, names the problem in every invalid one."""

from __future__ import annotations

import pytest

from rewrite.errors import ExtractionError
from rewrite.extract import Choice, check_choice
from rewrite.extract.check import class_label, describe
from rewrite.extract.snapshot import EClass, ENode, Snapshot
from tests.extract.egraphs import build

# 0 = x | 1 = Relu(0) | 2 = {Add(1, 0), Neg(3)} | 3 = {Neg(2), y}
SNAP, _ = build(
    {
        0: [("x", (), 1.0)],
        1: [("Relu", (0,), 1.0)],
        2: [("Add", (1, 0), 1.0), ("Neg", (3,), 1.0)],
        3: [("Neg", (2,), 1.0), ("y", (), 1.0)],
    },
    roots=[2],
)
SNAP.classes[2].names = ["logits"]
NODES = {cid: SNAP.classes[cid].nodes for cid in SNAP.classes}


def choice(picks: dict[int, int], roots: list[int] | None = None) -> Choice:
    """picks: class -> index of the e-node in the class."""
    return Choice(
        picks={cid: NODES[cid][i] for cid, i in picks.items()},
        roots=[2] if roots is None else roots,
        extractor="test",
    )


def test_valid_choices_pass() -> None:
    check_choice(SNAP, choice({2: 0, 1: 0, 0: 0}))
    check_choice(SNAP, choice({2: 1, 3: 1}))
    check_choice(SNAP, choice({2: 1, 3: 1, 1: 0}))  # an unneeded pick is allowed


def test_missing_root_pick() -> None:
    with pytest.raises(ExtractionError, match=r"test: root class 2 \('logits'\) is not picked"):
        check_choice(SNAP, choice({3: 1}))


def test_missing_child_pick() -> None:
    with pytest.raises(
        ExtractionError,
        match=r"class 0, a child of the pick Relu\(0\) for class 1, has no pick",
    ):
        check_choice(SNAP, choice({2: 0, 1: 0}))


def test_cycle_is_named() -> None:
    with pytest.raises(ExtractionError, match=r"cycle through class 2 \('logits'\): 2 -> 3 -> 2"):
        check_choice(SNAP, choice({2: 1, 3: 0}))


def test_self_loop_is_a_cycle() -> None:
    snap, _ = build({0: [("Identity", (0,), 0.0), ("x", (), 1.0)]}, roots=[0])
    bad = Choice(picks={0: snap.classes[0].nodes[0]}, roots=[0])
    with pytest.raises(ExtractionError, match=r"choice: the picked graph has a cycle.*0 -> 0"):
        check_choice(snap, bad)


def test_pick_from_another_class() -> None:
    wrong = choice({2: 0, 1: 0, 0: 0})
    wrong.picks[1] = NODES[3][1]  # y belongs to class 3
    with pytest.raises(ExtractionError, match=r"pick for class 1, Input\('y'\), is not one of"):
        check_choice(SNAP, wrong)


def test_pick_for_unknown_class() -> None:
    bad = choice({2: 0, 1: 0, 0: 0})
    bad.picks[42] = NODES[0][0]
    with pytest.raises(ExtractionError, match="picks class 42, which is not in the snapshot"):
        check_choice(SNAP, bad)


def test_roots_must_be_the_snapshots() -> None:
    with pytest.raises(ExtractionError, match=r"roots \[1\] are not the snapshot's \[2\]"):
        check_choice(SNAP, choice({1: 0, 0: 0}, roots=[1]))


def test_describe_names_leaves_projections_and_ops_exactly() -> None:
    """The forms every error message above quotes."""
    assert describe(ENode("Input", args=("x",))) == "Input('x')"
    assert describe(ENode("Init", args=("w",))) == "Init('w')"
    assert describe(ENode("Input")) == "Input()"  # a leaf without its name: as an op
    assert describe(ENode("Out", (12,), args=(1,))) == "Out[1](12)"
    assert describe(ENode("Out", (12,))) == "Out[0](12)"
    assert describe(ENode("Add", (3, 4), args=(0,))) == "Add(3, 4)"  # args are not shown
    assert describe(ENode("Gelu", (5,), domain="com.microsoft")) == "com.microsoft.Gelu(5)"


def test_class_label_quotes_at_most_three_original_names() -> None:
    leaf = ENode("Input", args=("a",))
    snap = Snapshot({7: EClass(7, [leaf]), 8: EClass(8, [leaf])}, roots=[7])
    snap.classes[7].names = ["a", "b", "c", "d"]
    assert class_label(snap, 7) == "class 7 ('a', 'b', 'c')"
    assert class_label(snap, 8) == "class 8"
    assert class_label(snap, 99) == "class 99"


def test_a_cycle_below_the_root_is_named_from_where_it_starts() -> None:
    # 0 = Relu(1) | 1 = Neg(2) | 2 = Neg(1): the cycle is 1 -> 2 -> 1, not the path from 0
    snap, _ = build(
        {0: [("Relu", (1,), 1.0)], 1: [("Neg", (2,), 1.0)], 2: [("Neg", (1,), 1.0)]}, roots=[0]
    )
    bad = Choice(picks={c: snap.classes[c].nodes[0] for c in (0, 1, 2)}, roots=[0])
    with pytest.raises(ExtractionError, match=r"cycle through class 1: 1 -> 2 -> 1 \(Neg\(2\)\)$"):
        check_choice(snap, bad)


def test_a_foreign_pick_lists_the_first_six_nodes_of_its_class() -> None:
    leaves = [(f"v{i}", (), 1.0) for i in range(7)]
    snap, _ = build({0: [("Relu", (1,), 1.0)], 1: leaves, 2: [("w", (), 1.0)]}, roots=[0])
    bad = Choice(picks={0: snap.classes[0].nodes[0], 1: snap.classes[2].nodes[0]}, roots=[0])
    have = ", ".join(f"Input('v{i}')" for i in range(6))
    with pytest.raises(ExtractionError) as e:
        check_choice(snap, bad)
    assert str(e.value) == (
        f"choice: the pick for class 1, Input('w'), is not one of its e-nodes ({have})"
    )
