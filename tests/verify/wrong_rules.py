"""Deliberately wrong rules: each must be refused (by the prover or by adversarial sampling)
with a counterexample that reproduces in ONNX Runtime.

Written as a user's rule file (`rewrite verify tests/verify/wrong_rules.py` refuses them all).
Each docstring states the claimed identity and why it is false; `CAUSES` files each rule under
the causes of issue 12 (1 casts, 2 a bound smaller than what the compiled rule matches, 3 reals
are not floats and int64 is not Z, 4 x/0, 5 only special values show it, 6 a contrib kernel
accepts less than its shape function, 7 exact in the reals with unbounded float error; 0: the
original wrong rules). `twin_rules.py` holds their sound twins.
"""

from onnx import TensorProto

from rewrite.rules import Float, Int, Ints, Rewrite, RuleSet, Tensor, op, rewrite

F32, F16, F64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE
I32, I64, BOOL = TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL

WRONG = RuleSet("wrong", doc="unsound rules the prover must refuse")


@WRONG.rule
def softmax_axis_off_by_one(x: Tensor, a: Int) -> Rewrite:
    """Softmax(x, axis=a) = Softmax(x, axis=-1) when a = rank - 2   (off by one axis)"""
    return rewrite(op.Softmax(x, axis=a)).to(op.Softmax(x, axis=-1), a == x.rank - 2)


@WRONG.rule
def softmax_axis_change(x: Tensor) -> Rewrite:
    """Softmax(x, axis=0) = Softmax(x, axis=-1)   (false unless rank 1)"""
    return rewrite(op.Softmax(x, axis=0)).to(op.Softmax(x, axis=-1))


@WRONG.rule
def transpose_compose_wrong_order(x: Tensor, p: Ints, q: Ints) -> Rewrite:
    """Transpose(Transpose(x, p), q) = Transpose(x, q∘p)   (the right order is p∘q)"""
    return rewrite(op.Transpose(op.Transpose(x, perm=p), perm=q)).to(
        op.Transpose(x, perm=q.compose(p))
    )


@WRONG.rule
def transpose_swap_is_identity(x: Tensor) -> Rewrite:
    """Transpose(x, perm=[1, 0]) = x   (only when x is symmetric)"""
    return rewrite(op.Transpose(x, perm=[1, 0])).to(x)


@WRONG.rule
def mul_one_broadcast_dropped(x: Tensor, c: Tensor) -> Rewrite:
    """x · 1 = x   without the shape guard: a ones tensor that broadcasts x changes its shape"""
    return rewrite(x * c).to(x, c.is_one())


@WRONG.rule
def add_zero_broadcast_dropped(x: Tensor, c: Tensor) -> Rewrite:
    """x + 0 = x   without the shape guard"""
    return rewrite(x + c).to(x, c.is_zero())


@WRONG.rule
def add_const_not_zero(x: Tensor, c: Tensor) -> Rewrite:
    """x + c = x   for a constant c that is not all zeros"""
    y = x + c
    return rewrite(y).to(x, c.is_const(), y.shape == x.shape)


@WRONG.rule(tags=["exact"])
def gelu_tanh_declared_exact(x: Tensor) -> Rewrite:
    """Gelu(x) = FastGelu(x)   (the tanh approximation is not exact: |error| up to ~5e-4)"""
    return rewrite(op.ms.Gelu(x)).to(op.ms.FastGelu(x))


@WRONG.rule
def mul_div_cancel(x: Tensor, y: Tensor) -> Rewrite:
    """(x · y) / y = x   (y can be zero)"""
    return rewrite((x * y) / y).to(x, x.shape == y.shape)


@WRONG.rule
def cast_removed(x: Tensor, to: Int) -> Rewrite:
    """Cast(x, to) = x   (the dtype changes)"""
    return rewrite(op.Cast(x, to=to)).to(x)


@WRONG.rule
def reshape_reshape_copied_dim(x: Tensor, s1: Ints, s2: Ints) -> Rewrite:
    """Reshape(Reshape(x, s1), s2) = Reshape(x, s2)   (a 0 in s2 copies a dim of the middle
    tensor, not of x)"""
    return rewrite(op.Reshape(op.Reshape(x, shape=s1), shape=s2)).to(op.Reshape(x, shape=s2))


@WRONG.rule
def neg_is_identity(x: Tensor) -> Rewrite:
    """Neg(x) = x"""
    return rewrite(-x).to(x)


