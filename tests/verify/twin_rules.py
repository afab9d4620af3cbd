"""Sound twins of the wrong rules (`wrong_rules.py`): each must be accepted, by the prover and
by adversarial sampling. Written as a user's rule file; `TWIN_OF` names the wrong rule each
one corrects.
"""

from onnx import TensorProto

from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite

TWINS = RuleSet("twins", doc="sound rules the verifier must accept")
F32, F64 = TensorProto.FLOAT, TensorProto.DOUBLE
I32, I64 = TensorProto.INT32, TensorProto.INT64


@TWINS.rule
def cast_int32_int64_round_trip(x: Tensor) -> Rewrite:
    """Cast(Cast(x, int64), int32) = x for int32 x   (int64 holds every int32)"""
    return rewrite(op.Cast(op.Cast(x, to=I64), to=I32)).to(x, x.dtype == I32)


@TWINS.rule
def cast_float_double_round_trip(x: Tensor) -> Rewrite:
    """Cast(Cast(x, float64), float32) = x for float32 x   (float64 holds every float32)"""
    return rewrite(op.Cast(op.Cast(x, to=F64), to=F32)).to(x, x.dtype == F32)


@TWINS.rule
def cast_float_int64_via_double(x: Tensor) -> Rewrite:
    """Cast(Cast(x, float64), int64) = Cast(x, int64) for float32 x   (the widening is exact)"""
    return rewrite(op.Cast(op.Cast(x, to=F64), to=I64)).to(op.Cast(x, to=I64), x.dtype == F32)


@TWINS.rule
def cast_of_int_sum_to_int32(a: Tensor, b: Tensor) -> Rewrite:
    """Cast(a + b, int32) = Cast(a, int32) + Cast(b, int32) for int64   (both wrap mod 2^32)"""
    return rewrite(op.Cast(a + b, to=I32)).to(
        op.Cast(a, to=I32) + op.Cast(b, to=I32), a.dtype == I64, a.shape == b.shape
    )


@TWINS.rule
def slice_to_3_noop_when_short(x: Tensor) -> Rewrite:
    """Slice(x, 0:3 on the last axis) = x when dim(-1) <= 3"""
    return rewrite(op.Slice(x, starts=[0], ends=[3], axes=[-1], steps=[1])).to(x, x.dim(-1) <= 3)


@TWINS.rule
def add_zero_same_shape(x: Tensor, z: Tensor) -> Rewrite:
    """x + 0 = x when x + 0 has x's shape and dtype   (exact: -0 + 0 is +0)"""
    y = x + z
    return rewrite(y).to(x, z.is_zero(), y.shape == x.shape, y.dtype == x.dtype)


@TWINS.rule
def int_add_sub_cancel(a: Tensor, b: Tensor) -> Rewrite:
    """(a + b) - b = a for int64   (wrapping arithmetic is a ring)"""
    return rewrite((a + b) - b).to(a, a.shape == b.shape, a.dtype == I64)


@TWINS.rule
def relu_difference(x: Tensor) -> Rewrite:
    """Relu(x) - Relu(-x) = x for float32   (holds at ±inf and NaN too; not for integers:
    -INT_MIN wraps)"""
    return rewrite(op.Relu(x) - op.Relu(-x)).to(x, x.dtype == F32)


@TWINS.rule
def neg_of_float_quotient(a: Tensor, c: Tensor) -> Rewrite:
    """-(a / c) = (-a) / c for float32   (IEEE division is symmetric in sign)"""
    return rewrite(-(a / c)).to((-a) / c, a.shape == c.shape, a.dtype == F32)


@TWINS.rule
def div_by_four_as_mul(a: Tensor, c: Tensor) -> Rewrite:
    """a / 4 = a · Reciprocal(4)   (1/4 is exact: both sides round a/4 once)"""
    y = a / c
    return rewrite(y).to(
        a * op.Reciprocal(c), c.is_scalar(), c.value() == 4.0, a.dtype == F32, y.shape == a.shape
    )


