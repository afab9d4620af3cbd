"""LSTM's cell step as ORT 1.32's deep_cpu_lstm computes it (`rewrite.ops.rnn` has the op).

Per step, with gates g = X_t·Wᵀ + H·Rᵀ split i, o, f, c, biases b = Wb + Rb (summed once),
clip = the attribute or FLT_MAX (`rnn.clip_bias`), peepholes P = (Pi, Po, Pf):
i = f(clip(g_i + C·Pi, b_i)); f = 1 - i when input_forget, else f(clip(g_f + C·Pf, b_f));
c = g(clip(g_c, b_c)); C' = C·f + i·c; o = f(clip(g_o + C'·Po, b_o)); H' = h(C')·o
(f, g, h: the activations, Sigmoid, Tanh, Tanh by default; the peephole terms added to the
gate in place, as elementwise_product does, before the bias).
"""

from __future__ import annotations

import numpy as np

from rewrite.ops.base import OpCall
from rewrite.ops.registry import register
from rewrite.ops.rnn import FLT_MAX, NO_CLIP, act, acts_of, clip_bias, ones, part_spec

Array = np.ndarray


def step_lstm(
    call: OpCall, d: int, xw: Array, states: list[Array], wts: dict[str, Array | None]
) -> list[Array]:
    """One LSTM step of one batch row (module docstring); states (H, C) -> (H', C')."""
    h, c_prev = states
    r = wts["R"]
    assert r is not None
    hid = r.shape[1]
    g = xw + np.matmul(h, r.T)
    gi, go, gf, gc = (g[:, k * hid : (k + 1) * hid] for k in range(4))
    b, p = wts["B"], wts["P"]
    bias = None if b is None else b[: 4 * hid] + b[4 * hid :]
    bi, bo, bf, bc = (None if bias is None else bias[k * hid : (k + 1) * hid] for k in range(4))
    clip = float(call.attr("clip", NO_CLIP))
    lim = FLT_MAX if clip == NO_CLIP else clip
    f_act, g_act, h_act = acts_of(call, d)
    if p is not None:
        gi = gi + c_prev * p[:hid]
    i = act(f_act, clip_bias(gi, bi, lim))
    if int(call.attr("input_forget", 0)):
        f = ones(i) - i
    else:
        if p is not None:
            gf = gf + c_prev * p[2 * hid :]
        f = act(f_act, clip_bias(gf, bf, lim))
    cell = act(g_act, clip_bias(gc, bc, lim))
    c_new = c_prev * f + i * cell
    if p is not None:
        go = go + c_new * p[hid : 2 * hid]
    o = act(f_act, clip_bias(go, bo, lim))
    return [act(h_act, c_new) * o, c_new]


LSTM_PART = register(part_spec("LSTM", step_lstm, 2))