@WRONG.rule
def matmul_commutes(a: Tensor, b: Tensor) -> Rewrite:
    """A @ B = B @ A"""
    return rewrite(a @ b).to(b @ a)


@WRONG.rule
def sub_commutes(x: Tensor, y: Tensor) -> Rewrite:
    """x - y = y - x"""
    return rewrite(x - y).to(y - x)


@WRONG.rule
def div_commutes(x: Tensor, y: Tensor) -> Rewrite:
    """x / y = y / x"""
    return rewrite(x / y).to(y / x)


@WRONG.rule
def relu_neg_commute(x: Tensor) -> Rewrite:
    """Relu(-x) = -Relu(x)"""
    return rewrite(op.Relu(-x)).to(-op.Relu(x))


@WRONG.rule
def quick_gelu_default_alpha(x: Tensor) -> Rewrite:
    """x · Sigmoid(x) = QuickGelu(x)   (QuickGelu's default alpha is 1.702, SiLU needs 1.0)"""
    return rewrite(x * op.Sigmoid(x)).to(op.ms.QuickGelu(x))


@WRONG.rule
def sqrt_of_square(x: Tensor) -> Rewrite:
    """Sqrt(x · x) = x   (|x|, not x)"""
    return rewrite(op.Sqrt(x * x)).to(x)


@WRONG.rule
def div_mul_int_truncates(x: Tensor, c: Tensor) -> Rewrite:
    """(x / c) · c = x for c = 2   (true in the reals, false for integers: 3 / 2 · 2 = 2)"""
    y = (x / c) * c
    return rewrite(y).to(x, c.is_scalar(), c.value() == 2.0, y.shape == x.shape)


@WRONG.rule
def expand_removed(x: Tensor, s: Ints) -> Rewrite:
    """Expand(x, s) = x   (Expand can grow x)"""
    return rewrite(op.Expand(x, shape=s)).to(x)


@WRONG.rule
def fused_matmul_alpha_dropped(a: Tensor, b: Tensor, alpha: Float) -> Rewrite:
    """FusedMatMul(A, B, alpha) = A @ B   (drops the scale)"""
    return rewrite(op.ms.FusedMatMul(a, b, alpha=alpha, transA=0, transB=0)).to(a @ b)


