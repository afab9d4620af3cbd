"""Multi-output ONNX nodes encoded as one typed term per output (used by `egraph.encode`).

Contract: `encode_parts(enc, n)` binds every named output of a Split, TopK or an op of
`ops.parts.PARTS` `n` to its `*Part` term and returns True, or binds nothing and returns
False (the node is then typed another way or kept opaque):
- Split with static sizes: `(SplitPart axis sizes i x)` per output (`ops.split`);
- TopK with a constant K: `(TopKPart axis largest k i x)` per output (`ops.topk`);
- an op of `ops.parts.PARTS` (LSTM, GRU, RNN, LayerNormalization, SkipLayerNormalization,
  SkipSimplifiedLayerNormalization, GroupQueryAttention): `(<op>Part attrs... i inputs...)` per
  named output i whose index the part accepts. An op of `ops.parts.DROPPABLE` takes this form
  only when one of its extra outputs is used; else `encode.typed_term` types it as its output
  0. An op of `ops.parts.SINGLE_FORM` naming no extra output is left to `encode.typed_term`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import onnx

from rewrite.egraph.literals import vec
from rewrite.onnx_io.graph import Graph, Node
from rewrite.ops.base import UNKNOWN, OpCall, OpSpec, TensorType
from rewrite.ops.parts import DROPPABLE, PART_OF, SINGLE_FORM, part
from rewrite.ops.split import split_plan
from rewrite.ops.topk import topk_plan


class _Encoder(Protocol):
    """What the part encoders use of `egraph.encode`'s encoder."""

    g: Graph
    typed: int

    def bind(self, value: str, term: str) -> str: ...

    def seed_type(self, var: str, t: TensorType | None) -> None: ...

    def ref(self, value: str) -> str: ...

    def const_value(self, value: str) -> np.ndarray | None: ...

    def typed_term(self, n: Node, form: OpSpec | None = None) -> str | None: ...

    def used(self, value: str) -> bool: ...


def encode_parts(enc: _Encoder, n: Node) -> bool:
    """Bind `n`'s outputs to `*Part` terms (module docstring); False when it has none."""
    domain = "" if n.domain == "ai.onnx" else n.domain
    name = PART_OF.get((n.op_type, domain))
    if name is not None:
        if (n.op_type, domain) in SINGLE_FORM and not any(n.outputs[1:]):
            return False
        extra_used = any(o and enc.used(o) for o in n.outputs[1:])
        return (extra_used or (n.op_type, domain) not in DROPPABLE) and _parts(enc, n, name)
    if domain:
        return False
    if n.op_type == "Split":
        return _split(enc, n)
    if n.op_type == "TopK":
        return _topk(enc, n)
    return False


def _call(enc: _Encoder, n: Node) -> OpCall:
    """`n` as an OpCall on the graph's types and the encoder's constants."""
    types = [enc.g.types.get(i, UNKNOWN) if i else None for i in n.inputs]
    consts = [enc.const_value(i) if i else None for i in n.inputs]
    return OpCall(n.op_type, types, consts, n.attrs, len(n.outputs), enc.g.opset)


def _split(enc: _Encoder, n: Node) -> bool:
    """A Split whose sizes are static: `(SplitPart axis sizes i x)` per output (the
    tensat encoding, `ops.split`); False (opaque) when they are not."""
    fits = n.inputs and n.inputs[0] and len(n.inputs) <= 2
    plan = split_plan(_call(enc, n)) if fits else None
    if plan is None or not all(n.outputs):
        return False
    axis, sizes = plan
    for i, o in enumerate(n.outputs):
        term = f"(SplitPart {axis} {vec(sizes)} {i} {enc.ref(n.inputs[0])})"
        enc.seed_type(enc.bind(o, term), enc.g.types.get(o))
    enc.typed += 1
    return True


def _topk(enc: _Encoder, n: Node) -> bool:
    """A TopK with a constant K: `(TopKPart axis largest k i x)` per output (`ops.topk`);
    False (opaque) when it has no typed form (`topk_plan`)."""
    fits = n.inputs and n.inputs[0] and len(n.outputs) == 2
    plan = topk_plan(_call(enc, n)) if fits else None
    if plan is None or not all(n.outputs):
        return False
    for i, o in enumerate(n.outputs):
        term = f"(TopKPart {' '.join(map(str, plan))} {i} {enc.ref(n.inputs[0])})"
        enc.seed_type(enc.bind(o, term), enc.g.types.get(o))
    enc.typed += 1
    return True


def _parts(enc: _Encoder, n: Node, name: str) -> bool:
    """`(<name> attrs... i inputs...)` per named output i (`ops.parts`); False (opaque) when
    the node does not fit the typed form or a used output is one the part does not accept."""
    p = part(name, n.domain)
    assert p is not None
    terms = []
    for i, o in enumerate(n.outputs):
        if not o:
            continue
        if not p.accepts(i):
            if enc.used(o):
                return False
            continue  # an unused output the part cannot stand for: left unbound
        attrs = [*n.attributes, onnx.helper.make_attribute("index", i)]
        node = Node(name, list(n.inputs), [o], domain=n.domain, attributes=attrs)
        term = enc.typed_term(node)
        if term is None:
            return False
        terms.append((o, term))
    if not terms:
        return False
    for o, term in terms:
        enc.seed_type(enc.bind(o, term), enc.g.types.get(o))
    enc.typed += 1
    return True