@TWINS.rule
def sub_from_zero_is_neg(x: Tensor, z: Tensor) -> Rewrite:
    """0 - x = Neg(x)   (exact; not bit-exact: 0 - 0 is +0, Neg(0) is -0)"""
    return rewrite(z - x).to(-x, z.is_zero(), z.shape == x.shape)


@TWINS.rule
def neg_of_sum(x: Tensor, y: Tensor) -> Rewrite:
    """Neg(x) - y = Neg(x + y)   (IEEE rounding is symmetric in sign)"""
    return rewrite(-x - y).to(-(x + y), x.shape == y.shape)


@TWINS.rule
def matmul_as_fused_matmul(a: Tensor, b: Tensor) -> Rewrite:
    """A @ B = FusedMatMul(A, B, alpha=1)   (ORT's kernel runs 1-D operands too)"""
    return rewrite(a @ b).to(op.ms.FusedMatMul(a, b, alpha=1.0, transA=0, transB=0), a.dtype == F32)


@TWINS.rule
def bias_gelu_1d_bias(a: Tensor, b: Tensor) -> Rewrite:
    """Gelu(a + b) = BiasGelu(a, b) for a 1-D bias b of a's last dim"""
    y = a + b
    return rewrite(op.ms.Gelu(y)).to(
        op.ms.BiasGelu(a, b), y.shape == a.shape, b.rank == 1, b.dim(0) == a.dim(-1), a.dtype == F32
    )


@TWINS.rule
def add_as_sum_float(a: Tensor, b: Tensor) -> Rewrite:
    """a + b = Sum(a, b) for float32   (ORT's Sum kernel is float-only)"""
    return rewrite(a + b).to(op.Sum(a, b), a.dtype == F32)


@TWINS.rule
def quick_gelu_alpha_one(x: Tensor) -> Rewrite:
    """x · Sigmoid(x) = QuickGelu(x, alpha=1)"""
    return rewrite(x * op.Sigmoid(x)).to(op.ms.QuickGelu(x, alpha=1.0))


@TWINS.rule
def tanh_from_sigmoid(x: Tensor, t: Tensor, o: Tensor) -> Rewrite:
    """t · Sigmoid(t · x) - o = Tanh(x) for t = 2, o = 1   (tanh x = 2σ(2x) - 1)"""
    y = t * op.Sigmoid(t * x) - o
    return rewrite(y).to(
        op.Tanh(x), t.is_scalar(), t.value() == 2.0, o.is_one(), y.shape == x.shape
    )


TWIN_OF: dict[str, str] = {
    "cast_int32_int64_round_trip": "cast_int64_int32_round_trip",
    "cast_float_double_round_trip": "cast_float16_round_trip",
    "cast_float_int64_via_double": "cast_through_any_type",
    "cast_of_int_sum_to_int32": "cast_of_int_sum_to_float",
    "slice_to_3_noop_when_short": "slice_to_3_is_noop",
    "add_zero_same_shape": "add_one_element_zero",
    "int_add_sub_cancel": "add_sub_cancel",
    "relu_difference": "relu_of_neg",
    "neg_of_float_quotient": "neg_of_int_quotient",
    "div_by_four_as_mul": "div_as_mul_reciprocal",
    "sub_from_zero_is_neg": "sub_from_zero_is_neg_bit_exact",
    "neg_of_sum": "sub_from_zero_is_neg_bit_exact",
    "matmul_as_fused_matmul": "fused_matmul_alpha_dropped",
    "bias_gelu_1d_bias": "bias_gelu_any_bias",
    "add_as_sum_float": "add_as_sum_any_dtype",
    "quick_gelu_alpha_one": "quick_gelu_default_alpha",
    "tanh_from_sigmoid": "exp_product",
}
"""Twin -> the wrong rule it corrects."""
