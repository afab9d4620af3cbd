"""Two rules a performance engineer writes that `rewrite verify` refuses, and why: each
counterexample is an input on which ONNX Runtime computes the two sides differently.

- `gelu_tanh_as_fast_gelu` (the fusion ORT's own optimizer makes) without a dtype guard:
  FastGelu(x) is inf at x = 1.8e308 in float64 where the export's order gives 1.8e308
  (`perf_rules.py`'s `gelu_tanh_fusion` is the float32 form, sampled within the tolerance).
- `attention_scale_any_dtype` (`attention_scale_to_query` without its float32 guard): in
  float64, (Q @ K)·c overflows where (Q·c) @ K does not, and float64 is the precision the
  sampler compares with, so nothing says which side is right (`perf_rules.py` has the
  float32 form: there the float64 value shows the right side is the exact one).

An approximate claim accepts an element the left side overflows where the float64 value is in
range and the right side is within the tolerance of it (the rewrite removed an intermediate
overflow): that is why PyTorch's GELU order and the float32 attention scale are in
`perf_rules.py`. (`scalar_into_weights` needed W's elements known finite and bounded:
`w.all(...)`.)

`tests/test_perf_rules.py` checks that each is refused with such a counterexample.
"""

import math

from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite

REFUSED = RuleSet("refused", doc="rules the verifier refuses, with the ORT runs that show why")


@REFUSED.rule(tags=["approximate", "ort-cpu", "ort-cuda"])
def gelu_tanh_as_fast_gelu(x: Tensor) -> Rewrite:
    """(x·0.5)·(1 + tanh((x + 0.044715·x³)·√(2/π))) = FastGelu(x)   (com.microsoft; GPT-2's
    export, x³ written Pow(x, 3); approximate: constants rounded to float32)"""
    inner = (x + op.Pow(x, 3.0) * 0.044715) * math.sqrt(2.0 / math.pi)
    lhs = (x * 0.5) * (op.Tanh(inner) + 1.0)
    return rewrite(lhs).to(op.ms.FastGelu(x), x.rank >= 1)


@REFUSED.rule(tags=["approximate"])
def attention_scale_any_dtype(q: Tensor, k: Tensor, c: Tensor) -> Rewrite:
    """(Q @ K) · c = (Q · c) @ K   for a scalar |c| <= 1 (scales the smaller operand: Q is
    seq×d, the scores seq×seq; approximate: rounding moves)"""
    small = (c.value() <= 1.0) & (c.value() >= -1.0)  # 1/√d: Q·c cannot overflow
    return rewrite((q @ k) * c).to((q * c) @ k, c.is_scalar(), c.rank == 0, q.rank >= 2, small)
