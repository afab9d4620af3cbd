"""Multi-output ops typed one output at a time: the `<Op>Part` table, and the ops whose unused
extra outputs may be dropped.

Contract: `PARTS` maps each typed part `(name, domain)` to the ONNX node it is one output of:
`<Op>Part(attrs..., index, inputs...)` is output `index` of `<Op>(inputs...)` with the same
attributes (`index` is the part's LAST typed attribute). `encode_parts` binds every named
output of such a node to its part term; `decode` writes the chosen parts of one (op,
attributes, inputs) back as ONE node, outputs no class chose left out ("") except the
`required` leading ones (given a fresh name). A part accepts only the indices in `indices`
(SkipLayerNormalization: ORT's CPU kernel never writes mean and inv_std_var). A `required`
output is written even where it comes after the last chosen one (GroupQueryAttention,
MultiHeadAttention: ORT needs both present outputs, and output 0 with a past depends on their
being declared; Attention: ORT needs present declared with a past).

`SINGLE_FORM` lists the ops with parts whose node declaring no extra output (none named) is
typed as the op itself, its one-output typed form, not as part 0 (GroupQueryAttention: output
0 is computed otherwise when the present outputs are declared; MultiHeadAttention: likewise
with a past, and its one-output form is the one rules match).

`DROPPABLE` lists the ops whose extra outputs, when no node reads them and they are not graph
outputs, are dropped: the node is typed as its single-output form (output 0), whose values do
not depend on which extra outputs the node declares (ORT's kernels compute output 0 the same
way; checked bit for bit in tests/egraph/test_encode_parts_drop.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MS = "com.microsoft"


@dataclass(frozen=True)
class PartOp:
    """The ONNX node a typed part is one output of."""

    op: str
    domain: str
    n_outputs: int
    required: int = 0
    """Leading outputs the node must declare (written with a fresh name when unused)."""
    indices: tuple[int, ...] = ()
    """The outputs the part can stand for (empty: all)."""

    def accepts(self, index: int) -> bool:
        return 0 <= index < self.n_outputs and (not self.indices or index in self.indices)


PARTS: dict[tuple[str, str], PartOp] = {
    ("LSTMPart", ""): PartOp("LSTM", "", 3),
    ("GRUPart", ""): PartOp("GRU", "", 2),
    ("RNNPart", ""): PartOp("RNN", "", 2),
    ("LayerNormalizationPart", ""): PartOp("LayerNormalization", "", 3, required=1),
    ("SkipLayerNormalizationPart", MS): PartOp("SkipLayerNormalization", MS, 4, 1, (0, 3)),
    ("SkipSimplifiedLayerNormalizationPart", MS): PartOp(
        "SkipSimplifiedLayerNormalization", MS, 4, 1, (0, 3)
    ),
    ("GroupQueryAttentionPart", MS): PartOp("GroupQueryAttention", MS, 3, required=3),
    ("MultiHeadAttentionPart", MS): PartOp("MultiHeadAttention", MS, 3, required=3),
    ("AttentionPart", MS): PartOp("Attention", MS, 2, required=2),
}
"""Typed part (name, domain) -> the ONNX op it is an output of."""

PART_OF: dict[tuple[str, str], str] = {(p.op, p.domain): name for (name, _), p in PARTS.items()}
"""ONNX (op_type, domain) -> the name of its typed part."""

DROPPABLE: frozenset[tuple[str, str]] = frozenset(
    {
        ("Dropout", ""),
        ("LayerNormalization", ""),
        ("SimplifiedLayerNormalization", ""),
        ("MaxPool", ""),
        ("SkipLayerNormalization", MS),
        ("SkipSimplifiedLayerNormalization", MS),
        ("Attention", MS),
    }
)
"""Ops typed as output 0 when their extra outputs are unused (module docstring)."""

SINGLE_FORM: frozenset[tuple[str, str]] = frozenset(
    {("GroupQueryAttention", MS), ("MultiHeadAttention", MS)}
)
"""Ops with parts typed as themselves when no extra output is named (module docstring)."""


def part(name: str, domain: str) -> PartOp | None:
    """The table's entry of a typed part, None when `name` is not one."""
    return PARTS.get((name, "" if domain == "ai.onnx" else domain))


def node_outputs(p: PartOp, named: dict[int, str], fresh: Callable[[], str]) -> list[str]:
    """The ONNX node's output list: `named[i]` at i, "" for the outputs left out, and
    `fresh()` for a required output not named (the list ends at the last named or required)."""
    last = max([*named, p.required - 1, 0])
    return [
        named[i] if i in named else (fresh() if i < p.required else "") for i in range(last + 1)
    ]
