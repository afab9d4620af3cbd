"""GRU's cell step as ORT 1.32's deep_cpu_gru computes it (`rewrite.ops.rnn` has the op).

Per step, with gate products g = X_t·Wᵀ + H·Rᵀ (split z, r, h; the recurrent GEMM accumulated
onto the input one), clip = the attribute or FLT_MAX (`rnn.clip_bias`), biases Wbz + Rbz and
Wbr + Rbr summed once: r = F(clip(g_r, Wbr + Rbr)) with F ORT's own reset-gate function;
linear_before_reset = 0: s = r·H, gh = X_t·Whᵀ + s·Rhᵀ, bias Wbh + Rbh (summed once); = 1:
s = (H·Rhᵀ + Rbh)·r, gh = X_t·Whᵀ + s, bias Wbh; z = f(clip(g_z, Wbz + Rbz)) (f the
activation as ORT's Sigmoid/Tanh ops compute it); H' = (1 - z)·G(clip(gh, bias)) + z·H.

F and G for Sigmoid and Tanh are not the ops: they are deep_cpu's rational approximation
(rnn_helpers.cc), replayed here operation by operation in float32: tanh(x) = p(x)/q(x) for x
clipped to [-10, 10] (NaN kept), p odd of degree 13 and q even of degree 6 in Horner form
(`tanh_rational`); sigmoid(x) = 0.5·(1 + tanh_rational(0.5·x)) for x clipped to [-20, 20]
(as an output gate: ((1 - z)·0.5)·(1 + p/q) + z·H). Relu there is x > 0 ? x : 0 (NaN -> 0).
"""

from __future__ import annotations

import numpy as np

from rewrite.ops.base import OpCall
from rewrite.ops.registry import register
from rewrite.ops.rnn import (
    FLT_MAX,
    NO_CLIP,
    act,
    acts_of,
    clip_bias,
    less,
    ones,
    part_spec,
    scalar,
    where,
)

Array = np.ndarray
_ALPHA = (
    -2.76076847742355e-16,
    2.00018790482477e-13,
    -8.60467152213735e-11,
    5.12229709037114e-08,
    1.48572235717979e-05,
    6.37261928875436e-04,
    4.89352455891786e-03,
)
"""alpha_13, alpha_11, ..., alpha_1 (float32 constants of rnn_helpers.cc), Horner order."""
_BETA = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
"""beta_6, beta_4, beta_2, beta_0."""


def _k(v: float, like: Array) -> Array:
    return scalar(float(np.float32(v)), like)


def _bound(x: Array, b: float) -> Array:
    """clip_for_tanh/sigmoid_in_place: -b below -b, b above b, else x (NaN kept)."""
    lo, hi = _k(-b, x), _k(b, x)
    return where(less(x, lo), lo, where(less(hi, x), hi, x))


def tanh_rational(x: Array) -> Array:
    """p(x)/q(x) (module docstring), x already bounded."""
    x2 = x * x
    p = x2 * _k(_ALPHA[0], x) + _k(_ALPHA[1], x)
    for a in _ALPHA[2:]:
        p = x2 * p + _k(a, x)
    p = x * p
    q = x2 * _k(_BETA[0], x) + _k(_BETA[1], x)
    for b in _BETA[2:]:
        q = x2 * q + _k(b, x)
    return p / q


def _reset(name: str, x: Array, other: Array) -> Array:
    """gru_reset_gate_<name>: other·F(x)."""
    if name == "sigmoid":
        half = _k(0.5, x)
        return other * (half * (ones(x) + tanh_rational(half * _bound(x, 20.0))))
    if name == "tanh":
        return other * tanh_rational(_bound(x, 10.0))
    return other * where(less(_k(0.0, x), x), x, _k(0.0, x))


def _output(name: str, x: Array, z: Array, h: Array) -> Array:
    """gru_output_gate_<name>: (1 - z)·G(x) + z·h."""
    keep = ones(z) - z
    if name == "sigmoid":
        half = _k(0.5, x)
        return keep * half * (ones(x) + tanh_rational(half * _bound(x, 20.0))) + z * h
    if name == "tanh":
        return keep * tanh_rational(_bound(x, 10.0)) + z * h
    return keep * where(less(_k(0.0, x), x), x, _k(0.0, x)) + z * h


def step_gru(
    call: OpCall, d: int, xw: Array, states: list[Array], wts: dict[str, Array | None]
) -> list[Array]:
    """One GRU step of one batch row (module docstring); states (H,) -> (H',)."""
    (h,) = states
    r_w, b = wts["R"], wts["B"]
    assert r_w is not None
    hid = r_w.shape[1]
    xz, xr, xh = (xw[:, k * hid : (k + 1) * hid] for k in range(3))
    rz, rr, rh = (r_w[k * hid : (k + 1) * hid] for k in range(3))
    f_name, g_name = (a.lower() for a in acts_of(call, d))
    clip = float(call.attr("clip", NO_CLIP))
    lim = FLT_MAX if clip == NO_CLIP else clip
    bz = None if b is None else b[:hid] + b[3 * hid : 4 * hid]
    br = None if b is None else b[hid : 2 * hid] + b[4 * hid : 5 * hid]
    gz, gr = xz + np.matmul(h, rz.T), xr + np.matmul(h, rr.T)
    pr = clip_bias(gr, br, lim)
    if int(call.attr("linear_before_reset", 0)):
        lin = np.matmul(h, rh.T)
        if b is not None:
            lin = lin + b[5 * hid :]
        gh = xh + _reset(f_name, pr, lin)
        bh = None if b is None else b[2 * hid : 3 * hid]
    else:
        gh = xh + np.matmul(_reset(f_name, pr, h), rh.T)
        bh = None if b is None else b[2 * hid : 3 * hid] + b[5 * hid :]
    z = act(f_name, clip_bias(gz, bz, lim))
    return [_output(g_name, clip_bias(gh, bh, lim), z, h)]


GRU_PART = register(part_spec("GRU", step_gru, 1))
