"""make_inputs / load_inputs on tiny models: shapes, dtypes, valid index ranges, metadata."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from rewrite.errors import ModelError
from rewrite.verify import input_specs, load_inputs, make_inputs, save_inputs
from tests.verify.models import I64, F, add_model, model, save

I32 = TensorProto.INT32


def embedding_model(vocab: int = 50) -> onnx.ModelProto:
    """E = Gather(W[vocab, 8], ids), ids int64 [batch, seq]."""
    return model(
        [helper.make_node("Gather", ["W", "ids"], ["E"])],
        [helper.make_tensor_value_info("ids", I64, ["batch", "seq"])],
        [helper.make_tensor_value_info("E", F, None)],
        [("W", np.ones((vocab, 8), np.float32))],
    )


def test_embedding_ids_stay_below_vocab_size() -> None:
    for seed in range(5):
        ids = make_inputs(embedding_model(50), seed=seed, dims={"seq": 256})["ids"]
        assert ids.dtype == np.int64 and ids.shape == (1, 256)
        assert ids.min() >= 0 and ids.max() < 50
        assert ids.max() >= 10  # the whole vocabulary is used, not just [0, 2)


def test_ids_followed_through_cast_and_unsqueeze_to_computed_table() -> None:
    """The table is computed (W + W), so its size comes from shape inference."""
    m = model(
        [
            helper.make_node("Cast", ["ids"], ["c"], to=I64),
            helper.make_node("Unsqueeze", ["c", "ax"], ["u"]),
            helper.make_node("Add", ["W", "W"], ["W2"]),
            helper.make_node("Gather", ["W2", "u"], ["E"], axis=1),
        ],
        [helper.make_tensor_value_info("ids", I32, [64])],
        [helper.make_tensor_value_info("E", F, None)],
        [("W", np.ones((4, 37), np.float32)), ("ax", np.array([0], np.int64))],
    )
    ids = make_inputs(m)["ids"]
    assert ids.dtype == np.int32 and ids.min() >= 0 and ids.max() < 37 and ids.max() > 2


def test_smallest_bound_over_all_uses() -> None:
    m = model(
        [
            helper.make_node("Gather", ["A", "ids"], ["x"]),
            helper.make_node("Gather", ["B", "ids"], ["y"]),
        ],
        [helper.make_tensor_value_info("ids", I64, [200])],
        [helper.make_tensor_value_info(n, F, None) for n in "xy"],
        [("A", np.ones((100, 2), np.float32)), ("B", np.ones((7, 2), np.float32))],
    )
    assert make_inputs(m)["ids"].max() < 7


def test_name_heuristics_and_position_clipped_to_table() -> None:
    m = model(
        [helper.make_node("Gather", ["P", "position_ids"], ["p"])],
        [
            helper.make_tensor_value_info("attention_mask", I64, [1, 12]),
            helper.make_tensor_value_info("token_type_ids", I64, [1, 12]),
            helper.make_tensor_value_info("position_ids", I64, [1, 12]),
            helper.make_tensor_value_info("other", I64, [1000]),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, [1000]),
        ],
        [helper.make_tensor_value_info("p", F, None)],
        [("P", np.ones((10, 4), np.float32))],
    )
    f = make_inputs(m)
    assert (f["attention_mask"] == 1).all() and (f["token_type_ids"] == 0).all()
    assert f["position_ids"].tolist() == [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9]]
    assert set(np.unique(f["other"])) == {0, 1}
    assert f["flag"].dtype == np.bool_ and 0 < f["flag"].sum() < 1000


def test_symbolic_dims_defaults_overrides_and_consistency() -> None:
    m = model(
        [helper.make_node("Add", ["a", "b"], ["y"])],
        [
            helper.make_tensor_value_info("a", F, ["batch", "sequence", "foo"]),
            helper.make_tensor_value_info("b", F, ["batch", "sequence", "foo"]),
        ],
        [helper.make_tensor_value_info("y", F, None)],
    )
    f = make_inputs(m)
    assert f["a"].shape == f["b"].shape == (1, 16, 2)
    assert make_inputs(m, dims={"foo": 5})["a"].shape == (1, 16, 5)


def test_seeded_and_deterministic() -> None:
    m = add_model(np.zeros((3, 4)))
    a, b, c = make_inputs(m, seed=3), make_inputs(m, seed=3), make_inputs(m, seed=4)
    assert np.array_equal(a["X"], b["X"]) and not np.array_equal(a["X"], c["X"])
    assert a["X"].dtype == np.float32


def test_initializers_listed_as_inputs_are_not_fed() -> None:
    m = add_model(np.zeros((3, 4)))
    m.graph.input.append(helper.make_tensor_value_info("B", F, [3, 4]))
    assert list(make_inputs(m)) == ["X"]


def test_corpus_metadata_is_honoured() -> None:
    recipes = {
        "ids": {"shape": [1, 9], "fill": "randint", "high": 7},
        "m": {"shape": [1, 9], "fill": "zeros"},
        "x": {"fill": "ones"},
    }
    m = model(
        [
            helper.make_node("Gather", ["W", "ids"], ["e"]),
            helper.make_node("Add", ["x", "x"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("ids", I64, ["b", "s"]),
            helper.make_tensor_value_info("m", I64, ["b", "s"]),
            helper.make_tensor_value_info("x", F, ["n"]),
        ],
        [helper.make_tensor_value_info(n, F, None) for n in "ey"],
        [("W", np.ones((1000, 2), np.float32))],
        meta={"corpus.inputs": json.dumps(recipes), "corpus.dims": json.dumps({"n": 3})},
    )
    f = make_inputs(m)
    assert f["ids"].shape == (1, 9) and f["ids"].max() < 7 and f["ids"].max() > 1
    assert (f["m"] == 0).all() and f["m"].shape == (1, 9)
    assert f["x"].tolist() == [1.0, 1.0, 1.0]
    assert make_inputs(m, dims={"s": 4})["ids"].shape == (1, 4)  # the caller's dims win


def test_never_fails_on_unknown_ops_or_shapes() -> None:
    m = model(
        [
            helper.make_node("Mystery", ["ids", "x"], ["t"], domain="custom.domain"),
            helper.make_node("Gather", ["t", "ids"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("ids", I64, [None, 4]),  # type: ignore[list-item]
            helper.make_tensor_value_info("x", F, None),
        ],
        [helper.make_tensor_value_info("y", F, None)],
    )
    m.opset_import.append(helper.make_opsetid("custom.domain", 1))
    f = make_inputs(m)
    assert f["ids"].shape == (1, 4) and f["ids"].max() < 2 and f["x"].shape == ()
    assert [s.fill for s in input_specs(m)] == ["randint", "randn"]


def test_load_inputs_round_trip(tmp_path: Path) -> None:
    m = save(embedding_model(), tmp_path / "emb.onnx")
    feeds = make_inputs(m)
    back = load_inputs(save_inputs(feeds, tmp_path / "in.npz"), m)
    assert back.keys() == feeds.keys() and np.array_equal(back["ids"], feeds["ids"])


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        (
            {"ids": np.zeros((1, 3), np.int64), "bogus": np.zeros(1)},
            "input 'bogus' is not an input",
        ),
        ({}, "input 'ids' is missing"),
        ({"ids": np.zeros((1, 3), np.int32)}, "input 'ids' has dtype int32, the model wants int64"),
        ({"ids": np.zeros(3, np.int64)}, "input 'ids' has rank 1"),
    ],
)
def test_load_inputs_errors_name_the_input(tmp_path: Path, arrays: dict, match: str) -> None:
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    with pytest.raises(ModelError, match=match):
        load_inputs(path, embedding_model())


def test_load_inputs_checks_static_dims(tmp_path: Path) -> None:
    path = tmp_path / "in.npz"
    np.savez(path, X=np.zeros((3, 5), np.float32))
    with pytest.raises(
        ModelError, match="input 'X' has shape \\[3, 5\\], the model wants 4 at dim 1"
    ):
        load_inputs(path, add_model(np.zeros((3, 4))))


def test_load_inputs_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "in.npz"
    path.write_text("not an npz")
    with pytest.raises(ModelError, match="cannot read inputs"):
        load_inputs(path, embedding_model())
