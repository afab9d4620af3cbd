"""Vision-model families built in code the way `torch.onnx.export` writes them, for tests.

Each builder returns a small, checked model (opset 17, static NCHW input `pixel_values`,
seeded random weights, torch-style node names via `_Builder` from `tests/families.py`):

- `convnext_stack`: ConvNeXt blocks: depthwise 7x7 Conv, Transpose to NHWC, LayerNormalization
  over channels, pointwise Linear as MatMul + Add, erf-GELU, layer-scale Mul, Transpose back,
  residual Add.
- `resnext_bottleneck`: 1x1 Conv, grouped 3x3 Conv, 1x1 Conv, each followed by an (unfused)
  BatchNormalization, Relu between, residual Add then Relu.
- `inception_module`: parallel 1x1, 1x1->3x3, 1x1->5x5 and MaxPool->1x1 branches, Concat.
- `squeezenet_fire`: two fire modules (squeeze 1x1, expand 1x1 and 3x3, Concat) with a
  ceil-mode MaxPool between.
- `mbconv_block`: MobileNetV3/EfficientNet block: expand 1x1, depthwise 3x3, SiLU as
  x * Sigmoid(x), squeeze-excitation (GlobalAveragePool, 1x1 Convs, Sigmoid gate), project.
- `vit_encoder`: patch Conv, Reshape/Transpose to tokens, class token Concat, position
  embedding Add, pre-LN blocks (`tests.families_seq.encoder_block`), head on the class token.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from tests.families import _Builder
from tests.families_seq import encoder_block, finish, gelu_erf, layer_norm, linear

OPSET = 17


def _image(shape: tuple[int, ...]) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info("pixel_values", T.FLOAT, list(shape))


def _out(
    b: _Builder, x: str, shape: tuple[int, ...]
) -> dict[str, tuple[str, int, list[int | str]]]:
    return {"output": (x, T.FLOAT, list(shape))}


def conv(
    b: _Builder,
    x: str,
    c_in: int,
    c_out: int,
    k: int,
    pre: str,
    *,
    group: int = 1,
    stride: int = 1,
    bias: bool = True,
) -> str:
    """`nn.Conv2d` with 'same' padding k // 2 (odd k) and the given groups and stride."""
    w = b.weight(
        f"{pre}.weight", (c_out, c_in // group, k, k), (2.0 / (k * k * c_in / group)) ** 0.5
    )
    ins = [x, w] + ([b.weight(f"{pre}.bias", (c_out,), 0.05)] if bias else [])
    p = k // 2
    return b.op("Conv", ins, kernel_shape=[k, k], pads=[p] * 4, strides=[stride] * 2, group=group)


def batch_norm(b: _Builder, x: str, c: int, pre: str) -> str:
    """`nn.BatchNorm2d` in eval mode, not fused into the Conv before it."""
    rng = b.rng
    stats = {
        "weight": 1.0 + 0.1 * rng.standard_normal(c),
        "bias": 0.1 * rng.standard_normal(c),
        "running_mean": 0.1 * rng.standard_normal(c),
        "running_var": 1.0 + 0.2 * rng.random(c),
    }
    names = []
    for k, v in stats.items():
        b.inits.append(numpy_helper.from_array(v.astype(np.float32), f"{pre}.{k}"))
        names.append(f"{pre}.{k}")
    return b.op("BatchNormalization", [x, *names], epsilon=1e-5, momentum=0.9)


def silu(b: _Builder, x: str) -> str:
    return b.op("Mul", [x, b.op("Sigmoid", [x])])


def convnext_stack(seed: int = 0, c: int = 8, hw: int = 8, blocks: int = 2) -> onnx.ModelProto:
    """(1, c, hw, hw) -> (1, c, hw, hw) through `blocks` ConvNeXt blocks."""
    b = _Builder(OPSET, np.random.default_rng(seed))
    x = "pixel_values"
    for i in range(blocks):
        pre = f"stages.0.blocks.{i}"
        b.scope = f"/{pre}"
        y = conv(b, x, c, c, 7, f"{pre}.dwconv", group=c)
        y = layer_norm(b, b.op("Transpose", [y], perm=[0, 2, 3, 1]), c, f"{pre}.norm")
        y = gelu_erf(b, linear(b, y, c, 4 * c, f"{pre}.pwconv1"))
        y = linear(b, y, 4 * c, c, f"{pre}.pwconv2")
        y = b.op("Mul", [b.weight(f"{pre}.gamma", (c,), 0.5), y])
        x = b.op("Add", [x, b.op("Transpose", [y], perm=[0, 3, 1, 2])])
    return finish(b, [_image((1, c, hw, hw))], _out(b, x, (1, c, hw, hw)))


def resnext_bottleneck(seed: int = 0, c: int = 16, hw: int = 8, groups: int = 4) -> onnx.ModelProto:
    """(1, c, hw, hw) -> same: relu(x + bn3(conv3(relu(bn2(gconv2(relu(bn1(conv1(x)))))))))."""
    b = _Builder(OPSET, np.random.default_rng(seed))
    width = 2 * c
    b.scope = "/layer1/layer1.0"
    y = b.op(
        "Relu",
        [batch_norm(b, conv(b, "pixel_values", c, width, 1, "conv1", bias=False), width, "bn1")],
    )
    y = conv(b, y, width, width, 3, "conv2", group=groups, bias=False)
    y = b.op("Relu", [batch_norm(b, y, width, "bn2")])
    y = batch_norm(b, conv(b, y, width, c, 1, "conv3", bias=False), c, "bn3")
    x = b.op("Relu", [b.op("Add", [y, "pixel_values"])])
    return finish(b, [_image((1, c, hw, hw))], _out(b, x, (1, c, hw, hw)))


def inception_module(seed: int = 0, c: int = 8, hw: int = 8) -> onnx.ModelProto:
    """(1, c, hw, hw) -> (1, 4 * c, hw, hw): four branches concatenated along channels."""
    b = _Builder(OPSET, np.random.default_rng(seed))
    x = "pixel_values"

    def conv_relu(y: str, c_in: int, k: int, pre: str) -> str:
        b.scope = f"/Mixed/{pre}"
        return b.op("Relu", [conv(b, y, c_in, c, k, pre)])

    b1 = conv_relu(x, c, 1, "branch1x1")
    b3 = conv_relu(conv_relu(x, c, 1, "branch3x3_1"), c, 3, "branch3x3_2")
    b5 = conv_relu(conv_relu(x, c, 1, "branch5x5_1"), c, 5, "branch5x5_2")
    b.scope = "/Mixed/branch_pool"
    pool = b.op("MaxPool", [x], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    bp = conv_relu(pool, c, 1, "branch_pool")
    b.scope = "/Mixed"
    y = b.op("Concat", [b1, b3, b5, bp], axis=1)
    return finish(b, [_image((1, c, hw, hw))], _out(b, y, (1, 4 * c, hw, hw)))


def _fire(b: _Builder, x: str, c_in: int, squeeze: int, expand: int, pre: str) -> str:
    b.scope = f"/features/{pre}"
    s = b.op("Relu", [conv(b, x, c_in, squeeze, 1, f"{pre}.squeeze")])
    e1 = b.op("Relu", [conv(b, s, squeeze, expand, 1, f"{pre}.expand1x1")])
    e3 = b.op("Relu", [conv(b, s, squeeze, expand, 3, f"{pre}.expand3x3")])
    return b.op("Concat", [e1, e3], axis=1)


def squeezenet_fire(seed: int = 0, c: int = 16, hw: int = 9) -> onnx.ModelProto:
    """(1, c, hw, hw) -> (1, c, ceil((hw - 3) / 2) + 1, ...): fire, MaxPool(ceil), fire."""
    b = _Builder(OPSET, np.random.default_rng(seed))
    y = _fire(b, "pixel_values", c, 4, c // 2, "3")
    b.scope = "/features/4"
    y = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    y = _fire(b, y, c, 4, c // 2, "5")
    side = -(-(hw - 3) // 2) + 1
    return finish(b, [_image((1, c, hw, hw))], _out(b, y, (1, c, side, side)))


def _squeeze_excite(b: _Builder, x: str, c: int, reduced: int, pre: str) -> str:
    s = b.op("GlobalAveragePool", [x])
    s = silu(b, conv(b, s, c, reduced, 1, f"{pre}.fc1"))
    return b.op("Mul", [b.op("Sigmoid", [conv(b, s, reduced, c, 1, f"{pre}.fc2")]), x])


def mbconv_block(seed: int = 0, c: int = 8, hw: int = 8, expand: int = 4) -> onnx.ModelProto:
    """(1, c, hw, hw) -> same: expand 1x1 + BN + SiLU, depthwise 3x3 + BN + SiLU, SE,
    project 1x1 + BN, residual Add (stochastic depth is identity in eval)."""
    b = _Builder(OPSET, np.random.default_rng(seed))
    mid = c * expand
    b.scope = "/features/1/0/block"
    y = silu(b, batch_norm(b, conv(b, "pixel_values", c, mid, 1, "expand", bias=False), mid, "bn0"))
    y = silu(b, batch_norm(b, conv(b, y, mid, mid, 3, "dw", group=mid, bias=False), mid, "bn1"))
    y = _squeeze_excite(b, y, mid, c // 2, "se")
    y = batch_norm(b, conv(b, y, mid, c, 1, "project", bias=False), c, "bn2")
    x = b.op("Add", [y, "pixel_values"])
    return finish(b, [_image((1, c, hw, hw))], _out(b, x, (1, c, hw, hw)))


def vit_encoder(
    seed: int = 0, image: int = 16, patch: int = 4, d: int = 16, layers: int = 2, classes: int = 10
) -> onnx.ModelProto:
    """(1, 3, image, image) -> logits (1, classes) from the class token."""
    b = _Builder(OPSET, np.random.default_rng(seed))
    n = (image // patch) ** 2
    b.scope = "/embeddings/patch_embeddings"
    w = b.weight("patch.weight", (d, 3, patch, patch), 0.2)
    y = b.op(
        "Conv",
        ["pixel_values", w, b.weight("patch.bias", (d,), 0.05)],
        kernel_shape=[patch, patch],
        strides=[patch, patch],
    )
    y = b.op("Transpose", [b.op("Reshape", [y, b.ints(1, d, n)])], perm=[0, 2, 1])
    b.scope = "/embeddings"
    cls = b.op("Expand", [b.weight("cls_token", (1, 1, d), 0.5), b.ints(1, 1, d)])
    x = b.op(
        "Add",
        [b.op("Concat", [cls, y], axis=1), b.weight("position_embeddings", (1, n + 1, d), 0.5)],
    )
    for i in range(layers):
        x = encoder_block(b, x, d, 4, f"encoder.layer.{i}", static=(1, n + 1))
    b.scope = "/layernorm"
    x = layer_norm(b, x, d, "layernorm")
    b.scope = "/classifier"
    x = linear(b, b.op("Gather", [x, b.const(0)], axis=1), d, classes, "classifier")
    return finish(b, [_image((1, 3, image, image))], _out(b, x, (1, classes)))
