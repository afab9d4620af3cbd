"""Builds the small models shipped in examples/models (run: python examples/make_models.py).

`tiny_bert_block.onnx`: one BERT-style encoder layer (embedding, self-attention, GELU MLP,
LayerNorms) at hidden 64, 4 heads, sequence 16, exported the way TorchScript exports look:
Identity and Dropout left in, Cast to the same type, a Shape->Gather->Concat->Reshape chain
on a static shape, a transpose pair that cancels, and a `* 1.0` scale.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as P
from onnx import helper, numpy_helper

HIDDEN, HEADS, SEQ, VOCAB = 64, 4, 16, 100


def tiny_bert_block() -> onnx.ModelProto:
    rng = np.random.default_rng(0)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(np.float32), name)

    def c(name: str, value: object, dtype: type = np.int64) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(value, dtype=dtype), name)

    d = HIDDEN // HEADS
    inits = [
        w("emb", VOCAB, HIDDEN),
        w("pos", SEQ, HIDDEN),
        w("ln1_g", HIDDEN),
        w("ln1_b", HIDDEN),
        w("wq", HIDDEN, HIDDEN),
        w("wk", HIDDEN, HIDDEN),
        w("wv", HIDDEN, HIDDEN),
        w("wo", HIDDEN, HIDDEN),
        w("bo", HIDDEN),
        w("w1", HIDDEN, 4 * HIDDEN),
        w("b1", 4 * HIDDEN),
        w("w2", 4 * HIDDEN, HIDDEN),
        w("b2", HIDDEN),
        w("ln2_g", HIDDEN),
        w("ln2_b", HIDDEN),
        c("one_f", 1.0, np.float32),
        c("half", 0.5, np.float32),
        c("sqrt2", np.sqrt(2.0), np.float32),
        c("scale", 1.0 / np.sqrt(d), np.float32),
        c("idx0", 0),
        c("idx1", 1),
        c("heads", [HEADS]),
        c("dh", [d]),
        c("hid", [HIDDEN]),
    ]
    n = helper.make_node
    nodes = [
        n("Gather", ["emb", "input_ids"], ["tok"]),
        n("Add", ["tok", "pos"], ["x0"]),
        n("Identity", ["x0"], ["x0_id"]),
        n("LayerNormalization", ["x0_id", "ln1_g", "ln1_b"], ["x1"], axis=-1, epsilon=1e-5),
        n("Dropout", ["x1"], ["x1_d"]),
        # the head reshape, computed from the (static) shape as TorchScript exports do
        n("Shape", ["x1_d"], ["shp"]),
        n("Gather", ["shp", "idx0"], ["b"], axis=0),
        n("Gather", ["shp", "idx1"], ["s"], axis=0),
        n("Unsqueeze", ["b", "idx0"], ["b1d"]),
        n("Unsqueeze", ["s", "idx0"], ["s1d"]),
        n("Concat", ["b1d", "s1d", "heads", "dh"], ["split_shape"], axis=0),
        n("Concat", ["b1d", "s1d", "hid"], ["merge_shape"], axis=0),
    ]
    for h in ("q", "k", "v"):
        nodes += [
            n("MatMul", ["x1_d", f"w{h}"], [f"{h}0"]),
            n("Reshape", [f"{h}0", "split_shape"], [f"{h}1"]),
            n("Transpose", [f"{h}1"], [f"{h}2"], perm=[0, 2, 1, 3]),
        ]
    nodes += [
        n("Transpose", ["k2"], ["kT"], perm=[0, 1, 3, 2]),
        n("MatMul", ["q2", "kT"], ["att0"]),
        n("Mul", ["att0", "scale"], ["att1"]),
        n("Softmax", ["att1"], ["att2"], axis=-1),
        n("Dropout", ["att2"], ["att3"]),
        n("MatMul", ["att3", "v2"], ["ctx0"]),
        n("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx1", "merge_shape"], ["ctx2"]),
        n("Cast", ["ctx2"], ["ctx3"], to=P.FLOAT),
        n("MatMul", ["ctx3", "wo"], ["o0"]),
        n("Add", ["o0", "bo"], ["o1"]),
        n("Mul", ["o1", "one_f"], ["o2"]),
        n("Add", ["o2", "x1_d"], ["r1"]),
        n("MatMul", ["r1", "w1"], ["f0"]),
        n("Add", ["f0", "b1"], ["f1"]),
        n("Div", ["f1", "sqrt2"], ["g0"]),
        n("Erf", ["g0"], ["g1"]),
        n("Add", ["g1", "one_f"], ["g2"]),
        n("Mul", ["f1", "g2"], ["g3"]),
        n("Mul", ["g3", "half"], ["g4"]),
        n("MatMul", ["g4", "w2"], ["f2"]),
        n("Add", ["f2", "b2"], ["f3"]),
        n("Transpose", ["f3"], ["f4"], perm=[1, 0, 2]),
        n("Transpose", ["f4"], ["f5"], perm=[1, 0, 2]),
        n("Add", ["f5", "r1"], ["r2"]),
        n("LayerNormalization", ["r2", "ln2_g", "ln2_b"], ["hidden"], axis=-1, epsilon=1e-5),
    ]
    for i, node in enumerate(nodes):
        node.name = f"/layer/{node.op_type}_{i}"
    graph = helper.make_graph(
        nodes,
        "tiny_bert_block",
        [helper.make_tensor_value_info("input_ids", P.INT64, [1, SEQ])],
        [helper.make_tensor_value_info("hidden", P.FLOAT, [1, SEQ, HIDDEN])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="rewrite-examples"
    )
    model.ir_version = 8
    helper.set_model_props(model, {"description": "one BERT-style encoder layer, hidden 64"})
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    out = Path(__file__).parent / "models"
    out.mkdir(exist_ok=True)
    onnx.save(tiny_bert_block(), out / "tiny_bert_block.onnx")


if __name__ == "__main__":
    main()
