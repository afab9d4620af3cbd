"""Left sides on a multi-output op's output 0 also match its part form.

Contract: `part_variants(rw)` is `rw` itself, then one rewrite per other combination of its
left sides' part apps, where a part app is an op application (anywhere in any left side,
nested included) of an op in `PART_FORMS`, and in each such variant every chosen part app is
replaced by `<Op>Part(same attributes, index=0, same inputs)`: output 0 of the node whose
extra outputs are used (`ops.parts`), which `encode_parts` types as parts instead of as the
one-output op. Structurally equal apps are one app (the compiled query binds them once).
Right sides and guards are not rewritten, except where they name a left-side term: such a
term (a right side reusing the matched `op.LayerNormalization(x, s, b)`, a guard on the root's
shape) names the same term in its new form, so it stays the bound e-class. With more than
`MAX_COMBINED` distinct part apps only two variants are made: the original and the one with
every part app replaced.

`PART_FORMS` is the ops in `ops.parts.DROPPABLE` with a typed part: LayerNormalization,
com.microsoft's SkipLayerNormalization, SkipSimplifiedLayerNormalization and Attention, whose
output 0 does not depend on which extra outputs the node declares (bit for bit in ORT,
`tests/egraph/test_encode_parts_drop.py`), so a rule proved and sampled on the one-output op
holds on the part. The part's missing tensor inputs are `ABSENT` (AttentionPart's past: P = 0,
the one-output Attention's only case).

Left out:
- GroupQueryAttention: its part is defined with a past (P > 0), where the one-output form's
  reference and semantics refuse the inputs (P = 0 only), so a rule proved on the one-output
  form would match parts outside the domain it was proved on; and ORT's output 0 with the
  present outputs declared is not bit-identical to the one-output node's for S > 1.
- MultiHeadAttention: with the part's past absent, its numpy reference and Z3 semantics at
  index 0 equal the one-output form's (checked on random cases), but ORT's output 0 is not
  bit-identical once the present outputs are declared (2.4e-7 apart measured without a mask
  or bias: the one-output node runs MLAS's flash attention), so a `bit-exact` rule sampled on
  the one-output node would not stay bit-exact on the part.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from itertools import combinations
from typing import Any

from rewrite.ops.parts import DROPPABLE, MS, PART_OF
from rewrite.rules.language import And, App, BinOp, Call, Cmp, Rewrite, Term, nodes
from rewrite.rules.ops import op

PART_FORMS: dict[tuple[str, str], str] = {
    key: PART_OF[key] for key in sorted(DROPPABLE) if key in PART_OF
}
"""(op, domain) of a one-output op -> the name of its part whose index 0 is the same value."""

MAX_COMBINED = 3
"""Up to this many distinct part apps in one rewrite, every combination is a variant."""


def part_variants(rw: Rewrite) -> list[Rewrite]:
    """`rw`, then its variants on part forms (module docstring)."""
    apps = list(dict.fromkeys(t for t in nodes(rw.lhs) if _has_part(t)))
    if not apps:
        return [rw]
    if len(apps) > MAX_COMBINED:
        chosen: list[tuple[App, ...]] = [tuple(apps)]
    else:
        chosen = [c for k in range(1, len(apps) + 1) for c in combinations(apps, k)]
    return [rw, *(_variant(rw, c) for c in chosen)]


def part_app(app: App, inputs: tuple[Term, ...] | None = None) -> App:
    """`app`'s part at index 0: the same attributes and `inputs` (default: `app`'s), the
    part's extra tensor inputs absent."""
    build = getattr(op.ms if app.domain == MS else op, PART_FORMS[(app.op, app.domain)])
    attrs = {n: v for n, v in app.attrs if v is not None}
    part = build(*(app.inputs if inputs is None else inputs), **attrs, index=0)
    assert isinstance(part, App)
    return part


def _has_part(t: Any) -> bool:
    return isinstance(t, App) and (t.op, t.domain) in PART_FORMS


def _variant(rw: Rewrite, chosen: Iterable[App]) -> Rewrite:
    """`rw` with each app of `chosen` on its left sides as its part; the other sides' terms
    that name a rebuilt left-side term name its new form."""
    picked = set(chosen)
    moved: dict[App, Term] = {}

    def left(t: Term) -> Term:
        if not isinstance(t, App):
            return t
        if t in moved:
            return moved[t]
        inputs = tuple(left(i) for i in t.inputs)
        new: Term = part_app(t, inputs) if t in picked else _with_inputs(t, inputs)
        if new != t:
            moved[t] = new
        return new

    lhs = tuple(left(t) for t in rw.lhs)
    rhs = tuple(_named(t, moved) for t in rw.rhs)
    return Rewrite(lhs, rhs, tuple(_named(g, moved) for g in rw.guards))


def _with_inputs(app: App, inputs: tuple[Term, ...]) -> App:
    if inputs == app.inputs:
        return app
    return App(app.op, app.attrs, inputs, app.domain)


def _named(x: Any, moved: dict[App, Term]) -> Any:
    """`x` (a term, an expression, a tuple of them) with every term in `moved` replaced; `x`
    itself where nothing in it is."""
    if isinstance(x, App):
        if x in moved:
            return moved[x]
        attrs = tuple((n, _named(v, moved)) for n, v in x.attrs)
        inputs = _named(x.inputs, moved)
        if _same(attrs, x.attrs) and _same(inputs, x.inputs):
            return x
        return App(x.op, attrs, inputs, x.domain)
    if isinstance(x, tuple):
        items = tuple(_named(i, moved) for i in x)
        return x if _same(items, x) else items
    fields: dict[str, Any] = {}
    if isinstance(x, Call):
        fields = {"args": x.args}
    elif isinstance(x, Cmp | BinOp):
        fields = {"left": x.left, "right": x.right}
    elif isinstance(x, And):
        fields = {"parts": x.parts}
    new = {k: _named(v, moved) for k, v in fields.items()}
    if all(new[k] is v for k, v in fields.items()):
        return x
    return replace(x, **new)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Are `a` and `b` the same objects, item by item (pairs compared item by item)?"""
    return all(
        _same(i, j) if isinstance(i, tuple) and isinstance(j, tuple) else i is j
        for i, j in zip(a, b, strict=True)
    )
