"""ort: rewrites that steer what ONNX Runtime executes on CPU.

ORT fuses patterns after we hand it the model; some of its fusions are slower than what they
replace (measured on ORT 1.32, `bench/` and ../shared/corpus/README.md), and some of its
matchers miss patterns. These rules offer the alternatives; the cost model, which prices what
ORT will actually run, decides.
"""

from onnx import TensorProto

from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite

ORT = RuleSet("ort", doc="alternatives that change what ONNX Runtime fuses")


@ORT.rule(tags=["exact", "ort-cpu"])
def add_as_sum(a: Tensor, b: Tensor) -> Rewrite:
    """a + b = Sum(a, b)   when a is float32 (ORT's CPU Sum has no integer kernel)

    The same kernel under another name: ORT fuses Add + LayerNormalization into
    SkipLayerNormalization, which ORT 1.32 runs about 5x slower on CPU than the Add and
    LayerNormalization it replaces, and it does not fuse Sum. The cost model prices an Add that
    feeds a LayerNormalization as the fused kernel, so extraction picks Sum exactly there."""
    return rewrite(a + b).to(op.Sum(a, b), a.dtype == TensorProto.FLOAT)
