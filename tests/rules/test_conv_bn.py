"""Conv + BatchNormalization folding (`examples/conv_bn_rules.py`), a rule whose right side
creates a constant from an attribute (epsilon): it fires on Conv + BatchNormalization models
built in code (with and without a Conv bias, 1-D and 2-D, every auto_pad form), the folded
weights and bias are one initializer each, and the output passes the differential check."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED
from rewrite.rules.rule import RuleSet
from rewrite.verify.gate import APPROXIMATE, verify_rules
from tests.egraph.models import model, ort_run, vi, write

ROOT = Path(__file__).resolve().parents[2]


def _conv_bn() -> RuleSet:
    spec = importlib.util.spec_from_file_location(
        "conv_bn_rules", ROOT / "examples" / "conv_bn_rules.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.CONV_BN  # type: ignore[no-any-return]


def conv_bn_model(*, bias: bool, spatial: int, pad: str = "NOTSET") -> onnx.ModelProto:
    """x [1, 3, 6, ...] -> Conv(W [4, 3, 3, ...], B?) -> BatchNormalization -> Relu."""
    rng = np.random.default_rng(spatial + 2 * bias)
    f = np.float32
    inits = {"w": rng.standard_normal((4, 3) + (3,) * spatial).astype(f)}
    if bias:
        inits["b"] = rng.standard_normal(4).astype(f)
    inits |= {"scale": rng.uniform(0.5, 2, 4).astype(f), "bias": rng.standard_normal(4).astype(f)}
    inits |= {"mean": rng.standard_normal(4).astype(f), "var": rng.uniform(0.5, 2, 4).astype(f)}
    conv_attrs: dict[str, object] = {"kernel_shape": [3] * spatial, "auto_pad": pad}
    if pad == "NOTSET":
        conv_attrs["pads"] = [1] * (2 * spatial)
    nodes = [
        h.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["c"], **conv_attrs),
        h.make_node(
            "BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"], epsilon=1e-3
        ),
        h.make_node("Relu", ["n"], ["y"]),
    ]
    protos = [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()]
    return model(
        nodes, [vi("x", [1, 3] + [6] * spatial)], [vi("y", [None] * (2 + spatial))], inits=protos
    )


@pytest.mark.parametrize(
    ("bias", "spatial", "pad"),
    [(True, 2, "NOTSET"), (False, 2, "NOTSET"), (True, 1, "VALID"), (False, 2, "SAME_UPPER")],
)
def test_batchnorm_is_folded_into_the_conv(
    tmp_path: Path, bias: bool, spatial: int, pad: str
) -> None:
    m = conv_bn_model(bias=bias, spatial=spatial, pad=pad)
    dst = tmp_path / "out.onnx"
    opts = Options(rulesets=[_conv_bn()], allow_approximate=True, prove_rules=False)
    report = optimize(write(m, tmp_path), dst, opts)
    assert report.status == STATUS_OPTIMIZED, report.warnings
    assert report.saturation["rule_matches"]["conv_bn_fold"] > 0
    assert report.verification["ok"] is True
    out = onnx.load(dst)
    assert [n.op_type for n in out.graph.node] == ["Conv", "Relu"]
    conv = out.graph.node[0]
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in out.graph.initializer}
    assert set(conv.input[1:]) <= set(inits) and len(conv.input) == 3  # folded W and bias
    assert inits[conv.input[1]].shape == (4, 3) + (3,) * spatial
    x = np.random.default_rng(0).standard_normal([1, 3] + [6] * spatial).astype(np.float32)
    want, got = ort_run(m, {"x": x})["y"], ort_run(out, {"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert out.graph.initializer[0].data_type == T.FLOAT


@pytest.mark.slow
def test_rewrite_verify_accepts_it_as_approximate_relative_to_its_terms() -> None:
    """`rewrite verify examples/conv_bn_rules.py` (~2-4 min): every one of its 24 forms is
    sampled in ORT, each within 1e-3 of the magnitude of the terms the Conv sums."""
    (res,) = verify_rules(_conv_bn().rules, cache=False)
    assert res.status == APPROXIMATE, res.message()
    assert res.max_error is not None and res.max_error < 1e-5, res