@WRONG.rule
def matmul_assoc_without_rank_guard(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """(A @ B) @ C = A @ (B @ C)   (not for 1-D operands: numpy's vector promotion is not
    associative, e.g. A (1,), B (2, 1, 3), C (3,))"""
    return rewrite((a @ b) @ c).to(a @ (b @ c))


@WRONG.rule
def concat_wrong_in_one_element(x: Tensor, y: Tensor, z: Tensor, w: Tensor) -> Rewrite:
    """Concat(x·(y + z), -w) = Concat(x·y + x·z, w) for a one-element w   (every element but
    the last holds, by distributivity, which only the solver sees; the last is -w vs w)"""
    return rewrite(op.Concat(x * (y + z), -w, axis=0)).to(
        op.Concat(x * y + x * z, w, axis=0),
        x.rank == 1,
        y.shape == x.shape,
        z.shape == x.shape,
        w.shape == [1],
    )


_ORIGINAL = [r.name for r in WRONG.rules]


# --- 1: casts --------------------------------------------------------------------------------


@WRONG.rule
def cast_int64_int32_round_trip(x: Tensor) -> Rewrite:
    """Cast(Cast(x, int32), int64) = x for int64 x   (wraps above 2^31)"""
    return rewrite(op.Cast(op.Cast(x, to=I32), to=I64)).to(x, x.dtype == I64)


@WRONG.rule
def cast_int_float_round_trip(x: Tensor) -> Rewrite:
    """Cast(Cast(x, float32), int64) = x for int64 x   (2^24 + 1 rounds to 2^24)"""
    return rewrite(op.Cast(op.Cast(x, to=F32), to=I64)).to(x, x.dtype == I64)


@WRONG.rule
def cast_float16_round_trip(x: Tensor) -> Rewrite:
    """Cast(Cast(x, float16), float32) = x for float32 x   (rounds to 11 bits, 1e5 -> inf)"""
    return rewrite(op.Cast(op.Cast(x, to=F16), to=F32)).to(x, x.dtype == F32)


@WRONG.rule
def cast_bool_round_trip(x: Tensor) -> Rewrite:
    """Cast(Cast(x, bool), float32) = x for float32 x   (0.5 -> true -> 1)"""
    return rewrite(op.Cast(op.Cast(x, to=BOOL), to=F32)).to(x, x.dtype == F32)


@WRONG.rule
def cast_through_any_type(x: Tensor, t: Int) -> Rewrite:
    """Cast(Cast(x, t), int64) = x for int64 x, any t   (float32 and float64 round)"""
    return rewrite(op.Cast(op.Cast(x, to=t), to=I64)).to(x, x.dtype == I64)


@WRONG.rule
def cast_float_int_round_trip(x: Tensor) -> Rewrite:
    """Cast(Cast(x, int64), float32) = x for float32 x   (truncates 0.5 to 0)"""
    return rewrite(op.Cast(op.Cast(x, to=I64), to=F32)).to(x, x.dtype == F32)


@WRONG.rule
def cast_int_bool_round_trip(x: Tensor) -> Rewrite:
    """Cast(Cast(x, bool), int64) = x for int64 x   (2 -> true -> 1)"""
    return rewrite(op.Cast(op.Cast(x, to=BOOL), to=I64)).to(x, x.dtype == I64)


@WRONG.rule
def cast_int32_then_float(x: Tensor) -> Rewrite:
    """Cast(Cast(x, int32), float32) = Cast(x, float32) for int64 x   (2^31 wraps)"""
    return rewrite(op.Cast(op.Cast(x, to=I32), to=F32)).to(op.Cast(x, to=F32), x.dtype == I64)


@WRONG.rule
def cast_of_int_sum_to_float(a: Tensor, b: Tensor) -> Rewrite:
    """Cast(a + b, float32) = Cast(a, float32) + Cast(b, float32) for int64   (each cast
    rounds above 2^24: a = 2^24 + 1, b = -1)"""
    return rewrite(op.Cast(a + b, to=F32)).to(
        op.Cast(a, to=F32) + op.Cast(b, to=F32), a.dtype == I64, a.shape == b.shape
    )


# --- 2: the bound is smaller than what the compiled rule matches -----------------------------


@WRONG.rule
def transpose_twelve_times(x: Tensor, p: Ints) -> Rewrite:
    """Transpose applied 12 times with the same perm = x   (true up to rank 4, where every
    perm's order divides 12; a 5-cycle at rank 5 has order 5)"""
    t = x
    for _ in range(12):
        t = op.Transpose(t, perm=p)
    return rewrite(t).to(x)


@WRONG.rule
def slice_to_3_is_noop(x: Tensor) -> Rewrite:
    """Slice(x, 0:3 on the last axis) = x   (only while that dim is <= 3)"""
    return rewrite(op.Slice(x, starts=[0], ends=[3], axes=[-1], steps=[1])).to(x)


@WRONG.rule
def slice_to_8_noop_when_multiple(x: Tensor) -> Rewrite:
    """Slice(x, 0:8 on the last axis) = x when dim(-1) % 8 == 0   (not at 16)"""
    return rewrite(op.Slice(x, starts=[0], ends=[8], axes=[-1], steps=[1])).to(
        x, x.dim(-1) % 8 == 0
    )


@WRONG.rule
def add_one_element_zero(x: Tensor, z: Tensor) -> Rewrite:
    """x + z = x for a one-element zero z   (z of shape [1, 1] broadcasts a rank-1 x up)"""
    return rewrite(x + z).to(x, z.is_zero(), z.is_scalar())


@WRONG.rule
def expand_to_ones_is_noop(x: Tensor) -> Rewrite:
    """Expand(x, [1, 1]) = x   (raises a rank-1 x to rank 2)"""
    return rewrite(op.Expand(x, shape=[1, 1])).to(x)


# --- 3: reals are not floats, int64 is not Z --------------------------------------------------


@WRONG.rule
def add_sub_cancel(a: Tensor, b: Tensor) -> Rewrite:
    """(a + b) - b = a   (float32 loses a: a = 1e-3, b = 1e4; b = inf gives NaN)"""
    return rewrite((a + b) - b).to(a, a.shape == b.shape)


@WRONG.rule
def mul_zero_is_zero(x: Tensor, z: Tensor) -> Rewrite:
    """x · 0 = 0   (inf · 0 and NaN · 0 are NaN)"""
    return rewrite(x * z).to(z, z.is_zero(), x.shape == z.shape)


@WRONG.rule
def matmul_reassociate_2d(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """(A @ B) @ C = A @ (B @ C) for matrices   (1e30 · 1e30 overflows on one side only)"""
    return rewrite((a @ b) @ c).to(a @ (b @ c), a.rank == 2, b.rank == 2, c.rank == 2)


@WRONG.rule
def mul_scalars_reassociate(x: Tensor, c: Tensor, d: Tensor) -> Rewrite:
    """(x · c) · d = x · (c · d)   (c = d = 1e30, x = 1e-30: c · d overflows)"""
    return rewrite((x * c) * d).to(x * (c * d), x.shape == c.shape, x.shape == d.shape)


@WRONG.rule
def exp_cancels_in_ratio(y: Tensor, x: Tensor) -> Rewrite:
    """(y · Exp(x)) / Exp(x) = y   (Exp(100) = inf: inf / inf is NaN)"""
    return rewrite((y * op.Exp(x)) / op.Exp(x)).to(y, x.shape == y.shape)


@WRONG.rule
def sigmoid_cancels_in_ratio(y: Tensor, x: Tensor) -> Rewrite:
    """(y · Sigmoid(x)) / Sigmoid(x) = y   (Sigmoid(-100) = 0: 0 / 0 is NaN)"""
    return rewrite((y * op.Sigmoid(x)) / op.Sigmoid(x)).to(y, x.shape == y.shape)


@WRONG.rule
def sqrt_of_square_is_abs(x: Tensor) -> Rewrite:
    """Sqrt(x · x) = |x| = Relu(x) + Relu(-x)   (x · x overflows at 1e30, underflows at 1e-30)"""
    return rewrite(op.Sqrt(x * x)).to(op.Relu(x) + op.Relu(-x))


@WRONG.rule
def relu_of_neg(x: Tensor) -> Rewrite:
    """Relu(-x) = Relu(x) - x   (at x = inf: inf - inf is NaN)"""
    return rewrite(op.Relu(-x)).to(op.Relu(x) - x)


@WRONG.rule
def neg_of_int_quotient(a: Tensor, c: Tensor) -> Rewrite:
    """-(a / c) = (-a) / c   (true for floats; int64: Neg(INT64_MIN) wraps to INT64_MIN)"""
    return rewrite(-(a / c)).to((-a) / c, a.shape == c.shape)


@WRONG.rule
def div_div_merge(a: Tensor, c: Tensor, d: Tensor) -> Rewrite:
    """(a / c) / d = a / (c · d)   (int64: c · d wraps; float32: c · d overflows)"""
    return rewrite((a / c) / d).to(a / (c * d), a.shape == c.shape, a.shape == d.shape)


@WRONG.rule
def square_over_self(x: Tensor) -> Rewrite:
    """(x · x) / x = x   (x = 0 gives 0/0; x = 1e30 overflows)"""
    return rewrite((x * x) / x).to(x)


# --- 4: x / 0 -------------------------------------------------------------------------------


@WRONG.rule
def div_then_mul_cancel(x: Tensor, y: Tensor) -> Rewrite:
    """(x / y) · y = x   (y = 0: x/0 · 0 is NaN; int64 truncates)"""
    return rewrite((x / y) * y).to(x, x.shape == y.shape)


@WRONG.rule
def div_as_mul_reciprocal(a: Tensor, b: Tensor) -> Rewrite:
    """a / b = a · Reciprocal(b)   (float32: 1 / 1e-40 overflows to inf, so a = 1e-3 gives inf
    for 1e37; sound only where 1/b is finite and exact, e.g. b a power of two)"""
    return rewrite(a / b).to(a * op.Reciprocal(b), a.shape == b.shape, a.dtype == F32)


# --- 6: contrib kernels accept less than their shape functions -------------------------------


@WRONG.rule
def bias_gelu_any_bias(a: Tensor, b: Tensor) -> Rewrite:
    """Gelu(a + b) = BiasGelu(a, b)   (ORT's kernel takes only a 1-D bias of a's last dim)"""
    return rewrite(op.ms.Gelu(a + b)).to(op.ms.BiasGelu(a, b))


@WRONG.rule
def add_as_sum_any_dtype(a: Tensor, b: Tensor) -> Rewrite:
    """a + b = Sum(a, b)   (ORT has no int64 Sum kernel)"""
    return rewrite(a + b).to(op.Sum(a, b))


# --- 7: exact in the reals, unbounded float error --------------------------------------------


@WRONG.rule
def exp_product(a: Tensor, b: Tensor) -> Rewrite:
    """Exp(a) · Exp(b) = Exp(a + b)   (exp(100) · exp(-100) is inf, exp(0) is 1)"""
    return rewrite(op.Exp(a) * op.Exp(b)).to(op.Exp(a + b), a.shape == b.shape)


@WRONG.rule
def softmax_shift(x: Tensor, c: Tensor) -> Rewrite:
    """Softmax(x + c) = Softmax(x) for a scalar c   (x + 1e30 rounds every x to 1e30)"""
    y = x + c
    return rewrite(op.Softmax(y, axis=-1)).to(
        op.Softmax(x, axis=-1), c.is_scalar(), y.shape == x.shape
    )


# --- 5: only special values show it (bit-exact claims: -0 is not +0) --------------------------


@WRONG.rule(tags=["bit-exact"])
def sub_from_zero_is_neg_bit_exact(x: Tensor, z: Tensor) -> Rewrite:
    """0 - x = Neg(x), bit-exact   (0 - 0 is +0, Neg(0) is -0: exact, not bit-exact)"""
    return rewrite(z - x).to(-x, z.is_zero(), z.shape == x.shape)


@WRONG.rule(tags=["bit-exact"])
def add_zero_bit_exact(x: Tensor, z: Tensor) -> Rewrite:
    """x + 0 = x, bit-exact   (-0 + 0 is +0)"""
    return rewrite(x + z).to(x, z.is_zero(), z.shape == x.shape)


@WRONG.rule
def scale_up_down_small(x: Tensor, c: Tensor) -> Rewrite:
    """(x · c) / c = x   for a scalar 0 < x < 40000 and c = 65536   (true in int64 and in
    floats, where x·c < 2^32 fits; wrong in int32, where it wraps)"""
    return rewrite((x * c) / c).to(
        x,
        x.is_scalar(),
        c.is_scalar(),
        x.rank == c.rank,
        x.value() > 0,
        x.value() < 40000,
        c.value() == 65536.0,
    )


@WRONG.rule(tags=["bit-exact"])
def add_zero_bit_exact_float32(x: Tensor, z: Tensor) -> Rewrite:
    """x + 0 = x, bit-exact, for float32   (-0 + 0 is +0; a dtype condition leaves no float16
    view: only the IEEE proof itself sees it)"""
    return rewrite(x + z).to(x, z.is_zero(), z.shape == x.shape, x.dtype == "float32")


CAUSES: dict[str, int] = {
    **dict.fromkeys(_ORIGINAL, 0),
    **dict.fromkeys(
        [
            "cast_int64_int32_round_trip", "cast_int_float_round_trip", "cast_float16_round_trip",
            "cast_bool_round_trip", "cast_through_any_type", "cast_float_int_round_trip",
            "cast_int_bool_round_trip", "cast_int32_then_float", "cast_of_int_sum_to_float",
        ],
        1,
    ),
    **dict.fromkeys(
        [
            "transpose_twelve_times", "slice_to_3_is_noop", "slice_to_8_noop_when_multiple",
            "add_one_element_zero", "expand_to_ones_is_noop",
        ],
        2,
    ),
    **dict.fromkeys(
        [
            "add_sub_cancel", "mul_zero_is_zero", "matmul_reassociate_2d",
            "mul_scalars_reassociate", "exp_cancels_in_ratio", "sigmoid_cancels_in_ratio",
            "sqrt_of_square_is_abs", "relu_of_neg", "neg_of_int_quotient", "div_div_merge",
            "square_over_self", "scale_up_down_small",
        ],
        3,
    ),
    **dict.fromkeys(["div_then_mul_cancel", "div_as_mul_reciprocal"], 4),
    **dict.fromkeys(
        ["sub_from_zero_is_neg_bit_exact", "add_zero_bit_exact", "add_zero_bit_exact_float32"],
        5,
    ),
    **dict.fromkeys(["bias_gelu_any_bias", "add_as_sum_any_dtype"], 6),
    **dict.fromkeys(["exp_product", "softmax_shift"], 7),
}  # fmt: skip
"""Rule name -> the cause of issue 12 it belongs to (see the module docstring)."""
