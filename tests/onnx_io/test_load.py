"""load: real files in, checked and typed Graphs out; load -> save round trips are exact."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.onnx_io import Graph, load, save
from rewrite.onnx_io.graph import release_pages
from rewrite.onnx_io.shapes import STUB_BYTES, infer_types
from rewrite.ops.base import UNKNOWN, TensorType
from tests.conftest import corpus_model
from tests.onnx_io import models
from tests.onnx_io.models import LIGHT, assert_same_outputs, const, vi

# Node counts after converting the opset-9 light models to opset 17 (before -> after): the
# converter adds Constant inputs (Dropout's ratio, Unsqueeze's axes) and wraps Softmax-1's
# 2-D coercion in Shape/Flatten/Reshape.
LIGHT_NODES = {
    "light_bvlc_alexnet": (40, 42),
    "light_densenet121": (1746, 1988),
    "light_inception_v1": (237, 238),
    "light_inception_v2": (916, 1054),
    "light_resnet50": (415, 415),
    "light_shufflenet": (446, 446),
    "light_squeezenet": (105, 109),
    "light_vgg19": (82, 84),
    "light_zfnet512": (38, 38),
}


def round_trip(src: Path, tmp_path: Path, **kw: int) -> tuple[Graph, onnx.ModelProto, Path]:
    """load src, save it, check the written file fully; return graph, written model, path."""
    g = load(src, **kw)
    out = tmp_path / "out.onnx"
    save(g, out, source=src)
    onnx.checker.check_model(str(out), full_check=True)
    return g, onnx.load(str(out)), out


@pytest.mark.parametrize("path", LIGHT, ids=lambda p: p.stem)
def test_light_model_round_trip(path: Path, tmp_path: Path) -> None:
    g, written, out = round_trip(path, tmp_path)
    original = onnx.load(str(path))
    before, after = LIGHT_NODES[path.stem]
    assert (len(original.graph.node), len(g.nodes)) == (before, after)
    assert g.opsets == {"": 17} and written.opset_import[0].version == 17
    assert written.ir_version >= 8
    assert any("converted from opset 9 to 17" in n for n in g.notes)
    # IR 3 listed every initializer as an input; ORT treats them as constants, and so do we.
    assert all(not g.is_constant(i) and i not in g.initializers for i in g.inputs)
    assert [o.name for o in written.graph.output] == [o.name for o in original.graph.output]
    assert all(t.shape is not None and t.dtype for t in g.types.values())
    assert_same_outputs(path, out, seeds=(0,))


@pytest.mark.parametrize("name", models.SMALL)
def test_small_model_round_trip(name: str, tmp_path: Path) -> None:
    src = models.save(models.SMALL[name](), tmp_path / "in.onnx")
    original = onnx.load(str(src))
    _, written, out = round_trip(src, tmp_path)
    assert written.graph.input == original.graph.input
    assert written.graph.output == original.graph.output
    assert written.metadata_props == original.metadata_props
    assert written.opset_import == original.opset_import
    for f in ("ir_version", "producer_name", "producer_version", "model_version", "doc_string"):
        assert getattr(written, f) == getattr(original, f)
    assert written.graph.doc_string == original.graph.doc_string
    assert [n.SerializeToString() for n in written.graph.node] == [
        n.SerializeToString() for n in original.graph.node
    ]
    assert_same_outputs(src, out)


def test_mlp_types_and_header(tmp_path: Path) -> None:
    g = load(models.save(models.mlp(), tmp_path / "m.onnx"))
    assert g.types["x"] == TensorType(T.FLOAT, ("batch", 8))
    assert g.types["xw"] == TensorType(T.FLOAT, ("batch", 4))
    assert g.types["w"] == TensorType(T.FLOAT, (8, 4))
    assert g.types["s1"] == TensorType(T.FLOAT, ("batch", 2))
    assert not g.header.graph.node and not g.header.graph.initializer
    assert g.nodes[0].doc_string == "the product" and g.nodes[3].attrs["num_outputs"] == 2
    assert g.path == (tmp_path / "m.onnx").resolve() and g.notes == []
    assert g.is_constant("w") and g.array("b").shape == (4,)


def test_unused_initializer_dropped_and_input_initializer_kept(tmp_path: Path) -> None:
    g, written, _ = round_trip(models.save(models.mlp(), tmp_path / "m.onnx"), tmp_path)
    assert "unused" in g.initializers
    assert [t.name for t in written.graph.initializer] == ["w", "b"]
    g, written, out = round_trip(
        models.save(models.initializer_input(), tmp_path / "i.onnx"), tmp_path
    )
    assert g.inputs == ["x", "b"] and not g.is_constant("b")
    assert [t.name for t in written.graph.initializer] == ["b"]
    assert [i.name for i in models.session(out).get_overridable_initializers()] == ["b"]


def test_if_subgraph_kept_byte_for_byte(tmp_path: Path) -> None:
    src = models.save(models.if_model(), tmp_path / "if.onnx")
    g, written, out = round_trip(src, tmp_path)
    node = next(n for n in g.nodes if n.op_type == "If")
    assert node.has_subgraph and node.implicit_inputs == ["x", "w", "c"]
    assert node in g.consumers()["w"]
    original = onnx.load(str(src)).graph.node[1].attribute
    assert [a.SerializeToString() for a in written.graph.node[1].attribute] == [
        a.SerializeToString() for a in original
    ]
    assert [t.name for t in written.graph.initializer] == ["w"]  # read only inside the If
    assert_same_outputs(src, out)


def test_unknown_custom_op_round_trips(tmp_path: Path) -> None:
    src = models.save(models.custom_op(), tmp_path / "c.onnx")
    g, written, _ = round_trip(src, tmp_path)
    frob = g.nodes[0]
    assert (frob.domain, frob.op_type, frob.outputs) == ("my.ops", "Frobnicate", ["y", "z"])
    assert frob.attrs["mode"] == "fast" and frob.attrs["sizes"] == [1, 2, 3]
    assert g.types["y"] == UNKNOWN and g.types["z"] == TensorType(T.FLOAT, ("n",))
    assert written.graph.node == onnx.load(str(src)).graph.node
    assert {o.domain: o.version for o in written.opset_import} == {"": 17, "my.ops": 3}


def test_external_data_loads_and_round_trips(tmp_path: Path) -> None:
    src = tmp_path / "ext" / "m.onnx"
    src.parent.mkdir()
    onnx.save_model(
        models.mlp(), src, save_as_external_data=True, location="weights.bin", size_threshold=0
    )
    assert (src.parent / "weights.bin").is_file()
    g, written, out = round_trip(src, tmp_path)
    w = g.initializers["w"]
    assert w.data_location == T.DEFAULT and not w.external_data
    assert np.array_equal(g.array("w"), models.rand((8, 4), 1))
    assert all(not t.external_data for t in written.graph.initializer)
    assert_same_outputs(src, out)


def test_big_external_initializers_are_mapped_not_copied(tmp_path: Path) -> None:
    big = models.rand((512, 1024), 3)  # 2 MiB: mapped (MAP_MIN_BYTES is 1 MiB)
    m = models.model(
        [h.make_node("MatMul", ["x", "w"], ["y"]), h.make_node("Add", ["y", "b"], ["z"])],
        [vi("x", [2, 512])],
        [vi("z", [2, 1024])],
        inits=[const("w", big), const("b", models.rand((1024,), 4))],
    )
    src = tmp_path / "m.onnx"
    onnx.save_model(m, src, save_as_external_data=True, location="m.data", size_threshold=0)
    g = load(src)
    w, b = g.array("w"), g.array("b")
    assert isinstance(w.base, np.memmap) and not w.flags.writeable
    assert np.array_equal(w, big) and w.dtype == np.float32 and w.shape == (512, 1024)
    assert not isinstance(b.base, np.memmap)  # 4 KiB: read from the proto as before
    release_pages(w, b)  # unmaps w's pages (values stay readable), a no-op for b
    assert np.array_equal(w, big) and np.array_equal(b, models.rand((1024,), 4))
    assert g.initializers["w"].raw_data == big.tobytes()  # the proto keeps its data too
    _, _, out = round_trip(src, tmp_path)
    assert_same_outputs(src, out)


def test_non_topological_file_is_sorted_stably(tmp_path: Path) -> None:
    m = models.mlp()
    nodes = list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend([nodes[2], nodes[0], nodes[3], nodes[1]])  # relu, mm, split, add
    g, written, out = round_trip(models.save(m, tmp_path / "m.onnx"), tmp_path)
    assert [n.name for n in g.nodes] == ["mm", "add", "relu", "split"]
    assert [n.name for n in written.graph.node] == ["mm", "add", "relu", "split"]
    assert_same_outputs(models.save(models.mlp(), tmp_path / "sorted.onnx"), out)


def test_sparse_initializer_becomes_dense(tmp_path: Path) -> None:
    values = const("s", np.array([1.5, -2.0], np.float32))
    sparse = h.make_sparse_tensor(values, const("", np.array([1, 4], np.int64)), [2, 3])
    m = models.model([h.make_node("Add", ["x", "s"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 3])])
    m.graph.sparse_initializer.append(sparse)
    src = models.save(m, tmp_path / "s.onnx")
    g, written, out = round_trip(src, tmp_path)
    assert np.array_equal(g.array("s"), np.array([[0, 1.5, 0], [0, -2.0, 0]], np.float32))
    assert not written.graph.sparse_initializer and g.types["s"] == TensorType(T.FLOAT, (2, 3))
    assert any("sparse" in n for n in g.notes)
    assert_same_outputs(src, out)


def test_opset_below_min_is_converted(tmp_path: Path) -> None:
    m = models.model(
        [h.make_node("Unsqueeze", ["x"], ["y"], axes=[0])],
        [vi("x", [2, 3])],
        [vi("y", [1, 2, 3])],
        opsets=[h.make_opsetid("", 11)],
        ir_version=6,
    )
    src = models.save(m, tmp_path / "old.onnx")
    g, written, out = round_trip(src, tmp_path)
    assert g.opset == 17 and [n.op_type for n in g.nodes] == ["Constant", "Unsqueeze"]
    assert written.ir_version == 8
    assert_same_outputs(src, out)
    assert load(src, min_opset=11).opset == 11  # at or above min_opset: untouched


def test_conversion_keeps_large_initializers(tmp_path: Path) -> None:
    # The converter sees a light copy; weights of 64 KiB or more are put back by name.
    m = models.wide()
    m.opset_import[0].version, m.ir_version = 11, 6
    src = models.save(m, tmp_path / "old.onnx")
    g, _, out = round_trip(src, tmp_path)
    assert g.opset == 17 and g.initializers["w"].ByteSize() >= STUB_BYTES
    assert np.array_equal(g.array("w"), models.rand((256, 64), 6))
    assert_same_outputs(src, out)


def test_shape_inference_failure_warns_and_keeps_declared_types(tmp_path: Path) -> None:
    # The initializer contradicts the declared input shape: inference raises even when lax.
    m = models.model(
        [h.make_node("Relu", ["x"], ["y"])],
        [vi("x", [2, 3])],
        [vi("y", None)],
        inits=[const("x", models.rand((3, 3), 0))],
    )
    with pytest.warns(RuntimeWarning, match=r"bad\.onnx: shape inference failed"):
        g = load(models.save(m, tmp_path / "bad.onnx"))
    assert g.types["x"] == TensorType(T.FLOAT, (3, 3)) and g.types["y"] == TensorType(1, None)
    assert any("shape inference failed" in n for n in g.notes)


def test_path_based_inference_matches_in_memory() -> None:
    m = models.mlp()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        via_files = infer_types(m, "m", [], limit=0)
    assert via_files == infer_types(m, "m", [])
    assert via_files["xw"] == TensorType(T.FLOAT, ("batch", 4))


def test_hollow_corpus_models_load() -> None:
    paths = sorted(models.CORPUS.glob("*.onnx"))
    if not paths:
        pytest.skip(f"no corpus in {models.CORPUS}")
    for p in paths:
        g = load(p)
        assert g.opset >= 17 and len(g.nodes) > 100, p
        assert all(t.dtype and t.shape is not None for t in g.types.values()), p


@pytest.mark.slow
def test_distilbert_round_trip_is_bit_identical(tmp_path: Path) -> None:
    src = corpus_model("distilbert.onnx")
    g, written, out = round_trip(src, tmp_path)
    assert len(g.nodes) == 349 and len(written.graph.node) == 349
    assert_same_outputs(src, out)


def test_stale_value_info_loses_to_inference(tmp_path: Path) -> None:
    m = models.mlp()
    m.graph.value_info.append(vi("xw", [99, 99]))
    g = load(models.save(m, tmp_path / "m.onnx"))
    assert g.types["xw"] == TensorType(T.FLOAT, ("batch", 4))
    assert g.types["r"] == TensorType(T.FLOAT, ("batch", 4))  # inference went on past it
    assert any("1 value_info entries in the file contradict" in n for n in g.notes)


def test_file_value_info_types_values_past_unknown_ops(tmp_path: Path) -> None:
    m = models.model(
        [
            h.make_node("Frobnicate", ["x"], ["y"], domain="my.ops"),
            h.make_node("Relu", ["y"], ["r"]),
            h.make_node("Transpose", ["r"], ["t"]),
        ],
        [vi("x", [2, 3])],
        [vi("t", None)],
        opsets=[*models.OPSET, h.make_opsetid("my.ops", 1)],
        value_info=[vi("y", [2, 5])],
    )
    g = load(models.save(m, tmp_path / "c.onnx"))
    assert g.types["y"] == TensorType(T.FLOAT, (2, 5))
    assert g.types["t"] == TensorType(T.FLOAT, (5, 2))  # inferred from the file's type of y
    assert g.notes == []
