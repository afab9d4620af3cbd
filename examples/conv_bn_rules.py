"""Conv + BatchNormalization folding: `rewrite optimize m.onnx out.onnx --rules
examples/conv_bn_rules.py --ruleset conv_bn --allow-approximate --trust-rules`.

The right side creates constants (epsilon, a `Float` attribute, becomes a scalar of var's dtype:
`var + eps`); constant folding after extraction turns `W · s4` and the new bias into one
initializer each, so the written graph is one Conv. `tests/rules/test_conv_bn.py` fires it on
Conv + BatchNormalization models built in code, and the output passes the differential check.

It is tagged `term-relative`: its error is measured against the magnitude of the terms the
Conv sums (`rewrite/verify/terms.py`), not the output: x holding +3e38 and -3e38 whose products
cancel to 18 gives 1e30 once the weights are scaled, 1e-7 of the terms, as any reordering of
the sum would. Per-element conditions keep the constants finite and within 1e4 (W·s never
overflows). `rewrite verify` still says `unknown`: the 24 forms times Conv's open attributes
leave no sampled case within the typing budget (one form alone is accepted as approximate,
sampled error 2.3e-7). Hence `--trust-rules`: the differential check of the output still runs.
"""

from rewrite.rules import Float, Int, Ints, Rewrite, RuleSet, Tensor, op, rewrite

CONV_BN = RuleSet("conv_bn", doc="BatchNormalization folded into the Conv before it")

PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


@CONV_BN.rule(tags=["approximate", "term-relative"])
def conv_bn_fold(
    x: Tensor,
    w: Tensor,
    b: Tensor,
    scale: Tensor,
    bias: Tensor,
    mean: Tensor,
    var: Tensor,
    eps: Float,
    q: Ints,
    k: Ints,
    s: Ints,
    d: Ints,
    g: Int,
) -> list[Rewrite]:
    """BatchNormalization(Conv(x, W, B), scale, bias, mean, var, epsilon) =
    Conv(x, W · s4, (B - mean) · s + bias)   with s = scale / Sqrt(var + epsilon) and s4 = s
    as [M, 1, ...] (W's rank), for constant W, B, scale, bias, mean, var; without B the bias
    is bias - mean · s (approximate: W · s4 is rounded where the model rounds Conv(x, W) · s)"""
    out = []
    in_range = [t.all(lambda e: e.is_finite() & (abs(e) <= 1e4)) for t in (w, scale, bias, mean)]
    in_range.append(var.all(lambda e: e.is_finite() & (e >= 0) & (e <= 1e4)))
    for n in (1, 2, 3):
        consts = [x.rank == n + 2, w.rank == n + 2, w.is_const(), scale.is_const()]
        consts += [bias.is_const(), *(v.rank == 1 for v in (scale, bias, mean, var))]
        consts += [mean.is_const(), var.is_const(), *in_range]
        for pad in PADS:
            attrs = dict(kernel_shape=k, strides=s, dilations=d, group=g, auto_pad=pad)
            attrs["pads"] = q if pad == "NOTSET" else ()
            for conv_bias in (b, None):
                conv = op.Conv(x, w, conv_bias, **attrs)
                lhs = op.BatchNormalization(conv, scale, bias, mean, var, epsilon=eps)
                sc = scale / op.Sqrt(var + eps)
                s4 = op.Unsqueeze(sc, axes=list(range(1, n + 2)))
                new_bias = bias - mean * sc if conv_bias is None else (b - mean) * sc + bias
                more = (
                    []
                    if conv_bias is None
                    else [b.is_const(), b.rank == 1, b.all(lambda e: abs(e) <= 1e4)]
                )
                rhs = op.Conv(x, w * s4, new_bias, **attrs)
                out.append(rewrite(lhs).to(rhs, *consts, *more))
    return out
