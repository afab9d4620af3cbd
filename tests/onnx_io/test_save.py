"""save/to_model: exact headers, opset bookkeeping, refusals, atomic writes, external data."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.errors import ModelError
from rewrite.onnx_io import Node, load, save, to_model
from tests.onnx_io import models
from tests.onnx_io.models import assert_same_outputs

save_module = importlib.import_module("rewrite.onnx_io.save")  # `save` is also the function


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """The MLP model saved as tmp_path/src/in.onnx."""
    (tmp_path / "src").mkdir()
    return models.save(models.mlp(), tmp_path / "src" / "in.onnx")


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_refuses_to_overwrite_the_input(src: Path, tmp_path: Path) -> None:
    g = load(src)
    link = tmp_path / "link.onnx"
    link.symlink_to(src)
    for out in (src, src.parent / ".." / "src" / "in.onnx", link):
        with pytest.raises(ModelError, match=r"refusing to overwrite the input model"):
            save(g, out, source=src)
    g.path = None  # only `source` protects it now
    with pytest.raises(ModelError, match=r"in\.onnx: refusing to overwrite"):
        save(g, src, source=str(src))
    with pytest.raises(ModelError, match=r"refusing to overwrite"):
        save(load(src), src)  # the file the graph came from, without `source`
    assert onnx.load(str(src)) == models.mlp()


def test_refuses_missing_folder(src: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"out\.onnx: cannot write: folder '.*nowhere' does not"):
        save(load(src), tmp_path / "nowhere" / "out.onnx")


def test_refuses_unwritable_folder(src: Path, tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root writes anywhere chmod allows; sysfs refuses even root
        out = Path("/sys/out.onnx")
    else:
        (tmp_path / "ro").mkdir(mode=0o555)
        out = tmp_path / "ro" / "out.onnx"
    with pytest.raises(
        ModelError, match=r"out\.onnx: cannot write(: folder .* is not writable| in)"
    ):
        save(load(src), out)
    assert not out.exists()


def test_refuses_directory_target(src: Path, tmp_path: Path) -> None:
    (tmp_path / "d.onnx").mkdir()
    with pytest.raises(ModelError, match=r"d\.onnx: cannot write: it is a directory"):
        save(load(src), tmp_path / "d.onnx")


def test_checker_failure_leaves_nothing_behind(src: Path, tmp_path: Path) -> None:
    g = load(src)
    g.nodes[2].op_type = "NoSuchOp"
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "old.onnx").write_bytes(b"previous")
    with pytest.raises(
        ModelError, match=r"old\.onnx: onnx\.checker rejects the model \(full check\): .*NoSuchOp"
    ):
        save(g, out_dir / "old.onnx")
    assert listing(out_dir) == ["old.onnx"]
    assert (out_dir / "old.onnx").read_bytes() == b"previous"
    with pytest.raises(ModelError, match="NoSuchOp"):
        save(g, out_dir / "big.onnx", external=True)
    assert listing(out_dir) == ["old.onnx"]


@pytest.mark.parametrize("external", [False, True])
def test_interrupt_while_checking_leaves_nothing_behind(
    src: Path, tmp_path: Path, external: bool
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "m.onnx").write_bytes(b"previous")

    def interrupt(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is save_module._check.__code__:
            raise KeyboardInterrupt  # Ctrl-C arriving while the written file is checked

    g = load(src)
    sys.settrace(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            save(g, out_dir / "m.onnx", external=external)
    finally:
        sys.settrace(None)
    assert listing(out_dir) == ["m.onnx"]
    assert (out_dir / "m.onnx").read_bytes() == b"previous"


def test_overwrites_other_output_atomically_with_normal_mode(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous")
    save(load(src), out, source=src)
    assert listing(tmp_path) == ["out.onnx", "src"]
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask
    assert_same_outputs(src, out)


def test_external_data_output(tmp_path: Path) -> None:
    src = models.save(models.wide(), tmp_path / "wide.onnx")
    out = tmp_path / "big.onnx"
    save(load(src), out, source=src, external=True)
    assert listing(tmp_path) == ["big.onnx", "big.onnx.data", "wide.onnx"]
    written = onnx.load(str(out), load_external_data=False)
    where = {t.name: {e.key: e.value for e in t.external_data} for t in written.graph.initializer}
    assert where["b"] == {}  # under EXTERNAL_MIN_BYTES: stays inline
    assert where["w"]["location"] == "big.onnx.data" and int(where["w"]["offset"]) % 4096 == 0
    assert_same_outputs(src, out)
    again = load(out)
    assert again.array("w").tobytes() == load(src).array("w").tobytes()
    save(again, tmp_path / "single.onnx", source=out)
    assert_same_outputs(src, tmp_path / "single.onnx")


@pytest.mark.parametrize(
    "build", [models.mlp, models.wide, models.if_model, models.constants, models.ms_gelu]
)
def test_single_file_is_exactly_to_model_serialized(
    build: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """save writes the weights tensor by tensor, never a ModelProto copy holding them all, and
    the bytes are still protobuf's own serialization of `to_model`."""
    m = build()
    m.graph.doc_string = "after the initializers"  # graph fields on both sides of the splice
    g = load(models.save(m, tmp_path / "m.onnx"))
    want = to_model(g).SerializeToString()
    monkeypatch.setattr(save_module, "to_model", None)  # not used by save
    save(g, tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").read_bytes() == want
    save(g, tmp_path / "ext.onnx", external=True)
    assert_same_outputs(tmp_path / "m.onnx", tmp_path / "ext.onnx")


def test_external_is_chosen_by_estimated_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = models.save(models.wide(), tmp_path / "wide.onnx")
    g = load(src)
    size = len(to_model(g).SerializeToString())
    monkeypatch.setattr(save_module, "EXTERNAL_THRESHOLD", size + 64)
    save(g, tmp_path / "one.onnx")
    assert listing(tmp_path) == ["one.onnx", "wide.onnx"]
    monkeypatch.setattr(save_module, "EXTERNAL_THRESHOLD", size - 64)
    save(g, tmp_path / "two.onnx")
    assert listing(tmp_path) == ["one.onnx", "two.onnx", "two.onnx.data", "wide.onnx"]


def test_typed_data_tensors_go_external(tmp_path: Path) -> None:
    big = h.make_tensor("k", T.FLOAT, [512], [0.5] * 512)  # float_data, not raw_data
    m = models.model(
        [h.make_node("Mul", ["x", "k"], ["y"])],
        [models.vi("x", [512])],
        [models.vi("y", [512])],
        inits=[big],
    )
    src = models.save(m, tmp_path / "f.onnx")
    save(load(src), tmp_path / "e.onnx", external=True)
    k = onnx.load(str(tmp_path / "e.onnx"), load_external_data=False).graph.initializer[0]
    assert k.data_location == T.EXTERNAL
    assert_same_outputs(src, tmp_path / "e.onnx")


def test_to_model_opsets_for_com_microsoft(tmp_path: Path) -> None:
    g = load(models.save(models.ms_gelu(), tmp_path / "ms.onnx"))
    assert {o.domain for o in to_model(g).opset_import} == {"", "com.microsoft"}
    g.nodes[1].op_type, g.nodes[1].domain = "Relu", ""  # nothing uses com.microsoft now
    assert {o.domain for o in to_model(g).opset_import} == {""}

    g = load(models.save(models.constants(), tmp_path / "c.onnx"))
    g.nodes.append(Node("Gelu", ["y"], ["g"], name="gelu", domain="com.microsoft"))
    g.header.graph.output[0].name = "g"
    g.outputs = ["g"]
    m = to_model(g)
    assert {(o.domain, o.version) for o in m.opset_import} == {("", 17), ("com.microsoft", 1)}
    save(g, tmp_path / "out.onnx")
    assert models.session(tmp_path / "out.onnx").run(None, {"x": models.rand((2, 3), 0)})


def test_to_model_clears_value_info_and_types_new_outputs(tmp_path: Path) -> None:
    m = models.mlp()
    m.graph.value_info.append(models.vi("xw", [99, 99]))  # stale
    g = load(models.save(m, tmp_path / "m.onnx"))
    g.outputs = ["s0", "xw"]
    out = to_model(g)
    assert not out.graph.value_info
    assert [o.name for o in out.graph.output] == ["s0", "xw"]
    assert out.graph.output[0] == m.graph.output[0]
    assert out.graph.output[1] == h.make_tensor_value_info("xw", T.FLOAT, ["batch", 4])
    assert g.header.graph.output == m.graph.output  # to_model does not touch the graph
