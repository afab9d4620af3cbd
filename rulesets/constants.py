"""constants: work that a constant makes unnecessary, folded into the op that follows.

Written exactly as a user's `--rules` file is.
"""

from rewrite.rules import Int, Ints, Rewrite, RuleSet, Tensor, op, rewrite

CONSTANTS = RuleSet("constants", doc="constant padding and scaling folded into the op after it")


def _spatial_pads(p: Ints, cp: Ints | None, n: int) -> tuple:
    """Conv pads (begins, then ends) of the `n` spatial axes after a Pad of rank n + 2 whose
    pads are `p` (begins, then ends of every axis); `cp` the Conv's own pads (None: none)."""
    r = n + 2
    grow = [p[2 + i] for i in range(n)] + [p[r + 2 + i] for i in range(n)]
    return tuple(grow if cp is None else [cp[i] + g for i, g in enumerate(grow)])


@CONSTANTS.rule
def pad_into_conv(
    x: Tensor,
    w: Tensor,
    b: Tensor,
    c: Tensor,
    p: Ints,
    cp: Ints,
    k: Ints,
    s: Ints,
    d: Ints,
    g: Int,
) -> list[Rewrite]:
    """Conv(Pad(x, p, 0), W, B, pads=q) = Conv(x, W, B, pads=q + p's spatial part)   for a
    constant-mode Pad filling 0 that pads no batch or channel axis and crops nothing (a Conv's
    pads are zeros added around the input, the same values the Pad writes)"""
    out = []
    for n in (1, 2):
        r = n + 2
        cond = [p.length() == 2 * r, p[0] == 0, p[1] == 0, p[r] == 0, p[r + 1] == 0]
        cond += [p[2 + i] >= 0 for i in range(n)] + [p[r + 2 + i] >= 0 for i in range(n)]
        for fill in (None, c):
            for bias in (b, None):
                pad = op.Pad(x, fill, pads=p, mode="constant")
                fill_cond = [] if fill is None else [c.is_zero()]
                attrs = dict(kernel_shape=k, strides=s, dilations=d, group=g)
                valid = op.Conv(pad, w, bias, auto_pad="VALID", pads=(), **attrs)
                unpadded = op.Conv(pad, w, bias, auto_pad="NOTSET", pads=(), **attrs)
                explicit = op.Conv(pad, w, bias, auto_pad="NOTSET", pads=cp, **attrs)
                for lhs, own in ((valid, None), (unpadded, None), (explicit, cp)):
                    more = [] if own is None else [cp.length() == 2 * n]
                    rhs = op.Conv(
                        x, w, bias, auto_pad="NOTSET", pads=_spatial_pads(p, own, n), **attrs
                    )
                    ranks = [x.rank == r, w.rank == r] + ([] if bias is None else [b.rank == 1])
                    out.append(rewrite(lhs).to(rhs, *ranks, *cond, *fill_cond, *more))
    return out
