"""Four rules a performance engineer writes that `rewrite verify` refuses, and why: each
counterexample is an input on which ONNX Runtime computes the two sides differently.

- `gelu_erf_as_gelu`, `gelu_tanh_as_fast_gelu` (the fusions ORT's own optimizer makes): at the
  edge of the float range the export's order of operations overflows where the fused kernel's
  does not (x·(1 + erf(x/√2)) is inf for x = 3.4e38, Gelu(x) is 3.4e38), or the other way
  round (FastGelu at 1.8e308 in float64).
- `scalar_into_weights`: (x·c) @ W and x @ (W·c) differ when x·c underflows to 0 and W holds an
  inf (0·inf is NaN); the rule would need W's values known to be finite.
- `attention_scale_to_query`: (Q @ K)·c overflows where (Q·c) @ K does not.

`tests/test_perf_rules.py` checks that each is refused with such a counterexample.
"""

import math

from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite

REFUSED = RuleSet("refused", doc="rules the verifier refuses, with the ORT runs that show why")


@REFUSED.rule(tags=["approximate", "ort-cpu", "ort-cuda"])
def gelu_erf_as_gelu(x: Tensor) -> Rewrite:
    """x·(1 + erf(x / √2))·0.5 = Gelu(x)   (com.microsoft; BERT's export; approximate: the
    model divides by float32(√2), the kernel multiplies by 1/√2)"""
    lhs = (x * (op.Erf(x / math.sqrt(2.0)) + 1.0)) * 0.5
    return rewrite(lhs).to(op.ms.Gelu(x), x.rank >= 1)


@REFUSED.rule(tags=["approximate", "ort-cpu", "ort-cuda"])
def gelu_tanh_as_fast_gelu(x: Tensor) -> Rewrite:
    """(x·0.5)·(1 + tanh((x + 0.044715·x³)·√(2/π))) = FastGelu(x)   (com.microsoft; GPT-2's
    export, x³ written Pow(x, 3); approximate: constants rounded to float32)"""
    inner = (x + op.Pow(x, 3.0) * 0.044715) * math.sqrt(2.0 / math.pi)
    lhs = (x * 0.5) * (op.Tanh(inner) + 1.0)
    return rewrite(lhs).to(op.ms.FastGelu(x), x.rank >= 1)


@REFUSED.rule(tags=["approximate"])
def scalar_into_weights(x: Tensor, c: Tensor, w: Tensor) -> Rewrite:
    """(x · c) @ W = x @ (W · c)   for a scalar constant |c| <= 1 and constant W (the
    product is folded at export: one multiply of the activations fewer; approximate: rounding
    moves)"""
    small = (c.value() <= 1.0) & (c.value() >= -1.0)  # W·c cannot overflow
    return rewrite((x * c) @ w).to(
        x @ (w * c), c.is_scalar(), c.is_const(), w.is_const(), c.rank == 0, w.rank == 2, small
    )


@REFUSED.rule(tags=["approximate"])
def attention_scale_to_query(q: Tensor, k: Tensor, c: Tensor) -> Rewrite:
    """(Q @ K) · c = (Q · c) @ K   for a scalar |c| <= 1 (scales the smaller operand: Q is
    seq×d, the scores seq×seq; approximate: rounding moves)"""
    small = (c.value() <= 1.0) & (c.value() >= -1.0)  # 1/√d: Q·c cannot overflow
    return rewrite((q @ k) * c).to((q * c) @ k, c.is_scalar(), c.rank == 0, q.rank >= 2, small)
